import type { Clock } from '../../src/clock.js';

/** A clock that moves only when a test moves it: expiry, overlap and staleness without waiting. */
export class TestClock implements Clock {
  constructor(private ms = Date.UTC(2026, 10, 26, 9, 0, 0)) {}

  now(): number {
    return this.ms;
  }

  advance(ms: number): void {
    this.ms += ms;
  }
}
