import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: more workers only make the argon2- and process-heavy tests fight.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
