/** Wall-clock milliseconds; injected so counters and windows can be driven by tests. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * A clock read as another (`base`) plus an offset measured against a reference: on PostgreSQL, the database
 * server's clock, so that every process compares instants written by others on one time scale.
 */
export class OffsetClock implements Clock {
  offsetMs = 0;
  constructor(readonly base: Clock = systemClock) {}
  now(): number {
    return this.base.now() + this.offsetMs;
  }
}
