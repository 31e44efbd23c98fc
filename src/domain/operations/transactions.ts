import { hostname, userInfo } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { eventHash, GENESIS } from '../../db/audit-hash.js';
import { chainHead, insertAuditEvents } from '../../db/repositories/audit.js';
import { isPermissionError, permissionDenied } from '../../db/roles.js';
import { touchPartners } from '../../db/repositories/partners.js';
import { announceRevision, bumpRevision } from '../../db/repositories/revision.js';
import { CommitOutcomeUnknown, TransactionTimeout, type SqlTx } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import type { AuditEntry } from '../rules/audit-actions.js';
import { auditRowsAsEvents, writeOutbox } from './outbox.js';

export interface Actor {
  /** Who did it, for the audit trail: --actor, PARTNERCTL_ACTOR, or the OS user. */
  readonly actor: string;
}

/** How long a unit may run and how often a unit that met a busy or conflicting database is tried again. */
export interface UnitPolicy {
  /** Default 60 s; a bulk change of 100,000 rows sets more. */
  timeoutMs?: number;
  /** Further attempts after a transient failure (busy, serialization, deadlock); default 7. */
  retries?: number;
  /**
   * How long one attempt waits for a lock another process holds (TransactionOptions.lockWaitMs). The server
   * passes 0: on SQLite that wait sleeps the thread, and with it every request the server is answering.
   */
  lockWaitMs?: number;
  /**
   * Instead of `retries` attempts, retry a transient failure until this much real time has passed since
   * the first attempt, pausing (off the event loop) between attempts; the last failure is then thrown.
   */
  retryForMs?: number;
}

const DEFAULT_POLICY: Required<Pick<UnitPolicy, 'timeoutMs' | 'retries'>> = { timeoutMs: 60_000, retries: 7 };

/** What the domain's changes run in: one transaction, its actor, and the audit events it records. */
export interface Unit {
  readonly tx: SqlTx;
  readonly who: Actor;
  /** The database's clock: the unit's changes read time from it only. */
  readonly clock: Clock;
  /** Records an event, written when the unit commits. A unit that records nothing changed nothing. */
  audit(entry: AuditEntry): void;
}

/**
 * Runs many domain changes as one transaction. The first statement bumps the revision row (the write lock,
 * and the signal that running servers' caches are stale); the audit events are written in the same
 * transaction, so changes and their record land or vanish together. On PostgreSQL a NOTIFY in the same
 * transaction tells listening servers the moment it commits. A unit that audited nothing is rolled
 * back: a runbook's re-run leaves running servers' caches alone. The whole unit is replayed after a
 * transient failure, so `work` must not have effects outside the transaction.
 */
/** Actions written with the partner's own row (which sets its updated_at then). */
const OWN_ROW_ACTIONS = new Set(['partner.created', 'partner.enabled', 'partner.disabled']);

export async function runUnit<T>(db: Database, who: Actor, work: (unit: Unit) => Promise<T>, policy: UnitPolicy = {}): Promise<T> {
  try {
    return await runTransaction(
      db,
      async (tx) => {
        await bumpRevision(tx);
        const events: AuditEntry[] = [];
        const result = await work({ tx, who, clock: db.clock, audit: (entry) => void events.push(entry) });
        if (events.length === 0) throw new Unchanged(result);
        const now = new Date(db.clock.now());
        // A partner's updated_at moves with every change to it (limits, keys, mappings, token cut-off), not
        // only with its own row's (created, enabled, disabled: written with the row). A test token minted for
        // it is not a change of the partner.
        const ownRow = (action: string) => OWN_ROW_ACTIONS.has(action);
        const changed = new Set(
          events.filter((event) => event.partnerId && !ownRow(event.action) && event.action !== 'token.test_minted').map((event) => event.partnerId!),
        );
        if (changed.size > 0) await touchPartners(tx, [...changed], now);
        await appendToChain(
          tx,
          events.map((event) => ({
            actor: who.actor,
            action: event.action,
            partnerId: event.partnerId ?? null,
            details: JSON.stringify(event.details ?? {}),
          })),
          now,
        );
        // On PostgreSQL, running servers drop their caches as soon as this commits (the poll is the fallback).
        await announceRevision(tx);
        return result;
      },
      policy,
    );
  } catch (error) {
    if (error instanceof Unchanged) return error.result as T;
    throw error;
  }
}

/**
 * One transaction with the unit's timeout and retry policy but no revision bump or audit: for records that
 * change nothing a server caches (a secret-scanning verdict on a false positive). Errors come out as
 * AppErrors, a refused privilege named.
 */
