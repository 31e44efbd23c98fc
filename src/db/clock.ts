import type { Clock, ClockReading } from '../clock.js';
import type { SqlDatabase } from './sql.js';

export interface ClockMeasurement {
  /** The database server's instant and this host's two clocks, all at the middle of the round trip. */
  reading: ClockReading;
  /** The database server's clock minus this host's wall clock, in whole ms. */
  offsetMs: number;
  roundTripMs: number;
}

/** A round trip longer than this is measured once more (the first may have opened the connection). */
const SLOW_ROUND_TRIP_MS = 10;

/**
 * The PostgreSQL server's clock (clock_timestamp: the instant the statement reads it, not the transaction's
 * start), read against this host's monotonic clock. The reading is placed at the middle of the round trip
 * (measured on the monotonic clock), so its error is at most half of it; of two readings the one with the
 * shorter round trip is kept.
 */
export async function measureClock(sql: SqlDatabase, wall: Clock, monotonic: () => number): Promise<ClockMeasurement> {
  const first = await readOnce(sql, wall, monotonic);
  if (first.roundTripMs <= SLOW_ROUND_TRIP_MS) return first;
  const second = await readOnce(sql, wall, monotonic);
  return second.roundTripMs < first.roundTripMs ? second : first;
}

async function readOnce(sql: SqlDatabase, wall: Clock, monotonic: () => number): Promise<ClockMeasurement> {
  const wallSent = wall.now();
  const started = monotonic();
  const [row] = await sql.query<{ now: number | string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now');
  const roundTripMs = monotonic() - started;
  const at = Number(row!.now);
  const reading = { at, monotonic: started + roundTripMs / 2, wall: wallSent + roundTripMs / 2 };
  return { reading, offsetMs: Math.round(at - reading.wall), roundTripMs };
}
