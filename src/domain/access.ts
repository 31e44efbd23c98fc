import type { Clock } from '../clock.js';
import type { Database } from '../db/client.js';
import { listenForChanges, type ChangeListener } from '../db/listen.js';
import { isMapped } from '../db/repositories/companies.js';
import { keyPairById } from '../db/repositories/key-pairs.js';
import { partnerGateRow } from '../db/repositories/partners.js';
import { currentRevision } from '../db/repositories/revision.js';
import { AppError } from '../errors.js';
import { matcherOf } from './networks.js';
import { isValidCompanyId } from './validation.js';
import type { TokenClaims } from './tokens.js';
import { companyRefusal, refusalError, tokenRefusal, type PairSnapshot, type PartnerSnapshot } from './verdict.js';

const DEFAULT_STALENESS_BOUND_MS = 1_000;
const DEFAULT_POLL_INTERVAL_MS = 250;
/**
 * Revision reads given up on (a database that accepts and never answers) still waiting for the driver's own
 * timeout: past this many, the poll waits for one of them to end instead of opening more connections.
 */
const MAX_ABANDONED_READS = 4;

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

function unavailable(error: unknown): AppError {
  return new AppError('database_unavailable', 'the service cannot check access right now', { cause: error });
}

/**
 * What the data-request gate needs to know from the database, held in memory. Every mutation bumps the
 * revision row; this polls it and forgets everything when it moves. On PostgreSQL every mutation also
 * sends a NOTIFY, and this LISTENs on a connection of its own and forgets everything at once. A verdict is never older than the
 * staleness bound: when the last confirmed poll is older than that, the gate checks the revision itself
 * before answering, and fails closed (503) when the database cannot say. Its reads are plain SQL: they are
 * the gate's cache misses, on the request path, and none is awaited past the staleness bound.
 *
 * With a staleness budget (PostgreSQL, PUBLIC_API_STALE_BUDGET), a database that stops answering does not
 * fail the gate at once: what this instance last confirmed (the verdicts it holds) keeps deciding, at cache
 * speed, until the budget is spent, counted from the last confirmed read or the last heartbeat written,
 * whichever is older (so that no receipt reading the heartbeat can think this instance is done sooner).
 * Nothing is read for a request meanwhile: a verdict needing something not held answers 503. When the
 * database answers again, the revision is read before anything else is trusted.
 */
export class AccessState {
  private revision: number | null = null;
  /** Moves whenever the caches are dropped, so a read begun before cannot be filed after. */
  private epoch = 0;
  /** The database connection's epoch the verdicts were read under (a reopened SQLite file is another database). */
  private connectionEpoch = 0;
  private listener: ChangeListener | undefined;
  private listenerStarting: Promise<void> | undefined;
  private stopped = false;
  private confirmedAt = 0;
  /** Verdicts answered from memory and read from the database: for the metrics. */
  cacheHits = 0;
  cacheMisses = 0;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  /** What the verdict needs, as read: null for a partner or pair that does not exist. */
  private readonly partners = new Map<string, PartnerSnapshot | null>();
  private readonly keyPairs = new Map<string, PairSnapshot | null>();
  private readonly mappings = new Map<string, boolean>();
  private readonly clock: Clock;
  /** Database reads of verdicts under way, by the epoch they began in (cache misses only). */
  private readonly loadsByEpoch = new Map<number, number>();
  private applied: number | null = null;
  /** When a read of the revision first failed, while it keeps failing (null: the database answers). */
  private unreachableSince: number | null = null;
  /** When this instance's heartbeat was last written (epoch ms; null: none written, the budget counts from the last read). */
  private heartbeatAt: number | null = null;
  private abandonedReads = 0;
  private servedInOutage = 0;
  /** Data requests decided from the held state while the database did not answer: for the metrics. */
  servedUnconfirmed = 0;

  constructor(
    private readonly db: Database,
    private readonly options: {
      stalenessBoundMs?: number;
      pollIntervalMs?: number;
      maxEntries?: number;
      onPoll?: () => void;
      /** PostgreSQL: LISTEN for announced changes (default true); the poll stays as the fallback. */
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
    } = {},
  ) {
    this.clock = options.clock ?? db.clock;
  }

  /** When the revision was last confirmed (epoch ms; 0 before the first). */
  get confirmedAtMs(): number {
    return this.confirmedAt;
  }

