import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

export async function isMapped(q: Queryable, partnerId: string, companyId: string): Promise<boolean> {
  const rows = await q.query('SELECT 1 AS found FROM company_mappings WHERE partner_id = $1 AND company_id = $2', [partnerId, companyId]);
  return rows.length > 0;
}

/** Ids per statement: under both engines' parameter limits (SQLite 32,766; PostgreSQL 65,535). */
const IDS_PER_STATEMENT = 10_000;

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let start = 0; start < items.length; start += size) out.push(items.slice(start, start + size));
  return out;
}

/**
 * Maps many companies in multi-row statements; ids already mapped are left alone (ON CONFLICT DO NOTHING).
 * Resolves to the ids this call added, in the order given.
 */
export async function insertMappings(
  tx: SqlTx,
  partnerId: string,
  companyIds: readonly string[],
  now: Date,
  progress?: (done: number) => void,
): Promise<string[]> {
  let done = 0;
  const added: string[] = [];
  for (const chunk of chunks(companyIds, IDS_PER_STATEMENT)) {
    // `WHERE true`: SQLite would read the ON of ON CONFLICT as a join's, after a SELECT with no WHERE.
    const rows = await tx.query<{ company_id: string }>(
      `INSERT INTO company_mappings (partner_id, company_id, created_at)
       SELECT $1, value, $2 FROM ${tx.dialect.textListRowsSql('$3')} WHERE true
       ON CONFLICT DO NOTHING RETURNING company_id`,
      [partnerId, now, tx.dialect.textList(chunk)],
    );
    for (const row of rows) added.push(row.company_id);
    done += chunk.length;
    progress?.(done);
  }
  return added;
}

/** Unmaps many companies; resolves to the ids this call removed. */
export async function deleteMappings(
  tx: SqlTx,
  partnerId: string,
  companyIds: readonly string[],
  progress?: (done: number) => void,
): Promise<string[]> {
  let done = 0;
  const removed: string[] = [];
  for (const chunk of chunks(companyIds, IDS_PER_STATEMENT)) {
    const rows = await tx.query<{ company_id: string }>(
      `DELETE FROM company_mappings WHERE partner_id = $1 AND ${tx.dialect.inTextListSql('company_id', '$2')} RETURNING company_id`,
      [partnerId, tx.dialect.textList(chunk)],
    );
    for (const row of rows) removed.push(row.company_id);
    done += chunk.length;
    progress?.(done);
  }
  return removed;
}

export async function mappingCount(q: Queryable, partnerId: string): Promise<number> {
  const [row] = await q.query<{ n: number | string }>('SELECT COUNT(*) AS n FROM company_mappings WHERE partner_id = $1', [partnerId]);
  return Number(row?.n ?? 0);
}

/** One page of a partner's companies, by company id; the cursor is the last id of the previous page. */
export async function mappingPage(
  q: Queryable,
  partnerId: string,
  options: { cursor?: string; limit: number },
): Promise<{ companyId: string; createdAt: Date }[]> {
  const params: unknown[] = [partnerId];
  const after = options.cursor === undefined ? '' : `AND company_id > $${params.push(options.cursor)}`;
  const rows = await q.query<{ company_id: string; created_at: unknown }>(
    `SELECT company_id, created_at FROM company_mappings WHERE partner_id = $1 ${after} ORDER BY company_id LIMIT $${params.push(options.limit)}`,
    params,
  );
  return rows.map((row) => ({ companyId: row.company_id, createdAt: toDate(row.created_at)! }));
}

/** Every company id of a partner (export, apply). */
export async function companyIdsOf(q: Queryable, partnerId: string): Promise<string[]> {
  const rows = await q.query<{ company_id: string }>('SELECT company_id FROM company_mappings WHERE partner_id = $1 ORDER BY company_id', [partnerId]);
  return rows.map((row) => row.company_id);
}
