import type { Database } from '../../db/client.js';
import { eventHash, GENESIS } from '../../db/audit-hash.js';
import { auditPage, chainPage, chainRowsAt, chainStart, latestChained, type ChainRow } from '../../db/repositories/audit.js';
import type { Queryable } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { closest } from '../../text.js';
import { AUDIT_ACTIONS, isAuditAction, type AuditAction } from '../rules/audit-actions.js';
import { findPartner } from './partners.js';
import { CONTROL, isValidCompanyId } from '../rules/validation.js';

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


export interface AuditQuery {
  partner?: string;
  since?: Date;
  /** Any text: one outside the vocabulary is refused, naming the nearest actions. */
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

/** An action of the vocabulary, or a refusal naming the nearest ones (a typo must not answer "No audit events"). */
function auditAction(value: string): AuditAction {
  if (isAuditAction(value)) return value;
  const near = closest(value, AUDIT_ACTIONS);
  throw new AppError('invalid_argument', `no audit action '${value.slice(0, 40)}'${near.length > 0 ? `; did you mean ${near.join(', ')}?` : ''}`, {
    field: 'action',
    hint: `the actions: ${AUDIT_ACTIONS.join(', ')}`,
  });
}

/** Newest first, a page at a time; `nextCursor` continues after the last event of this page. */
export async function auditEventsPage(db: Database, options: AuditQuery): Promise<{ events: AuditRecord[]; nextCursor: string | null }> {
  const action = options.action === undefined ? undefined : auditAction(options.action);
  if (options.principal !== undefined && (options.principal === '' || options.principal.length > 200 || CONTROL.test(options.principal))) {
    throw new AppError('invalid_argument', 'principal must be 1 to 200 characters without control characters', { field: 'principal' });
  }
  if (options.company !== undefined && !isValidCompanyId(options.company)) {
    throw new AppError('invalid_argument', 'company id may hold only visible ASCII characters, 1 to 128', { field: 'company_id' });
  }
  if (options.cursor !== undefined && !/^[1-9]\d{0,15}$/.test(options.cursor)) {
    throw new AppError('invalid_argument', `cursor '${options.cursor.slice(0, 40)}' is not a cursor from a previous page`, { field: 'cursor' });
  }
  const partnerId = options.partner ? (await findPartner(db.sql, options.partner)).id : undefined;
  const rows = await auditPage(db.sql, {
    ...(partnerId ? { partnerId } : {}),
    ...(options.since ? { since: options.since } : {}),
    ...(action ? { action } : {}),
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

/** The latest event of the chain: what `audit head` prints, to be kept where the database's owner cannot rewrite it. */
export async function auditHead(db: Database): Promise<{ id: number; seq: number; hash: string } | null> {
  return latestChained(db.sql);
}

export type BreakReason = 'altered' | 'removed' | 'inserted' | 'reordered';

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
 * Walks every event in commit (id) order, whatever its id, and checks every link: each event's hash over
 * its content and the hash before it, and its position one past the previous. The first event that fails
 * is named with a reason: altered (its content, or the content behind a re-computed hash), removed
 * (positions missing before it), inserted (not part of the chain at that place: a copy, or a row slipped
 * in) or reordered (chain positions stored out of commit order). With `expectedHead` (from an earlier
 * `audit head`), a chain that no longer contains that hash has lost its tail.
 */
export async function verifyAuditChain(db: Database, options: { expectedHead?: string } = {}): Promise<ChainReport> {
  const expected = options.expectedHead?.trim().toLowerCase();
  if (expected !== undefined && !HEX_64.test(expected)) {
    throw new AppError('invalid_argument', 'head must be a hash of the audit chain\'s head (64 hex digits)', { field: 'head' });
  }
  const since = await chainStart(db.sql);
  const chainStarted = (await latestChained(db.sql)) !== null;
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
  for (let afterId: number | null = null; ; ) {
    const page = await chainPage(db.sql, afterId, 2000);
    if (page.length === 0) break;
    for (const row of page) {
      afterId = row.id;
      if (row.hash === null || row.seq === null || row.prevHash === null) {
        if (since && row.id > 0 && row.id <= since.legacyThrough && !chainStarted) {
          return broken(row, 'inserted', `event #${row.id} predates the chain and is not chained yet: migrating the database chains it`);
        }
        if (row.id <= (since?.legacyThrough ?? 0)) {
          return broken(
            row,
            'inserted',
            `event #${row.id} sits below the start of the chain without chain data: it was written around partnerctl, and writes are refused until the database's owner removes it`,
          );
        }
        return broken(row, 'inserted', `event #${row.id} carries no chain data: it was written around partnerctl`);
      }
      if (eventHash({ ...row, seq: row.seq, prevHash: row.prevHash }) !== row.hash) {
        return broken(row, 'altered', `event #${row.id} does not match its hash: its content was changed`);
      }
      if (row.seq !== (previous?.seq ?? 0) + 1 || row.prevHash !== (previous?.hash ?? GENESIS)) {
        const found = await explainBreak(db.sql, previous, row as Chained);
        return broken(found.at, found.reason, found.message);
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

type Chained = ChainRow & { seq: number; prevHash: string; hash: string };

/** Why `row`, whose hash is right, does not follow `previous` (the last event that did): which event to name. */
async function explainBreak(
  q: Queryable,
  previous: ChainRow | null,
  row: Chained,
): Promise<{ at: ChainRow; reason: BreakReason; message: string }> {
  const expectedSeq = (previous?.seq ?? 0) + 1;
  const expectedPrev = previous?.hash ?? GENESIS;
  if (previous && row.seq === previous.seq && row.prevHash === previous.prevHash) {
    if (row.hash === previous.hash) {
      return { at: row, reason: 'inserted', message: `event #${row.id} repeats #${previous.id} (chain position ${row.seq}): it was inserted` };
    }
    // Two events claim one position: the one the next position links to is the chain's.
    const next = await chainRowsAt(q, row.seq + 1);
    if (next.some((later) => later.prevHash === previous.hash) && !next.some((later) => later.prevHash === row.hash)) {
      return { at: row, reason: 'inserted', message: `event #${row.id} is not part of the chain: it claims the position of #${previous.id}` };
    }
    return { at: previous, reason: 'inserted', message: `event #${previous.id} is not part of the chain: it was inserted before #${row.id}` };
  }
  if (row.seq < expectedSeq) {
    const holder = (await chainRowsAt(q, row.seq)).find((other) => other.id < row.id);
    const message =
      holder?.hash === row.hash
        ? `event #${row.id} repeats #${holder.id} (chain position ${row.seq}): it was inserted`
        : `event #${row.id} is not part of the chain: position ${row.seq} is ${holder ? `#${holder.id}'s` : 'behind it'}`;
    return { at: row, reason: 'inserted', message };
  }
  if (row.seq > expectedSeq) {
    const due = (await chainRowsAt(q, expectedSeq)).find((other) => other.id > row.id && other.prevHash === expectedPrev);
    const twin = (await chainRowsAt(q, row.seq)).find((other) => other.id !== row.id);
    if (due && twin) {
      // The chain goes on in order after it, and its position is held by another event: it is the stray.
      const message =
        twin.hash === row.hash
          ? `event #${row.id} repeats #${twin.id} (chain position ${row.seq}): it was inserted`
          : `event #${row.id} is not part of the chain: position ${row.seq} is #${twin.id}'s`;
      return { at: row, reason: 'inserted', message };
    }
    if (due) {
      return {
        at: row,
        reason: 'reordered',
        message: `event #${row.id} (chain position ${row.seq}) is stored before #${due.id} (position ${expectedSeq}): the events were reordered`,
      };
    }
    return {
      at: row,
      reason: 'removed',
      message: `${row.seq - expectedSeq} event(s) before #${row.id} were removed (chain positions ${expectedSeq}-${row.seq - 1})`,
    };
  }
  if (previous) {
    // In place, but not linked to what is before it: the previous event was rewritten, hash and all.
    return { at: previous, reason: 'altered', message: `event #${previous.id} was rewritten (its hash no longer links to #${row.id})` };
  }
  return { at: row, reason: 'inserted', message: `event #${row.id} is not part of the chain (it links to no event before it)` };
}
