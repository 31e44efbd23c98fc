import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { clearOfHourBoundary } from '../support/hours.js';
import { serve, serveInProcess } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';

/**
 * Usage counts at shutdown while another process holds the lock the write needs (SQLite's write lock by
 * BEGIN IMMEDIATE; on PostgreSQL the usage table locked): the server waits and retries, bounded, and the
 * counts land once the lock is released.
 */

/** Holds the lock until the returned function is called. */
async function holdLock(backend: TestBackend): Promise<() => Promise<void>> {
  if (backend.provider === 'sqlite') {
    const db = new Sqlite(backend.url.replace(/^file:/, ''));
    db.exec('BEGIN IMMEDIATE');
    return async () => {
      db.exec('COMMIT');
      db.close();
    };
  }
  const client = new pg.Client({ connectionString: backend.url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE usage_hours IN EXCLUSIVE MODE');
  return async () => {
    await client.query('COMMIT');
    await client.end();
  };
}

describe.concurrent.each(BACKENDS)('usage counts at shutdown with the database busy (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
      upstream = await startUpstream();
    });
    afterAll(async () => {
      await upstream?.close();
      await backend?.dispose();
    });

    it('waits for the lock, retries and writes all twenty counts once it is released', async () => {
      await runCli(['create-partner', '--name', 'Counted'], backend.env);
      await runCli(['map-company', 'Counted', '--company', 'acme', '--yes'], backend.env);
      const token = (await runCli(['mint-test-token', 'Counted', '--json'], backend.env)).json().access_token;
      // All twenty counts in one hour's row.
      await clearOfHourBoundary();
      const server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url });
      for (let i = 0; i < 20; i++) {
        const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
        expect(response.status).toBe(200);
      }
      const release = await holdLock(backend);
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(server.child.exitCode, 'the server waits while the lock is held').toBeNull();
      await release();
      expect(await server.exited).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(10_000);
      expect(server.stdout()).not.toMatch(/NOT written/);
      const usage = (await runCli(['usage', 'Counted', '--json'], backend.env)).json();
      expect(usage.rows).toMatchObject([{ requests: 20, accepted: 20 }]);
    }, 40_000);

    it('reports loudly, with the totals, what it still cannot write once the bound (10 s) has passed', async () => {
      await runCli(['create-partner', '--name', 'Stuck'], backend.env);
      await runCli(['map-company', 'Stuck', '--company', 'acme', '--yes'], backend.env);
      const token = (await runCli(['mint-test-token', 'Stuck', '--json'], backend.env)).json().access_token;
      const server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url });
      for (let i = 0; i < 7; i++) {
        const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
        expect(response.status).toBe(200);
      }
      const release = await holdLock(backend);
      try {
        const signalled = Date.now();
        server.child.kill('SIGTERM');
        await server.exited;
        const took = Date.now() - signalled;
        expect(took).toBeGreaterThanOrEqual(9_000);
        expect(took).toBeLessThan(15_000);
        const line = server.stdout().split('\n').find((l) => l.includes('NOT written'));
        expect(line, server.stdout()).toBeDefined();
        const entry = JSON.parse(line!) as { level: number; msg: string; lost: { requests: number; accepted: number; partners: number } };
        expect(entry.level).toBe(50);
        expect(entry.lost).toMatchObject({ requests: 7, accepted: 7, partners: 1 });
        expect(entry.msg).toMatch(/7 requests/);
      } finally {
        await release();
      }
    }, 40_000);

    it.skipIf(provider !== 'postgresql')('two instances stopping at once both write their counts (three rounds)', async () => {
      await runCli(['create-partner', '--name', 'Twice'], backend.env);
      await runCli(['map-company', 'Twice', '--company', 'acme', '--yes'], backend.env);
      const token = (await runCli(['mint-test-token', 'Twice', '--json'], backend.env)).json().access_token;
      // The three rounds add to one hour's row.
      await clearOfHourBoundary();
      for (let round = 1; round <= 3; round++) {
        // In this process: the subject is two instances' counts meeting in one database at once, not their
        // processes (SIGTERM comes from the serve command's signal emitter, as the binary gets it).
        const servers = await Promise.all([1, 2].map(() => serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url })));
        for (const server of servers) {
          for (let i = 0; i < 10; i++) {
            const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
            expect(response.status).toBe(200);
          }
        }
        expect(await Promise.all(servers.map((server) => server.stop()))).toEqual([0, 0]);
        const usage = (await runCli(['usage', 'Twice', '--json'], backend.env)).json();
        expect(usage.rows, `round ${round}`).toMatchObject([{ requests: 20 * round }]);
      }
    }, 60_000);
  });
});
