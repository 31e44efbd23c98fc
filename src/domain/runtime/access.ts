import type { Clock } from '../../clock.js';
import { TUNING } from '../../config.js';
import type { Database } from '../../db/client.js';
import { isMapped } from '../../db/repositories/companies.js';
import { keyPairById } from '../../db/repositories/key-pairs.js';
import { partnerGateRow } from '../../db/repositories/partners.js';
import { openRecordingWindows } from '../../db/repositories/recording-windows.js';
import { AppError } from '../../errors.js';
import { FreshnessRule, type Freshness } from '../rules/freshness.js';
import { matcherOf } from '../operations/networks.js';
import { SnapshotCache, type Maybe } from '../rules/snapshot-cache.js';
import type { TokenClaims } from '../operations/tokens.js';
import { isValidCompanyId } from '../rules/validation.js';
import { RevisionWatch } from './revision-watch.js';
import { companyRefusal, refusalError, tokenRefusal, type PairSnapshot, type PartnerSnapshot } from '../rules/verdict.js';

const DEFAULT_MAX_ENTRIES = 200_000;

/** The database stopped answering (`start`), or answers again (`end`): for the server's log. */
export type OutageEvent =
  | { kind: 'start'; since: number; lastConfirmedAt: number; revision: number | null; servingUntil: number | null; error: unknown }
  | { kind: 'end'; since: number; endedAt: number; servedUnconfirmed: number; revisionBefore: number | null; revision: number };

/** The state the gate decides from while the database does not answer (null while it does). */
export interface HeldState {
  /** Data requests are decided from the held state (the budget holds); false: they answer 503. */
  serving: boolean;
  /** The instant until which the held state may decide (0 with no budget). */
  servingUntil: number;
}

/** The gate cannot decide: the database does not answer (and no staleness budget holds, or it is spent). */
function unavailable(error: unknown, budgetSpent = false): AppError {
  return new AppError('database_unavailable', 'the service cannot check access right now', { cause: error, ...(budgetSpent ? { reason: 'stale_budget_spent' as const } : {}) });
}

const NOT_HELD = new Error('the database does not answer; this verdict is not held');

export interface AccessOptions {
  stalenessBoundMs?: number;
  pollIntervalMs?: number;
  maxEntries?: number;
  onPoll?: () => void;
  /** LISTEN for announced changes where the database has them (default true); the poll stays as the fallback. */
  listen?: boolean;
  /** Called with the error when the LISTEN connection is lost (it reconnects by itself). */
  onListenerLost?: (error: unknown) => void;
  /** Called when `appliedRevision` moves (never on a data request's own path: see settle). */
  onApplied?: (revision: number) => void;
  /** Where the verdicts and the staleness bound read time (default: the database handle's clock). */
  clock?: Clock;
  /** How long the held state keeps deciding while the database does not answer (default 0: never). */
  staleBudgetMs?: number;
  /** The database stopped answering, or answers again (never on a data request's own path). */
  onOutage?: (event: OutageEvent) => void;
}

/**
 * What the data-request gate needs to know from the database, held in memory as snapshots (a partner, a key
 * pair, a mapping) and decided by the pure rules of verdict.ts. Every mutation bumps the revision row; the
 * revision watch (revision-watch.ts) reads it, on a poll and on a LISTEN's hints, and the snapshots are
 * dropped when it has moved. How far they may be trusted is the one freshness rule
 * (freshness.ts): past the staleness bound the revision is confirmed before answering, and the gate fails
 * closed (503) when the database cannot say, unless a staleness budget holds (PostgreSQL,
 * PUBLIC_API_STALE_BUDGET): then what is held decides, and nothing is read, until the budget is spent.
 *
 * Each check returns undefined when it accepts from memory (the usual case: no promise), and a promise
 * otherwise (a read, a refusal).
 */
