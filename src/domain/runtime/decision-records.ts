// The answers on record that were not a success (docs/decisions.md): the gate's refusals and the server's
// own failures, each with its cause (docs/reasons.md). Each takes one slot of a fixed ring on the
// request path (a reference and a time, nothing allocated); off the path, the slots are read in a batch, the
// cap applied (per partner and per client address per minute), and what the cap held back counted, one
// counter row per minute and key. Records, not state: nothing reads them to decide.
import type { Clock } from '../../clock.js';
import { TUNING } from '../../config.js';
import type { Database } from '../../db/client.js';
import { pruneAssertionJtis } from '../../db/repositories/key-pairs.js';
import { addUnrecorded, insertDecisions, partnersOfPairs, pruneBatch, PRUNED_TABLES, type DecisionRow, type UnrecordedDelta } from '../../db/repositories/decisions.js';
import { RECORDED_CAUSE, type AnswerCause } from '../../reasons.js';
import { DeferredWrites, STOP_WRITE_LIMIT_MS, type OnWriteFailure } from './deferred-writes.js';
import { parseTokenId } from '../operations/tokens.js';
import { addressKey } from '../rules/address-key.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';

/** Refusals held between two writes at most; beyond, counted as unrecorded (`overflow`). */
const RING_SIZE = 65_536;
/** A ring this full is read at once rather than at the next tick of the interval (a flood). */
const RING_HIGH = RING_SIZE / 2;
const WRITE_INTERVAL_MS = 1_000;
/** Rows kept for the next attempt while the database does not take them; beyond, counted as unrecorded. */
const MAX_PENDING_ROWS = 50_000;
const PRUNE_INTERVAL_MS = 3_600_000;
const MINUTE_MS = 60_000;
const RETRY_MAX_MS = 5_000;

/** What the finish step knows of an answer that was not a success (protocol/finished-request.ts has these fields). */
export interface RefusedRequest {
  readonly requestId: string;
  readonly method: string;
  readonly partnerId: string | null;
  readonly keyPairId: string | null;
  readonly tokenId: string | null;
  /** The company the request named, authorised or not. */
  readonly companyNamed: string | null;
  readonly client: string;
  readonly status: number;
  readonly reason?: AnswerCause;
  /** A data request's trace id; null for any other request. */
  readonly traceId: string | null;
  readonly engineStatus: number | null;
  /** 0 when the engine was not asked. */
  readonly engineMs: number;
  /** The answer's body length (its Content-Length); null when it did not say. */
  readonly bytes: number | null;
  /** Present on a token exchange: the partner of the pair its access key named, when it named one. */
  readonly exchange?: { readonly partnerId: string | null };
}

export interface DecisionRecorderOptions {
  /** Days of records kept (PUBLIC_API_DECISION_RETENTION). */
  retentionMs: number;
  /** The per-minute cap per partner and per address of no partner (default: the configuration table's). */
  capPerMinute?: number;
  /** Records per minute in all (PUBLIC_API_RECORDS_PER_MINUTE); answers of no partner take at most half. */
  totalPerMinute?: number;
  onFailure?: OnWriteFailure;
}

/** Which cap held an answer back (gate_decisions_unrecorded.held_by). */
export const HELD_BY = ['instance', 'partner', 'key_pair', 'token', 'address', 'overflow'] as const;
export type HeldBy = (typeof HELD_BY)[number];

const TOTAL_PER_MINUTE = 10_000;
/** One client of a partner (a token, an address) records at most this share of the partner's cap; one key pair half. */
const CLIENT_SHARE = 10;
const PAIR_SHARE = 2;

/**
 * The caps an answer is recorded under in its minute, each a key, its limit and its name, checked in order:
 * the instance's total; for an answer of no partner, their half of the total and the address's cap; for a
 * partner's, the partner's cap and each client's share of it (its token, its key pair, its address), so that
 * no single client can use up what support sees of the partner's others.
 */
function capsOf(minute: number, partnerId: string | null, tokenId: string | null, keyPairId: string | null, client: string, cap: number, total: number): Array<[string, number, HeldBy]> {
  const caps: Array<[string, number, HeldBy]> = [[`${minute}|total`, total, 'instance']];
  if (partnerId === null) {
    caps.push([`${minute}|anonymous`, Math.floor(total / 2), 'instance'], [`${minute}|a|${client}`, cap, 'address']);
    return caps;
  }
  caps.push([`${minute}|p|${partnerId}`, cap, 'partner']);
  if (tokenId !== null) caps.push([`${minute}|pt|${partnerId}|${tokenId}`, Math.max(1, Math.floor(cap / CLIENT_SHARE)), 'token']);
  if (keyPairId !== null) caps.push([`${minute}|pk|${partnerId}|${keyPairId}`, Math.max(1, Math.floor(cap / PAIR_SHARE)), 'key_pair']);
  caps.push([`${minute}|pa|${partnerId}|${client}`, Math.max(1, Math.floor(cap / CLIENT_SHARE)), 'address']);
  return caps;
}

