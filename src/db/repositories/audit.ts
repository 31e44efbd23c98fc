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

/** Newest first. */
export async function auditPage(q: Queryable, options: { partnerId?: string; limit: number }): Promise<AuditRow[]> {
  const params: unknown[] = [];
  const where = options.partnerId ? `WHERE partner_id = $${params.push(options.partnerId)}` : '';
  const rows = await q.query<{ id: number | string; at: unknown; actor: string; action: string; partner_id: string | null; details: string }>(
    `SELECT id, at, actor, action, partner_id, details FROM audit_events ${where} ORDER BY id DESC LIMIT $${params.push(options.limit)}`,
    params,
  );
  return rows.map((row) => ({
    id: Number(row.id),
    at: toDate(row.at)!,
    actor: row.actor,
    action: row.action,
    partnerId: row.partner_id,
    details: row.details,
  }));
}
