import { randomBytes } from 'node:crypto';
import { AppError } from '../../errors.js';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export const ACCESS_KEY_PREFIX = 'pctl_ak_';
export const SECRET_KEY_PREFIX = 'pctl_sk_';

/** A prefixed ULID: sorts by creation time, so list pages can use the id as their cursor. */
export function newId(prefix: 'ptn' | 'kp', now: number): string {
  let time = '';
  for (let rest = now, i = 0; i < 10; i++, rest = Math.floor(rest / 32)) time = CROCKFORD[rest % 32] + time;
  const random = randomBytes(16);
  let tail = '';
  for (let i = 0; i < 16; i++) tail += CROCKFORD[random[i]! % 32];
  return `${prefix}_${time}${tail}`;
}

function base62(bytes: Buffer): string {
  let value = BigInt(`0x${bytes.toString('hex')}`);
  let out = '';
  while (value > 0n) {
    out = BASE62[Number(value % 62n)] + out;
    value /= 62n;
  }
  return out.padStart(Math.ceil((bytes.length * 8) / Math.log2(62)), '0');
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (const byte of Buffer.from(text, 'utf8')) crc = CRC_TABLE[(crc ^ byte) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** The checksum that ends a key: CRC32 of everything before it (prefix included), 6 base62 characters. */
function checksumOf(body: string): string {
  let value = crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++, value = Math.floor(value / 62)) out = BASE62[value % 62] + out;
  return out;
}

const CHECKSUM_LENGTH = 6;
/** The part of a key-pair id after `kp_` (a ULID); the secret carries it so it names its pair. */
const PAIR_PART_LENGTH = 26;

/**
 * Access key: `pctl_ak_` + 128 random bits (22 base62) + checksum. Secret key: `pctl_sk_` + the pair's id
 * without `kp_` (26 Crockford characters, not secret) + 256 random bits from the CSPRNG (43 base62) + checksum.
 * Without a pair (a stand-in that is never stored), the id's time is the epoch: no clock is read.
 */
export function newKeyMaterial(keyPairId: string = newId('kp', 0)): { accessKey: string; secretKey: string } {
  const accessBody = ACCESS_KEY_PREFIX + base62(randomBytes(16));
  const secretBody = SECRET_KEY_PREFIX + keyPairId.slice('kp_'.length) + base62(randomBytes(32));
  return { accessKey: accessBody + checksumOf(accessBody), secretKey: secretBody + checksumOf(secretBody) };
}

/** Keys issued from the key_lifecycle release on: what the README publishes for secret scanners. */
const ACCESS_KEY_FORMAT = /^pctl_ak_[0-9A-Za-z]{28}$/;
const SECRET_KEY_FORMAT = /^pctl_sk_[0-9A-HJKMNP-TV-Z]{26}[0-9A-Za-z]{49}$/;
/** Keys issued before: no checksum, no pair in the secret. They keep working. */
const LEGACY_ACCESS_KEY_FORMAT = /^pctl_ak_[0-9A-Za-z]{22}$/;
const LEGACY_SECRET_KEY_FORMAT = /^pctl_sk_[0-9A-Za-z]{43}$/;

/** Either format of access key (what the token endpoint accepts before looking anything up). */
export const ACCESS_KEY_PATTERN = /^pctl_ak_(?:[0-9A-Za-z]{22}|[0-9A-Za-z]{28})$/;
export const PARTNER_ID_PATTERN = /^ptn_[0-9A-HJKMNP-TV-Z]{26}$/;
export const KEY_PAIR_ID_PATTERN = /^kp_[0-9A-HJKMNP-TV-Z]{26}$/;

/** Whether a new-format key's checksum matches (offline: no database). */
function checksumValid(key: string): boolean {
  const body = key.slice(0, -CHECKSUM_LENGTH);
  return key.length > CHECKSUM_LENGTH && checksumOf(body) === key.slice(-CHECKSUM_LENGTH);
}

export type ParsedKey =
  | { kind: 'access_key'; legacy: boolean }
  | { kind: 'secret_key'; legacy: false; keyPairId: string }
  | { kind: 'secret_key'; legacy: true };

/**
 * What a value starting with a key prefix is, offline. Throws `invalid_argument` for a malformed value,
 * saying `checksum` when the shape is right and the checksum is not (a typo, a truncated copy).
 */
export function parseKey(value: string): ParsedKey {
  if (ACCESS_KEY_FORMAT.test(value)) {
    if (!checksumValid(value)) throw badChecksum('access key');
    return { kind: 'access_key', legacy: false };
  }
  if (SECRET_KEY_FORMAT.test(value)) {
    if (!checksumValid(value)) throw badChecksum('secret key');
    return { kind: 'secret_key', legacy: false, keyPairId: `kp_${value.slice(SECRET_KEY_PREFIX.length, SECRET_KEY_PREFIX.length + PAIR_PART_LENGTH)}` };
  }
  if (LEGACY_ACCESS_KEY_FORMAT.test(value)) return { kind: 'access_key', legacy: true };
  if (LEGACY_SECRET_KEY_FORMAT.test(value)) return { kind: 'secret_key', legacy: true };
  const what = value.startsWith(SECRET_KEY_PREFIX) ? 'secret key' : 'access key';
  throw new AppError('invalid_argument', `not a well-formed ${what}: wrong length or characters (a ${what} here is ${what === 'secret key' ? 'pctl_sk_ + 75' : 'pctl_ak_ + 28'} letters and digits)`);
}

function badChecksum(what: string): AppError {
  return new AppError('invalid_argument', `not a valid ${what}: its checksum does not match (a typo, or a truncated or altered copy)`);
}

/**
 * A value as it is often pasted, unwrapped: surrounding quotes, a trailing comma or semicolon, a variable
 * assignment or a JSON/YAML field (`SECRET=…`, `export X=…`, `"secret_key": "…"`) and an `Authorization:
 * Bearer …` prefix are removed, repeatedly, so that a pasted `"pctl_sk_…",` is the key itself.
 */
export function unwrapPasted(value: string): string {
  let text = value.trim();
  for (let round = 0; round < 5; round++) {
    const before = text;
    text = text.replace(/[,;]+$/, '').trim();
    text = text.replace(/^(?:export\s+)?["']?[A-Za-z_][A-Za-z0-9_.-]*["']?\s*[=:]\s*/, '').trim();
    text = text.replace(/^(?:authorization:\s*)?bearer\s+/i, '').trim();
    const quoted = /^(["'`])([\s\S]*)\1$/.exec(text);
    if (quoted) text = quoted[2]!.trim();
    if (text === before) break;
  }
  return text;
}
