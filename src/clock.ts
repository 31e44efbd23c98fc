/**
 * Epoch milliseconds: the host's wall clock on SQLite, the database server's on PostgreSQL (OffsetClock);
 * injected so counters and windows can be driven by tests.
 */
export interface Clock {
  now(): number;
  /**
   * Whether time elapsed on this clock since its last reference is known: false when the host's wall clock
   * has run ahead of the monotonic one by more than STEP_DETECT_MS since then (a forward step, or a suspend
   * the monotonic clock did not count), so that what is held cannot be dated. Absent: always known.
   */
  bounded?(): boolean;
}

export const systemClock: Clock = { now: () => Date.now() };

/** This process's monotonic clock (ms): never stepped, whatever the host's wall clock does. */
export const hostMonotonic = (): number => performance.now();

/** The wall clock and the monotonic one drifting apart by more than this since a reference is a step. */
export const STEP_DETECT_MS = 1_000;

/** One reading of a reference clock (the database server's): its instant, and this host's two clocks then. */
export interface ClockReading {
  /** The reference's instant (epoch ms). */
  at: number;
  /** The monotonic clock (`monotonic`) at that instant. */
  monotonic: number;
  /** The host's wall clock at that instant. */
  wall: number;
}

/**
 * A reference clock (on PostgreSQL, the database server's) read on this host: the last reading of it plus
 * the MONOTONIC time elapsed since, so that every process compares instants written by others on one time
 * scale and no step of the host's wall clock moves an instant this process writes or compares (a token's
 * issue time, a staleness deadline, a heartbeat). The wall clock is read only to date the reading (before
 * the first, the clock is the wall clock) and to notice a step (`wallDrift`). Never runs backwards: a new
 * reading a little behind the extrapolated time holds the clock until it catches up.
 */
export class OffsetClock implements Clock {
  private reading: ClockReading | null = null;
  private last = Number.NEGATIVE_INFINITY;

  constructor(
    readonly wall: Clock = systemClock,
    readonly monotonic: () => number = hostMonotonic,
  ) {}

  now(): number {
    const reading = this.reading;
    // Whole milliseconds, as Date.now() reads (ids and columns are dated in them).
    const now = reading === null ? this.wall.now() : Math.floor(reading.at + (this.monotonic() - reading.monotonic));
    if (now < this.last) return this.last;
    this.last = now;
    return now;
  }

  /** A new reading of the reference: instants are counted from it. */
  set(reading: ClockReading): void {
    this.reading = reading;
  }

  /** The reading instants are counted from (null before the first). */
  get lastReading(): ClockReading | null {
    return this.reading;
  }

  /**
   * How far the wall clock has moved beyond the monotonic one since the last reading (ms; negative: it stepped
   * back). 0 before the first reading.
   */
  wallDrift(): number {
    const reading = this.reading;
    if (reading === null) return 0;
    return this.wall.now() - reading.wall - (this.monotonic() - reading.monotonic);
  }

  /**
   * False while the wall clock is ahead of the monotonic one by more than STEP_DETECT_MS since the last
   * reading: a forward step and a suspend (which Linux's monotonic clock does not count) look alike, so
   * time elapsed since the reading cannot be bounded until the next one.
   */
  bounded(): boolean {
    return this.wallDrift() <= STEP_DETECT_MS;
  }
}
