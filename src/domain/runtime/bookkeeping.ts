import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { keyPairById, noteSwitch, touchLastRefused, touchLastUsed, touchUnlistedRefused } from '../../db/repositories/key-pairs.js';
import { announceRevision, bumpRevision } from '../../db/repositories/revision.js';
import { recordSigningKeys } from '../../db/repositories/signing-keys.js';
import { DeferredWrites, STOP_WRITE_LIMIT_MS, type OnWriteFailure } from './deferred-writes.js';
import { settleOverlap } from '../operations/key-pairs.js';
import type { AuditEntry } from '../rules/audit-actions.js';
import { appendToChain } from '../operations/transactions.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';

/** Who the audit trail names for what the server records by itself (the end of an overlap it noticed). */
export const SERVER_ACTOR = 'partnerctl serve';

/** Rows of each kind kept while they cannot be written (a database down for long); beyond, new ones are dropped. */
export const MAX_PENDING_BOOKKEEPING = 100_000;
const RETRY_MIN_MS = 250;
const RETRY_MAX_MS = 5_000;

/**
 * The server's own writes that no answer depends on (when a pair last minted a token or was last refused,
 * which signing keys exist): remembered in memory and written in one short transaction off the request path. The write never
 * waits for a lock another process holds (a long CLI transaction, a `BEGIN IMMEDIATE` elsewhere): on SQLite
 * that wait would sleep the event loop and freeze every request. When the lock is busy, or the database
 * does not answer, the batch is kept (newest value per row) and retried with a growing delay.
 */
export class Bookkeeping extends DeferredWrites {
  private readonly lastUsed = new Map<string, Date>();
  private readonly lastRefused = new Map<string, Date>();
  private readonly unlistedRefused = new Map<string, { at: Date; address: string }>();
  private readonly signingKeys = new Set<string>();
  /** Retiring pair -> the new pair's first exchange and the end it moves the overlap to. */
  private readonly switches = new Map<string, { at: Date; retiresAt: Date }>();
  /** Retiring pairs found past their end: settled (superseded, `keys.retired` audited). */
  private readonly overlapsEnded = new Set<string>();
  private delayMs = RETRY_MIN_MS;
  /** Told of the cap since the last write that went through. */
  private reportedFull = false;

  private get cap(): number {
    return this.options.maxPending ?? MAX_PENDING_BOOKKEEPING;
  }

  private full(): void {
    if (this.reportedFull) return;
    this.reportedFull = true;
    this.options.onFull?.(this.cap);
  }

  constructor(
    db: Database,
    private readonly options: { maxPending?: number; onFailure?: OnWriteFailure; clock?: Clock; onFull?: (cap: number) => void } = {},
  ) {
    super(db, options.clock ?? db.clock, options.onFailure);
  }

  /** A pair minted a token at `at`. */
  keyPairUsed(pairId: string, at: Date): void {
    const known = this.lastUsed.get(pairId);
    if (!known || known < at) {
      if (!known && this.lastUsed.size >= this.cap) {
        this.full();
        return;
      }
      this.lastUsed.set(pairId, at);
    }
    this.schedule(0);
  }

  /** A superseded, revoked or expired pair (or a wrong secret for its access key) was tried at `at`. */
  keyPairRefused(pairId: string, at: Date): void {
    const known = this.lastRefused.get(pairId);
    if (!known || known < at) {
      if (!known && this.lastRefused.size >= this.cap) {
        this.full();
        return;
      }
      this.lastRefused.set(pairId, at);
    }
    this.schedule(0);
  }

  /** The switch: the partner's new pair exchanged at `at`, so its retiring pair retires at `retiresAt`. */
  keyPairSwitched(retiringPairId: string, at: Date, retiresAt: Date): void {
    if (!this.switches.has(retiringPairId)) this.switches.set(retiringPairId, { at, retiresAt });
    this.schedule(0);
  }

  /** A retiring pair was tried after its overlap ended: record the end (nothing depends on when). */
  overlapEnded(pairId: string): void {
    if (this.overlapsEnded.size >= this.cap) {
      this.full();
      return;
    }
    this.overlapsEnded.add(pairId);
    this.schedule(0);
  }

  /** A pair's genuine secret was refused at `at` from `address`, outside its partner's network rules. */
  keyPairRefusedFromUnlisted(pairId: string, at: Date, address: string): void {
    const known = this.unlistedRefused.get(pairId);
    if (!known || known.at < at) {
      if (!known && this.unlistedRefused.size >= this.cap) {
        this.full();
        return;
      }
      this.unlistedRefused.set(pairId, { at, address });
    }
    this.schedule(0);
  }

