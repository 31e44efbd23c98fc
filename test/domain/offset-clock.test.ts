// Issue 37, points 1 and 2, at the clock itself: the database's clock read on this host is its last reading
// plus the monotonic time since, whatever the wall clock does. Both host clocks are injected.
import { describe, expect, it } from 'vitest';
import { OffsetClock, STEP_DETECT_MS } from '../../src/clock.js';
import { FreshnessRule } from '../../src/domain/rules/freshness.js';

const DB_AT = Date.UTC(2026, 10, 28, 4, 0, 0);

/** A host: a wall clock a test can step, and a monotonic one it can only advance. */
function host(wallAt = DB_AT + 3) {
  const state = { wall: wallAt, monotonic: 5_000.25 };
  return {
    state,
    wall: { now: () => state.wall },
    monotonic: () => state.monotonic,
    /** Real time passes: both clocks move. */
    pass(ms: number) {
      state.wall += ms;
      state.monotonic += ms;
    },
  };
}

function readClock(h: ReturnType<typeof host>, at = DB_AT): OffsetClock {
  const clock = new OffsetClock(h.wall, h.monotonic);
  clock.set({ at, monotonic: h.state.monotonic, wall: h.state.wall });
  return clock;
}

describe('37.1, 37.2: the database clock counted on the monotonic clock (OffsetClock)', () => {
  it('before any reading it is the wall clock; after one, the reading plus the monotonic time since, in whole ms', () => {
    const h = host();
    const clock = new OffsetClock(h.wall, h.monotonic);
    expect(clock.now()).toBe(DB_AT + 3);
    clock.set({ at: DB_AT, monotonic: h.state.monotonic, wall: h.state.wall });
    // The reading is 3 ms behind what was read before: held there (never backwards) until it catches up.
    expect(clock.now()).toBe(DB_AT + 3);
    h.pass(1_234.6);
    expect(clock.now()).toBe(DB_AT + 1_234);
    expect(Number.isInteger(clock.now())).toBe(true);
  });

  it('37.1: a wall clock stepping back 60 s moves no instant, and is seen as a drift of -60 s (elapsed time still bounded)', () => {
    const h = host();
    const clock = readClock(h);
    h.pass(2_000);
    const before = clock.now();
    h.state.wall -= 60_000;
    expect(clock.now()).toBe(before);
    h.pass(1_000);
    expect(clock.now()).toBe(before + 1_000);
    expect(clock.wallDrift()).toBe(-60_000);
    expect(clock.bounded()).toBe(true);
  });

  it('37.2: a wall clock stepping 25 s ahead dates nothing ahead, and elapsed time is not bounded until the next reading', () => {
    const h = host();
    const clock = readClock(h);
    h.pass(300);
    h.state.wall += 25_000;
    expect(clock.now()).toBe(DB_AT + 300);
    expect(clock.wallDrift()).toBe(25_000);
    expect(clock.bounded()).toBe(false);
    // A new reading (the database answered) is trusted again: the drift counts from it.
    clock.set({ at: DB_AT + 300, monotonic: h.state.monotonic, wall: h.state.wall });
    expect(clock.bounded()).toBe(true);
    expect(clock.wallDrift()).toBe(0);
  });

  it('a suspend the monotonic clock did not count looks like a forward step: not bounded', () => {
    const h = host();
    const clock = readClock(h);
    h.state.wall += 3_600_000;
    expect(clock.bounded()).toBe(false);
  });

  it('a slow drift is bounded until it passes the step threshold', () => {
    const h = host();
    const clock = readClock(h);
    // 0.05 % fast, for as long as it takes to pass the threshold.
    for (let i = 0; i < 10_000 && clock.bounded(); i++) {
      h.pass(1_000);
      h.state.wall += 0.5;
    }
    expect(clock.wallDrift()).toBeGreaterThan(STEP_DETECT_MS);
    expect(clock.wallDrift()).toBeLessThan(STEP_DETECT_MS + 1);
  });

  it('never runs backwards: a reading behind the extrapolated time holds the clock until it catches up', () => {
    const h = host();
    const clock = readClock(h);
    h.pass(1_000);
    expect(clock.now()).toBe(DB_AT + 1_000);
    clock.set({ at: DB_AT + 990, monotonic: h.state.monotonic, wall: h.state.wall });
    expect(clock.now()).toBe(DB_AT + 1_000);
    h.pass(15);
    expect(clock.now()).toBe(DB_AT + 1_005);
  });
});

describe('37.1: the staleness budget on that clock', () => {
  const BOUND_MS = 1_000;
  const BUDGET_MS = 12_000;

  /** An instance that confirmed the revision and wrote a heartbeat, then lost the database. */
  function cut() {
    const h = host();
    const clock = readClock(h);
    const rule = new FreshnessRule(BOUND_MS, BUDGET_MS);
    rule.confirmedAt = clock.now();
    rule.heartbeatWritten(clock.now());
    h.pass(500);
    rule.unreachableSince = clock.now();
    const judge = () => rule.judge(clock.now(), clock.bounded());
    return { h, clock, rule, judge, until: rule.servingUntil() };
  }

  it('a wall clock stepping back 60 s does not lengthen the budget: held until servingUntil, stale just after', () => {
    const { h, clock, judge, until } = cut();
    h.pass(2_000);
    expect(judge()).toBe('held');
    h.state.wall -= 60_000;
    h.pass(until - clock.now());
    expect(judge()).toBe('held');
    h.pass(1);
    expect(judge()).toBe('stale');
  });

  it('a wall clock stepping ahead (or a suspend) while held: elapsed time cannot be bounded, nothing held decides', () => {
    const { h, judge } = cut();
    h.pass(2_000);
    expect(judge()).toBe('held');
    h.state.wall += STEP_DETECT_MS + 1;
    expect(judge()).toBe('stale');
  });

  it('the staleness bound is counted on the monotonic clock too: a step back leaves fresh state fresh for 1 s only', () => {
    const h = host();
    const clock = readClock(h);
    const rule = new FreshnessRule(BOUND_MS, 0);
    rule.confirmedAt = clock.now();
    h.state.wall -= 60_000;
    h.pass(BOUND_MS);
    expect(rule.judge(clock.now(), clock.bounded())).toBe('fresh');
    h.pass(1);
    expect(rule.judge(clock.now(), clock.bounded())).toBe('stale');
  });
});
