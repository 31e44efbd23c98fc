import type { TestProject } from 'vitest/node';
import { templateRun } from './global-setup.js';
import { removeTemplates } from './templates.js';

/**
 * The unit lane's global setup: no PostgreSQL and no Redis, whatever runs on this machine. Suites
 * parametrised over both backends run their SQLite half; the rest of them run in `npm test`.
 */
export default async function setup(project: TestProject) {
  project.provide('postgresAdminUrl', null);
  project.provide('redisUrl', null);
  const run = templateRun();
  project.provide('templateRun', run);
  return () => removeTemplates(run, null);
}
