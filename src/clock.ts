/** Wall-clock milliseconds; injected so counters and windows can be driven by tests. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
