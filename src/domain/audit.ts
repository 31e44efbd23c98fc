import type { Database } from '../db/client.js';
import { eventHash, GENESIS } from '../db/audit-hash.js';
import { auditPage, chainPage, chainStart, latestChained, type ChainRow } from '../db/repositories/audit.js';
import { AppError } from '../errors.js';
import { findPartner } from './partners.js';
import { CONTROL, isValidCompanyId } from './validation.js';

export interface AuditRecord {
  id: number;
  at: Date;
  actor: string;
  /** The login the database vouched for (PostgreSQL), or the OS user@host (SQLite: not verified). */
  principal: string | null;
  principalVerified: boolean;
  action: string;
  partnerId: string | null;
  partnerName: string | null;
  details: Record<string, unknown>;
}

/** The actions recorded today (the README lists them); `--action` takes any name of this shape. */
const AUDIT_ACTIONS = [
  'partner.created',
  'partner.disabled',
  'partner.enabled',
  'partner.limits_set',
  'keys.issued',
  'keys.rotated',
  'keys.retired',
  'keys.revoked',
  'tokens.revoked',
  'company.mapped',
  'company.unmapped',
  'token.test_minted',
  'leak.reported',
  'webhook.added',
  'webhook.removed',
  'instance.forgotten',
] as const;

export interface AuditQuery {
  partner?: string;
  since?: Date;
  action?: string;
  principal?: string;
  company?: string;
  cursor?: string;
  limit: number;
}

/** Whether an event's details name the company (`company_id`, or among `company_ids`). */
function namesCompany(details: Record<string, unknown>, company: string): boolean {
  if (details.company_id === company) return true;
  return Array.isArray(details.company_ids) && details.company_ids.includes(company);
}

/** Newest first, a page at a time; `nextCursor` continues after the last event of this page. */
export async function auditEventsPage(db: Database, options: AuditQuery): Promise<{ events: AuditRecord[]; nextCursor: string | null }> {
  if (options.action !== undefined && !/^[a-z_]{1,40}\.[a-z_]{1,40}$/.test(options.action)) {
    throw new AppError('invalid_argument', `--action must be an action name such as keys.revoked, got '${options.action.slice(0, 40)}'`, {
      hint: `recorded actions: ${AUDIT_ACTIONS.join(', ')}`,
    });
  }
  if (options.principal !== undefined && (options.principal === '' || options.principal.length > 200 || CONTROL.test(options.principal))) {
    throw new AppError('invalid_argument', '--principal must be 1 to 200 characters without control characters');
  }
  if (options.company !== undefined && !isValidCompanyId(options.company)) {
    throw new AppError('invalid_argument', 'company id may hold only visible ASCII characters, 1 to 128', { field: 'company_id' });
  }
  if (options.cursor !== undefined && !/^[1-9]\d{0,15}$/.test(options.cursor)) {
    throw new AppError('invalid_argument', `--cursor '${options.cursor.slice(0, 40)}' is not a cursor from a previous page`);
  }
  const partnerId = options.partner ? (await findPartner(db.sql, options.partner)).id : undefined;
  const rows = await auditPage(db.sql, {
    ...(partnerId ? { partnerId } : {}),
    ...(options.since ? { since: options.since } : {}),
    ...(options.action ? { action: options.action } : {}),
    ...(options.principal ? { principal: options.principal } : {}),
    ...(options.company ? { company: options.company } : {}),
    ...(options.cursor ? { beforeId: Number(options.cursor) } : {}),
    limit: options.limit + 1,
  });
  const page = rows.slice(0, options.limit);
  const nextCursor = rows.length > options.limit ? String(page.at(-1)!.id) : null;
  const events = page
    .map((row) => ({ ...row, details: JSON.parse(row.details) as Record<string, unknown> }))
    .filter((event) => options.company === undefined || namesCompany(event.details, options.company));
  return { events, nextCursor };
}

/** Newest first: one page's events. */
export async function listAuditEvents(db: Database, options: AuditQuery): Promise<AuditRecord[]> {
  return (await auditEventsPage(db, options)).events;
}

/** The latest event of the chain: what `audit head` prints, to be kept where the database's owner cannot rewrite it. */
export async function auditHead(db: Database): Promise<{ id: number; seq: number; hash: string } | null> {
  return latestChained(db.sql);
}

