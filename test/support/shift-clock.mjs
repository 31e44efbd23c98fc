// Preloaded into a server under test (`node --import <this file>`): its wall clock (Date.now() and new Date()
// alike) runs off the host's, as on a host whose clock is wrong, and can step or drift while it runs.
// performance.now() and process.hrtime are left alone, as a real step of the wall clock leaves the monotonic
// one. See "Stepping clock" in README.md beside this file.
//
// - SHIFT_CLOCK_MS: the shift from the start (ms; negative: behind).
// - STEP_CLOCK_FILE: a control file, re-read at most every STEP_CLOCK_POLL_MS (default 5) of monotonic time
//   when the clock is read, holding {"offset_ms": N, "drift_ms_per_s": R}: from when the process reads a new
//   content, the wall clock is the host's + N + R ms for every second since (a step to N, then a drift).
//   A missing or unreadable file leaves the clock as it is.
import { readFileSync } from 'node:fs';

const RealDate = globalThis.Date;
const controlFile = process.env.STEP_CLOCK_FILE;
const pollMs = Number(process.env.STEP_CLOCK_POLL_MS ?? 5);

let offsetMs = Number(process.env.SHIFT_CLOCK_MS ?? 0);
let driftPerS = 0;
/** When the current offset and drift were read (the host's own wall clock). */
let since = RealDate.now();
let content;
let readAt = Number.NEGATIVE_INFINITY;

function reread() {
  const now = performance.now();
  if (controlFile === undefined || now - readAt < pollMs) return;
  readAt = now;
  let text;
  try {
    text = readFileSync(controlFile, 'utf8');
  } catch {
    return;
  }
  if (text === content) return;
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return;
  }
  content = text;
  offsetMs = Number(parsed.offset_ms ?? 0);
  driftPerS = Number(parsed.drift_ms_per_s ?? 0);
  since = RealDate.now();
}

function shifted() {
  reread();
  const real = RealDate.now();
  return real + offsetMs + (driftPerS * (real - since)) / 1000;
}

class ShiftedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(shifted());
    else super(...args);
  }

  static now() {
    return Math.floor(shifted());
  }
}

globalThis.Date = ShiftedDate;
