import { defineConfig } from 'vitest/config';

// Run alone, after the rest: their bounds are the product's promises on a machine doing nothing else (a
// refusal's timing, a Redis-shared limit's accuracy, a receipt's wait, a bound after a database comes
// back); the suite's own parallel load on two cores stalls Redis past its 250 ms command timeout, a
// frozen instance's receipt past its --wait, and broke them at random.
const ALONE = ['test/hardening/timing.test.ts', 'test/http/clock-steps.test.ts', 'test/http/limits-instances.test.ts', 'test/http/receipts.test.ts', 'test/http/outage.test.ts'];

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
          exclude: ALONE,
          // Four workers on two cores: much of the suite waits (staleness bounds, expiries, child processes,
          // Redis and PostgreSQL round trips), and the waits overlap. Measured in one sitting on this
          // machine (whole suite): 140 s with two workers, 105 s with four.
          maxWorkers: 4,
          // A worker keeps its modules from one file to the next instead of importing them again: every test
          // builds its own databases, servers and processes, so no state is shared through a module.
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'timing',
          include: ALONE,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
