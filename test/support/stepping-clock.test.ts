// The fault kit's stepping clock (issue 40), on a real child process: its wall clock steps back, ahead and
// drifts as the test says, while its monotonic clock runs on untouched.
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { SteppingClock } from './stepping-clock.js';

/**
 * Prints, for each line it reads, its wall clock's distance from its monotonic one, and its monotonic time.
 * The wall clock is read between two monotonic readings, twenty times, and the tightest pair is kept: a
 * process descheduled between two readings (a loaded machine) would otherwise count the pause as a shift.
 */
const PROBE = `
const { createInterface } = require('node:readline');
createInterface({ input: process.stdin }).on('line', () => {
  let best;
  for (let i = 0; i < 20; i++) {
    const before = performance.now();
    const wall = Date.now();
    const after = performance.now();
    if (best === undefined || after - before < best.after - best.before) best = { before, wall, after };
  }
  const mono = (best.before + best.after) / 2;
  // new Date() against Date.now() read just before it, from the tightest of twenty tries likewise.
  let constructed;
  for (let i = 0, tightest = Infinity; i < 20; i++) {
    const first = Date.now();
    const made = new Date().getTime();
    const last = Date.now();
    if (last - first < tightest) [tightest, constructed] = [last - first, made - first];
  }
  console.log(JSON.stringify({ mono, shift: best.wall - (performance.timeOrigin + mono), constructed }));
});
`;

interface Probe {
  read(): Promise<{ mono: number; shift: number; constructed: number }>;
  child: ChildProcess;
}

function probe(clock: SteppingClock, env: NodeJS.ProcessEnv = {}): Probe {
  const child = spawn(process.execPath, [...clock.nodeArgs, '-e', PROBE], { env: { ...process.env, ...clock.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    child,
    read: async () => {
      child.stdin!.write('\n');
      const { value } = await lines.next();
      return JSON.parse(value as string);
    },
  };
}

describe('the stepping clock (test/support/shift-clock.mjs)', () => {
  const started: { clock: SteppingClock; child: ChildProcess }[] = [];
  afterEach(() => {
    for (const { clock, child } of started.splice(0)) {
      child.kill();
      clock.dispose();
    }
  });

  const start = (env: NodeJS.ProcessEnv = {}) => {
    const clock = new SteppingClock();
    const p = probe(clock, env);
    started.push({ clock, child: p.child });
    return { clock, p };
  };

  it('steps back and ahead while the process runs, Date.now() and new Date() alike, leaving performance.now() alone', async () => {
    const { clock, p } = start();
    const before = await p.read();
    expect(Math.abs(before.shift)).toBeLessThan(50);
    clock.set({ offsetMs: -60_000 });
    await sleep(10);
    const back = await p.read();
    expect(Math.abs(back.shift + 60_000)).toBeLessThan(50);
    expect(Math.abs(back.constructed)).toBeLessThan(5);
    expect(back.mono).toBeGreaterThan(before.mono);
    clock.set({ offsetMs: 25_000 });
    await sleep(10);
    const ahead = await p.read();
    expect(Math.abs(ahead.shift - 25_000)).toBeLessThan(50);
    expect(ahead.mono).toBeGreaterThan(back.mono);
  });

  it('drifts: the shift grows by the rate for every second of monotonic time', async () => {
    const { clock, p } = start();
    clock.set({ offsetMs: 0, driftMsPerS: 500 });
    await sleep(10);
    const first = await p.read();
    await sleep(400);
    const second = await p.read();
    const expected = ((second.mono - first.mono) / 1000) * 500;
    expect(Math.abs(second.shift - first.shift - expected)).toBeLessThan(5);
  });

  it('SHIFT_CLOCK_MS shifts from the start, without a control file', async () => {
    const clock = new SteppingClock();
    const child = spawn(process.execPath, [...clock.nodeArgs, '-e', PROBE], { env: { ...process.env, SHIFT_CLOCK_MS: '1500' }, stdio: ['pipe', 'pipe', 'inherit'] });
    started.push({ clock, child });
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    child.stdin!.write('\n');
    const { value } = await lines.next();
    expect(Math.abs((JSON.parse(value as string) as { shift: number }).shift - 1_500)).toBeLessThan(50);
  });

  it('a half-written or missing control file changes nothing', async () => {
    const { clock, p } = start();
    clock.set({ offsetMs: 7_000 });
    await sleep(10);
    expect(Math.abs((await p.read()).shift - 7_000)).toBeLessThan(50);
    writeFileSync(clock.file, '{"offset_ms": -3');
    await sleep(10);
    expect(Math.abs((await p.read()).shift - 7_000)).toBeLessThan(50);
    rmSync(clock.file);
    await sleep(10);
    expect(Math.abs((await p.read()).shift - 7_000)).toBeLessThan(50);
  });
});
