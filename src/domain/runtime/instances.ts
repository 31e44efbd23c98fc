import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { announceInstance, beatInstance, listInstances, removeInstance, type InstanceRow } from '../../db/repositories/instances.js';
import { liveLease } from '../../db/repositories/leases.js';
import { currentRevision } from '../../db/repositories/revision.js';
import { AppError } from '../../errors.js';
import { beyondTolerance } from './clock-sync.js';
import { DeferredWrites, type OnWriteFailure } from './deferred-writes.js';
import { runUnit, type Actor } from '../operations/transactions.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';
import { beforeDeadline } from '../../deadline.js';

/** A heartbeat at least this often (the bound is 2 s; a failed beat is retried sooner). */
export const HEARTBEAT_MS = 1_000;
/** An instance whose heartbeat is older than this is stale: listed, never awaited. */
export const STALE_AFTER_MS = 10_000;
/** A failed write is retried after 50 ms, doubling up to 1 s. */
const RETRY_MS = 50;
const RETRY_MAX_MS = 1_000;
/** How long shutdown keeps trying to remove the row before it gives up (loudly). */
export const REMOVE_FOR_MS = 2_000;

export function newInstanceId(): string {
  return `srv_${randomBytes(8).toString('hex')}`;
}

export function isStale(lastSeenAt: Date, now: number): boolean {
  return now - lastSeenAt.getTime() > STALE_AFTER_MS;
}

/**
 * The instant until which an instance may still decide requests from the state it last confirmed, should it
 * have lost the database: its last heartbeat + its staleness budget (the instance stops by then: see
 * AccessState). Null with no budget (it stops past the 1 s staleness bound).
 */
export function servingUntil(row: Pick<InstanceRow, 'lastSeenAt' | 'staleBudgetMs'>): Date | null {
  return row.staleBudgetMs > 0 ? new Date(row.lastSeenAt.getTime() + row.staleBudgetMs) : null;
}

/**
 * Stale and done: its heartbeat is older than 10 s and its budget is spent, so it can no longer answer from
 * old state. Receipts never wait for such an instance; one that is stale but within its budget may still be
 * serving what it last confirmed, and is not counted as done.
 */
export function isDone(row: Pick<InstanceRow, 'lastSeenAt' | 'staleBudgetMs'>, now: number): boolean {
  return now - row.lastSeenAt.getTime() > Math.max(STALE_AFTER_MS, row.staleBudgetMs);
}

export interface RegistryEvents {
  onFailure?: OnWriteFailure;
  /** Heartbeats have failed for longer than the stale threshold: commands no longer wait for this instance. */
  onStale?: (error: unknown) => void;
  /** Shutdown could not remove the row: the instance shows stale after 10 s instead of leaving at once. */
  onGaveUp?: (error: unknown) => void;
  /** A heartbeat was written with this `last_seen_at` (what receipts count the budget from). */
  onBeat?: (lastSeenAt: Date) => void;
}

/**
 * This serve instance's row in `serve_instances`: written when it starts listening, refreshed every second
 * (the heartbeat) and at once whenever the applied revision moves, removed when it stops. Every write is
 * off the request path and never waits for a lock (DeferredWrites): a busy SQLite file delays the row,
 * never a request. The applied revision is read from the access state at each write, so it is always one
 * the caches already reflect.
 */
export class InstanceRegistry extends DeferredWrites {
  readonly instanceId = newInstanceId();
  readonly host = hostname();
  readonly pid = process.pid;
  readonly startedAt: Date;
  private address: string | null = null;
  /** The applied revision last written (undefined: nothing written yet). */
  private written: number | null | undefined;
  private due = false;
  private lastError: unknown;
  private failingSince: number | undefined;
  private reportedStale = false;

