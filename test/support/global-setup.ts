import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { Redis } from 'ioredis';
import pg from 'pg';
import { memoryTablespace, removeOrphanTemplates, removeTemplates, type TemplateRun } from './templates.js';

export const DEFAULT_POSTGRES_ADMIN_URL = 'postgresql://postgres@127.0.0.1:5432/postgres';
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Whether the Redis the limit tests share counters through answers; loud when it does not. */
async function redisReachable(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch (error) {
    console.warn(
      `\n*** Redis at ${url} is unreachable (${(error as Error).message}): every Redis test is SKIPPED.` +
        ' Start it (see .ci/run) or set PARTNERCTL_TEST_REDIS_URL. ***\n',
    );
    return false;
  } finally {
    client.disconnect();
  }
}

/** This run's templates: a folder of its own, an id naming its PostgreSQL templates, its tablespace. */
export function templateRun(tablespace: string | null = null): TemplateRun {
  return { dir: mkdtempSync(join(tmpdir(), 'partnerctl-templates-')), id: `${process.pid}_${randomBytes(3).toString('hex')}`, tablespace };
}

/** Finds out once whether a PostgreSQL server is there; says so loudly when it is not. */
export default async function setup(project: TestProject) {
  const adminUrl = process.env.PARTNERCTL_TEST_POSTGRES_URL || DEFAULT_POSTGRES_ADMIN_URL;
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3_000 });
  let reachable = false;
  try {
    await client.connect();
    await client.query('SELECT 1');
    reachable = true;
  } catch (error) {
    console.warn(
      `\n*** PostgreSQL at ${adminUrl.replace(/:[^:@/]*@/, ':***@')} is unreachable (${(error as Error).message}):` +
        ' every PostgreSQL test is SKIPPED. Start it or set PARTNERCTL_TEST_POSTGRES_URL. ***\n',
    );
  } finally {
    await client.end().catch(() => {});
  }
  project.provide('postgresAdminUrl', reachable ? adminUrl : null);
  const redisUrl = process.env.PARTNERCTL_TEST_REDIS_URL || DEFAULT_REDIS_URL;
  project.provide('redisUrl', (await redisReachable(redisUrl)) ? redisUrl : null);
  if (reachable) await removeOrphanTemplates(adminUrl);
  const run = templateRun(reachable ? await memoryTablespace(adminUrl) : null);
  project.provide('templateRun', run);
  return () => removeTemplates(run, reachable ? adminUrl : null);
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string | null;
    redisUrl: string | null;
    /** Where this run's migrated templates go (test/support/templates.ts). */
    templateRun: TemplateRun;
  }
}