  /** The last revision read (null before the first); other caches of the server file their entries under it. */
  get revisionSeen(): number | null {
    return this.revision;
  }

  /**
   * The revision every answer reflects from now on: the caches were dropped for it, and no read of a verdict
   * begun before can still decide a request. Null before the first. What the instance registry records.
   */
  get appliedRevision(): number | null {
    return this.applied;
  }

  get stalenessBoundMs(): number {
    return this.options.stalenessBoundMs ?? DEFAULT_STALENESS_BOUND_MS;
  }

  get staleBudgetMs(): number {
    return this.options.staleBudgetMs ?? 0;
  }

  /** This instance's heartbeat was written with `lastSeenAt`: the budget counts from it at the latest. */
  heartbeatWritten(lastSeenAt: number): void {
    if (this.heartbeatAt === null || lastSeenAt > this.heartbeatAt) this.heartbeatAt = lastSeenAt;
  }

  /** The instant until which the held state may decide requests while the database does not answer. */
  private servingUntil(): number {
    const budget = this.staleBudgetMs;
    if (budget <= 0) return 0;
    return Math.min(this.confirmedAt, this.heartbeatAt ?? this.confirmedAt) + budget;
  }

  /** Past the staleness bound, whether the held state still decides: the database does not answer and the budget holds. */
  private servesHeld(now: number): boolean {
    return this.unreachableSince !== null && now <= this.servingUntil();
  }

  /** Null while the database answers; otherwise what the gate decides from (readiness, metrics). */
  get held(): HeldState | null {
    if (this.unreachableSince === null) return null;
    const now = this.clock.now();
    return {
      serving: now - this.confirmedAt <= this.stalenessBoundMs || this.servesHeld(now),
      servingUntil: this.servingUntil(),
    };
  }

  /** How old the last confirmed state is (ms since the last revision read that answered). */
  get stateAgeMs(): number {
    return this.clock.now() - this.confirmedAt;
  }

  /** True when requests are being decided from state older than the staleness bound. */
  get servingStale(): boolean {
    const now = this.clock.now();
    return now - this.confirmedAt > this.stalenessBoundMs && this.servesHeld(now);
  }

  /** One more request decided from the held state. */
  private countHeld(): void {
    this.servedUnconfirmed++;
    this.servedInOutage++;
  }