export class AccessState {
  private applied: number | null = null;
  private readonly freshness: FreshnessRule;
  private readonly watch: RevisionWatch;
  private readonly partners: SnapshotCache<string, PartnerSnapshot | null>;
  private readonly keyPairs: SnapshotCache<string, PairSnapshot | null>;
  private readonly mappings: SnapshotCache<string, boolean>;
  private readonly clock: Clock;
  private servedInOutage = 0;
  /** Data requests decided from the held state while the database did not answer: for the metrics. */
  servedUnconfirmed = 0;

  constructor(
    private readonly db: Database,
    private readonly options: AccessOptions = {},
  ) {
    this.clock = options.clock ?? db.clock;
    this.freshness = new FreshnessRule(options.stalenessBoundMs ?? TUNING.stalenessBoundMs, options.staleBudgetMs ?? 0);
    const max = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    const settle = () => this.settle();
    this.partners = new SnapshotCache(max, settle);
    this.keyPairs = new SnapshotCache(max, settle);
    this.mappings = new SnapshotCache(max, settle);
    this.watch = new RevisionWatch(db, this.freshness, this.clock, {
      pollIntervalMs: options.pollIntervalMs ?? TUNING.pollIntervalMs,
      listen: db.dialect.listens && options.listen !== false,
      onMoved: () => this.forget(),
      onRead: () => {
        this.settle();
        options.onPoll?.();
      },
      onOutage: (event) => {
        if (event.kind === 'start') {
          this.servedInOutage = 0;
          options.onOutage?.(event);
        } else {
          options.onOutage?.({ ...event, servedUnconfirmed: this.servedInOutage });
        }
      },
      ...(options.onListenerLost ? { onListenerLost: options.onListenerLost } : {}),
    });
  }

  /** Snapshots answered from memory, and read from the database: for the metrics. */
  get cacheHits(): number {
    return this.partners.hits + this.keyPairs.hits + this.mappings.hits;
  }

  get cacheMisses(): number {
    return this.partners.misses + this.keyPairs.misses + this.mappings.misses;
  }

  /** When the revision was last confirmed (epoch ms; 0 before the first). */
  get confirmedAtMs(): number {
    return this.freshness.confirmedAt;
  }

  /** The last revision read (null before the first); other caches of the server file their entries under it. */
  get revisionSeen(): number | null {
    return this.watch.revision;
  }

  /**
   * The revision every answer reflects from now on: the snapshots were dropped for it, and no read begun
   * before can still decide a request. Null before the first. What the instance registry records.
   */
  get appliedRevision(): number | null {
    return this.applied;
  }

  get stalenessBoundMs(): number {
    return this.freshness.stalenessBoundMs;
  }

  get staleBudgetMs(): number {
    return this.freshness.staleBudgetMs;
  }

  /** This instance's heartbeat was written with `lastSeenAt`: the budget counts from it at the latest. */
  heartbeatWritten(lastSeenAt: number): void {
    this.freshness.heartbeatWritten(lastSeenAt);
  }

  /** The freshness rule's verdict now. */
  judge(): Freshness {
    return this.freshness.judge(this.clock.now(), this.clock.bounded?.() ?? true);
  }

  /** Null while the database answers; otherwise what the gate decides from (readiness, metrics, the token endpoint). */
  get held(): HeldState | null {
    if (this.freshness.unreachableSince === null) return null;
    return { serving: this.judge() !== 'stale', servingUntil: this.freshness.servingUntil() };
  }

  /** How old the last confirmed state is (ms since the last revision read that answered). */
  get stateAgeMs(): number {
    return this.clock.now() - this.freshness.confirmedAt;
  }

  /** True when requests are being decided from state older than the staleness bound. */
  get servingStale(): boolean {
    return this.judge() === 'held';
  }

  /** A read on the gate's behalf: bounded by the staleness bound, a failure answered 503. */
  private async readBounded<T>(load: () => Promise<T>): Promise<T> {
    try {
      return await this.watch.bounded(load(), this.stalenessBoundMs);
    } catch (error) {
      throw unavailable(error);
    }
  }

