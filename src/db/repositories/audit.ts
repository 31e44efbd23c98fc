import { eventHash, GENESIS } from '../audit-hash.js';
import type { Column, Columns } from '../models.js';
import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

export type AuditRow = Columns<'AuditEvent', 'id' | 'at' | 'actor' | 'principal' | 'principalVerified' | 'action' | 'partnerId' | 'details'>;

/** An event about to be appended to the chain: its content, its position and both hashes. */
export type ChainedInsert = Omit<AuditRow, 'id' | 'principalVerified'> & Column<'AuditEvent', 'seq', number> & Column<'AuditEvent', 'prevHash' | 'hash', string>;

/**
 * The chain's last event (by position) and the principal this connection is vouched as (PostgreSQL's
 * session_user; null on SQLite). Read inside the unit's write lock, so no other writer can append between
 * this read and the unit's insert. `unchained`: the first ids of events at or below the chain's legacy mark
 * (0 on a database created with the chain) that carry no chain data: events written before the chain
 * existed and still waiting for the migration runner, or rows written around partnerctl.
 */
export async function chainHead(
  tx: SqlTx,
): Promise<{ seq: number; hash: string | null; sessionUser: string | null; unchained: number[] }> {
  const sessionUser = tx.dialect.hasLogins ? 'session_user' : 'NULL';
  const [row] = await tx.query<{ seq: unknown; hash: string | null; session_user: string | null }>(
    `SELECT (SELECT seq FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1) AS seq,
            (SELECT hash FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1) AS hash,
            ${sessionUser} AS session_user`,
  );
  const unchained = await tx.query<{ id: unknown }>(
    `SELECT id FROM audit_events
     WHERE hash IS NULL AND id <= COALESCE((SELECT legacy_through FROM audit_chain WHERE id = 1), 0) ORDER BY id LIMIT 6`,
  );
  return {
    seq: row?.seq === null || row?.seq === undefined ? 0 : Number(row.seq),
    hash: row?.hash ?? null,
    sessionUser: row?.session_user ?? null,
    unchained: unchained.map((item) => Number(item.id)),
  };
}

/** Appends events in chain order. On PostgreSQL a trigger sets principal and principal_verified itself. */
export async function insertAuditEvents(tx: SqlTx, events: readonly ChainedInsert[]): Promise<void> {
  const rows = events.map(
    (event) =>
      [event.at, event.actor, event.principal, tx.dialect.hasLogins, event.action, event.partnerId, event.details, event.seq, event.prevHash, event.hash] as const,
  );
  for (const batch of valuesBatches(rows)) {
    await tx.run(
      `INSERT INTO audit_events (at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash) VALUES ${batch.placeholders}`,
      batch.params,
    );
  }
}

/**
 * A stored event as the chain sees it: every hashed column, `at` as the database holds it; no position or
 * hashes for an event written before the chain existed.
 */
export type ChainRow = Omit<AuditRow, 'at'> & Column<'AuditEvent', 'at', string> & Columns<'AuditEvent', 'seq' | 'prevHash' | 'hash'>;

/** Events in id (commit) order after `afterId` (null: from the first, whatever its id), a page at a time. */
export async function chainPage(q: Queryable, afterId: number | null, limit: number): Promise<ChainRow[]> {
  const params: unknown[] = afterId === null ? [] : [afterId];
  const rows = await q.query<ChainRaw>(
    `SELECT id, ${q.dialect.atTextSql()} AS at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash
     FROM audit_events ${afterId === null ? '' : 'WHERE id > $1'} ORDER BY id LIMIT $${params.push(limit)}`,
    params,
  );
  return rows.map(chainRowFromRaw);
}

/** The events that claim one position of the chain, in id order (one, unless rows were slipped in). */
export async function chainRowsAt(q: Queryable, seq: number): Promise<ChainRow[]> {
  const rows = await q.query<ChainRaw>(
    `SELECT id, ${q.dialect.atTextSql()} AS at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash
     FROM audit_events WHERE seq = $1 ORDER BY id`,
    [seq],
  );
  return rows.map(chainRowFromRaw);
}

type ChainRaw = {
  id: unknown;
  at: string;
  actor: string;
  principal: string | null;
  principal_verified: unknown;
  action: string;
  partner_id: string | null;
  details: string;
  seq: unknown;
  prev_hash: string | null;
  hash: string | null;
};

function chainRowFromRaw(row: ChainRaw): ChainRow {
  return {
    id: Number(row.id),
    at: row.at,
    actor: row.actor,
    principal: row.principal,
    principalVerified: row.principal_verified === true || Number(row.principal_verified) === 1,
    action: row.action,
    partnerId: row.partner_id,
    details: row.details,
    seq: row.seq === null ? null : Number(row.seq),
    prevHash: row.prev_hash,
    hash: row.hash,
  };
}

/** Where the chain starts (null before the migration that added it). */
export async function chainStart(q: Queryable): Promise<{ startedAt: Date; legacyThrough: number } | null> {
  const [row] = await q.query<{ started_at: unknown; legacy_through: unknown }>('SELECT started_at, legacy_through FROM audit_chain WHERE id = 1');
  return row ? { startedAt: toDate(row.started_at)!, legacyThrough: Number(row.legacy_through) } : null;
}

