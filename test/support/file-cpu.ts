import { appendFileSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { afterAll, beforeAll } from 'vitest';

/**
 * Loaded only by `npm run test:durations` (PARTNERCTL_TEST_CPU_LOG names the log; vitest.config.ts): each
 * file's CPU seconds, its worker's and those of the processes it started and waited for (the binary,
 * `serve`, shells), appended to the log as one JSON line. Linux's /proc/self/stat counts a waited-for child's
 * CPU in the parent (cutime, cstime); elsewhere only the worker's own CPU is counted. The figures order the
 * files (test/support/sequencer.ts), nothing else.
 */
const log = process.env.PARTNERCTL_TEST_CPU_LOG;

/** This process's CPU seconds and its waited-for children's. */
function cpuSeconds(): number {
  try {
    // The fields after the command's closing parenthesis start at the state (field 3): utime, stime, cutime and
    // cstime are fields 14 to 17, in clock ticks (100 a second on Linux).
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / 100;
  } catch {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1e6;
  }
}

let started = 0;
beforeAll(() => {
  started = cpuSeconds();
});
// biome-ignore lint/correctness/noEmptyPattern: vitest requires a destructuring pattern for the hook's context; the file is the second argument
afterAll(({}, suite) => {
  if (log === undefined) return;
  const file = relative(process.cwd(), suite.file.filepath);
  appendFileSync(log, `${JSON.stringify({ file, cpu: Math.round((cpuSeconds() - started) * 10) / 10 })}\n`);
});
