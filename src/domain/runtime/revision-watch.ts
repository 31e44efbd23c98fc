// Whether what the gate holds is still what the database says: the revision row, read on a poll and, where
// the database announces changes (PostgreSQL's LISTEN), sooner on a hint. A notification is only a hint:
// anyone who can log in can send one, so hints are coalesced into one read at a time and only the revision
// read decides that something moved. The watch keeps the freshness rule's facts (confirmed, unreachable)
// and says when the database stops answering and when it answers again.
import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { listenForChanges, type ChangeListener } from '../../db/listen.js';
import { currentRevision } from '../../db/repositories/revision.js';
import type { FreshnessRule } from '../rules/freshness.js';

/**
 * Revision reads given up on (a database that accepts and never answers) still waiting for the driver's own
 * timeout: past this many, the poll waits for one of them to end instead of opening more connections.
 */
const MAX_ABANDONED_READS = 4;

/** The database stopped answering (`start`), or answers again (`end`). */
export type WatchEvent =
  | { kind: 'start'; since: number; lastConfirmedAt: number; revision: number | null; servingUntil: number | null; error: unknown }
  | { kind: 'end'; since: number; endedAt: number; revisionBefore: number | null; revision: number };

export interface RevisionWatchOptions {
  pollIntervalMs: number;
  /** LISTEN where the database announces changes. */
  listen: boolean;
  /** The revision (or the database behind the connection) moved: what is held is no longer true. */
  onMoved: () => void;
  /** A read of the revision answered (after onMoved, when it moved). */
  onRead: () => void;
  onOutage: (event: WatchEvent) => void;
  onListenerLost?: (error: unknown) => void;
}

export class RevisionWatch {
  private revisionNow: number | null = null;
  /** The database connection's epoch the revision was read under (a reopened SQLite file is another database). */
  private connectionEpoch = 0;
  private listener: ChangeListener | undefined;
  private listenerStarting: Promise<void> | undefined;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> | undefined;
  /** A hint came while a read was under way (it may predate the change): read once more after it. */
  private rereadQueued = false;
  private abandonedReads = 0;

  constructor(
    private readonly db: Database,
    private readonly freshness: FreshnessRule,
    private readonly clock: Clock,
    private readonly options: RevisionWatchOptions,
  ) {}

  /** The last revision read (null before the first). */
  get revision(): number | null {
    return this.revisionNow;
  }

  /**
   * `work`, or a rejection once `ms` have passed without its answer (the work is left to the driver's own
   * timeouts: a connection that accepts and never answers would otherwise hold the caller forever).
   */
  bounded<T>(work: Promise<T>, ms: number): Promise<T> {
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

  start(): void {
    this.timer = setInterval(() => {
      if (this.abandonedReads < MAX_ABANDONED_READS) void this.refresh().catch(() => {});
    }, this.options.pollIntervalMs);
    this.timer.unref();
    if (this.options.listen) {
      this.listenerStarting = listenForChanges(this.db.config, {
        onChange: () => this.hint(),
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

  /** A change may have been announced: read the revision now, or once more after the read under way. */
  hint(): void {
    if (this.inflight !== undefined) {
      this.rereadQueued = true;
      return;
    }
    void this.refresh().catch(() => {});
  }

  /**
   * Reads the revision (giving up after the staleness bound). A failed read marks the database unreachable
   * until a read succeeds.
   */
  refresh(): Promise<void> {
    this.inflight ??= this.read().finally(() => {
      this.inflight = undefined;
      if (this.rereadQueued) {
        this.rereadQueued = false;
        void this.refresh().catch(() => {});
      }
    });
    return this.inflight;
  }

  private async read(): Promise<void> {
    const startedAt = this.clock.now();
    let value: number;
    try {
      value = (await this.bounded(currentRevision(this.db.sql), this.freshness.stalenessBoundMs)) ?? 0;
    } catch (error) {
      this.unreachable(error);
      throw error;
    }
    const before = this.revisionNow;
    if (value !== this.revisionNow || this.db.sql.epoch !== this.connectionEpoch) {
      this.connectionEpoch = this.db.sql.epoch;
      this.options.onMoved();
      this.revisionNow = value;
    }
    this.freshness.confirmedAt = startedAt;
    this.reachable(before, value);
    this.options.onRead();
  }

  private unreachable(error: unknown): void {
    if (this.freshness.unreachableSince !== null) return;
    const since = this.clock.now();
    this.freshness.unreachableSince = since;
    this.options.onOutage({
      kind: 'start',
      since,
      lastConfirmedAt: this.freshness.confirmedAt,
      revision: this.revisionNow,
      servingUntil: this.freshness.staleBudgetMs > 0 ? this.freshness.servingUntil() : null,
      error,
    });
  }

  private reachable(revisionBefore: number | null, revision: number): void {
    const since = this.freshness.unreachableSince;
    if (since === null) return;
    this.freshness.unreachableSince = null;
    this.options.onOutage({ kind: 'end', since, endedAt: this.clock.now(), revisionBefore, revision });
  }
}
