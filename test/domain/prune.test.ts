// Issue 38.5: pruning that finishes. Past the retention, records go in bounded steps off the request path: on
// SQLite no step holds the event loop long enough to keep GET /healthz from answering within 100 ms; on
// PostgreSQL the steps go fast enough that a 10 M backlog is gone within an hour.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { insertDecisions } from '../../src/db/repositories/decisions.js';
import { newRequestId } from '../../src/request-id.js';
import { backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { buildTestApp, type TestApp } from '../http/support.js';

const DAY_MS = 86_400_000;

/** `rows` decisions 40 days old (past the default 30-day retention), and one of today that must stay. */
async function backlog(db: Database, rows: number): Promise<string> {
  const old = new Date(db.clock.now() - 40 * DAY_MS);
  const template = newRequestId(old.getTime());
  const kept = newRequestId(db.clock.now());
  const row = (requestId: string, at: Date) => ({
    requestId, at, instanceId: 'srv_old', route: 'data', partnerId: null, keyPairId: null, tokenId: null, companyId: null, clientAddress: '192.0.2.1',
    status: 401, reason: 'token_missing', method: 'GET', path: '/public/v1/prices', engineStatus: null, engineMs: null, traceId: null, bytes: null,
  });
  await db.sql.transaction(
    async (tx) => {
      await insertDecisions(tx, [row(template, old), row(kept, new Date(db.clock.now()))]);
      await tx.run(
        `INSERT INTO gate_decisions (request_id, at, instance_id, route, client_address, status, reason)
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
         SELECT 'old-' || CAST(n.i AS TEXT), t.at, t.instance_id, t.route, t.client_address, t.status, t.reason FROM n, gate_decisions t WHERE t.request_id = $2`,
        [rows - 1, template],
      );
    },
    { timeoutMs: 600_000 },
  );
  return kept;
}

async function count(db: Database): Promise<number> {
  return Number((await db.sql.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM gate_decisions'))[0]!.n);
}

describe.skipIf(!backendAvailable('sqlite'))('38.5: a large backlog pruned on SQLite while /healthz answers (sqlite)', () => {
  let backend: TestBackend;
  let db: Database;
  let t: TestApp;
  const ROWS = 300_000;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('38.5: 300k expired rows go in steps; GET /healthz answers within 100 ms throughout', async () => {
    await backlog(db, ROWS);
    expect(await count(db)).toBe(ROWS + 1);
    // The server prunes at start: the backlog goes while it answers.
    t = await buildTestApp(backend, db);
    const pruned = t.services.decisions.prune();
    let done = false;
    void pruned.finally(() => {
      done = true;
    });
    /** How late each probe was answered: its 5 ms wait and its answer, past the 5 ms. */
    const latencies: number[] = [];
    /** The CPU this process spent meanwhile: the step of the prune that ran in the wait, and the answer. */
    const held: number[] = [];
    while (!done) {
      const cpu = process.cpuUsage();
      const started = performance.now();
      // A probe every 5 ms: a step of the prune runs in the wait (the event loop's check phase it yields to)
      // and delays the probe by as long as it holds the loop.
      await new Promise((resolve) => setTimeout(resolve, 5));
      const response = await t.inject({ method: 'GET', url: '/healthz' });
      const spent = process.cpuUsage(cpu);
      latencies.push(performance.now() - started - 5);
      held.push((spent.user + spent.system) / 1000);
      expect(response.statusCode).toBe(200);
    }
    expect(await pruned).toBe(true);
    expect(await count(db)).toBe(1);
    // The prune spanned many probes: answered between its steps, not after one long delete.
    expect(latencies.length).toBeGreaterThan(20);
    // No probe waited on more than 100 ms of the event loop's work (a step is a few ms: docs/decisions.md).
    // Counted in CPU time, which a machine busy with other work does not stretch; the wall time it does
    // (125 ms seen under two busy loops) is printed beside it.
    console.log(`prune: ${latencies.length} probes, the latest answered ${Math.round(Math.max(...latencies))} ms late, the most CPU before an answer ${Math.round(Math.max(...held))} ms`);
    expect(Math.max(...held)).toBeLessThan(100);
  }, 300_000);
});

describe.skipIf(!backendAvailable('postgresql'))('38.5: pruning on PostgreSQL keeps the pace of 10 M rows an hour (postgresql)', () => {
  let backend: TestBackend;
  let db: Database;
  let t: TestApp;
  const ROWS = 200_000;

  beforeAll(async () => {
    backend = await createBackend('postgresql');
    db = await openMigrated(backend);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('38.5: 200k expired rows go at more than 10 M an hour, in steps that each finish (no single delete to cancel)', async () => {
    const kept = await backlog(db, ROWS);
    t = await buildTestApp(backend, db);
    const started = performance.now();
    expect(await t.services.decisions.prune()).toBe(true);
    const seconds = (performance.now() - started) / 1000;
    expect(await count(db)).toBe(1);
    expect((await db.sql.query<{ request_id: string }>('SELECT request_id FROM gate_decisions'))[0]!.request_id).toBe(kept);
    expect(ROWS / seconds).toBeGreaterThan(10_000_000 / 3_600);
  }, 300_000);
});
