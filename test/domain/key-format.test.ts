import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { newId, newKeyMaterial, parseKey } from '../../src/domain/rules/identifiers.js';
import { AppError } from '../../src/errors.js';
import { parseTokenId } from '../../src/domain/operations/tokens.js';
import { ACCESS_KEY_FORMAT, BASE62, checksumOf, checksumValid, crc32, SECRET_KEY_FORMAT } from '../support/key-format.js';

/** The regular expressions the docs publish for secret scanners, from the "Key formats" block of docs/leaked-credentials.md. */
function readmePatterns(): { access: RegExp; secret: RegExp } {
  const readme = readFileSync(new URL('../../docs/leaked-credentials.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Key formats'));
  const block = /```text\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const lines = block.split('\n').filter((line) => line.trim() !== '');
  const access = lines.find((line) => line.includes('pctl_ak_'));
  const secret = lines.find((line) => line.includes('pctl_sk_'));
  if (!access || !secret) throw new Error('docs/leaked-credentials.md has no key-format block');
  return { access: new RegExp(access.trim()), secret: new RegExp(secret.trim()) };
}

/** Every one-character substitution of the key's body (after the prefix), a sample for speed. */
function typos(key: string, count: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const position = 8 + ((i * 7) % (key.length - 8));
    const original = key[position]!;
    const replacement = BASE62[(BASE62.indexOf(original) + 1 + (i % 61)) % 62]!;
    out.push(key.slice(0, position) + replacement + key.slice(position + 1));
  }
  return out;
}

describe('key formats', () => {
  it('holds keys against the standard CRC32 (check value of "123456789")', () => {
    expect(crc32('123456789')).toBe(0xcbf43926);
  });

  it('issues keys in the published formats, the secret naming its pair, each ending in its checksum', () => {
    const id = newId('kp', Date.now());
    const { accessKey, secretKey } = newKeyMaterial(id);
    expect(accessKey).toMatch(ACCESS_KEY_FORMAT);
    expect(secretKey).toMatch(SECRET_KEY_FORMAT);
    expect(checksumValid(accessKey)).toBe(true);
    expect(checksumValid(secretKey)).toBe(true);
    expect(secretKey.slice(-6)).toBe(checksumOf(secretKey.slice(0, -6)));
    expect(parseKey(secretKey)).toEqual({ kind: 'secret_key', legacy: false, keyPairId: id });
    expect(parseKey(accessKey)).toEqual({ kind: 'access_key', legacy: false });
    // The random part of the secret is 43 base62 characters: more than 256 bits.
    expect(secretKey.slice(8 + 26, -6)).toHaveLength(43);
    expect(43 * Math.log2(62)).toBeGreaterThan(256);
  });

  it('publishes in docs/leaked-credentials.md regular expressions that match freshly issued keys and only them', () => {
    const { access, secret } = readmePatterns();
    for (let i = 0; i < 50; i++) {
      const { accessKey, secretKey } = newKeyMaterial(newId('kp', Date.now()));
      expect(`found ${accessKey} in a log`).toMatch(access);
      expect(`"${secretKey}"`).toMatch(secret);
      expect(access.exec(` ${accessKey} `)?.[0]).toBe(accessKey);
      expect(secret.exec(`=${secretKey};`)?.[0]).toBe(secretKey);
      expect(accessKey).not.toMatch(secret);
      expect(secretKey).not.toMatch(access);
    }
    // Old keys (no checksum) are not matched by the new patterns.
    expect(`pctl_sk_${'a'.repeat(43)}`).not.toMatch(secret);
    expect(`pctl_ak_${'a'.repeat(22)}`).not.toMatch(access);
  });

  it('tells a one-character typo from a real key offline: the checksum rejects it, saying checksum', () => {
    for (let round = 0; round < 20; round++) {
      const { accessKey, secretKey } = newKeyMaterial(newId('kp', Date.now()));
      for (const key of [...typos(accessKey, 20), ...typos(secretKey, 40)]) {
        expect(checksumValid(key)).toBe(false);
        let error: unknown;
        try {
          parseKey(key);
        } catch (caught) {
          error = caught;
        }
        // A typo in the pair part can leave a character outside the Crockford alphabet: malformed either way.
        expect(error).toBeInstanceOf(AppError);
        expect((error as AppError).code).toBe('invalid_argument');
        if (SECRET_KEY_FORMAT.test(key) || ACCESS_KEY_FORMAT.test(key)) expect((error as AppError).message).toContain('checksum');
      }
    }
  });

  it('keeps accepting the old formats (no checksum), saying so', () => {
    expect(parseKey(`pctl_ak_${'A1'.repeat(11)}`)).toEqual({ kind: 'access_key', legacy: true });
    expect(parseKey(`pctl_sk_${'z'.repeat(43)}`)).toEqual({ kind: 'secret_key', legacy: true });
  });

  it('refuses malformed keys as invalid_argument without mentioning a checksum', () => {
    for (const value of ['pctl_ak_', 'pctl_ak_short', `pctl_sk_${'!'.repeat(75)}`, `pctl_sk_${'a'.repeat(80)}`]) {
      expect(() => parseKey(value)).toThrow(AppError);
      try {
        parseKey(value);
      } catch (error) {
        expect((error as AppError).code).toBe('invalid_argument');
        expect((error as AppError).message).not.toContain('checksum');
      }
    }
  });

  it('reads token ids: partner, key pair (or test), issue time in ms; older ids are not traceable', () => {
    const partnerId = newId('ptn', Date.now());
    const keyPairId = newId('kp', Date.now());
    expect(parseTokenId(`${partnerId}.${keyPairId}.1795391427874.86afcf9fcc3735d5`)).toEqual({ partnerId, keyPairId, issuedAtMs: 1795391427874 });
    expect(parseTokenId(`${partnerId}.test.1795391427874.86afcf9fcc3735d5`)).toEqual({ partnerId, keyPairId: null, issuedAtMs: 1795391427874 });
    expect(parseTokenId('3b241101-e2bb-4255-8caf-4136c566a962')).toBeNull();
  });
});