export class DecisionRecorder extends DeferredWrites {
  private readonly slots: Array<RefusedRequest | undefined> = new Array<RefusedRequest | undefined>(RING_SIZE).fill(undefined);
  private readonly times = new Float64Array(RING_SIZE);
  private readonly paths: Array<string | undefined> = new Array<string | undefined>(RING_SIZE).fill(undefined);
  private head = 0;
  private used = 0;
  /** Refusals that found the ring full, since the last write. */
  private overflowed = 0;
  /** Per minute and cap key (see `capsOf`): answers recorded so far. */
  private readonly recorded = new Map<string, number>();
  private rows: DecisionRow[] = [];
  private unrecorded = new Map<string, UnrecordedDelta>();
  private interval: NodeJS.Timeout | undefined;
  private retryMs = WRITE_INTERVAL_MS;
  private pruning: Promise<boolean> | undefined;

  constructor(
    db: Database,
    clock: Clock,
    private readonly instanceId: string,
    private readonly options: DecisionRecorderOptions,
  ) {
    super(db, clock, options.onFailure);
  }

  /** Prunes at once, then every hour (each instance does; the deletes agree). */
  start(): void {
    if (this.interval || this.stopped) return;
    void this.prune();
    this.interval = setInterval(() => void this.prune(), PRUNE_INTERVAL_MS);
    this.interval.unref();
  }

  /** An answer that was not a success (or a success inside a recording window), on the request path: a ring slot, or a counter when the ring is full. */
  refused(request: RefusedRequest, path: string): void {
    if (this.used === RING_SIZE) {
      this.overflowed++;
      return;
    }
    const slot = (this.head + this.used) % RING_SIZE;
    this.slots[slot] = request;
    this.paths[slot] = path;
    this.times[slot] = this.clock.now();
    this.used++;
    if (this.used === RING_HIGH) this.schedule(0, { preempt: true });
    else this.schedule(WRITE_INTERVAL_MS);
  }

  get pending(): number {
    return this.used + this.rows.length + this.unrecorded.size + (this.overflowed > 0 ? 1 : 0);
  }

  /**
   * Deletes what is older than the retention (decisions, their counters, exposure hours) in bounded steps,
   * then the expired assertion jti notes,
   * one short transaction each, yielding to the event loop between them, until none is left; resolves whether
   * it finished (false: a step failed, or the recorder stopped; the next prune goes on). One at a time.
   */
  prune(): Promise<boolean> {
    this.pruning ??= this.pruneAll().finally(() => {
      this.pruning = undefined;
    });
    return this.pruning;
  }

  /** Stops as DeferredWrites does, a prune under way ending at its next step first. */
  override async stop(limitMs?: number): Promise<boolean> {
    this.stopped = true;
    await this.pruning;
    return super.stop(limitMs);
  }

  private async pruneAll(): Promise<boolean> {
    const before = new Date(this.clock.now() - this.options.retentionMs);
    const limit = this.db.sql.dialect.pruneBatchRows;
    for (const table of PRUNED_TABLES) {
      for (;;) {
        if (this.stopped) return false;
        let deleted = 0;
        const written = await this.write(async (tx) => {
          deleted = await pruneBatch(tx, table, before, limit);
        });
        if (!written) return false;
        // Requests between two steps: a step is the longest the event loop waits for the prune (SQLite).
        await new Promise((resolve) => setImmediate(resolve));
        if (deleted < limit) break;
      }
    }
    // Client assertions' jti notes are kept only while their assertion lives (a few minutes: one step).
    return this.write((tx) => pruneAssertionJtis(tx, new Date(this.clock.now())));
  }

  protected override cancelTimer(): void {
    super.cancelTimer();
    clearInterval(this.interval);
    this.interval = undefined;
  }