/** The chain's last event by position: what `audit head` prints. */
export async function latestChained(q: Queryable): Promise<{ id: number; seq: number; hash: string } | null> {
  const [row] = await q.query<{ id: unknown; seq: unknown; hash: string }>(
    'SELECT id, seq, hash FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1',
  );
  return row ? { id: Number(row.id), seq: Number(row.seq), hash: row.hash } : null;
}

/**
 * Chains the events written before the chain existed (id up to legacy_through, hash still null), oldest
 * first, ahead of every event chained since (there are none until this has run: units refuse to append
 * while any wait). Run by the migration runner as the database's owner (the only role PostgreSQL lets
 * update audit rows). Returns how many it chained.
 */
export async function chainLegacyEvents(tx: SqlTx): Promise<number> {
  const start = await chainStart(tx);
  if (!start) return 0;
  const [chained] = await tx.query<{ n: unknown }>('SELECT COUNT(*) AS n FROM audit_events WHERE hash IS NOT NULL');
  if (Number(chained?.n ?? 0) > 0) return 0;
  let prevHash = GENESIS;
  let seq = 0;
  let afterId = 0;
  for (;;) {
    const page = (await chainPage(tx, afterId, 1000)).filter((row) => row.id <= start.legacyThrough);
    if (page.length === 0) return seq;
    for (const row of page) {
      seq += 1;
      const hash = eventHash({ ...row, seq, prevHash });
      await tx.run('UPDATE audit_events SET seq = $1, prev_hash = $2, hash = $3 WHERE id = $4', [seq, prevHash, hash, row.id]);
      prevHash = hash;
      afterId = row.id;
    }
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
  options: { partnerId?: string; since?: Date; action?: string; principal?: string; company?: string; beforeId?: number; limit: number },
): Promise<AuditPageRow[]> {
  const params: unknown[] = [];
  const conditions: string[] = [];
  if (options.partnerId) conditions.push(`e.partner_id = $${params.push(options.partnerId)}`);
  if (options.since) conditions.push(`e.at >= $${params.push(options.since)}`);
  if (options.action) conditions.push(`e.action = $${params.push(options.action)}`);
  if (options.principal) conditions.push(`e.principal = $${params.push(options.principal)}`);
  if (options.company) {
    conditions.push(`e.details LIKE $${params.push(`%${JSON.stringify(options.company).replace(/[\\%_]/g, (c) => `\\${c}`)}%`)} ESCAPE '\\'`);
  }
  if (options.beforeId !== undefined) conditions.push(`e.id < $${params.push(options.beforeId)}`);
  const rows = await q.query<{
    id: number | string;
    at: unknown;
    actor: string;
    principal: string | null;
    principal_verified: unknown;
    action: string;
    partner_id: string | null;
    partner_name: string | null;
    details: string;
  }>(
    `SELECT e.id, e.at, e.actor, e.principal, e.principal_verified, e.action, e.partner_id, p.name AS partner_name, e.details
     FROM audit_events e LEFT JOIN partners p ON p.id = e.partner_id
     ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
     ORDER BY e.id DESC LIMIT $${params.push(options.limit)}`,
    params,
  );
  return rows.map((row) => ({
    id: Number(row.id),
    at: toDate(row.at)!,
    actor: row.actor,
    principal: row.principal,
    principalVerified: row.principal_verified === true || Number(row.principal_verified) === 1,
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

/** The lifetime (seconds) a test token was minted with, from its `token.test_minted` event; null without one. */
export async function testTokenLifetime(q: Queryable, partnerId: string, jti: string): Promise<number | null> {
  const rows = await q.query<{ details: string }>(
    "SELECT details FROM audit_events WHERE partner_id = $1 AND action = 'token.test_minted' AND details LIKE $2 ORDER BY id DESC LIMIT 5",
    [partnerId, `%"jti":${JSON.stringify(jti)}%`],
  );
  for (const row of rows) {
    const details = JSON.parse(row.details) as { jti?: unknown; ttl?: unknown };
    if (details.jti === jti && typeof details.ttl === 'number') return details.ttl;
  }
  return null;
}

/** Whether an event of this action names the webhook in its details (`webhook_id`). */
export async function webhookEventExists(q: Queryable, action: string, webhookId: string): Promise<boolean> {
  const rows = await q.query('SELECT 1 AS found FROM audit_events WHERE action = $1 AND details LIKE $2 LIMIT 1', [action, `%"webhook_id":${JSON.stringify(webhookId)}%`]);
  return rows.length > 0;
}

/** The test-token mint event whose details carry this jti (older, untraceable token ids). */
export async function testTokenEventByJti(q: Queryable, jti: string): Promise<{ partnerId: string | null; at: Date; details: string } | null> {
  const [row] = await q.query<{ partner_id: string | null; at: unknown; details: string }>(
    "SELECT partner_id, at, details FROM audit_events WHERE action = 'token.test_minted' AND details LIKE $1 ORDER BY id DESC LIMIT 1",
    [`%${JSON.stringify(jti)}%`],
  );
  return row ? { partnerId: row.partner_id, at: toDate(row.at)!, details: row.details } : null;
}
