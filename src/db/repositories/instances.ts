import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

/** The PostgreSQL channel a serve instance announces its applied revision on (receipts LISTEN to it). */
export const INSTANCES_CHANNEL = 'partnerctl_instances';

export type InstanceRow = Columns<'ServeInstance'>;

/**
 * An instance's heartbeat: its row, inserted when missing (the first beat, or after someone removed it), with
 * `last_seen_at` and `applied_revision` refreshed.
 */
export async function beatInstance(tx: SqlTx, row: InstanceRow): Promise<void> {
  await tx.run(
    `INSERT INTO serve_instances (instance_id, host, pid, version, address, started_at, last_seen_at, applied_revision, stale_budget_ms, clock_offset_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (instance_id) DO UPDATE SET last_seen_at = excluded.last_seen_at, applied_revision = excluded.applied_revision,
       clock_offset_ms = excluded.clock_offset_ms`,
    [row.instanceId, row.host, row.pid, row.version, row.address, row.startedAt, row.lastSeenAt, row.appliedRevision, row.staleBudgetMs, row.clockOffsetMs],
  );
}

/**
 * Tells PostgreSQL listeners (receipts) that an instance's row moved; after its commit, on its own: a NOTIFY
 * inside the heartbeat's transaction would queue its commit behind every other notifying commit of the
 * database, and the heartbeat never waits for a lock.
 */
export async function announceInstance(q: Queryable, instanceId: string): Promise<void> {
  if (!q.dialect.listens) return;
  await q.query('SELECT pg_notify($1, $2)', [INSTANCES_CHANNEL, instanceId]);
}

export async function removeInstance(tx: SqlTx, instanceId: string): Promise<number> {
  return tx.run('DELETE FROM serve_instances WHERE instance_id = $1', [instanceId]);
}

/** Every registered instance, oldest start first. */
export async function listInstances(q: Queryable): Promise<InstanceRow[]> {
  const rows = await q.query<Record<string, unknown>>(
    'SELECT instance_id, host, pid, version, address, started_at, last_seen_at, applied_revision, stale_budget_ms, clock_offset_ms FROM serve_instances ORDER BY started_at, instance_id',
  );
  return rows.map((row) => ({
    instanceId: String(row.instance_id),
    host: String(row.host),
    pid: Number(row.pid),
    version: String(row.version),
    address: String(row.address),
    startedAt: toDate(row.started_at)!,
    lastSeenAt: toDate(row.last_seen_at)!,
    appliedRevision: row.applied_revision === null || row.applied_revision === undefined ? null : Number(row.applied_revision),
    staleBudgetMs: Number(row.stale_budget_ms),
    clockOffsetMs: row.clock_offset_ms === null || row.clock_offset_ms === undefined ? null : Number(row.clock_offset_ms),
  }));
}