  constructor(
    db: Database,
    clock: Clock,
    private readonly version: string,
    private readonly appliedRevision: () => number | null,
    /** This host's clock minus the database server's (ClockSync), shown by `partnerctl instances`; null: not measured. */
    private readonly clockOffsetMs: () => number | null,
    private readonly events: RegistryEvents = {},
    /** PUBLIC_API_STALE_BUDGET as this instance applies it (0 on SQLite): receipts read it from the row. */
    private readonly staleBudgetMs = 0,
  ) {
    super(db, clock, (error, failures) => {
      this.lastError = error;
      events.onFailure?.(error, failures);
    });
    this.startedAt = new Date(clock.now());
  }

  /** Registers the instance (at its listening address) and starts the heartbeat. */
  start(address: string): void {
    this.address = address;
    this.due = true;
    this.schedule(0, { preempt: true });
  }

  /** The applied revision moved: write it now (off the caller's path). */
  revisionApplied(): void {
    if (this.address === null || this.stopped) return;
    this.due = true;
    this.schedule(0, { preempt: true });
  }

  get pending(): number {
    return this.due ? 1 : 0;
  }

  protected async writeOnce(): Promise<boolean> {
    if (this.address === null) return true;
    const applied = this.appliedRevision();
    const row: InstanceRow = {
      instanceId: this.instanceId,
      host: this.host,
      pid: this.pid,
      version: this.version,
      address: this.address,
      startedAt: this.startedAt,
      lastSeenAt: new Date(this.clock.now()),
      appliedRevision: applied,
      staleBudgetMs: this.staleBudgetMs,
      clockOffsetMs: withinColumn(this.clockOffsetMs()),
    };
    this.due = false;
    const moved = applied !== this.written;
    const ok = await this.write((tx) => beatInstance(tx, row));
    if (ok) {
      this.written = applied;
      this.events.onBeat?.(row.lastSeenAt);
      if (moved) await announceInstance(this.db.sql, this.instanceId).catch(() => {});
      this.failingSince = undefined;
      this.reportedStale = false;
    } else {
      this.due = true;
      const now = this.clock.now();
      this.failingSince ??= now;
      if (!this.reportedStale && now - this.failingSince > STALE_AFTER_MS) {
        this.reportedStale = true;
        this.events.onStale?.(this.lastError);
      }
    }
    if (this.stopped) return ok;
    // A revision that moved during the write, or a failed write, goes again at once (a little later after
    // a failure); otherwise the next heartbeat.
    const retry = Math.min(RETRY_MAX_MS, RETRY_MS * 2 ** Math.min(5, this.failures - 1));
    if (!ok) this.schedule(retry, { preempt: true });
    else this.schedule(this.appliedRevision() !== this.written ? 0 : HEARTBEAT_MS, { preempt: true });
    return ok;
  }

  /**
   * Stops the heartbeat and removes the row, retrying a busy database until `deadline` (a performance.now()
   * instant; 2 s by default); past it, it gives up (onGaveUp) and the row is left to go stale. Safe to call twice.
   */
  override async stop(deadline = performance.now() + REMOVE_FOR_MS): Promise<boolean> {
    if (this.stopped) return true;
    // One last heartbeat at most: a write under way may end past the deadline, so each is raced against it.
    if ((await beforeDeadline<boolean | undefined>(super.stop(0).catch(() => false), deadline, undefined)) === undefined) return this.gaveUp();
    if (this.address === null) return true;
    for (;;) {
      if (await beforeDeadline<unknown>(this.write((tx) => removeInstance(tx, this.instanceId).then(() => undefined)), deadline, undefined)) return true;
      if (performance.now() + RETRY_MS * 2 > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 2));
    }
    return this.gaveUp();
  }

  private gaveUp(): false {
    this.events.onGaveUp?.(this.lastError);
    return false;
  }
}

export interface InstanceStatus extends InstanceRow {
  stale: boolean;
  /** Its clock is beyond the tolerance from the database server's: it mints no token. */
  clockSkewed: boolean;
  /** Live (or stale but within its budget) and not yet at the database's current revision. */
  behind: boolean;
  /**
   * Stale but within its budget: it may still be answering from its last state until `servingUntil`
   * (receipts do not count it as done). False when live, or done.
   */
  mayServe: boolean;
  /** Its last heartbeat + its budget (null: no budget). */
  servingUntil: Date | null;
}

