import type { Clock } from '../clock.js';
import type { SqlDatabase } from './sql.js';

export interface ClockOffset {
  /** The database server's clock minus `local`'s, in whole ms, at the middle of the round trip. */
  offsetMs: number;
  roundTripMs: number;
}

/** A round trip longer than this is measured once more (the first may have opened the connection). */
const SLOW_ROUND_TRIP_MS = 10;

/**
 * How far `local` is from the PostgreSQL server's clock (clock_timestamp: the instant the statement reads
 * it, not the transaction's start). The reading is placed at the middle of the round trip, so the error is
 * at most half of it; of two readings the one with the shorter round trip is kept.
 */
export async function measureClockOffset(sql: SqlDatabase, local: Clock): Promise<ClockOffset> {
  const first = await readOnce(sql, local);
  if (first.roundTripMs <= SLOW_ROUND_TRIP_MS) return first;
  const second = await readOnce(sql, local);
  return second.roundTripMs < first.roundTripMs ? second : first;
}

async function readOnce(sql: SqlDatabase, local: Clock): Promise<ClockOffset> {
  const sentAt = local.now();
  const started = performance.now();
  const [row] = await sql.query<{ now: number | string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now');
  const roundTripMs = performance.now() - started;
  return { offsetMs: Math.round(Number(row!.now) - (sentAt + roundTripMs / 2)), roundTripMs };
}