  /** Signing keys that exist (and may have signed tokens): the database remembers them. */
  signingKeysSeen(kids: readonly string[]): void {
    for (const kid of kids) this.signingKeys.add(kid);
    if (kids.length > 0) this.schedule(0);
  }

  get pending(): number {
    return this.lastUsed.size + this.lastRefused.size + this.unlistedRefused.size + this.signingKeys.size + this.switches.size + this.overlapsEnded.size;
  }

  protected async writeOnce(): Promise<boolean> {
    if (this.pending === 0) return true;
    const uses = [...this.lastUsed];
    const refusals = [...this.lastRefused];
    const unlisted = [...this.unlistedRefused];
    const kids = [...this.signingKeys];
    const switches = [...this.switches];
    const ended = [...this.overlapsEnded];
    this.lastUsed.clear();
    this.lastRefused.clear();
    this.unlistedRefused.clear();
    this.signingKeys.clear();
    this.switches.clear();
    this.overlapsEnded.clear();
    const written = await this.write(async (tx) => {
      if (kids.length > 0) await recordSigningKeys(tx, kids, new Date(this.clock.now()));
      for (const [pairId, at] of uses) await touchLastUsed(tx, pairId, at);
      for (const [pairId, at] of refusals) await touchLastRefused(tx, pairId, at);
      for (const [pairId, { at, address }] of unlisted) await touchUnlistedRefused(tx, pairId, at, address);
      for (const [pairId, { at, retiresAt }] of switches) await noteSwitch(tx, pairId, at, retiresAt);
      // An overlap already over (--after-switch 0s, or found past its end) is recorded with how it ended.
      const events: AuditEntry[] = [];
      for (const pairId of new Set([...ended, ...switches.map(([id]) => id)])) {
        const event = await settleOverlap(tx, await keyPairById(tx, pairId), this.clock.now());
        if (event) events.push(event);
      }
      if (events.length > 0) {
        const rows = events.map((event) => ({
          actor: SERVER_ACTOR,
          action: event.action,
          partnerId: event.partnerId ?? null,
          details: JSON.stringify(event.details ?? {}),
        }));
        // Into the one chain, under the revision row's lock as every unit of work (and the change reaches
        // the other servers as any other).
        await bumpRevision(tx);
        await appendToChain(tx, rows, new Date(this.clock.now()));
        await announceRevision(tx);
      }
    });
    if (written) {
      this.delayMs = RETRY_MIN_MS;
      this.reportedFull = false;
      if (this.pending > 0) this.schedule(0);
      return true;
    }
    // Put the batch back, unless a newer value arrived meanwhile, and retry with a growing delay.
    for (const [pairId, at] of uses) {
      const newer = this.lastUsed.get(pairId);
      if (!newer || newer < at) this.lastUsed.set(pairId, at);
    }
    for (const [pairId, at] of refusals) {
      const newer = this.lastRefused.get(pairId);
      if (!newer || newer < at) this.lastRefused.set(pairId, at);
    }
    for (const [pairId, value] of unlisted) {
      const newer = this.unlistedRefused.get(pairId);
      if (!newer || newer.at < value.at) this.unlistedRefused.set(pairId, value);
    }
    for (const kid of kids) this.signingKeys.add(kid);
    for (const [pairId, value] of switches) if (!this.switches.has(pairId)) this.switches.set(pairId, value);
    for (const pairId of ended) this.overlapsEnded.add(pairId);
    const delay = this.delayMs;
    this.delayMs = Math.min(RETRY_MAX_MS, this.delayMs * 2);
    this.schedule(delay);
    return false;
  }
}

/** Bookkeeping's log lines: the cap reached, writes failing (every 20th after the first). */
export function bookkeepingLog(logger: Logger | undefined): { onFull: (cap: number) => void; onFailure: OnWriteFailure } {
  return {
    onFull: (cap) =>
      logger?.error(
        { cap },
        `BOOKKEEPING CAP REACHED: ${cap} rows of one kind (last_used_at, refusals) are waiting for the database; newer ones are dropped until a write goes through`,
      ),
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) {
        logger?.warn({ err: loggableChain(error), failures }, 'bookkeeping write deferred (database busy or unavailable); retrying');
      }
    },
  };
}

/** What stopping could not write: lost, said at error level. */
export function logBookkeepingLost(logger: Logger | undefined, bookkeeping: Bookkeeping): void {
  logger?.error(
    { lost: bookkeeping.pending },
    `bookkeeping NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: ${bookkeeping.pending} rows (when key pairs were last used or refused, signing keys seen) are lost`,
  );
}
