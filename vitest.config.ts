import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Four workers on two cores: much of the suite waits (staleness bounds, expiries, child processes,
    // Redis and PostgreSQL round trips), and the waits overlap. Measured in one sitting on this machine
    // (whole suite): 140 s with two workers, 105 s with four; the timing tests keep their tolerance.
    maxWorkers: 4,
    fileParallelism: true,
  },
});
