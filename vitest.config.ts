import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // Four workers on two cores: much of the suite waits (child processes, PostgreSQL and Redis round trips,
    // the product's own bounds), and the waits overlap. Every file runs beside the others: a bound in a test
    // is the product's promise with its stated slack, which a busy machine keeps too (npm run test:stress).
    maxWorkers: 4,
    // A worker keeps its modules from one file to the next instead of importing them again: every test
    // builds its own databases, servers and processes, so no state is shared through a module.
    isolate: false,
  },
});
