// The leases table: who runs a task that one instance runs at a time, until when. PostgreSQL only (on SQLite
// every instance delivers, under its claims). Every instant is the database's own clock, never a host's:
// instances whose clocks disagree still agree on whether a lease has expired.
import { toDate } from '../sql.js';
import type { Queryable } from '../unit.js';

/** The database's current instant, as the TIMESTAMP(3) column holds it (UTC). */
const DATABASE_NOW = "(clock_timestamp() AT TIME ZONE 'UTC')";

/**
 * Takes the lease for `ttlMs` from now when it is free or expired, or renews it when `holder` holds it.
 * True when `holder` holds it now; false when another holder's lease has not expired.
 */
export async function takeLease(q: Queryable, name: string, holder: string, ttlMs: number): Promise<boolean> {
  const rows = await q.query(
    `INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, ${DATABASE_NOW} + $3::int * interval '1 millisecond')
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
      WHERE leases.holder = excluded.holder OR leases.expires_at <= ${DATABASE_NOW}
     RETURNING holder`,
    [name, holder, Math.round(ttlMs)],
  );
  return rows.length === 1;
}

/** The holder of a lease that has not expired by the database's clock, and until when; null when none. */
export async function liveLease(q: Queryable, name: string): Promise<{ holder: string; expiresAt: Date } | null> {
  const [row] = await q.query<{ holder: string; expires_at: unknown }>(
    `SELECT holder, expires_at FROM leases WHERE name = $1 AND expires_at > ${DATABASE_NOW}`,
    [name],
  );
  return row ? { holder: row.holder, expiresAt: toDate(row.expires_at)! } : null;
}

/** Gives the lease up (at shutdown), so that another instance takes it at its next try. */
export async function releaseLease(q: Queryable, name: string, holder: string): Promise<void> {
  await q.query('DELETE FROM leases WHERE name = $1 AND holder = $2', [name, holder]);
}

/** A lease and its holder, for a write made only while the holder still holds it (a fence). */
export interface LeaseFence {
  name: string;
  holder: string;
}

/** The condition of a fenced statement (PostgreSQL), its parameters numbered from `first`. */
export function leaseStillHeld(first: number): string {
  return `EXISTS (SELECT 1 FROM leases WHERE name = $${first} AND holder = $${first + 1} AND expires_at > ${DATABASE_NOW})`;
}
