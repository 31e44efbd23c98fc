import type { Clock } from '../clock.js';
import type { SqlDatabase } from './sql.js';

export interface ClockOffset {
  /** The database server's clock minus `local`'s, in ms, at the middle of the round trip. */
  offsetMs: number;
  roundTripMs: number;
}

/**
 * How far `local` is from the PostgreSQL server's clock (clock_timestamp: the instant the statement reads
 * it, not the transaction's start). The reading is placed at the middle of the round trip, so the error is
 * at most half of it.
 */
export async function measureClockOffset(sql: SqlDatabase, local: Clock): Promise<ClockOffset> {
  const sentAt = local.now();
  const started = performance.now();
  const [row] = await sql.query<{ now: number | string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now');
  const roundTripMs = performance.now() - started;
  return { offsetMs: Math.round(Number(row!.now) - (sentAt + roundTripMs / 2)), roundTripMs };
}
