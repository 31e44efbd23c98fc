import type { KeyPairRow } from './key-pairs.js';
import type { Column, Columns } from '../models.js';
import { leaseStillHeld, type LeaseFence } from './leases.js';
import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

/** An endpoint as listed: never its secret (support and on-call may read this much, not the secret). */
export type WebhookEndpoint = Columns<'WebhookEndpoint', 'id' | 'url' | 'partnerId' | 'description' | 'createdAt'> &
  /** Event types it receives (stored comma-separated); null: every one. */
  Column<'WebhookEndpoint', 'events', string[] | null>;

/** With its signing secret (whsec_…): read only by the sender, `webhooks test`, and `webhooks add` once. */
export type WebhookEndpointRow = WebhookEndpoint & Columns<'WebhookEndpoint', 'secret'>;

type EndpointRaw = {
  id: string;
  url: string;
  secret?: string;
  events: string | null;
  partner_id: string | null;
  description: string | null;
  created_at: unknown;
};

function endpointFromRaw(row: EndpointRaw): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: row.events === null ? null : row.events.split(',').filter(Boolean),
    partnerId: row.partner_id,
    description: row.description,
    createdAt: toDate(row.created_at)!,
  };
}

// Never the secret: the columns every role may read (db roles grants support and on-call these alone).
const ENDPOINT_COLUMNS = 'id, url, events, partner_id, description, created_at';

export async function insertWebhookEndpoint(tx: SqlTx, endpoint: WebhookEndpointRow): Promise<void> {
  await tx.run(
    'INSERT INTO webhook_endpoints (id, url, secret, events, partner_id, description, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [
      endpoint.id,
      endpoint.url,
      endpoint.secret,
      endpoint.events === null ? null : endpoint.events.join(','),
      endpoint.partnerId,
      endpoint.description,
      endpoint.createdAt,
    ],
  );
}

