import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { releaseLease, takeLease, type LeaseFence } from './repositories/leases.js';
import type { SqlDatabase } from './sql.js';

/** The tasks that a single instance runs at a time, each under a lease of its own. */
export type LeaseName = 'webhook_delivery';

/** A lease not renewed for this long has expired: another instance may take it. */
export const LEASE_TTL_MS = 5_000;
/** The holder renews its lease this often; the others try to take it this often. */
export const LEASE_RENEW_MS = 1_000;
const STOP_LIMIT_MS = 1_000;

/** Whether this process holds a lease, until stopped. */
export interface Leadership {
  readonly held: boolean;
  /** What a write that only the holder may make names (the claim of a delivery). */
  readonly fence: LeaseFence;
  stop(): Promise<void>;
}

export interface LeadershipOptions {
  /** Told when the lease is taken. */
  onTaken?: () => void;
  /** Told when a lease that was held is found lost: not renewed in time (paused, the database unreachable). */
  onLost?: () => void;
  ttlMs?: number;
  renewMs?: number;
  /** Who holds it, as `instances` names it: the serve instance's id (unique to the process), else host/pid/random. */
  holder?: string;
}

/**
 * Holds a lease row (PostgreSQL): taken when it is free or expired, renewed every `renewMs`, valid for
 * `ttlMs` after each renewal by the database's clock. An advisory lock would not do: a process that is
 * paused (SIGSTOP, a paused VM, a stuck event loop) keeps its connection, and the lock with it, for as long
 * as it is paused. A lease stops being renewed instead, and another instance takes it within
 * `ttlMs + renewMs`. This process counts itself the holder only until `ttlMs` after it sent its last
 * successful renewal, on its own monotonic clock (never its wall clock), so a resumed holder knows at once
 * that its lease may be gone; the writes only the holder may make are fenced on the row as well.
 */
export function holdLeadership(sql: SqlDatabase, name: LeaseName, options: LeadershipOptions = {}): Leadership {
  const leadership = new LeaseLeadership(sql, name, options);
  leadership.start();
  return leadership;
}

class LeaseLeadership implements Leadership {
  readonly fence: LeaseFence;
  /** Until when (performance.now()) the lease is this process's at the latest. */
  private validUntil = Number.NEGATIVE_INFINITY;
  private told = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private lapse: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;
  private readonly ttlMs: number;
  private readonly renewMs: number;

  constructor(
    private readonly sql: SqlDatabase,
    name: LeaseName,
    private readonly options: LeadershipOptions,
  ) {
    this.fence = { name, holder: options.holder ?? `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}` };
    this.ttlMs = options.ttlMs ?? LEASE_TTL_MS;
    this.renewMs = options.renewMs ?? LEASE_RENEW_MS;
  }

  get held(): boolean {
    return !this.stopped && performance.now() < this.validUntil;
  }

  start(): void {
    this.renewing = this.renew();
  }

  private async renew(): Promise<void> {
    const sentAt = performance.now();
    let taken: boolean | undefined;
    try {
      taken = await takeLease(this.sql, this.fence.name, this.fence.holder, this.ttlMs);
    } catch {
      // The database did not answer: the lease, if held, stays this process's until it expires.
    }
    // A lapse while this renewal hung is told before its answer counts, even when the timer that tells it has
    // not run yet (a busy event loop): the holder did stop counting itself one meanwhile.
    this.tell();
    if (taken !== undefined) this.validUntil = taken ? sentAt + this.ttlMs : Number.NEGATIVE_INFINITY;
    if (this.stopped) return;
    this.tell();
    clearTimeout(this.lapse);
    if (this.held) {
      // Told even while the next renewal hangs.
      this.lapse = setTimeout(() => this.tell(), this.validUntil - performance.now() + 1);
      this.lapse.unref();
    }
    this.timer = setTimeout(() => {
      this.renewing = this.renew();
    }, this.renewMs);
    this.timer.unref();
  }

  private tell(): void {
    const held = this.held;
    if (held === this.told || this.stopped) return;
    this.told = held;
    (held ? this.options.onTaken : this.options.onLost)?.();
  }

  /**
   * Stops renewing and gives the lease up, so that another instance takes it at its next try; within a
   * second whatever the database does (a lease not given up expires by itself).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.lapse);
    const release = (async () => {
      await this.renewing;
      if (this.validUntil > performance.now()) await releaseLease(this.sql, this.fence.name, this.fence.holder);
    })().catch(() => {});
    await Promise.race([release, new Promise((resolve) => setTimeout(resolve, STOP_LIMIT_MS).unref())]);
  }
}
