import { createHash } from 'node:crypto';

/** The previous hash of the first event of a chain. */
export const GENESIS = '0'.repeat(64);

/** What an event's hash covers: every column but its id, in this order. */
export interface ChainedContent {
  seq: number;
  /** The timestamp as the database holds it (see Dialect.atText), so the hash does not depend on a time zone. */
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