  /**
   * A read of something else the gate needs (a partner's limits), under the same rules as the snapshots'
   * loads: none while what is held decides, none awaited past the staleness bound.
   */
  read<T>(load: () => Promise<T>): Promise<T> {
    if (this.judge() === 'held') return Promise.reject(unavailable(NOT_HELD));
    return this.readBounded(load);
  }

  start(): void {
    this.watch.start();
  }

  /** True while a LISTEN for announced changes is in force. */
  get listening(): boolean {
    return this.watch.listening;
  }

  /** Resolves once the LISTEN connection is up (or has failed its first attempt and is retrying). */
  listenerReady(): Promise<boolean> {
    return this.watch.listenerReady();
  }

  stop(): void {
    this.watch.stop();
  }

  /** A change may have been announced: the revision is read now (revision-watch.ts); only it moves the snapshots. */
  hint(): void {
    this.watch.hint();
  }

  /** Reads the revision now (see revision-watch.ts); the snapshots are dropped when it moved. */
  refresh(): Promise<void> {
    return this.watch.refresh();
  }

  /** Every snapshot dropped, under a new generation (a read begun before is not filed after). */
  private forget(): void {
    this.partners.clear();
    this.keyPairs.clear();
    this.mappings.clear();
  }

  /**
   * Marks the revision applied once no snapshot read begun under an earlier generation is still under way
   * (such a read may predate the change, and its answer would still decide its request).
   */
  private settle(): void {
    const revision = this.watch.revision;
    if (revision === null || revision === this.applied) return;
    if (!this.partners.settled || !this.keyPairs.settled || !this.mappings.settled) return;
    this.applied = revision;
    this.options.onApplied?.(this.applied);
  }

  /**
   * What the snapshots may be read under: at once while fresh or held; past the bound, once the revision is
   * confirmed (or the database found not to answer while the budget holds); 503 otherwise.
   */
  private ready(): Maybe<Freshness> {
    const state = this.judge();
    if (state !== 'stale') return state;
    return this.refresh().then(
      () => 'fresh',
      (error: unknown) => {
        if (this.judge() === 'held') return 'held';
        throw unavailable(error, this.staleBudgetMs > 0);
      },
    );
  }

  /** A snapshot from memory, or read (never while what is held decides: what is not held is not known). */
  private snapshot<V>(cache: SnapshotCache<string, V>, key: string, state: Freshness, load: () => Promise<V>): Maybe<V> {
    if (state === 'held' && cache.peek(key) === undefined) return Promise.reject(unavailable(NOT_HELD));
    return cache.get(key, () => this.readBounded(load));
  }

  private partner(state: Freshness, partnerId: string): Maybe<PartnerSnapshot | null> {
    return this.snapshot(this.partners, partnerId, state, async () => {
      const [row, windows] = await Promise.all([partnerGateRow(this.db.sql, partnerId), openRecordingWindows(this.db.sql, new Date(this.clock.now()), partnerId)]);
      const recording = windows.map((window) => ({ companyId: window.companyId, endsAt: window.endsAt.getTime() }));
      return row && { status: row.status, tokensRevokedBefore: row.tokensRevokedBefore, allows: matcherOf(row.allowFrom), ...(recording.length > 0 ? { recording } : {}) };
    });
  }

  /** The pair as the verdict needs it (its partner is in it: a pair of another partner is refused). */
  private keyPair(state: Freshness, keyPairId: string): Maybe<PairSnapshot | null> {
    return this.snapshot(this.keyPairs, keyPairId, state, async () => {
      const row = await keyPairById(this.db.sql, keyPairId);
      return (
        row && {
          partnerId: row.partnerId,
          status: row.status,
          expiresAt: row.expiresAt,
          retiresAt: row.retiresAt,
          supersededAt: row.supersededAt,
          revokedAt: row.revokedAt,
        }
      );
    });
  }

