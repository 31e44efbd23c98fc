import type { Queryable, SqlTx } from '../unit.js';

/**
 * The first statement of every change: it takes the write lock up front (SQLite queues writers on its busy
 * timeout instead of failing them at lock upgrade; PostgreSQL serialises on the row lock), and it tells
 * running servers that their caches are stale.
 */
export async function bumpRevision(tx: SqlTx): Promise<void> {
  await tx.run('UPDATE revision SET value = value + 1 WHERE id = 1');
}

export async function currentRevision(q: Queryable): Promise<number | null> {
  const [row] = await q.query<{ value: number | string }>('SELECT value FROM revision WHERE id = 1');
  return row ? Number(row.value) : null;
}
