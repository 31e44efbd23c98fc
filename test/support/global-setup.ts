import type { TestProject } from 'vitest/node';
import pg from 'pg';

export const DEFAULT_POSTGRES_ADMIN_URL = 'postgresql://postgres@127.0.0.1:5432/postgres';

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
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAdminUrl: string | null;
  }
}
