import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export const ACCESS_KEY_PREFIX = 'pctl_ak_';
export const SECRET_KEY_PREFIX = 'pctl_sk_';

/** A prefixed ULID: sorts by creation time, so list pages can use the id as their cursor. */
export function newId(prefix: 'ptn' | 'kp', now = Date.now()): string {
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

/** Access key: public, 128 random bits. Secret key: 256 random bits from the CSPRNG. */
export function newKeyMaterial(): { accessKey: string; secretKey: string } {
  return {
    accessKey: ACCESS_KEY_PREFIX + base62(randomBytes(16)),
    secretKey: SECRET_KEY_PREFIX + base62(randomBytes(32)),
  };
}

export const ACCESS_KEY_PATTERN = /^pctl_ak_[0-9A-Za-z]{22}$/;
export const SECRET_KEY_PATTERN = /^pctl_sk_[0-9A-Za-z]{43}$/;
export const PARTNER_ID_PATTERN = /^ptn_[0-9A-HJKMNP-TV-Z]{26}$/;