export async function webhookEndpoints(q: Queryable): Promise<WebhookEndpoint[]> {
  return (await q.query<EndpointRaw>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at, id`)).map(endpointFromRaw);
}

export async function webhookEndpointById(q: Queryable, id: string): Promise<WebhookEndpoint | null> {
  const [row] = await q.query<EndpointRaw>(`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE id = $1`, [id]);
  return row ? endpointFromRaw(row) : null;
}

/** The endpoint with its signing secret, for a send (`webhooks test`); null when none has that id. */
export async function webhookEndpointWithSecret(q: Queryable, id: string): Promise<WebhookEndpointRow | null> {
  const [row] = await q.query<EndpointRaw & { secret: string }>(`SELECT ${ENDPOINT_COLUMNS}, secret FROM webhook_endpoints WHERE id = $1`, [id]);
  return row ? { ...endpointFromRaw(row), secret: row.secret } : null;
}

/** How many deliveries to the endpoint are still to be made (what removing it drops). */
export async function pendingDeliveryCount(q: Queryable, id: string): Promise<number> {
  const [row] = await q.query<{ n: unknown }>("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'", [id]);
  return Number(row?.n ?? 0);
}

/** Removes the endpoint and what was still to be delivered to it; the deliveries already made stay listed. */
export async function deleteWebhookEndpoint(tx: SqlTx, id: string): Promise<{ removed: number; dropped: number }> {
  const dropped = await tx.run("DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'", [id]);
  return { removed: await tx.run('DELETE FROM webhook_endpoints WHERE id = $1', [id]), dropped };
}

/** `data` is the JSON body sent: {type, timestamp, data}; `auditSeq` the audit event it reports (written in the same transaction), null for a server's reminder. */
export type OutboxEvent = Columns<'WebhookEvent'>;

/** The event and one pending delivery per endpoint (due at once), in the caller's transaction. */
export async function insertOutboxEvent(tx: SqlTx, event: OutboxEvent, endpointIds: readonly string[]): Promise<void> {
  await tx.run('INSERT INTO webhook_events (id, type, partner_id, data, created_at, audit_seq) VALUES ($1, $2, $3, $4, $5, $6)', [
    event.id,
    event.type,
    event.partnerId,
    event.data,
    event.createdAt,
    event.auditSeq,
  ]);
  for (const endpointId of endpointIds) {
    await tx.run(
      "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, created_at) VALUES ($1, $2, 'pending', 0, $3, $4)",
      [event.id, endpointId, event.createdAt, event.createdAt],
    );
  }
}

export type DueDelivery = Columns<'WebhookDelivery', 'eventId' | 'endpointId' | 'attempts'> &
  Column<'WebhookDelivery', 'nextAttemptAt', Date> &
  Columns<'WebhookEndpoint', 'url' | 'secret'> &
  Columns<'WebhookEvent', 'type' | 'data' | 'createdAt'>;

type DueRaw = {
  event_id: string;
  endpoint_id: string;
  attempts: unknown;
  next_attempt_at: unknown;
  url: string;
  secret: string;
  type: string;
  data: string;
  created_at: unknown;
};

/** Pending deliveries due at `now`, oldest first. */
export async function dueDeliveries(q: Queryable, now: Date, limit: number): Promise<DueDelivery[]> {
  const rows = await q.query<DueRaw>(
    `SELECT d.event_id, d.endpoint_id, d.attempts, d.next_attempt_at, w.url, w.secret, e.type, e.data, e.created_at
       FROM webhook_deliveries d
       JOIN webhook_endpoints w ON w.id = d.endpoint_id
       JOIN webhook_events e ON e.id = d.event_id
      WHERE d.status = 'pending' AND d.next_attempt_at <= $1
      ORDER BY d.next_attempt_at, d.event_id
      LIMIT ${Math.max(1, Math.floor(limit))}`,
    [now],
  );
  return rows.map((row) => ({
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    attempts: Number(row.attempts),
    nextAttemptAt: toDate(row.next_attempt_at)!,
    url: row.url,
    secret: row.secret,
    type: row.type,
    data: row.data,
    createdAt: toDate(row.created_at)!,
  }));
}

/**
 * Claims a due delivery: its next attempt moves to `leaseUntil` (past the send's timeout), so no other
 * sender takes it meanwhile, and a sender that dies mid-send leaves it due again then. False when another
 * sender claimed it first, or when `fence` is given and its holder no longer holds that lease (a leader that
 * was paused past its lease claims nothing).
 */
export async function claimDelivery(tx: SqlTx, due: DueDelivery, leaseUntil: Date, fence?: LeaseFence): Promise<boolean> {
  const changed = await tx.run(
    `UPDATE webhook_deliveries SET next_attempt_at = $1
      WHERE event_id = $2 AND endpoint_id = $3 AND status = 'pending' AND attempts = $4 AND next_attempt_at <= $5${fence ? ` AND ${leaseStillHeld(6)}` : ''}`,
    [leaseUntil, due.eventId, due.endpointId, due.attempts, due.nextAttemptAt, ...(fence ? [fence.name, fence.holder] : [])],
  );
  return changed === 1;
}

export interface AttemptOutcome {
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  at: Date;
  nextAttemptAt: Date | null;
  httpStatus: number | null;
  error: string | null;
}

export async function recordAttempt(tx: SqlTx, eventId: string, endpointId: string, outcome: AttemptOutcome): Promise<void> {
  await tx.run(
    `UPDATE webhook_deliveries SET status = $1, attempts = $2, last_attempt_at = $3, next_attempt_at = $4, last_status = $5, last_error = $6,
            delivered_at = $7
      WHERE event_id = $8 AND endpoint_id = $9 AND status = 'pending'`,
    [
      outcome.status,
      outcome.attempts,
      outcome.at,
      outcome.nextAttemptAt,
      outcome.httpStatus,
      outcome.error,
      outcome.status === 'delivered' ? outcome.at : null,
      eventId,
      endpointId,
    ],
  );
}

export type DeliveryRow = Columns<'WebhookDelivery'> & Columns<'WebhookEvent', 'type'>;

/** Newest first. */
export async function deliveryPage(q: Queryable, options: { endpointId?: string; failed?: boolean; limit: number }): Promise<DeliveryRow[]> {
  const conditions: string[] = [];
  const params: unknown[] = [];
  if (options.endpointId !== undefined) conditions.push(`d.endpoint_id = $${params.push(options.endpointId)}`);
  // Failed: given up, or pending after at least one failed attempt.
  if (options.failed) conditions.push("(d.status = 'failed' OR (d.status = 'pending' AND d.attempts > 0))");
  const rows = await q.query<{
    event_id: string;
    endpoint_id: string;
    type: string;
    status: string;
    attempts: unknown;
    last_status: unknown;
    last_error: string | null;
    last_attempt_at: unknown;
    next_attempt_at: unknown;
    delivered_at: unknown;
    created_at: unknown;
  }>(
    `SELECT d.event_id, d.endpoint_id, e.type, d.status, d.attempts, d.last_status, d.last_error, d.last_attempt_at, d.next_attempt_at,
            d.delivered_at, d.created_at
       FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
      ${conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : ''}
      ORDER BY d.created_at DESC, d.event_id DESC
      LIMIT ${Math.max(1, Math.floor(options.limit))}`,
    params,
  );
  return rows.map((row) => ({
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    type: row.type,
    status: row.status,
    attempts: Number(row.attempts),
    lastStatus: row.last_status === null || row.last_status === undefined ? null : Number(row.last_status),
    lastError: row.last_error,
    lastAttemptAt: toDate(row.last_attempt_at),
    nextAttemptAt: row.status === 'pending' ? toDate(row.next_attempt_at) : null,
    deliveredAt: toDate(row.delivered_at),
    createdAt: toDate(row.created_at)!,
  }));
}

/** Records a reminder as sent; false when it already was (by this or another instance). */
export async function insertReminder(tx: SqlTx, key: string, now: Date): Promise<boolean> {
  return (await tx.run('INSERT INTO webhook_reminders (key, created_at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [key, now])) === 1;
}

export async function remindersSent(q: Queryable, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const params = [...keys];
  const rows = await q.query<{ key: string }>(`SELECT key FROM webhook_reminders WHERE key IN (${params.map((_, i) => `$${i + 1}`).join(', ')})`, params);
  return new Set(rows.map((row) => row.key));
}

/** Live pairs (active or retiring, of an active partner) expiring after `now` and before `until`. */
/**
 * Candidates for keys.expiring: pairs stored as minting whose expiry falls in the window, of active partners.
 * Which of them are live now is the domain's to say (domain/key-pair-state.ts), from the columns returned.
 */
export async function pairsExpiringBetween(
  q: Queryable,
  now: Date,
  until: Date,
): Promise<(Pick<KeyPairRow, 'id' | 'partnerId' | 'status' | 'retiresAt' | 'supersededAt' | 'revokedAt'> & { expiresAt: Date })[]> {
  const rows = await q.query<{ id: string; partner_id: string; status: string; expires_at: unknown; retires_at: unknown; superseded_at: unknown; revoked_at: unknown }>(
    `SELECT k.id, k.partner_id, k.status, k.expires_at, k.retires_at, k.superseded_at, k.revoked_at FROM key_pairs k JOIN partners p ON p.id = k.partner_id
      WHERE k.status IN ('active', 'retiring') AND p.status = 'active' AND k.expires_at IS NOT NULL AND k.expires_at > $1 AND k.expires_at <= $2`,
    [now, until],
  );
  return rows.map((row) => ({
    id: row.id,
    partnerId: row.partner_id,
    status: row.status,
    expiresAt: toDate(row.expires_at)!,
    retiresAt: toDate(row.retires_at),
    supersededAt: toDate(row.superseded_at),
    revokedAt: toDate(row.revoked_at),
  }));
}

/** Accepted data requests since `dayStart` of every partner with a daily quota, against the quota. */
export async function quotaUse(q: Queryable, dayStart: Date): Promise<{ partnerId: string; quota: number; used: number }[]> {
  const rows = await q.query<{ partner_id: string; daily_quota: unknown; used: unknown }>(
    `SELECT l.partner_id, l.daily_quota, COALESCE(SUM(u.accepted), 0) AS used
       FROM partner_limits l JOIN usage_hours u ON u.partner_id = l.partner_id AND u.period_start >= $1
      WHERE l.daily_quota IS NOT NULL AND l.daily_quota > 0
      GROUP BY l.partner_id, l.daily_quota`,
    [dayStart],
  );
  return rows.map((row) => ({ partnerId: row.partner_id, quota: Number(row.daily_quota), used: Number(row.used) }));
}

export type LeakReportRow = Columns<'LeakReport'>;

export async function leakReports(q: Queryable, fingerprints: readonly string[]): Promise<Map<string, LeakReportRow>> {
  if (fingerprints.length === 0) return new Map();
  const rows = await q.query<{
    fingerprint: string;
    label: string;
    kind: string;
    partner_id: string | null;
    key_pair_id: string | null;
    action: string;
    reported_at: unknown;
  }>(
    `SELECT fingerprint, label, kind, partner_id, key_pair_id, action, reported_at FROM leak_reports WHERE fingerprint IN (${fingerprints
      .map((_, i) => `$${i + 1}`)
      .join(', ')})`,
    [...fingerprints],
  );
  return new Map(
    rows.map((row) => [
      row.fingerprint,
      {
        fingerprint: row.fingerprint,
        label: row.label,
        kind: row.kind,
        partnerId: row.partner_id,
        keyPairId: row.key_pair_id,
        action: row.action,
        reportedAt: toDate(row.reported_at)!,
      },
    ]),
  );
}

/** Records the alert; false when it was already recorded (a duplicate that raced this one). */
export async function insertLeakReport(tx: SqlTx, report: LeakReportRow): Promise<boolean> {
  return (
    (await tx.run(
      'INSERT INTO leak_reports (fingerprint, label, kind, partner_id, key_pair_id, action, reported_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (fingerprint) DO NOTHING',
      [report.fingerprint, report.label, report.kind, report.partnerId, report.keyPairId, report.action, report.reportedAt],
    )) === 1
  );
}

/** Records many alerts at once; those already recorded are left as they are. */
export async function insertLeakReports(tx: SqlTx, reports: readonly LeakReportRow[]): Promise<void> {
  const rows = reports.map((report) => [report.fingerprint, report.label, report.kind, report.partnerId, report.keyPairId, report.action, report.reportedAt] as const);
  for (const { placeholders, params } of valuesBatches(rows)) {
    await tx.run(
      `INSERT INTO leak_reports (fingerprint, label, kind, partner_id, key_pair_id, action, reported_at) VALUES ${placeholders} ON CONFLICT (fingerprint) DO NOTHING`,
      params,
    );
  }
}

export async function markPairLeaked(tx: SqlTx, keyPairId: string, at: Date, url: string): Promise<void> {
  await tx.run('UPDATE key_pairs SET leak_reported_at = $1, leak_url = $2 WHERE id = $3', [at, url, keyPairId]);
}
