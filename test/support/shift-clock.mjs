// Preloaded into a server under test (`node --import <this file>`): its Date, Date.now() and new Date()
// alike, runs SHIFT_CLOCK_MS ahead (negative: behind), as on a host whose clock is wrong. performance.now()
// is left alone, as a wrong wall clock leaves the monotonic one.
const shift = Number(process.env.SHIFT_CLOCK_MS ?? 0);
const RealDate = globalThis.Date;

class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + shift);
    else super(...args);
  }

  static now() {
    return RealDate.now() + shift;
  }
}

globalThis.Date = ShiftedDate;