  /**
   * `work`, or a rejection once `ms` have passed without its answer (the work is left to the driver's own
   * timeouts: a connection that accepts and never answers would otherwise hold the caller forever).
   */
  private bounded<T>(work: Promise<T>, ms: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.abandonedReads++;
        void work.catch(() => {}).finally(() => this.abandonedReads--);
        reject(new Error(`the database did not answer within ${ms} ms`));
      }, ms);
      work.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /**
   * A read of something else the gate needs (a partner's limits), under the same rules as the verdicts'
   * cache misses: none while the database does not answer, none awaited past the staleness bound.
   */
  async read<T>(load: () => Promise<T>): Promise<T> {
    if (this.servingStale) throw unavailable(new Error('the database does not answer; this is not held'));
    try {
      return await this.bounded(load(), this.stalenessBoundMs);
    } catch (error) {
      throw unavailable(error);
    }
  }

  start(): void {
    const interval = this.options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.timer = setInterval(() => {
      if (this.abandonedReads < MAX_ABANDONED_READS) void this.refresh().catch(() => {});
    }, interval);
    this.timer.unref();
    if (this.db.provider === 'postgresql' && this.options.listen !== false) {
      this.listenerStarting = listenForChanges(this.db.config, {
        onChange: () => this.dropCaches(),
        ...(this.options.onListenerLost ? { onLost: this.options.onListenerLost } : {}),
      }).then(
        (listener) => {
          if (this.stopped) void listener.close();
          else this.listener = listener;
        },
        (error) => this.options.onListenerLost?.(error),
      );
    }
  }

  /** True while a LISTEN for announced changes is in force. */
  get listening(): boolean {
    return this.listener?.listening ?? false;
  }

  /** Resolves once the LISTEN connection is up (or has failed its first attempt and is retrying). */
  async listenerReady(): Promise<boolean> {
    await this.listenerStarting;
    return this.listener?.listening ?? false;
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
    void this.listener?.close();
  }

  /**
   * An announced change: forget every verdict now, then confirm the revision. A revision read already under
   * way may have begun before the change committed, so the confirming read starts after it.
   */
  dropCaches(): void {
    this.forget();
    const under = this.inflight;
    if (under !== undefined) void under.catch(() => {}).then(() => this.refresh()).catch(() => {});
    else void this.refresh().catch(() => {});
  }

  /** Every cached verdict dropped, under a new epoch (a read begun before is not filed after). */
  private forget(): void {
    this.epoch++;
    this.partners.clear();
    this.keyPairs.clear();
    this.mappings.clear();
  }

  /**
   * Marks the revision applied once no verdict read begun under an earlier epoch is still under way (such a
   * read may predate the change, and its answer would still decide its request).
   */
  private settle(): void {
    if (this.revision === null || this.revision === this.applied) return;
    for (const epoch of this.loadsByEpoch.keys()) if (epoch < this.epoch) return;
    this.applied = this.revision;
    this.options.onApplied?.(this.applied);
  }

  /**
   * Reads the revision (giving up after the staleness bound); on a change, drops every cached verdict. A
   * failed read marks the database unreachable until a read succeeds.
   */
  refresh(): Promise<void> {
    this.inflight ??= (async () => {
      try {
        const startedAt = this.clock.now();
        let value: number;
        try {
          value = (await this.bounded(currentRevision(this.db.sql), this.stalenessBoundMs)) ?? 0;
        } catch (error) {
          this.unreachable(error);
          throw error;
        }
        const before = this.revision;
        if (value !== this.revision || this.db.sql.epoch !== this.connectionEpoch) {
          this.connectionEpoch = this.db.sql.epoch;
          this.forget();
          this.revision = value;
        }
        this.confirmedAt = startedAt;
        this.reachable(before, value);
        this.settle();
        this.options.onPoll?.();
      } finally {
        this.inflight = undefined;
      }
    })();
    return this.inflight;
  }

  private unreachable(error: unknown): void {
    if (this.unreachableSince !== null) return;
    this.unreachableSince = this.clock.now();
    this.servedInOutage = 0;
    this.options.onOutage?.({
      kind: 'start',
      since: this.unreachableSince,
      lastConfirmedAt: this.confirmedAt,
      revision: this.revision,
      servingUntil: this.staleBudgetMs > 0 ? this.servingUntil() : null,
      error,
    });
  }

  private reachable(revisionBefore: number | null, revision: number): void {
    if (this.unreachableSince === null) return;
    const since = this.unreachableSince;
    this.unreachableSince = null;
    this.options.onOutage?.({ kind: 'end', since, endedAt: this.clock.now(), servedUnconfirmed: this.servedInOutage, revisionBefore, revision });
  }

  /**
   * Resolves once the revision is confirmed within the staleness bound, or with true when the held state
   * decides instead (the database does not answer, the budget holds); rejects (503) otherwise.
   */
  private async fresh(): Promise<boolean> {
    const now = this.clock.now();
    if (now - this.confirmedAt <= this.stalenessBoundMs) return false;
    if (this.servesHeld(now)) return true;
    try {
      await this.refresh();
      return false;
    } catch (error) {
      if (this.servesHeld(this.clock.now())) return true;
      throw unavailable(error);
    }
  }

  private async cached<T>(cache: Map<string, T>, key: string, load: () => Promise<T>): Promise<T> {
    const held = await this.fresh();
    const known = cache.get(key);
    if (known !== undefined) {
      this.cacheHits++;
      return known;
    }
    // Nothing is read while the database does not answer: what is not held is not known.
    if (held) throw unavailable(new Error('the database does not answer; this verdict is not held'));
    this.cacheMisses++;
    const epochBefore = this.epoch;
    this.loadsByEpoch.set(epochBefore, (this.loadsByEpoch.get(epochBefore) ?? 0) + 1);
    let value: T;
    try {
      value = await this.bounded(load(), this.stalenessBoundMs);
    } catch (error) {
      throw unavailable(error);
    } finally {
      const left = this.loadsByEpoch.get(epochBefore)! - 1;
      if (left === 0) this.loadsByEpoch.delete(epochBefore);
      else this.loadsByEpoch.set(epochBefore, left);
      if (epochBefore !== this.epoch) this.settle();
    }
    // Only remember an answer read under the revision it will be filed under.
    if (epochBefore === this.epoch) {
      if (cache.size >= (this.options.maxEntries ?? 200_000)) cache.clear();
      cache.set(key, value);
    }
    return value;
  }

  private partner(partnerId: string): Promise<PartnerSnapshot | null> {
    return this.cached(this.partners, partnerId, async () => {
      const row = await partnerGateRow(this.db.sql, partnerId);
      return row && { status: row.status, tokensRevokedBefore: row.tokensRevokedBefore, allows: matcherOf(row.allowFrom) };
    });
  }

  /** The pair as the verdict needs it (its partner is in it: a pair of another partner is refused). */
  private keyPair(keyPairId: string): Promise<PairSnapshot | null> {
    return this.cached(this.keyPairs, keyPairId, async () => {
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

  async partnerActive(partnerId: string): Promise<boolean> {
    return (await this.partner(partnerId))?.status === 'active';
  }

  isMapped(partnerId: string, companyId: string): Promise<boolean> {
    return this.cached(this.mappings, `${partnerId}\u0000${companyId}`, () => isMapped(this.db.sql, partnerId, companyId));
  }

  /**
   * A verified token is still accepted (the verdict, verdict.ts `tokenRefusal`, from a snapshot read through
   * the caches): its partner is active, it was issued at or after the partner's `tokens_revoked_before`
   * (milliseconds: a token re-exchanged right after `revoke-tokens` is accepted at once), the pair that
   * minted it is not revoked, and the partner's network rules, if any, allow the client's address (403
   * `address_not_allowed`; an empty address matches no rule). A refusal carries its reason code.
   */
  async authenticate(claims: TokenClaims, client = ''): Promise<void> {
    const partner = await this.partner(claims.partnerId);
    const pair = claims.keyPairId === null ? null : await this.keyPair(claims.keyPairId);
    const now = this.clock.now();
    if (now - this.confirmedAt > this.stalenessBoundMs) this.countHeld();
    const reason = tokenRefusal(claims, partner, pair, client, now);
    if (reason !== null) throw refusalError(reason, 'gate');
  }

  /**
   * The company part of the gate, for claims already through `authenticate`: the company must be mapped to
   * the token's partner. An unmapped company and one that does not exist are the same lookup and the same
   * answer (404, reason `company_not_mapped`).
   */
  async authorizeCompany(claims: TokenClaims, companyId: unknown): Promise<void> {
    const valid = isValidCompanyId(companyId);
    const reason = companyRefusal(valid, valid && (await this.isMapped(claims.partnerId, companyId)));
    if (reason !== null) throw refusalError(reason, 'gate');
  }

  /**
   * `authenticate`'s verdict from the caches alone, without waiting: true when the last confirmed revision is
   * within the staleness bound, the partner and the pair are cached, and the same verdict accepts; false
   * when anything would need the database or is refused (call authenticate, which gives the refusal).
   */
  authenticatesNow(claims: TokenClaims, client = ''): boolean {
    const now = this.clock.now();
    const held = now - this.confirmedAt > this.stalenessBoundMs;
    if (held && !this.servesHeld(now)) return false;
    const partner = this.partners.get(claims.partnerId);
    if (partner === undefined) return false;
    let pair: PairSnapshot | null = null;
    if (claims.keyPairId !== null) {
      const known = this.keyPairs.get(claims.keyPairId);
      if (known === undefined) return false;
      pair = known;
    }
    if (tokenRefusal(claims, partner, pair, client, now) !== null) return false;
    // One hit per cached verdict consulted, as authenticate counts them.
    this.cacheHits += claims.keyPairId !== null ? 2 : 1;
    if (held) this.countHeld();
    return true;
  }

  /** `authorizeCompany`'s verdict from the caches alone, as authenticatesNow: false when it cannot say (or refuses). */
  authorizesCompanyNow(claims: TokenClaims, companyId: string): boolean {
    const now = this.clock.now();
    if (now - this.confirmedAt > this.stalenessBoundMs && !this.servesHeld(now)) return false;
    const valid = isValidCompanyId(companyId);
    if (companyRefusal(valid, valid && this.mappings.get(`${claims.partnerId}\u0000${companyId}`) === true) !== null) return false;
    this.cacheHits++;
    return true;
  }

  /**
   * The whole gate behind a verified token: the partner must be active, the minting pair not revoked, and
   * the company mapped (`authenticate`, then `authorizeCompany`).
   */
  async authorize(claims: TokenClaims, companyId: unknown, client = ''): Promise<void> {
    await this.authenticate(claims, client);
    await this.authorizeCompany(claims, companyId);
  }
}
