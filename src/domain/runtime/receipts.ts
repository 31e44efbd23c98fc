import type { Database } from '../../db/client.js';
import { listenForChanges, type ChangeListener } from '../../db/listen.js';
import { INSTANCES_CHANNEL, listInstances, type InstanceRow } from '../../db/repositories/instances.js';
import { currentRevision } from '../../db/repositories/revision.js';
import { AppError } from '../../errors.js';
import { isDone, isStale, servingUntil } from './instances.js';

/** How often the wait reads serve_instances: where the database listens, only the fallback behind the NOTIFY. */
const POLL_MS = { listening: 100, polling: 20 } as const;

export interface Receipt {
  /** The revision awaited: the one just committed (on a re-run, the current one). */
  revision: number;
  /**
   * Live instances that applied it, with the time from the commit to their confirmation (as seen here); null
   * on a re-check (`partnerctl receipt`), which does not know when the change committed.
   */
  confirmed: { instanceId: string; host: string; pid: number; afterMs: number | null }[];
  /**
   * Instances that had not applied it when the wait ended and may still be answering: live ones, and stale
   * ones still within their staleness budget, which may be deciding from their last state (one that cannot
   * read the database) until `servingUntil` (their last heartbeat + budget; null without a budget).
   */
  unconfirmed: { instanceId: string; host: string; pid: number; lastSeenAt: Date; servingUntil: Date | null; stale: boolean }[];
  /**
   * Instances whose heartbeat is older than 10 s and whose budget is spent (done serving from their last
   * state at `servingUntil`; null without a budget): listed, never awaited.
   */
  stale: { instanceId: string; host: string; pid: number; lastSeenAt: Date; servingUntil: Date | null }[];
}

/** `--wait` values: 500ms, 3s, 1m (up to 10 minutes). */
export function parseWait(value: string): number {
  const match = /^(\d{1,6})(ms|s|m)$/.exec(value);
  const ms = match ? Number(match[1]) * (match[2] === 'ms' ? 1 : match[2] === 's' ? 1_000 : 60_000) : -1;
  if (!match || ms <= 0 || ms > 600_000) {
    throw new AppError('invalid_argument', `wait must be a duration such as 500ms, 3s or 1m (at most 10m), got '${value.slice(0, 40)}'`, { field: 'wait' });
  }
  return ms;
}

/**
 * Waits for the serve instances to confirm a committed change: opened before the change (so that on
 * PostgreSQL the LISTEN for the instances' announcements is in force when they confirm), then `wait`.
 */
export class ConfirmationWatch {
  private listener: ChangeListener | undefined;
  private wake: (() => void) | undefined;
  /** An announcement arrived while no one was waiting (during a read): read again at once. */
  private announced = false;

  private constructor(private readonly db: Database) {}

  static async open(db: Database): Promise<ConfirmationWatch> {
    const watch = new ConfirmationWatch(db);
    if (db.dialect.listens) {
      watch.listener = await listenForChanges(db.config, { channel: INSTANCES_CHANNEL, onChange: () => watch.notify() });
    }
    return watch;
  }

  private notify(): void {
    if (this.wake) this.wake();
    else this.announced = true;
  }

  /**
   * Waits until every live instance has applied the revision (the current one, or `recheck`'s), or
   * until `waitMs` after `committedAt`. `afterMs` is measured from `committedAt` to when this process saw
   * the confirmation, so the instance refused the credential at or before it; a re-check has none.
   */
  async wait(committedAt: number, waitMs: number, recheck?: number): Promise<Receipt> {
    const revision = recheck ?? (await currentRevision(this.db.sql)) ?? 0;
    const seen = new Map<string, number>();
    const deadline = committedAt + waitMs;
    let rows: InstanceRow[] = [];
    const check = async (): Promise<boolean> => {
      this.announced = false;
      rows = await listInstances(this.db.sql);
      const now = this.db.clock.now();
      let done = true;
      for (const row of rows) {
        // A stale instance past its budget is never awaited, nor counted as confirming (it may be dead); one
        // within it may still be answering from what it last confirmed, so it is not done.
        if (isDone(row, now)) continue;
        if (row.appliedRevision !== null && row.appliedRevision >= revision) {
          if (!seen.has(row.instanceId)) seen.set(row.instanceId, Math.max(0, now - committedAt));
        } else {
          done = false;
        }
      }
      return done;
    };
    const pollMs = this.db.dialect.listens ? POLL_MS.listening : POLL_MS.polling;
    while (!(await check()) && this.db.clock.now() < deadline) {
      if (this.announced) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, Math.min(pollMs, deadline - this.db.clock.now())));
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.wake = done;
      });
      this.wake = undefined;
    }
    const now = this.db.clock.now();
    const receipt: Receipt = { revision, confirmed: [], unconfirmed: [], stale: [] };
    for (const row of rows) {
      const who = { instanceId: row.instanceId, host: row.host, pid: row.pid };
      const afterMs = seen.get(row.instanceId);
      if (afterMs !== undefined) receipt.confirmed.push({ ...who, afterMs: recheck === undefined ? afterMs : null });
      else if (isDone(row, now)) receipt.stale.push({ ...who, lastSeenAt: row.lastSeenAt, servingUntil: servingUntil(row) });
      else receipt.unconfirmed.push({ ...who, lastSeenAt: row.lastSeenAt, servingUntil: servingUntil(row), stale: isStale(row.lastSeenAt, now) });
    }
    receipt.confirmed.sort((a, b) => (a.afterMs ?? 0) - (b.afterMs ?? 0));
    return receipt;
  }

  async close(): Promise<void> {
    await this.listener?.close();
  }
}


/** A change id (`partnerctl receipt <change-id>`): the revision a change committed, as its receipt names it. */
export function parseChangeId(value: string): number {
  if (!/^[1-9]\d{0,14}$/.test(value)) {
    throw new AppError('invalid_argument', `the change id must be the number a receipt names (change_id in JSON), got '${value.slice(0, 40)}'`, { field: 'change_id' });
  }
  return Number(value);
}

/**
 * The receipt of an earlier change, read again (changes nothing): waits up to `waitMs` for every live
 * instance to have applied its revision. A revision the database has not reached is no change of it.
 */
export async function recheckReceipt(db: Database, revision: number, waitMs: number): Promise<Receipt> {
  const current = (await currentRevision(db.sql)) ?? 0;
  if (revision > current) {
    throw new AppError('not_found', `no change ${revision}: the database is at revision ${current}`, { field: 'change_id' });
  }
  const watch = await ConfirmationWatch.open(db);
  try {
    return await watch.wait(db.clock.now(), waitMs, revision);
  } finally {
    await watch.close();
  }
}
