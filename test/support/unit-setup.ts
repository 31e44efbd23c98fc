import type { TestProject } from 'vitest/node';

/**
 * The unit lane's global setup: no PostgreSQL and no Redis, whatever runs on this machine. Suites
 * parametrised over both backends run their SQLite half; the rest of them run in `npm test`.
 */
export default function setup(project: TestProject) {
  project.provide('postgresAdminUrl', null);
  project.provide('redisUrl', null);
}
