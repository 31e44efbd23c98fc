import type { Clock } from '../clock.js';
import type { Database } from '../db/client.js';
import { addUsage, usageRows, type UsageDelta, type UsageGrouping, type UsageRow } from '../db/repositories/usage.js';
import { DeferredWrites, type OnWriteFailure } from './deferred-writes.js';
import { findPartner } from './partners.js';

const HOUR_MS = 3_600_000;
const USAGE_FLUSH_INTERVAL_MS = 10_000;
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

/** hour -> partner -> company -> counts. Nested maps: a request allocates nothing once its cell exists. */
type Hours = Map<number, Map<string, Map<string, Cell>>>;

/**
 * Data requests per partner × company × hour, counted in memory by one instance and added to usage_hours
 * in one batched upsert at least every 10 s (and on close), never on the request path. The write never
 * waits for a lock another process holds (see Bookkeeping): when it cannot write, the counts are kept and
 * merged into the next attempt; on close it retries for a bounded time (STOP_WRITE_LIMIT_MS), then what it
 * could not write is reported with its totals. A crash loses what was counted since the last flush, 10 s at most.
 */
export class UsageCounter extends DeferredWrites {
  private hours: Hours = new Map();
  private cells = 0;
  private interval: NodeJS.Timeout | undefined;
  /** Requests not counted because too many cells were pending (a database down for long). */
  dropped = 0;
  /** `dropped` when the cap was last reported (told again after a write makes room and it fills up again). */
  private droppedReported = 0;

  constructor(
    db: Database,
    clock: Clock,
    private readonly options: { intervalMs?: number; onFailure?: OnWriteFailure; onFull?: (cap: number) => void } = {},
  ) {
    super(db, clock, options.onFailure);
  }

  start(): void {
    if (this.interval || this.stopped) return;
    this.interval = setInterval(() => void this.flush(), this.options.intervalMs ?? USAGE_FLUSH_INTERVAL_MS);
    this.interval.unref();
  }

  /**
   * One finished data request of an authenticated partner. `companyId` is '' when the request was answered
   * before its company was known (a 429, a refused company); `engineMs` the engine's time, 0 without one.
   */
  record(partnerId: string, companyId: string, status: number, engineMs: number): void {
    const companies = this.companiesOf(Math.floor(this.clock.now() / HOUR_MS), partnerId);
    let cell = companies.get(companyId);
    if (cell === undefined) {
      if (this.cells >= MAX_USAGE_CELLS) {
        if (this.dropped++ === this.droppedReported) this.options.onFull?.(MAX_USAGE_CELLS);
        return;
      }
      cell = { accepted: 0, clientErrors: 0, serverErrors: 0, rateLimited: 0, engineMs: 0 };
      companies.set(companyId, cell);
      this.cells++;
    }
    if (status < 400) cell.accepted++;
    else if (status < 500) {
      cell.clientErrors++;
      if (status === 429) cell.rateLimited++;
    } else cell.serverErrors++;
    cell.engineMs += engineMs;
  }

  get pending(): number {
    return this.cells;
  }

  /** What is counted and not written yet, summed: what a failed last write at shutdown loses. */
  totals(): { requests: number; accepted: number; clientErrors: number; serverErrors: number; rateLimited: number; cells: number; partners: number } {
    const sums = { requests: 0, accepted: 0, clientErrors: 0, serverErrors: 0, rateLimited: 0, cells: this.cells, partners: 0 };
    const partners = new Set<string>();
    for (const byPartner of this.hours.values()) {
      for (const [partnerId, companies] of byPartner) {
        partners.add(partnerId);
        for (const cell of companies.values()) {
          sums.accepted += cell.accepted;
          sums.clientErrors += cell.clientErrors;
          sums.serverErrors += cell.serverErrors;
          sums.rateLimited += cell.rateLimited;
        }
      }
    }
    sums.requests = sums.accepted + sums.clientErrors + sums.serverErrors;
    sums.partners = partners.size;
    return sums;
  }

  protected override cancelTimer(): void {
    super.cancelTimer();
    clearInterval(this.interval);
    this.interval = undefined;
  }

  protected async writeOnce(): Promise<boolean> {
    if (this.cells === 0) return true;
    const batch = this.hours;
    this.hours = new Map();
    this.cells = 0;
    const deltas: UsageDelta[] = [];
    for (const [hour, partners] of batch) {
      const periodStart = new Date(hour * HOUR_MS);
      for (const [partnerId, companies] of partners) {
        for (const [companyId, cell] of companies) {
          deltas.push({
            partnerId,
            companyId,
            periodStart,
            accepted: cell.accepted,
            clientErrors: cell.clientErrors,
            serverErrors: cell.serverErrors,
            rateLimited: cell.rateLimited,
            engineMsSum: Math.round(cell.engineMs * 1000) / 1000,
          });
        }
      }
    }
    if (await this.write((tx) => addUsage(tx, deltas))) {
      this.droppedReported = this.dropped;
      return true;
    }
    // Merge the batch back into what was counted meanwhile; the next flush tries again.
    for (const [hour, partners] of batch) {
      for (const [partnerId, companies] of partners) {
        for (const [companyId, cell] of companies) this.mergeBack(hour, partnerId, companyId, cell);
      }
    }
    return false;
  }

  /** The partner's cells of that hour, made when missing. */
  private companiesOf(hour: number, partnerId: string): Map<string, Cell> {
    let partners = this.hours.get(hour);
    if (partners === undefined) {
      partners = new Map();
      this.hours.set(hour, partners);
    }
    let companies = partners.get(partnerId);
    if (companies === undefined) {
      companies = new Map();
      partners.set(partnerId, companies);
    }
    return companies;
  }

  private mergeBack(hour: number, partnerId: string, companyId: string, cell: Cell): void {
    const companies = this.companiesOf(hour, partnerId);
    const known = companies.get(companyId);
    if (!known) {
      companies.set(companyId, cell);
      this.cells++;
      return;
    }
    known.accepted += cell.accepted;
    known.clientErrors += cell.clientErrors;
    known.serverErrors += cell.serverErrors;
    known.rateLimited += cell.rateLimited;
    known.engineMs += cell.engineMs;
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