  private mapped(state: Freshness, partnerId: string, companyId: string): Maybe<boolean> {
    return this.snapshot(this.mappings, `${partnerId}\u0000${companyId}`, state, () => isMapped(this.db.sql, partnerId, companyId));
  }

  async partnerActive(partnerId: string): Promise<boolean> {
    return (await this.partner(await this.ready(), partnerId))?.status === 'active';
  }

  async isMapped(partnerId: string, companyId: string): Promise<boolean> {
    return this.mapped(await this.ready(), partnerId, companyId);
  }

  /**
   * A verified token is still accepted (verdict.ts `tokenRefusal`, over the snapshots): its partner is active,
   * it was issued at or after the partner's brake, the pair that minted it is not revoked, and the partner's
   * network rules, if any, allow the client's address (an empty address matches no rule). Undefined: accepted
   * from memory; otherwise a promise, rejected with the refusal and its reason code.
   */
  authenticate(claims: TokenClaims, client = ''): Promise<void> | undefined {
    const state = this.ready();
    if (state instanceof Promise) return state.then((ready) => this.authenticateAs(ready, claims, client));
    return this.authenticateAs(state, claims, client);
  }

  private authenticateAs(state: Freshness, claims: TokenClaims, client: string): Promise<void> | undefined {
    const partner = this.partner(state, claims.partnerId);
    const pair = claims.keyPairId === null ? null : this.keyPair(state, claims.keyPairId);
    if (partner instanceof Promise || pair instanceof Promise) {
      return Promise.all([partner, pair]).then(([known, knownPair]) => this.admit(state, claims, known, knownPair, client));
    }
    try {
      this.admit(state, claims, partner, pair, client);
      return undefined;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private admit(state: Freshness, claims: TokenClaims, partner: PartnerSnapshot | null, pair: PairSnapshot | null, client: string): void {
    if (state === 'held') {
      this.servedUnconfirmed++;
      this.servedInOutage++;
    }
    const reason = tokenRefusal(claims, partner, pair, client, this.clock.now());
    if (reason !== null) throw refusalError(reason, 'gate');
  }

  /**
   * The company part of the gate, for claims already through `authenticate`: the company must be mapped to
   * the token's partner. An unmapped company and one that does not exist are the same lookup and the same
   * answer (404, reason `company_not_mapped`). Undefined: accepted from memory; otherwise a promise.
   */
  authorizeCompany(claims: TokenClaims, companyId: unknown): Promise<void> | undefined {
    if (!isValidCompanyId(companyId)) return Promise.reject(refusalError(companyRefusal(false, false)!, 'gate'));
    const state = this.ready();
    const mapped = state instanceof Promise ? state.then((ready) => this.mapped(ready, claims.partnerId, companyId)) : this.mapped(state, claims.partnerId, companyId);
    if (mapped instanceof Promise) return mapped.then((known) => this.mappedOrRefused(known));
    try {
      this.mappedOrRefused(mapped);
      return undefined;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private mappedOrRefused(mapped: boolean): void {
    const reason = companyRefusal(true, mapped);
    if (reason !== null) throw refusalError(reason, 'gate');
  }

  /**
   * Whether an answer to this partner (naming this company) falls in one of its recording windows: a look at
   * the partner's snapshot in memory, never a read (the gate loaded it; without a window, one property test).
   */
  recording(partnerId: string, companyId: string | null): boolean {
    const windows = this.partners.peek(partnerId)?.recording;
    if (windows === undefined) return false;
    const now = this.clock.now();
    return windows.some((window) => window.endsAt > now && (window.companyId === null || window.companyId === companyId));
  }

  /** The whole gate behind a verified token: `authenticate`, then `authorizeCompany`. */
  async authorize(claims: TokenClaims, companyId: unknown, client = ''): Promise<void> {
    await this.authenticate(claims, client);
    await this.authorizeCompany(claims, companyId);
  }
}
