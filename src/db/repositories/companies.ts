import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

export async function isMapped(q: Queryable, partnerId: string, companyId: string): Promise<boolean> {
  const rows = await q.query('SELECT 1 AS found FROM company_mappings WHERE partner_id = $1 AND company_id = $2', [partnerId, companyId]);
  return rows.length > 0;
}

export async function insertMapping(tx: SqlTx, partnerId: string, companyId: string, now: Date): Promise<void> {
  await tx.run('INSERT INTO company_mappings (partner_id, company_id, created_at) VALUES ($1, $2, $3)', [partnerId, companyId, now]);
}

/** Resolves to the number of rows removed (0 or 1). */
export async function deleteMapping(tx: SqlTx, partnerId: string, companyId: string): Promise<number> {
  return tx.run('DELETE FROM company_mappings WHERE partner_id = $1 AND company_id = $2', [partnerId, companyId]);
}

export async function mappingsOf(q: Queryable, partnerId: string): Promise<{ companyId: string; createdAt: Date }[]> {
  const rows = await q.query<{ company_id: string; created_at: unknown }>(
    'SELECT company_id, created_at FROM company_mappings WHERE partner_id = $1 ORDER BY company_id',
    [partnerId],
  );
  return rows.map((row) => ({ companyId: row.company_id, createdAt: toDate(row.created_at)! }));
}
