// The receipt of a command that revokes or refuses credentials: after its commit, wait until every live
// `serve` instance has applied the new revision, then say who confirmed, how fast, and who did not.
import type { Database } from '../db/client.js';
import type { ConfirmationWatch, Receipt } from '../domain/runtime/receipts.js';
import { EXIT } from '../errors.js';
import { defineOptions, type OptionsOf } from './options.js';
import type { Output } from './output.js';
import { say } from './say.js';

export const WAIT_OPTIONS = defineOptions([
  {
    flags: '--wait <duration>',
    description: 'after committing, wait this long for every live serve instance to confirm (500ms, 3s, 1m); exit 6 when one does not',
    default: '3s',
  },
  { flags: '--no-wait', description: 'commit and exit without waiting for the serve instances (no receipt)' },
]);

/** The --wait duration, or false with --no-wait. */
export type WaitOptions = OptionsOf<typeof WAIT_OPTIONS>;

export interface Waiting {
  /** Waits for the instances (the change committed at `committedAt`, epoch ms). */
  finish(committedAt: number): Promise<Receipt>;
  /** The change failed: stop listening. */
  abandon(): Promise<void>;
}

/** Checks --wait (bad input fails before anything changes); null with --no-wait. */
export async function parseWaitOption(options: WaitOptions): Promise<number | null> {
  if (options.wait === false) return null;
  const { parseWait } = await import('../domain/runtime/receipts.js');
  return parseWait(options.wait);
}

/** Opens the watch before the change (PostgreSQL: the LISTEN is in force before any instance confirms). */
export async function startWaiting(db: Database, waitMs: number | null): Promise<Waiting | null> {
  if (waitMs === null) return null;
  const { ConfirmationWatch } = await import('../domain/runtime/receipts.js');
  const watch: ConfirmationWatch = await ConfirmationWatch.open(db);
  return {
    finish: async (committedAt) => {
      try {
        return await watch.wait(committedAt, waitMs);
      } finally {
        await watch.close();
      }
    },
    abandon: () => watch.close(),
  };
}

/** With --debug, the instant every after_ms counts from (epoch ms), on stderr. */
export function noteCommit(out: Output, debug: boolean | undefined, committedAt: number): void {
  if (debug) out.note(say`partnerctl: debug: committed at ${new Date(committedAt).toISOString()} (${committedAt} ms); after_ms counts from here`);
}

/** Runs the change with the watch open; returns its result, the receipt (null with --no-wait). */
export async function withReceipt<T>(
  db: Database,
  waitMs: number | null,
  change: () => Promise<T>,
  out?: Output,
  debug?: boolean,
): Promise<{ result: T; receipt: Receipt | null }> {
  const waiting = await startWaiting(db, waitMs);
  let result: T;
  try {
    result = await change();
  } catch (error) {
    await waiting?.abandon();
    throw error;
  }
  const committedAt = db.clock.now();
  if (out) noteCommit(out, debug, committedAt);
  return { result, receipt: waiting ? await waiting.finish(committedAt) : null };
}

/**
 * The receipt in a command's JSON: `{ change_id, receipt: … }`, or nothing with --no-wait. The change id is
 * the revision awaited: `partnerctl receipt <change-id>` re-checks it without changing anything.
 */
export function receiptJson(receipt: Receipt | null): { change_id?: number; receipt?: object } {
  if (receipt === null) return {};
  return {
    change_id: receipt.revision,
    receipt: {
      revision: receipt.revision,
      confirmed: receipt.confirmed.map((c) => ({ instance_id: c.instanceId, host: c.host, pid: c.pid, after_ms: c.afterMs })),
      unconfirmed: receipt.unconfirmed.map((u) => ({
        instance_id: u.instanceId,
        host: u.host,
        pid: u.pid,
        last_seen_at: u.lastSeenAt.toISOString(),
        serving_until: u.servingUntil?.toISOString() ?? null,
      })),
    },
  };
}

/**
 * Prints the receipt (text: one line per instance) and, when a live instance did not confirm, names it on
 * stderr; returns the exit code (6 `not_confirmed`, else undefined for 0). With --json the receipt is
 * already in the command's object.
 */
export function reportReceipt(out: Output, receipt: Receipt | null, waitText: string): number | undefined {
  if (receipt === null) return undefined;
  if (!out.json) {
    const live = receipt.confirmed.length + receipt.unconfirmed.length;
    if (live === 0) out.line(say`No live serve instance is registered: nothing to confirm (revision ${receipt.revision}).`);
    else out.line(say`Serve instances (revision ${receipt.revision}):`);
    for (const c of receipt.confirmed) {
      out.line(c.afterMs === null ? say`  ${c.instanceId}  ${c.host}  pid ${c.pid}  applied revision ${receipt.revision}` : say`  ${c.instanceId}  ${c.host}  pid ${c.pid}  refusing since +${c.afterMs} ms`);
    }
    for (const u of receipt.unconfirmed) {
      out.line(say`  ${u.instanceId}  ${u.host}  pid ${u.pid}  NOT CONFIRMED within ${waitText} (last seen ${u.lastSeenAt.toISOString()}${servingUntilText(u.servingUntil)})`);
    }
    for (const s of receipt.stale) {
      const done = s.servingUntil === null ? '' : `; served from its last state until ${s.servingUntil.toISOString()} at the latest`;
      out.line(say`  ${s.instanceId}  ${s.host}  pid ${s.pid}  stale, not awaited (last seen ${s.lastSeenAt.toISOString()}${done})`);
    }
  }
  if (receipt.unconfirmed.length === 0) return undefined;
  const names = receipt.unconfirmed.map((u) => `${u.instanceId} (${u.host}, pid ${u.pid}${servingUntilText(u.servingUntil)})`).join(', ');
  out.note(
    say`partnerctl: not_confirmed: the change is committed, but ${receipt.unconfirmed.length} serve instance(s) did not confirm revision ${receipt.revision} within ${waitText}: ${names} (hint: re-check this change, changing nothing: ${recheckCommand(receipt.revision)}; 'partnerctl instances' lists them; an instance that is gone for good: 'partnerctl instances --forget ID')`,
  );
  return EXIT.notConfirmed;
}

/** The read-only re-check of a change, as every exit 6 names it. */
function recheckCommand(changeId: number): string {
  return `'partnerctl receipt ${changeId} --wait 30s'`;
}

/** An instance that cannot read the database may answer from its last state until then (its budget). */
function servingUntilText(until: Date | null): string {
  return until === null ? '' : `; may serve from its last state until ${until.toISOString()}`;
}