export async function runTransaction<T>(db: Database, work: (tx: SqlTx) => Promise<T>, policy: UnitPolicy = {}): Promise<T> {
  const { timeoutMs, retries, lockWaitMs, retryForMs } = { ...DEFAULT_POLICY, ...policy };
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await db.sql.transaction(work, lockWaitMs === undefined ? { timeoutMs } : { timeoutMs, lockWaitMs });
    } catch (error) {
      if (error instanceof Unchanged || error instanceof AppError) throw error;
      // Rolled back: nothing changed. Named outside the failed transaction.
      if (isPermissionError(error)) throw await permissionDenied(db, error);
      if (isTransient(error)) {
        const pause = retryForMs === undefined ? 20 * (attempt + 1) + Math.random() * 50 : Math.min(250, 25 * 2 ** attempt);
        const again = retryForMs === undefined ? attempt < retries : performance.now() - started + pause < retryForMs;
        if (again) {
          await sleep(pause);
          continue;
        }
      }
      throw translateDatabaseError(error);
    }
  }
}

/**
 * Appends events to the one audit chain, and the webhook events among them to the outbox. Call it inside the write lock (the revision row bumped first in
 * the same transaction, as every unit of work does), so the head read here is the head when the
 * transaction commits: one chain, in commit order.
 */
export async function appendToChain(
  tx: SqlTx,
  events: readonly { actor: string; action: string; partnerId: string | null; details: string }[],
  at: Date,
): Promise<void> {
  const head = await chainHead(tx);
  if (head.unchained.length > 0) throw unchainedEvents(head.unchained, head.seq > 0);
  // PostgreSQL's trigger writes session_user whatever is sent; the hash must cover the same value.
  const principal = tx.dialect.hasLogins ? head.sessionUser : localPrincipal();
  let seq = head.seq;
  let prevHash = head.hash ?? GENESIS;
  const chained = events.map((event) => {
    seq += 1;
    const content = { ...event, seq, at: tx.dialect.atText(at), principal, principalVerified: tx.dialect.hasLogins, prevHash };
    const hash = eventHash(content);
    const row = { ...event, at, principal, seq, prevHash, hash };
    prevHash = hash;
    return row;
  });
  await insertAuditEvents(tx, chained);
  // The webhook events these changes make, in the same transaction (the outbox): none without its change.
  await writeOutbox(tx, auditRowsAsEvents(chained), at);
}

/**
 * Events below the chain's start without chain data (the first few): before any event is chained, those with
 * positive ids are a database's older events, which the migration runner chains; the others are rows
 * written around partnerctl, which only the owner can take out.
 */
function unchainedEvents(ids: readonly number[], chainStarted: boolean): AppError {
  const foreign = ids.filter((id) => chainStarted || id <= 0);
  if (foreign.length === 0) {
    return new AppError('schema_out_of_date', 'audit events written before the audit chain existed are not chained yet');
  }
  const shown = foreign.slice(0, 5);
  return new AppError(
    'audit_chain_broken',
    `audit event(s) ${shown.map((id) => `#${id}`).join(', ')}${foreign.length > shown.length ? ' and more' : ''} sit at or below the start of the audit chain but are not part of it: they were written around partnerctl, and no change is recorded until they are gone`,
    {
      hint: `the database's owner removes them (DELETE FROM audit_events WHERE hash IS NULL AND id IN (${shown.join(', ')})) (docs/roles.md#the-audit-chain)`,
    },
  );
}

let cachedLocalPrincipal: string | undefined;

/** On SQLite nothing vouches for anyone: the OS user and host of this process, recorded as unverified. */
function localPrincipal(): string {
  if (cachedLocalPrincipal === undefined) {
    let user = 'unknown';
    try {
      user = userInfo().username;
    } catch {}
    cachedLocalPrincipal = `${user}@${hostname()}`;
  }
  return cachedLocalPrincipal;
}

class Unchanged {
  constructor(readonly result: unknown) {}
}

function isTransient(error: unknown): boolean {
  // Replaying a unit that may have committed would make the change twice.
  if (error instanceof CommitOutcomeUnknown) return false;
  const code = String((error as { code?: unknown }).code ?? '');
  // 55P03: a lock not taken within lock_timeout (a unit that asked not to wait for locks).
  if (/^SQLITE_BUSY|^40001$|^40P01$|^55P03$/.test(code)) return true;
  return /database is locked|could not serialize|deadlock detected|lock timeout/i.test((error as Error).message ?? '');
}

export function translateDatabaseError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (error instanceof CommitOutcomeUnknown) {
    return new AppError('database_unavailable', 'the connection to the database failed while the change was committing: it may have committed or not', {
      next: 'check_commit_outcome',
      cause: error,
    });
  }
  const code = String((error as { code?: unknown }).code ?? '');
  const message = (error as Error)?.message ?? String(error);
  if (code === '23505' || /^SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)$/.test(code) || /unique constraint/i.test(message)) {
    return new AppError('concurrent_update', 'another change to the same record happened at the same time', {
      hint: 'run the command again',
      cause: error,
    });
  }
  if (error instanceof TransactionTimeout || code === '57014' || code === '55P03' || /^SQLITE_BUSY/.test(code) || /database is locked/i.test(message)) {
    return new AppError('database_unavailable', 'the database stayed busy for too long', {
      hint: 'another process may be holding a long write; try again',
      cause: error,
    });
  }
  return new AppError('database_unavailable', 'the database failed the request', { cause: error });
}
