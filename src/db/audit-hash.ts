import { createHash } from 'node:crypto';

/** The previous hash of the first event of a chain. */
export const GENESIS = '0'.repeat(64);

/** What an event's hash covers: every column but its id, in this order. */
export interface ChainedContent {
  seq: number;
  /** The timestamp as the database holds it (see `atText`), so the hash does not depend on a time zone. */
  at: string;
  actor: string;
  principal: string | null;
  principalVerified: boolean;
  action: string;
  partnerId: string | null;
  details: string;
  prevHash: string;
}

/** SHA-256 (hex) over the canonical content: a JSON array of the fields in a fixed order, version first. */
export function eventHash(event: ChainedContent): string {
  const canonical = JSON.stringify([
    1,
    event.seq,
    event.at,
    event.actor,
    event.principal,
    event.principalVerified,
    event.action,
    event.partnerId,
    event.details,
    event.prevHash,
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}

/**
 * A timestamp as the database stores it: SQLite keeps the ISO text the app writes; pg sends a Date as the
 * writer's local wall time, which PostgreSQL keeps in the TIMESTAMP(3) column (read back with AT_TEXT_SQL).
 */
export function atText(provider: 'sqlite' | 'postgresql', at: Date): string {
  if (provider === 'sqlite') return at.toISOString().replace('Z', '+00:00');
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return (
    `${pad(at.getFullYear(), 4)}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T` +
    `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`
  );
}

/** The SQL expression that reads `at` back as `atText` wrote it. */
export function atTextSql(provider: 'sqlite' | 'postgresql', column = 'at'): string {
  return provider === 'sqlite' ? column : `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS')`;
}
