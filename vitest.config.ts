import { defineConfig } from 'vitest/config';
import { ARGON2_TEST_COST } from './test/support/argon2-cost.js';
import WaitingBesideBusy from './test/support/sequencer.js';

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    // `npm run test:durations` alone: each file's CPU seconds, for the order files start in (sequencer.ts).
    setupFiles: process.env.PARTNERCTL_TEST_CPU_LOG ? ['test/support/file-cpu.ts'] : [],
    reporters: ['default', './test/support/summary-reporter.ts'],
    // argon2 at a test's cost in the workers and every process they start (test/support/argon2-cost.cjs).
    execArgv: ['--require', ARGON2_TEST_COST],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // Longest first, but never more files that mostly wait at once than the workers less two (test/support/
    // sequencer.ts): the long files wait beside the short ones, and two workers always use the cores.
    sequence: { sequencer: WaitingBesideBusy },
    // Six workers on two cores: much of the suite waits (child processes, PostgreSQL and Redis round trips,
    // the product's own bounds), and the waits overlap. With PostgreSQL's test databases in memory the run is
    // bound by CPU, and neither five nor seven was faster: alternated on 2026-11-28, vitest took 124 and 127 s
    // with six, 122 and 135 s with seven (which spent more CPU); whole npm test runs took 123.8 and 131.1 s
    // with six, 136.5 and 140.7 s with five (which spent less CPU: BENCHMARKS.md). With the order of sequencer.ts (2026-11-29),
    // eight left the cores idle 3-5 s a run against 18-29 s with six, but spent 16 s more CPU: whole npm test runs
    // took 107.4 and 100.6 s with eight, 104.3 and 102.5 s with six. Every file runs beside the others: a bound in a test is
    // the product's promise with its stated slack, which a busy machine keeps too (npm run test:stress).
    // Node 20 reads and parses the file NODE_EXTRA_CA_CERTS names at every start, before any code runs: 60-70 ms
    // a process with a system bundle of some 140 certificates (this machine's environment sets it), and a run
    // starts some 300 processes (the binary, `serve`, shells). Empty, Node skips it. No test needs it: every
    // server a test talks to is its own, on loopback, over plain HTTP, and npm runs offline (pack.test.ts).
    env: { NODE_EXTRA_CA_CERTS: '' },
    maxWorkers: 6,
    // A worker keeps its modules from one file to the next instead of importing them again: every test
    // builds its own databases, servers and processes, so no state is shared through a module.
    isolate: false,
  },
});