export type BreakReason = 'altered' | 'removed' | 'inserted';

export interface ChainReport {
  ok: boolean;
  /** Events walked. */
  events: number;
  /** The hash of the last intact event walked (null: none). */
  head: string | null;
  /** The first event that is not what the chain says (null with ok, and for a cut-off tail). */
  brokenAt: number | null;
  reason: BreakReason | null;
  /** One sentence on what was found. */
  message: string;
  /** From where the chain vouches: events up to `legacyThrough` predate it and were chained at `startedAt`. */
  since: { startedAt: Date; legacyThrough: number } | null;
}

const HEX_64 = /^[0-9a-f]{64}$/;

/**
 * Walks the chain in commit order and checks every link: each event's hash over its content and the hash
 * before it, and its position one past the previous. The first event that fails is named with a reason:
 * altered (its content, or the content behind a re-computed hash), removed (positions missing before it) or
 * inserted (not part of the chain at that place). With `expectedHead` (from an earlier `audit head`), a
 * chain that no longer contains that hash has lost its tail.
 */
export async function verifyAuditChain(db: Database, options: { expectedHead?: string } = {}): Promise<ChainReport> {
  const expected = options.expectedHead?.trim().toLowerCase();
  if (expected !== undefined && !HEX_64.test(expected)) {
    throw new AppError('invalid_argument', "--head must be a hash printed by 'partnerctl audit head' (64 hex digits)");
  }
  const since = await chainStart(db.sql);
  let walked = 0;
  let previous: ChainRow | null = null;
  let headFound = expected === undefined;
  const broken = (row: ChainRow | null, reason: BreakReason, message: string): ChainReport => ({
    ok: false,
    events: walked,
    head: previous?.hash ?? null,
    brokenAt: row?.id ?? null,
    reason,
    message,
    since,
  });
  for (let afterId = 0; ; ) {
    const page = await chainPage(db.sql, afterId, 2000);
    if (page.length === 0) break;
    for (const row of page) {
      afterId = row.id;
      if (row.hash === null || row.seq === null || row.prevHash === null) {
        if (since && row.id <= since.legacyThrough) {
          return broken(row, 'inserted', `event #${row.id} predates the chain and is not chained yet: run 'partnerctl db migrate'`);
        }
        return broken(row, 'inserted', `event #${row.id} carries no chain data: it was written around partnerctl`);
      }
      if (eventHash({ ...row, seq: row.seq, prevHash: row.prevHash }) !== row.hash) {
        return broken(row, 'altered', `event #${row.id} does not match its hash: its content was changed`);
      }
      const expectedSeq = (previous?.seq ?? 0) + 1;
      const expectedPrev = previous?.hash ?? GENESIS;
      if (row.seq === expectedSeq && row.prevHash === expectedPrev) {
        // linked
      } else if (previous && row.seq === previous.seq && row.prevHash === previous.prevHash) {
        // This event takes the place the previous one claimed: the previous one was slipped in.
        return broken(previous, 'inserted', `event #${previous.id} is not part of the chain: it was inserted before #${row.id}`);
      } else if (row.seq > expectedSeq) {
        const missing = row.seq - expectedSeq;
        return broken(row, 'removed', `${missing} event(s) before #${row.id} were removed (chain positions ${expectedSeq}-${row.seq - 1})`);
      } else if (previous && row.seq === expectedSeq) {
        // In place, but not linked to what is before it: the previous event was rewritten, hash and all.
        return broken(previous, 'altered', `event #${previous.id} was rewritten (its hash no longer links to #${row.id})`);
      } else {
        return broken(row, 'inserted', `event #${row.id} is not part of the chain (position ${row.seq} where ${expectedSeq} was due)`);
      }
      walked += 1;
      previous = row;
      if (!headFound && row.hash === expected) headFound = true;
    }
  }
  if (!headFound) {
    return broken(
      null,
      'removed',
      `the head ${expected!.slice(0, 12)}… is no longer in the chain: events after #${previous?.id ?? 0} were removed`,
    );
  }
  return {
    ok: true,
    events: walked,
    head: previous?.hash ?? null,
    brokenAt: null,
    reason: null,
    message: `the chain of ${walked} event(s) is intact`,
    since,
  };
}
