import type { Queryable, SqlTx } from '../unit.js';

/** A partner's network rules as stored (canonical CIDRs, comma-separated); null: none. */
export async function networkOf(q: Queryable, partnerId: string): Promise<string | null> {
  const [row] = await q.query<{ allow_from: string }>('SELECT allow_from FROM partner_networks WHERE partner_id = $1', [partnerId]);
  return row?.allow_from ?? null;
}

export async function upsertNetwork(tx: SqlTx, partnerId: string, allowFrom: string, now: Date): Promise<void> {
  await tx.run(
    `INSERT INTO partner_networks (partner_id, allow_from, updated_at) VALUES ($1, $2, $3)
     ON CONFLICT (partner_id) DO UPDATE SET allow_from = excluded.allow_from, updated_at = excluded.updated_at`,
    [partnerId, allowFrom, now],
  );
}

export async function deleteNetwork(tx: SqlTx, partnerId: string): Promise<number> {
  return tx.run('DELETE FROM partner_networks WHERE partner_id = $1', [partnerId]);
}
