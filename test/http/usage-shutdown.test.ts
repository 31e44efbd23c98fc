import Sqlite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { againOn503 } from '../support/again.js';
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

/**
 * `count` data requests, each answered 200. What stopping writes is the subject here, not availability: a
 * gate's read past its 1 s bound on a loaded machine is answered 503 (docs/server.md), and taken again.
 */
async function dataRequests(server: { url: string }, token: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const status = await againOn503(
      async () => {
        const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
        await response.arrayBuffer();
        return response.status;
      },
      (answered) => answered,
      'a data request',
    );
    expect(status).toBe(200);
  }
}

/**
 * The 503s a server counted as the partner's requests (and 5xx): those answered once the token was verified
 * (the limits' or the mapping's read past its bound), which its request log names the partner of. Usually none.
 */
const counted503 = (requestLog: string) => requestLog.split('\n').filter((line) => line.includes('"partner_id"') && line.includes('"status":503')).length;

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
      // A failed assertion never leaves the server running past its test.
      onTestFinished(() => void server.child.kill('SIGKILL'));
      await dataRequests(server, token, 20);
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
      expect(usage.rows).toMatchObject([{ requests: 20 + counted503(server.stdout()), accepted: 20 }]);
    }, 40_000);

    it('reports loudly, with the totals, what it still cannot write once the bound (10 s) has passed', async () => {
      await runCli(['create-partner', '--name', 'Stuck'], backend.env);
      await runCli(['map-company', 'Stuck', '--company', 'acme', '--yes'], backend.env);
      const token = (await runCli(['mint-test-token', 'Stuck', '--json'], backend.env)).json().access_token;
      const server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url });
      // A failed assertion never leaves the server running past its test.
      onTestFinished(() => void server.child.kill('SIGKILL'));
      await dataRequests(server, token, 7);
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
        const entry = JSON.parse(line!) as { level: number; msg: string; lost: { requests: number; accepted: number; serverErrors: number; partners: number } };
        const refused = counted503(server.stdout());
        expect(entry.level).toBe(50);
        expect(entry.lost).toMatchObject({ requests: 7 + refused, accepted: 7, serverErrors: refused, partners: 1 });
        expect(entry.msg).toMatch(new RegExp(`${7 + refused} requests \\(7 accepted`));
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
      /** The requests the rows should hold so far: twenty a round, and any 503 a server counted. */
      let requests = 0;
      for (let round = 1; round <= 3; round++) {
        // In this process: the subject is two instances' counts meeting in one database at once, not their
        // processes (SIGTERM comes from the serve command's signal emitter, as the binary gets it).
        const servers = await Promise.all([1, 2].map(() => serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url })));
        for (const server of servers) await dataRequests(server, token, 10);
        expect(await Promise.all(servers.map((server) => server.stop()))).toEqual([0, 0]);
        requests += 20 + servers.reduce((sum, server) => sum + counted503(server.stdout()), 0);
        const usage = (await runCli(['usage', 'Twice', '--json'], backend.env)).json();
        expect(usage.rows, `round ${round}`).toMatchObject([{ requests }]);
      }
    }, 60_000);
  });
});
