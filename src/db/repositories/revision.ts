import type { Queryable, SqlTx } from '../unit.js';

/**
 * The first statement of every change: it takes the write lock up front (SQLite queues writers on its busy
 * timeout instead of failing them at lock upgrade; PostgreSQL serialises on the row lock), and it tells
 * running servers that their caches are stale.
 */
export async function bumpRevision(tx: SqlTx): Promise<void> {
  await tx.run('UPDATE revision SET value = value + 1 WHERE id = 1');
}

/** The PostgreSQL channel every access-affecting change is announced on. */
export const ACCESS_CHANNEL = 'partnerctl_access';

/**
 * Tells listening servers (PostgreSQL only) that access changed. Sent inside the change's transaction, so
 * it is delivered when, and only if, the change commits, and after its rows are visible to readers.
 */
export async function announceRevision(tx: SqlTx): Promise<void> {
  if (!tx.dialect.listens) return;
  await tx.query('SELECT pg_notify($1, (SELECT value::text FROM revision WHERE id = 1))', [ACCESS_CHANNEL]);
}

export async function currentRevision(q: Queryable): Promise<number | null> {
  const [row] = await q.query<{ value: number | string }>('SELECT value FROM revision WHERE id = 1');
  return row ? Number(row.value) : null;
}
