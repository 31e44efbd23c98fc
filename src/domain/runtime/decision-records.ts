// The answers on record that were not a success (docs/decisions.md): the gate's refusals and the server's
// own failures, each with its cause (docs/reasons.md). Each takes one slot of a fixed ring on the
// request path (a reference and a time, nothing allocated); off the path, the slots are read in a batch, the
// cap applied (per partner and per client address per minute), and what the cap held back counted, one
// counter row per minute and key. Records, not state: nothing reads them to decide.
import type { Clock } from '../../clock.js';
import { TUNING } from '../../config.js';
import type { Database } from '../../db/client.js';
import { addUnrecorded, insertDecisions, partnersOfPairs, pruneRecords, type DecisionRow, type UnrecordedDelta } from '../../db/repositories/decisions.js';
import type { AnswerCause } from '../../reasons.js';
import { DeferredWrites, STOP_WRITE_LIMIT_MS, type OnWriteFailure } from './deferred-writes.js';
import { parseTokenId } from '../operations/tokens.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';

/** Refusals recorded per partner, and per client address, per minute by one instance; beyond, counted only. */
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
  /** Present on a token exchange. */
  readonly exchange?: object;
}

export interface DecisionRecorderOptions {
  /** Days of records kept (PUBLIC_API_DECISION_RETENTION). */
  retentionMs: number;
  /** The per-minute cap (default: the configuration table's). */
  capPerMinute?: number;
  onFailure?: OnWriteFailure;
}

export class DecisionRecorder extends DeferredWrites {
  private readonly slots: Array<RefusedRequest | undefined> = new Array<RefusedRequest | undefined>(RING_SIZE).fill(undefined);
  private readonly times = new Float64Array(RING_SIZE);
  private readonly paths: Array<string | undefined> = new Array<string | undefined>(RING_SIZE).fill(undefined);
  private head = 0;
  private used = 0;
  /** Refusals that found the ring full, since the last write. */
  private overflowed = 0;
  /** Per minute and key (`p:` partner, `a:` address): refusals recorded so far. */
  private readonly recorded = new Map<string, number>();
  private rows: DecisionRow[] = [];
  private unrecorded = new Map<string, UnrecordedDelta>();
  private interval: NodeJS.Timeout | undefined;
  private retryMs = WRITE_INTERVAL_MS;

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

  /** An answer that was not a success, on the request path: a ring slot, or a counter when the ring is full. */
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

  /** Deletes what is older than the retention: decisions, their counters, exposure hours. */
  async prune(): Promise<boolean> {
    const before = new Date(this.clock.now() - this.options.retentionMs);
    return this.write(async (tx) => {
      await pruneRecords(tx, before);
    });
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
    if (excess > 0) this.countUnrecorded(this.clock.now(), 'overflow', '', excess);
    for (const delta of unrecorded) this.countUnrecorded(delta.minute.getTime(), delta.keyKind, delta.keyValue, delta.refusals);
    const delay = this.retryMs;
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    this.schedule(delay);
    return false;
  }

  /** The ring into rows under the cap and counters beyond it. */
  private drain(): void {
    const cap = this.options.capPerMinute ?? TUNING.decisionCapPerMinute;
    const now = this.clock.now();
    const currentMinute = Math.floor(now / MINUTE_MS);
    for (const key of this.recorded.keys()) {
      if (Number(key.slice(0, key.indexOf('|'))) < currentMinute - 1) this.recorded.delete(key);
    }
    if (this.overflowed > 0) {
      this.countUnrecorded(now, 'overflow', '', this.overflowed);
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
      // A refused token was verified: its id names its partner.
      const partnerId = request.partnerId ?? (request.tokenId === null ? null : (parseTokenId(request.tokenId)?.partnerId ?? null));
      const addressKey = `${minute}|a|${request.client}`;
      const partnerKey = partnerId === null ? null : `${minute}|p|${partnerId}`;
      const byAddress = this.recorded.get(addressKey) ?? 0;
      const byPartner = partnerKey === null ? 0 : (this.recorded.get(partnerKey) ?? 0);
      if (byAddress >= cap) {
        this.countUnrecorded(at, 'address', request.client, 1);
        continue;
      }
      if (byPartner >= cap) {
        this.countUnrecorded(at, 'partner', partnerId!, 1);
        continue;
      }
      this.recorded.set(addressKey, byAddress + 1);
      if (partnerKey !== null) this.recorded.set(partnerKey, byPartner + 1);
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
        reason: request.reason ?? 'internal_error',
        method: request.method,
        path,
        engineStatus: request.engineStatus,
        engineMs: request.engineMs > 0 ? Math.round(request.engineMs) : null,
        traceId: request.traceId,
      });
    }
  }

  private countUnrecorded(at: number, keyKind: string, keyValue: string, refusals: number): void {
    const minute = Math.floor(at / MINUTE_MS) * MINUTE_MS;
    const key = `${minute}|${keyKind}|${keyValue}`;
    const known = this.unrecorded.get(key);
    if (known) known.refusals += refusals;
    else this.unrecorded.set(key, { minute: new Date(minute), instanceId: this.instanceId, keyKind, keyValue, refusals });
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
