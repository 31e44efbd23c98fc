import { defineConfig } from 'vitest/config';
import { ARGON2_TEST_COST } from './test/support/argon2-cost.js';

/**
 * `npm run test:unit`: the fast lane (docs/development.md, "Test lanes"). The rules, the domain on SQLite
 * files, the HTTP kernel in-process (inject; a stand-in engine on loopback at most), the CLI through runCli
 * with an injected terminal. No PostgreSQL, no Redis (test/support/unit-setup.ts says neither is there, so
 * suites over both backends run their SQLite half) and no child process (test/support/unit-lane.ts fails
 * a file that starts one). Every file here runs in `npm test` too, on both backends.
 */
export const UNIT = [
  'test/cli/audit-actions.test.ts',
  'test/cli/cli-safety-37.test.ts',
  'test/cli/columns.test.ts',
  'test/cli/config.test.ts',
  'test/cli/context.test.ts',
  'test/cli/defects-37.test.ts',
  'test/cli/hints.test.ts',
  'test/cli/networks.test.ts',
  'test/cli/options.test.ts',
  'test/cli/reference.test.ts',
  'test/cli/updated-at.test.ts',
  'test/cli/webhooks-rerun.test.ts',
  'test/config-docs.test.ts',
  'test/db/dialect.test.ts',
  'test/db/migrations.test.ts',
  'test/db/schema-parity.test.ts',
  'test/db/sqlite-file.test.ts',
  'test/docs.test.ts',
  'test/domain/access.test.ts',
  'test/domain/audit.test.ts',
  'test/domain/clocked.test.ts',
  'test/domain/companies.test.ts',
  'test/domain/concurrency.test.ts',
  'test/domain/credentials.test.ts',
  'test/domain/desired-state.test.ts',
  'test/domain/held-writes.test.ts',
  'test/domain/hourly-counts.test.ts',
  'test/domain/instances.test.ts',
  'test/domain/key-format.test.ts',
  'test/domain/key-pair-lifecycle.test.ts',
  'test/domain/key-pair-state.test.ts',
  'test/domain/key-pairs.test.ts',
  'test/domain/leak-reports.test.ts',
  'test/domain/limits.test.ts',
  'test/domain/lookup.test.ts',
  'test/domain/no-cli-words.test.ts',
  'test/domain/offset-clock.test.ts',
  'test/domain/partners.test.ts',
  'test/domain/properties.test.ts',
  'test/domain/refusals.test.ts',
  'test/domain/tokens.test.ts',
  'test/domain/verdict.test.ts',
  'test/domain/webhook-delivery.test.ts',
  'test/hardening/cli-input.test.ts',
  'test/hardening/forged-dates.test.ts',
  'test/http/app.test.ts',
  'test/http/connections.test.ts',
  'test/http/data-route.test.ts',
  'test/http/data.test.ts',
  'test/http/decisions.test.ts',
  'test/http/limits.test.ts',
  'test/http/token.test.ts',
  'test/install-scripts.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/support/unit-setup.ts'],
    setupFiles: ['test/support/unit-lane.ts'],
    reporters: ['default', './test/support/summary-reporter.ts'],
    include: UNIT,
    // argon2 at a test's cost in the workers and every process they start (test/support/argon2-cost.cjs).
    execArgv: ['--require', ARGON2_TEST_COST],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // As in the whole suite: every test builds its own databases, so a worker keeps its modules.
    isolate: false,
    // Three workers on two cores: a file waits too (SQLite's fsync, argon2 on libuv's threads, loopback).
    maxWorkers: 3,
  },
});
