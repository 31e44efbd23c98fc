import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

/** One answer that was not a success (a refusal by the gate, a failure of the server's), as gate_decisions holds it. */
export type DecisionRow = Columns<'GateDecision'>;

/** One counter of refusals not recorded (a minute, an instance, a key over the cap). */
export type UnrecordedDelta = Columns<'GateDecisionUnrecorded'>;

const COLUMNS = 'request_id, at, instance_id, route, partner_id, key_pair_id, token_id, company_id, client_address, status, reason, method, path, engine_status, engine_ms, trace_id, bytes';

type Raw = {
  request_id: string;
  at: unknown;
  instance_id: string;
  route: string;
  partner_id: string | null;
  key_pair_id: string | null;
  token_id: string | null;
  company_id: string | null;
  client_address: string;
  status: number | string;
  reason: string;
  method: string | null;
  path: string | null;
  engine_status: number | string | null;
  engine_ms: number | string | null;
  trace_id: string | null;
  bytes: number | string | null;
};

function numberOrNull(value: number | string | null): number | null {
  return value === null ? null : Number(value);
}

function fromRaw(raw: Raw): DecisionRow {
  return {
    requestId: raw.request_id,
    at: toDate(raw.at)!,
    instanceId: raw.instance_id,
    route: raw.route,
    partnerId: raw.partner_id,
    keyPairId: raw.key_pair_id,
    tokenId: raw.token_id,
    companyId: raw.company_id,
    clientAddress: raw.client_address,
    status: Number(raw.status),
    reason: raw.reason,
    method: raw.method,
    path: raw.path,
    engineStatus: numberOrNull(raw.engine_status),
    engineMs: numberOrNull(raw.engine_ms),
    traceId: raw.trace_id,
    bytes: numberOrNull(raw.bytes),
  };
}

/** The partners of these key pairs (a refused exchange knows its pair, not always its partner). */
export async function partnersOfPairs(q: Queryable, pairIds: readonly string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (let i = 0; i < pairIds.length; i += 500) {
    const slice = pairIds.slice(i, i + 500);
    const rows = await q.query<{ id: string; partner_id: string }>(
      `SELECT id, partner_id FROM key_pairs WHERE id IN (${slice.map((_, n) => `$${n + 1}`).join(', ')})`,
      slice,
    );
    for (const row of rows) found.set(row.id, row.partner_id);
  }
  return found;
}

/** Records refusals; a request id already recorded keeps its row. */
export async function insertDecisions(tx: SqlTx, rows: readonly DecisionRow[]): Promise<void> {
  const values = rows.map(
    (r) =>
      [r.requestId, r.at, r.instanceId, r.route, r.partnerId, r.keyPairId, r.tokenId, r.companyId, r.clientAddress, r.status, r.reason, r.method, r.path, r.engineStatus, r.engineMs, r.traceId, r.bytes] as const,
  );
  for (const { placeholders, params } of valuesBatches(values)) {
    await tx.run(`INSERT INTO gate_decisions (${COLUMNS}) VALUES ${placeholders} ON CONFLICT (request_id) DO NOTHING`, params);
  }
}

/** Adds to the counters of refusals not recorded (created when missing). */
export async function addUnrecorded(tx: SqlTx, deltas: readonly UnrecordedDelta[]): Promise<void> {
  const values = deltas.map((d) => [d.minute, d.instanceId, d.keyKind, d.keyValue, d.heldBy, d.refusals] as const);
  for (const { placeholders, params } of valuesBatches(values)) {
    await tx.run(
      `INSERT INTO gate_decisions_unrecorded (minute, instance_id, key_kind, key_value, held_by, refusals) VALUES ${placeholders}
       ON CONFLICT (minute, instance_id, key_kind, key_value, held_by) DO UPDATE SET refusals = gate_decisions_unrecorded.refusals + excluded.refusals`,
      params,
    );
  }
}

/** The tables pruned past the retention, each with its time column. */
export const PRUNED_TABLES = [
  ['gate_decisions', 'at'],
  ['gate_decisions_unrecorded', 'minute'],
  ['exposure_hours', 'period_start'],
] as const;

/** Deletes at most `limit` rows of `table` older than `before` (one bounded step); how many went. */
export async function pruneBatch(tx: SqlTx, [table, column]: (typeof PRUNED_TABLES)[number], before: Date, limit: number): Promise<number> {
  const row = tx.dialect.rowLocator;
  return tx.run(`DELETE FROM ${table} WHERE ${row} IN (SELECT ${row} FROM ${table} WHERE ${column} < $1 LIMIT $2)`, [before, limit]);
}

export async function decisionByRequestId(q: Queryable, requestId: string): Promise<DecisionRow | null> {
  const rows = await q.query<Raw>(`SELECT ${COLUMNS} FROM gate_decisions WHERE request_id = $1`, [requestId]);
  return rows[0] ? fromRaw(rows[0]) : null;
}

