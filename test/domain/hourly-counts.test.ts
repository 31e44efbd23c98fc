import Sqlite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { addUsage, type UsageDelta } from '../../src/db/repositories/usage.js';
import { toDate } from '../../src/db/sql.js';
import type { SqlTx } from '../../src/db/unit.js';
import type { Database } from '../../src/db/client.js';
import { ExposureCounter } from '../../src/domain/runtime/exposure-counts.js';
import { HourlyCounts } from '../../src/domain/runtime/hourly-counts.js';
import { useMigratedDatabase } from './fixtures.js';

const HOUR = Date.UTC(2026, 10, 26, 10);

/** The shared mechanism with a cap of two cells, writing its counts as usage rows (accepted). */
class Tally extends HourlyCounts<{ n: number }, [partnerId: string, companyId: string], UsageDelta> {
  constructor(db: Database, now: () => number, onFull: (cap: number) => void) {
    super(db, { now }, 2, 2, { onFull });
  }

  record(partnerId: string, companyId: string): void {
    const hour = Math.floor(this.clock.now() / 3_600_000);
    let cell = this.cellAt(hour, partnerId, companyId);
    if (cell === undefined) {
      if (!this.room()) return;
      cell = this.keep({ n: 0 }, hour, partnerId, companyId);
    }
    cell.n++;
  }

  protected merge(known: { n: number }, cell: { n: number }): void {
    known.n += cell.n;
  }

  protected delta(cell: { n: number }, periodStart: Date, partnerId: string, companyId: string): UsageDelta {
    return { partnerId, companyId, periodStart, accepted: cell.n, clientErrors: 0, serverErrors: 0, rateLimited: 0, engineMsSum: 0 };
  }

  protected add(tx: SqlTx, deltas: UsageDelta[]): Promise<void> {
    return addUsage(tx, deltas);
  }
}

describe('hourly counts (usage and exposure counts)', () => {
  const ctx = useMigratedDatabase('sqlite');

  /** Another process's write lock (BEGIN IMMEDIATE), held until the returned function is called. */
  function holdWriteLock(): () => void {
    const other = new Sqlite(ctx.backend.url.replace(/^file:/, ''));
    other.exec('BEGIN IMMEDIATE');
    return () => {
      other.exec('COMMIT');
      other.close();
    };
  }

  it('keep at most their cap of cells, count what they drop, tell onFull once per fill, and merge a failed batch back', async () => {
    const full: number[] = [];
    const tally = new Tally(ctx.db, () => HOUR, (cap) => full.push(cap));
    tally.record('ptn_tally', 'a');
    tally.record('ptn_tally', 'b');
    tally.record('ptn_tally', 'c');
    tally.record('ptn_tally', 'd');
    tally.record('ptn_tally', 'a');
    expect([tally.pending, tally.dropped, full]).toEqual([2, 2, [2]]);

    const release = holdWriteLock();
    const failed = tally.flush();
    // Counted while the batch is out: a cell of the batch and a new one, merged with it when the write fails.
    tally.record('ptn_tally', 'a');
    tally.record('ptn_tally', 'e');
    expect(await failed).toBe(false);
    expect(tally.failures).toBe(1);
    expect(tally.pending).toBe(3);
    // The failed write made no room: the cap is not told again.
    tally.record('ptn_tally', 'f');
    expect([tally.dropped, full]).toEqual([3, [2]]);
    release();

    expect(await tally.flush()).toBe(true);
    expect(tally.pending).toBe(0);
    const rows = await ctx.db.sql.query<{ company_id: string; accepted: number }>(
      "SELECT company_id, accepted FROM usage_hours WHERE partner_id = 'ptn_tally' ORDER BY company_id",
    );
    expect(rows.map((row) => [row.company_id, Number(row.accepted)])).toEqual([
      ['a', 3],
      ['b', 1],
      ['e', 1],
    ]);
    // A write made room: filling up again is told again.
    for (const company of ['g', 'h', 'i']) tally.record('ptn_tally', company);
    expect([tally.dropped, full]).toEqual([4, [2, 2]]);
    expect(await tally.stop(100)).toBe(true);
  });

  it('exposure counts merge a failed batch back per token, company and address, keeping the first and last instants', async () => {
    let now = HOUR + 60_000;
    const exposure = new ExposureCounter(ctx.db, { now: () => now });
    exposure.record('ptn_x', 'kp_x', 'tok_x', 'co_1', '192.0.2.1', 200);
    exposure.record('ptn_x', 'kp_x', 'tok_x', 'co_1', '192.0.2.2', 404);
    const release = holdWriteLock();
    const failed = exposure.flush();
    now += 60_000;
    exposure.record('ptn_x', 'kp_x', 'tok_x', 'co_1', '192.0.2.1', 503);
    exposure.record('ptn_x', 'kp_x', 'tok_x', 'co_2', '192.0.2.1', 200);
    expect(await failed).toBe(false);
    expect(exposure.pending).toBe(3);
    release();

    expect(await exposure.flush()).toBe(true);
    const rows = await ctx.db.sql.query<Record<string, unknown>>(
      "SELECT key_pair_id, company_id, client_address, accepted, client_errors, server_errors, first_at, last_at FROM exposure_hours WHERE token_id = 'tok_x' ORDER BY company_id, client_address",
    );
    expect(
      rows.map((row) => [
        row.key_pair_id,
        row.company_id,
        row.client_address,
        Number(row.accepted),
        Number(row.client_errors),
        Number(row.server_errors),
        toDate(row.first_at)!.getTime() - HOUR,
        toDate(row.last_at)!.getTime() - HOUR,
      ]),
    ).toEqual([
      ['kp_x', 'co_1', '192.0.2.1', 1, 0, 1, 60_000, 120_000],
      ['kp_x', 'co_1', '192.0.2.2', 0, 1, 0, 60_000, 60_000],
      ['kp_x', 'co_2', '192.0.2.1', 1, 0, 0, 120_000, 120_000],
    ]);
  });
});