  protected async writeOnce(): Promise<boolean> {
    this.drain();
    if (this.rows.length === 0 && this.unrecorded.size === 0) return true;
    const rows = this.rows;
    const unrecorded = [...this.unrecorded.values()];
    this.rows = [];
    this.unrecorded = new Map();
    const written = await this.write(async (tx) => {
      const unknown = [...new Set(rows.filter((row) => row.partnerId === null && row.keyPairId !== null).map((row) => row.keyPairId!))];
      if (unknown.length > 0) {
        const partners = await partnersOfPairs(tx, unknown);
        for (const row of rows) if (row.partnerId === null && row.keyPairId !== null) row.partnerId = partners.get(row.keyPairId) ?? null;
      }
      if (rows.length > 0) await insertDecisions(tx, rows);
      if (unrecorded.length > 0) await addUnrecorded(tx, unrecorded);
    });
    if (written) {
      this.retryMs = WRITE_INTERVAL_MS;
      if (this.used >= RING_HIGH) this.schedule(0, { preempt: true });
      else if (this.used > 0) this.schedule(WRITE_INTERVAL_MS);
      return true;
    }
    // Kept for the next attempt (bounded: beyond MAX_PENDING_ROWS the oldest are counted instead).
    const kept = rows.concat(this.rows);
    const excess = kept.length - MAX_PENDING_ROWS;
    this.rows = excess > 0 ? kept.slice(excess) : kept;
    if (excess > 0) this.countUnrecorded(this.clock.now(), 'overflow', '', 'overflow', excess);
    for (const delta of unrecorded) this.countUnrecorded(delta.minute.getTime(), delta.keyKind, delta.keyValue, delta.heldBy as HeldBy, delta.refusals);
    const delay = this.retryMs;
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    this.schedule(delay);
    return false;
  }

  /** The ring into rows under the cap and counters beyond it. */
  private drain(): void {
    const cap = this.options.capPerMinute ?? TUNING.decisionCapPerMinute;
    const total = this.options.totalPerMinute ?? TOTAL_PER_MINUTE;
    const now = this.clock.now();
    const currentMinute = Math.floor(now / MINUTE_MS);
    for (const key of this.recorded.keys()) {
      if (Number(key.slice(0, key.indexOf('|'))) < currentMinute - 1) this.recorded.delete(key);
    }
    if (this.overflowed > 0) {
      this.countUnrecorded(now, 'overflow', '', 'overflow', this.overflowed);
      this.overflowed = 0;
    }
    for (; this.used > 0; this.used--) {
      const slot = this.head;
      const request = this.slots[slot]!;
      const at = this.times[slot]!;
      const path = this.paths[slot] ?? null;
      this.slots[slot] = undefined;
      this.paths[slot] = undefined;
      this.head = (this.head + 1) % RING_SIZE;
      const minute = Math.floor(at / MINUTE_MS);
      // A refused token was verified: its id names its partner; a refused exchange, its pair's.
      const partnerId = request.partnerId ?? request.exchange?.partnerId ?? (request.tokenId === null ? null : (parseTokenId(request.tokenId)?.partnerId ?? null));
      const client = addressKey(request.client);
      const caps = capsOf(minute, partnerId, request.tokenId, request.keyPairId, client, cap, total);
      const full = caps.find(([key, limit]) => (this.recorded.get(key) ?? 0) >= limit);
      if (full !== undefined) {
        // Counted as whose it was (the partner's, whichever cap held it; else the address's) and by which cap.
        this.countUnrecorded(at, partnerId === null ? 'address' : 'partner', partnerId ?? client, full[2], 1);
        continue;
      }
      for (const [key] of caps) this.recorded.set(key, (this.recorded.get(key) ?? 0) + 1);
      this.rows.push({
        requestId: request.requestId,
        at: new Date(at),
        instanceId: this.instanceId,
        route: request.exchange !== undefined ? 'exchange' : request.traceId !== null ? 'data' : 'other',
        partnerId,
        keyPairId: request.keyPairId,
        tokenId: request.tokenId,
        companyId: request.companyNamed,
        clientAddress: request.client,
        status: request.status,
        // A success is here only inside a recording window (http/server/request-log.ts).
        reason: request.reason ?? (request.status < 400 ? RECORDED_CAUSE : 'internal_error'),
        method: request.method,
        path,
        engineStatus: request.engineStatus,
        engineMs: request.engineMs > 0 ? Math.round(request.engineMs) : null,
        bytes: request.bytes,
        traceId: request.traceId,
      });
    }
  }

  private countUnrecorded(at: number, keyKind: string, keyValue: string, heldBy: HeldBy, refusals: number): void {
    const minute = Math.floor(at / MINUTE_MS) * MINUTE_MS;
    const key = `${minute}|${keyKind}|${keyValue}|${heldBy}`;
    const known = this.unrecorded.get(key);
    if (known) known.refusals += refusals;
    else this.unrecorded.set(key, { minute: new Date(minute), instanceId: this.instanceId, keyKind, keyValue, heldBy, refusals });
  }
}

/** The recorder's log line: writes failing (every 20th after the first). */
export function decisionsLog(logger: Logger | undefined): Pick<DecisionRecorderOptions, 'onFailure'> {
  return {
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) logger?.warn({ err: loggableChain(error), failures }, 'refusals on record not written (database busy or unavailable); kept for the next attempt');
    },
  };
}

/** What stopping could not write of the refusals on record and the exposure counts: lost, said at error level. */
export function logRecordsLost(logger: Logger | undefined, refusals: number, exposureCells: number): void {
  logger?.error(
    { refusals, exposure_cells: exposureCells },
    `refusals on record or exposure counts NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: they are lost`,
  );
}
