// The published key format (docs/leaked-credentials.md), written again here from the documentation: the
// tests hold the product's keys against this second implementation instead of against its own.

export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `pctl_ak_` + 22 random base62 + 6 checksum. */
export const ACCESS_KEY_FORMAT = /^pctl_ak_[0-9A-Za-z]{28}$/;
/** `pctl_sk_` + the pair's ULID (26 Crockford) + 43 random base62 + 6 checksum. */
export const SECRET_KEY_FORMAT = /^pctl_sk_[0-9A-HJKMNP-TV-Z]{26}[0-9A-Za-z]{49}$/;

/** The standard CRC32 (IEEE 802.3, reflected, polynomial 0xEDB88320), bit by bit. */
export function crc32(text: string): number {
  let crc = 0xffffffff;
  for (const byte of Buffer.from(text, 'utf8')) {
    crc ^= byte;
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? (crc >>> 1) ^ 0xedb88320 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** The 6 base62 characters that end a key: CRC32 of everything before them, most significant first. */
export function checksumOf(body: string): string {
  let value = crc32(body);
  let out = '';
  for (let i = 0; i < 6; i++, value = Math.floor(value / 62)) out = BASE62[value % 62] + out;
  return out;
}

export function checksumValid(key: string): boolean {
  return key.length > 6 && checksumOf(key.slice(0, -6)) === key.slice(-6);
}
