import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { addUsage, usageRows, type UsageDelta, type UsageGrouping, type UsageRow } from '../../db/repositories/usage.js';
import type { SqlTx } from '../../db/unit.js';
import { HOUR_MS, HourlyCounts, type HourlyCountsOptions } from './hourly-counts.js';
import { findPartner } from '../operations/partners.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';
import { STOP_WRITE_LIMIT_MS } from './deferred-writes.js';

/**
 * Cells kept between flushes at most (partner × company × hour), also while the database does not answer;
 * beyond, requests in new cells are not counted (counted in `dropped`, and `onFull` told once).
 */
export const MAX_USAGE_CELLS = 200_000;

interface Cell {
  accepted: number;
  clientErrors: number;
  serverErrors: number;
  rateLimited: number;
  engineMs: number;
}

/**
 * Data requests per partner × company × hour, counted in memory by one instance and added to usage_hours
 * in one batched upsert at least every 10 s (and on close), never on the request path (HourlyCounts). The
 * write never waits for a lock another process holds (see Bookkeeping): when it cannot write, the counts are
 * kept and merged into the next attempt; on close it retries for a bounded time (STOP_WRITE_LIMIT_MS), then
 * what it could not write is reported with its totals. A crash loses what was counted since the last flush, 10 s at most.
 */
export class UsageCounter extends HourlyCounts<Cell, [partnerId: string, companyId: string], UsageDelta> {
  constructor(db: Database, clock: Clock, options: HourlyCountsOptions = {}) {
    super(db, clock, 2, MAX_USAGE_CELLS, options);
  }

  /**
   * One finished data request of an authenticated partner. `companyId` is '' when the request was answered
   * before its company was known (a 429, a refused company); `engineMs` the engine's time, 0 without one.
   */
  record(partnerId: string, companyId: string, status: number, engineMs: number): void {
    const hour = Math.floor(this.clock.now() / HOUR_MS);
    let cell = this.cellAt(hour, partnerId, companyId);
    if (cell === undefined) {
      if (!this.room()) return;
      cell = this.keep({ accepted: 0, clientErrors: 0, serverErrors: 0, rateLimited: 0, engineMs: 0 }, hour, partnerId, companyId);
    }
    if (status < 400) cell.accepted++;
    else if (status < 500) {
      cell.clientErrors++;
      if (status === 429) cell.rateLimited++;
    } else cell.serverErrors++;
    cell.engineMs += engineMs;
  }

  /** What is counted and not written yet, summed: what a failed last write at shutdown loses. */
  totals(): { requests: number; accepted: number; clientErrors: number; serverErrors: number; rateLimited: number; cells: number; partners: number } {
    const sums = { requests: 0, accepted: 0, clientErrors: 0, serverErrors: 0, rateLimited: 0, cells: this.pending, partners: 0 };
    const partners = new Set<string>();
    this.forEachCell((cell, _hour, partnerId) => {
      partners.add(partnerId);
      sums.accepted += cell.accepted;
      sums.clientErrors += cell.clientErrors;
      sums.serverErrors += cell.serverErrors;
      sums.rateLimited += cell.rateLimited;
    });
    sums.requests = sums.accepted + sums.clientErrors + sums.serverErrors;
    sums.partners = partners.size;
    return sums;
  }

  protected merge(known: Cell, cell: Cell): void {
    known.accepted += cell.accepted;
    known.clientErrors += cell.clientErrors;
    known.serverErrors += cell.serverErrors;
    known.rateLimited += cell.rateLimited;
    known.engineMs += cell.engineMs;
  }

  protected delta(cell: Cell, periodStart: Date, partnerId: string, companyId: string): UsageDelta {
    return {
      partnerId,
      companyId,
      periodStart,
      accepted: cell.accepted,
      clientErrors: cell.clientErrors,
      serverErrors: cell.serverErrors,
      rateLimited: cell.rateLimited,
      engineMsSum: Math.round(cell.engineMs * 1000) / 1000,
    };
  }

  protected add(tx: SqlTx, deltas: UsageDelta[]): Promise<void> {
    return addUsage(tx, deltas);
  }
}

export interface UsageReportOptions {
  /** A partner id or name; all partners when absent. */
  partner?: string;
  since: Date;
  by?: Exclude<UsageGrouping, 'partner'>;
  limit: number;
}

/** The usage table summed for the CLI; `since` is rounded down to its hour (hours are the stored unit). */
export async function usageReport(db: Database, options: UsageReportOptions): Promise<UsageRow[]> {
  const partnerId = options.partner === undefined ? undefined : (await findPartner(db.sql, options.partner)).id;
  const since = new Date(Math.floor(options.since.getTime() / HOUR_MS) * HOUR_MS);
  return usageRows(db.sql, { ...(partnerId !== undefined ? { partnerId } : {}), since, by: options.by ?? 'partner', limit: options.limit });
}

/** The usage counter's log lines: the cap reached, writes failing (every 20th after the first). */
export function usageLog(logger: Logger | undefined): Pick<HourlyCountsOptions, 'onFull' | 'onFailure'> {
  return {
    onFull: (cap) =>
      logger?.error(
        { cap },
        `USAGE CAP REACHED: ${cap} usage cells (partner × company × hour) are waiting for the database; requests in new cells are not counted until a write goes through`,
      ),
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) {
        logger?.warn({ err: loggableChain(error), failures }, 'usage counts not written (database busy or unavailable); kept for the next attempt');
      }
    },
  };
}

/** What stopping could not write: lost, said at error level with the totals. */
export function logUsageLost(logger: Logger | undefined, usage: UsageCounter): void {
  const lost = usage.totals();
  const line = `usage counts NOT written at shutdown after retrying for ${STOP_WRITE_LIMIT_MS / 1000} s: ${lost.requests} requests (${lost.accepted} accepted, ${lost.clientErrors} 4xx, ${lost.serverErrors} 5xx) of ${lost.partners} partners are lost`;
  logger?.error({ lost }, line);
}
