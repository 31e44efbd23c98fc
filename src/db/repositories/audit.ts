import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

export interface AuditRow {
  id: number;
  at: Date;
  actor: string;
  action: string;
  partnerId: string | null;
  details: string;
}

export async function insertAuditEvents(
  tx: SqlTx,
  events: readonly { actor: string; action: string; partnerId: string | null; details: string }[],
  at: Date,
): Promise<void> {
  const rows = events.map((event) => [at, event.actor, event.action, event.partnerId, event.details] as const);
  for (const batch of valuesBatches(rows)) {
    await tx.run(`INSERT INTO audit_events (at, actor, action, partner_id, details) VALUES ${batch.placeholders}`, batch.params);
  }
}

export interface AuditPageRow extends AuditRow {
  partnerName: string | null;
}

/**
 * Newest first; the cursor is the last id of the previous page. `company` keeps the events whose details
 * name that company (`company_id`, or one of `company_ids`): a text match narrowed in the domain.
 */
export async function auditPage(
  q: Queryable,
  options: { partnerId?: string; since?: Date; action?: string; company?: string; beforeId?: number; limit: number },
): Promise<AuditPageRow[]> {
  const params: unknown[] = [];
  const conditions: string[] = [];
  if (options.partnerId) conditions.push(`e.partner_id = $${params.push(options.partnerId)}`);
  if (options.since) conditions.push(`e.at >= $${params.push(options.since)}`);
  if (options.action) conditions.push(`e.action = $${params.push(options.action)}`);
  if (options.company) {
    conditions.push(`e.details LIKE $${params.push(`%${JSON.stringify(options.company).replace(/[\\%_]/g, (c) => `\\${c}`)}%`)} ESCAPE '\\'`);
  }
  if (options.beforeId !== undefined) conditions.push(`e.id < $${params.push(options.beforeId)}`);
  const rows = await q.query<{
    id: number | string;
    at: unknown;
    actor: string;
    action: string;
    partner_id: string | null;
    partner_name: string | null;
    details: string;
  }>(
    `SELECT e.id, e.at, e.actor, e.action, e.partner_id, p.name AS partner_name, e.details
     FROM audit_events e LEFT JOIN partners p ON p.id = e.partner_id
     ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
     ORDER BY e.id DESC LIMIT $${params.push(options.limit)}`,
    params,
  );
  return rows.map((row) => ({
    id: Number(row.id),
    at: toDate(row.at)!,
    actor: row.actor,
    action: row.action,
    partnerId: row.partner_id,
    partnerName: row.partner_name,
    details: row.details,
  }));
}

/** When the partner's newest event of this action was recorded (null: never). */
export async function lastEventAt(q: Queryable, partnerId: string, action: string): Promise<Date | null> {
  const [row] = await q.query<{ at: unknown }>(
    'SELECT at FROM audit_events WHERE partner_id = $1 AND action = $2 ORDER BY id DESC LIMIT 1',
    [partnerId, action],
  );
  return row ? toDate(row.at) : null;
}

/** The test-token mint event whose details carry this jti (older, untraceable token ids). */
export async function testTokenEventByJti(q: Queryable, jti: string): Promise<{ partnerId: string | null; at: Date; details: string } | null> {
  const [row] = await q.query<{ partner_id: string | null; at: unknown; details: string }>(
    "SELECT partner_id, at, details FROM audit_events WHERE action = 'token.test_minted' AND details LIKE $1 ORDER BY id DESC LIMIT 1",
    [`%${JSON.stringify(jti)}%`],
  );
  return row ? { partnerId: row.partner_id, at: toDate(row.at)!, details: row.details } : null;
}