/** Which decisions: a window, and optionally a partner, a reason, a key pair, a token. */
export interface DecisionFilter {
  since: Date;
  until: Date;
  partnerId?: string;
  reason?: string;
  keyPairId?: string;
  tokenId?: string;
  /** Statuses from and to (inclusive). */
  statusFrom?: number;
  statusTo?: number;
  companyId?: string;
  clientAddress?: string;
  /**
   * Only what came after a containment: rows from its instant, and rows of the reason it causes whenever they
   * are dated (it cannot have caused one before it, though the refusing instance's clock may date one a
   * little earlier than the clock that dated the containment: each is within its error of the database's).
   */
  after?: { at: Date; causedReason?: string };
}

function where(filter: DecisionFilter, params: unknown[]): string {
  const parts = [`at >= $${params.push(filter.since)}`, `at < $${params.push(filter.until)}`];
  if (filter.after !== undefined) {
    const from = `at >= $${params.push(filter.after.at)}`;
    parts.push(filter.after.causedReason === undefined ? from : `(${from} OR reason = $${params.push(filter.after.causedReason)})`);
  }
  if (filter.partnerId !== undefined) parts.push(`partner_id = $${params.push(filter.partnerId)}`);
  if (filter.reason !== undefined) parts.push(`reason = $${params.push(filter.reason)}`);
  if (filter.keyPairId !== undefined) parts.push(`key_pair_id = $${params.push(filter.keyPairId)}`);
  if (filter.tokenId !== undefined) parts.push(`token_id = $${params.push(filter.tokenId)}`);
  if (filter.statusFrom !== undefined) parts.push(`status >= $${params.push(filter.statusFrom)}`);
  if (filter.statusTo !== undefined) parts.push(`status <= $${params.push(filter.statusTo)}`);
  if (filter.companyId !== undefined) parts.push(`company_id = $${params.push(filter.companyId)}`);
  if (filter.clientAddress !== undefined) parts.push(`client_address = $${params.push(filter.clientAddress)}`);
  return parts.join(' AND ');
}

export type DecisionGrouping = 'company' | 'address';

export interface DecisionCount {
  reason: string;
  /** The company or client address, with a grouping; '' for refusals that named no company. */
  key?: string;
  refusals: number;
  latestAt: Date;
}

/** Refusals counted by reason (and company or address), most first. */
export async function decisionCounts(q: Queryable, filter: DecisionFilter, by: DecisionGrouping | undefined): Promise<DecisionCount[]> {
  const params: unknown[] = [];
  const key = by === 'company' ? "COALESCE(company_id, '')" : by === 'address' ? 'client_address' : null;
  const rows = await q.query<{ reason: string; key?: string; refusals: number | string; latest_at: unknown }>(
    `SELECT reason${key ? `, ${key} AS key` : ''}, COUNT(*) AS refusals, MAX(at) AS latest_at
     FROM gate_decisions WHERE ${where(filter, params)}
     GROUP BY reason${key ? `, ${key}` : ''}
     ORDER BY COUNT(*) DESC, reason${key ? ', key' : ''}`,
    params,
  );
  return rows.map((row) => ({
    reason: row.reason,
    ...(key ? { key: row.key ?? '' } : {}),
    refusals: Number(row.refusals),
    latestAt: toDate(row.latest_at)!,
  }));
}

/** The newest decisions of the filter. */
export async function latestDecisions(q: Queryable, filter: DecisionFilter, limit: number): Promise<DecisionRow[]> {
  const params: unknown[] = [];
  const condition = where(filter, params);
  const rows = await q.query<Raw>(`SELECT ${COLUMNS} FROM gate_decisions WHERE ${condition} ORDER BY at DESC, request_id LIMIT $${params.push(limit)}`, params);
  return rows.map(fromRaw);
}

/**
 * Answers not recorded in the window, per cap that held them (`instance`, `partner`, `key_pair`, `token`,
 * `address`, `overflow`); only the partner's with `partnerId` (whichever cap held them).
 */
export async function unrecordedCounts(q: Queryable, filter: { since: Date; until: Date; partnerId?: string }): Promise<Map<string, number>> {
  const params: unknown[] = [filter.since, filter.until];
  const partner = filter.partnerId === undefined ? '' : ` AND key_kind = 'partner' AND key_value = $${params.push(filter.partnerId)}`;
  const rows = await q.query<{ held_by: string; refusals: number | string }>(
    // Rows written before held_by ('') were held by the cap of their own kind.
    `SELECT CASE WHEN held_by = '' THEN key_kind ELSE held_by END AS held_by, SUM(refusals) AS refusals
     FROM gate_decisions_unrecorded WHERE minute >= $1 AND minute < $2${partner} GROUP BY 1`,
    params,
  );
  return new Map(rows.map((row) => [row.held_by, Number(row.refusals)]));
}

/** The instant of the oldest record kept; null when there is none. */
export async function oldestDecisionAt(q: Queryable): Promise<Date | null> {
  const rows = await q.query<{ at: unknown }>('SELECT MIN(at) AS at FROM gate_decisions');
  return toDate(rows[0]?.at ?? null);
}