/**
 * Who delivers webhooks (PostgreSQL: one instance at a time, under a lease): the live lease's holder, the
 * registered instance it is when it is one (a `webhooks deliver` run is not), and until when it holds it.
 * Null on SQLite, where every instance delivers under its claims.
 */
export interface WebhookDelivererStatus {
  holder: string | null;
  instanceId: string | null;
  heldUntil: Date | null;
}

/** Every registered instance against the database's current revision, and who delivers webhooks (`partnerctl instances`). */
export async function instanceReport(db: Database): Promise<{ revision: number; instances: InstanceStatus[]; webhookDelivery: WebhookDelivererStatus | null }> {
  const revision = (await currentRevision(db.sql)) ?? 0;
  const rows = await listInstances(db.sql);
  const now = db.clock.now();
  const lease = db.dialect.hasLeases ? await liveLease(db.sql, 'webhook_delivery') : undefined;
  const webhookDelivery =
    lease === undefined
      ? null
      : {
          holder: lease?.holder ?? null,
          instanceId: rows.find((row) => row.instanceId === lease?.holder)?.instanceId ?? null,
          heldUntil: lease?.expiresAt ?? null,
        };
  return {
    revision,
    webhookDelivery,
    instances: rows.map((row) => {
      const stale = isStale(row.lastSeenAt, now);
      const mayServe = stale && !isDone(row, now);
      return {
        ...row,
        stale,
        clockSkewed: beyondTolerance(row.clockOffsetMs),
        behind: (!stale || mayServe) && (row.appliedRevision === null || row.appliedRevision < revision),
        mayServe,
        servingUntil: servingUntil(row),
      };
    }),
  };
}

/**
 * `instances --forget`: the operator says an instance is gone for good (a crashed host), so no later
 * receipt waits for it. Its row is removed, audited; an instance that is in fact alive writes it again with
 * its next heartbeat (and then confirms like any other).
 */
export async function forgetInstance(db: Database, who: Actor, instanceId: string): Promise<InstanceRow> {
  return runUnit(db, who, async (unit) => {
    const row = (await listInstances(unit.tx)).find((candidate) => candidate.instanceId === instanceId);
    if (row === undefined) throw new AppError('not_found', `no serve instance ${instanceId} is registered`, { field: 'instanceId' });
    await removeInstance(unit.tx, instanceId);
    unit.audit({
      action: 'instance.forgotten',
      details: { instance_id: row.instanceId, host: row.host, pid: row.pid, last_seen_at: row.lastSeenAt.toISOString(), stale_budget_ms: row.staleBudgetMs },
    });
    return row;
  });
}

const INT32_MAX = 2_147_483_647;

/** The column is a 32-bit integer: an offset beyond ±24.8 days is written as the limit (skewed all the same). */
function withinColumn(offsetMs: number | null): number | null {
  return offsetMs === null ? null : Math.max(-INT32_MAX, Math.min(INT32_MAX, Math.round(offsetMs)));
}

/** The registry's log lines: heartbeats failing (every 20th after the first), the instance stale, the row left behind. */
export function registryLog(logger: Logger | undefined): Pick<RegistryEvents, 'onFailure' | 'onStale' | 'onGaveUp'> {
  return {
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) {
        logger?.warn({ err: loggableChain(error), failures }, 'instance heartbeat not written (database busy or unavailable); retrying');
      }
    },
    onStale: (error) =>
      logger?.error(
        { err: loggableChain(error) },
        'INSTANCE STALE: no heartbeat written for over 10 s; receipts no longer wait for this instance (still retrying)',
      ),
    onGaveUp: (error) =>
      logger?.error(
        { err: loggableChain(error) },
        'INSTANCE ROW NOT REMOVED: the database did not take the removal within 2 s; the list of instances shows this one stale after 10 s',
      ),
  };
}
