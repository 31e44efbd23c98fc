import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

export type PartnerRow = Columns<'Partner', 'id' | 'name' | 'status' | 'createdAt' | 'updatedAt' | 'credentialsPolicy'>;

const COLUMNS = 'id, name, status, created_at, updated_at, credentials_policy';

type Raw = { id: string; name: string; status: string; created_at: unknown; updated_at: unknown; credentials_policy: string };

function fromRaw(row: Raw): PartnerRow {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    createdAt: toDate(row.created_at)!,
    updatedAt: toDate(row.updated_at)!,
    credentialsPolicy: row.credentials_policy,
  };
}

export async function partnerById(q: Queryable, id: string): Promise<PartnerRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM partners WHERE id = $1`, [id]);
  return row ? fromRaw(row) : null;
}

export async function partnerByName(q: Queryable, name: string): Promise<PartnerRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM partners WHERE name = $1`, [name]);
  return row ? fromRaw(row) : null;
}

/** The partner whose name is the same ignoring case and Unicode form (name_key is unique: one at most). */
export async function partnerByNameKey(q: Queryable, key: string): Promise<PartnerRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM partners WHERE name_key = $1`, [key]);
  return row ? fromRaw(row) : null;
}

export async function insertPartner(
  tx: SqlTx,
  partner: { id: string; name: string; nameKey: string; status?: string },
  now: Date,
): Promise<PartnerRow> {
  const status = partner.status ?? 'active';
  await tx.run('INSERT INTO partners (id, name, name_key, status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)', [
    partner.id,
    partner.name,
    partner.nameKey,
    status,
    now,
    now,
  ]);
  return { id: partner.id, name: partner.name, status, createdAt: now, updatedAt: now, credentialsPolicy: 'both' };
}

/** set-credentials: which kinds of key pair the partner's keys may exchange with. */
export async function updateCredentialsPolicy(tx: SqlTx, id: string, policy: string, now: Date): Promise<void> {
  await tx.run('UPDATE partners SET credentials_policy = $1, updated_at = $2 WHERE id = $3', [policy, now, id]);
}

export async function updatePartnerStatus(tx: SqlTx, id: string, status: string, now: Date): Promise<void> {
  await tx.run('UPDATE partners SET status = $1, updated_at = $2 WHERE id = $3', [status, now, id]);
}

/** Partners whose name contains `term` (any case), by name: for pickers. */
export async function searchPartners(q: Queryable, term: string, limit: number): Promise<{ id: string; name: string; status: string }[]> {
  const pattern = `%${term.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return q.query("SELECT id, name, status FROM partners WHERE LOWER(name) LIKE $1 ESCAPE '\\' ORDER BY name LIMIT $2", [pattern, limit]);
}

export interface PartnerListRow extends PartnerRow {
  companyCount: number;
  activeAccessKey: string | null;
}

/** One page, oldest first (ids sort by creation); the cursor is the last id of the previous page. */
export async function partnerPage(
  q: Queryable,
  options: { status?: string; cursor?: string; limit: number; companyId?: string },
): Promise<PartnerListRow[]> {
  const conditions: string[] = [];
  const params: unknown[] = [];
  if (options.status) conditions.push(`p.status = $${params.push(options.status)}`);
  // Support: which partners can reach this company (the index on company_id answers it).
  if (options.companyId !== undefined) {
    conditions.push(`p.id IN (SELECT m.partner_id FROM company_mappings m WHERE m.company_id = $${params.push(options.companyId)})`);
  }
  if (options.cursor) conditions.push(`p.id > $${params.push(options.cursor)}`);
  const rows = await q.query<Raw & { company_count: number | string; active_access_key: string | null }>(
    `SELECT p.id, p.name, p.status, p.created_at, p.updated_at, p.credentials_policy,
       (SELECT COUNT(*) FROM company_mappings m WHERE m.partner_id = p.id) AS company_count,
       (SELECT k.access_key FROM key_pairs k WHERE k.partner_id = p.id AND k.status = 'active') AS active_access_key
     FROM partners p
     ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
     ORDER BY p.id
     LIMIT $${params.push(options.limit)}`,
    params,
  );
  return rows.map((row) => ({ ...fromRaw(row), companyCount: Number(row.company_count), activeAccessKey: row.active_access_key }));
}

/**
 * What the gate needs about a partner: its status, the instant (ms) before which its tokens are refused, and
 * its network rules (partner_networks.allow_from; null: none).
 */
export async function partnerGateRow(
  q: Queryable,
  id: string,
): Promise<{ status: string; tokensRevokedBefore: number | null; allowFrom: string | null; credentialsPolicy: string } | null> {
  const [row] = await q.query<{ status: string; tokens_revoked_before: unknown; allow_from: string | null; credentials_policy: string }>(
    'SELECT p.status, p.tokens_revoked_before, n.allow_from, p.credentials_policy FROM partners p LEFT JOIN partner_networks n ON n.partner_id = p.id WHERE p.id = $1',
    [id],
  );
  if (!row) return null;
  return {
    status: row.status,
    tokensRevokedBefore: row.tokens_revoked_before == null ? null : Number(row.tokens_revoked_before),
    allowFrom: row.allow_from ?? null,
    credentialsPolicy: row.credentials_policy,
  };
}

/** Marks partners as changed now (their limits, keys, mappings or token cut-off changed), a chunk at a time. */
export async function touchPartners(tx: SqlTx, ids: readonly string[], now: Date): Promise<void> {
  for (let start = 0; start < ids.length; start += 500) {
    const chunk = ids.slice(start, start + 500);
    await tx.run(`UPDATE partners SET updated_at = $1 WHERE id IN (${chunk.map((_id, i) => `$${i + 2}`).join(', ')})`, [now, ...chunk]);
  }
}

export async function setTokensRevokedBefore(tx: SqlTx, id: string, ms: number): Promise<void> {
  await tx.run('UPDATE partners SET tokens_revoked_before = $1 WHERE id = $2', [ms, id]);
}
