import type { Queryable, SqlTx } from '../unit.js';

/** Remembers key ids (never key material); ids already recorded keep their first time. */
export async function recordSigningKeys(tx: SqlTx, kids: readonly string[], now: Date): Promise<void> {
  for (const kid of kids) {
    await tx.run('INSERT INTO signing_keys (kid, first_seen_at) VALUES ($1, $2) ON CONFLICT (kid) DO NOTHING', [kid, now]);
  }
}

/** How many signing keys have ever been recorded. */
export async function countSigningKeys(q: Queryable): Promise<number> {
  const [row] = await q.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM signing_keys');
  return Number(row?.n ?? 0);
}
