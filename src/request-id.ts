// Request ids that carry their time (UUIDv7, RFC 9562 §5.7): still a UUID as the API contract requires, and
// `explain` of an id with nothing on record can tell an id older than the retention from one not written yet.
// node:crypto has no v7 on Node 20; this is the one generator (random bytes drawn in blocks, one hex table).
import { randomFillSync } from 'node:crypto';

const HEX = Array.from({ length: 256 }, (_, n) => n.toString(16).padStart(2, '0'));
const BLOCK = 10 * 4_096;
const pool = Buffer.allocUnsafe(BLOCK);
let used = BLOCK;

/** A new UUIDv7 for the instant `nowMs` (48 bits of milliseconds, 74 random bits). */
export function newRequestId(nowMs: number): string {
  if (used + 10 > BLOCK) {
    randomFillSync(pool);
    used = 0;
  }
  const r = used;
  used += 10;
  const ms = Math.max(0, Math.floor(nowMs));
  const high = Math.floor(ms / 0x1_0000_0000);
  const low = ms >>> 0;
  return (
    HEX[(high >>> 8) & 0xff]! + HEX[high & 0xff]! + HEX[low >>> 24]! + HEX[(low >>> 16) & 0xff]! + '-' +
    HEX[(low >>> 8) & 0xff]! + HEX[low & 0xff]! + '-' +
    HEX[0x70 | (pool[r]! & 0x0f)]! + HEX[pool[r + 1]!]! + '-' +
    HEX[0x80 | (pool[r + 2]! & 0x3f)]! + HEX[pool[r + 3]!]! + '-' +
    HEX[pool[r + 4]!]! + HEX[pool[r + 5]!]! + HEX[pool[r + 6]!]! + HEX[pool[r + 7]!]! + HEX[pool[r + 8]!]! + HEX[pool[r + 9]!]!
  );
}

const V7 = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** The instant a UUIDv7 request id was made at; null for any other UUID (a v4 id of an older server). */
export function timeOfRequestId(id: string): number | null {
  const match = V7.exec(id);
  return match ? Number.parseInt(match[1]! + match[2]!, 16) : null;
}
