import { generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader, SignJWT } from 'jose';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { RETIRED_KEY_OVERLAP_SECONDS, rotateSigningKey, SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { mintTestToken } from '../../src/domain/operations/test-tokens.js';
import { mintToken, TOKEN_AUDIENCE, TOKEN_ISSUER, TokenVerifier } from '../../src/domain/operations/tokens.js';
import { refusalError, tokenRefusal } from '../../src/domain/rules/verdict.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, auditCount, expectAppError, uniqueName, useMigratedDatabase } from './fixtures.js';
import { systemClock } from '../../src/clock.js';
import { TestClock } from '../support/clock.js';

const folder = mkdtempSync(join(tmpdir(), 'partnerctl-token-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));
afterEach(() => {
  vi.useRealTimers();
});

const keyFile = () => join(folder, `${randomUUID()}.json`);
const nowSeconds = () => Math.floor(Date.now() / 1000);
const SUBJECT = { partnerId: 'ptn_01JD0000000000000000000000', keyPairId: 'kp_01JD0000000000000000000000' };

function base64url(value: object | string): string {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

interface Crafted {
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  key?: KeyObject | Uint8Array;
}

/** A token built by hand: the service's claims and header unless overridden. */
async function craft(keys: SigningKeys, { header = {}, claims = {}, key }: Crafted = {}): Promise<string> {
  const current = keys.current();
  const iat = nowSeconds();
  const payload = {
    iss: TOKEN_ISSUER,
    aud: TOKEN_AUDIENCE,
    sub: SUBJECT.partnerId,
    kp: SUBJECT.keyPairId,
    jti: randomUUID(),
    iat,
    exp: iat + 900,
    ...claims,
  };
  for (const [name, value] of Object.entries(payload)) if (value === undefined) delete (payload as Record<string, unknown>)[name];
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'EdDSA', kid: current.kid, typ: 'JWT', ...header } as { alg: string })
    .sign(key ?? current.key);
}

describe('signing keys', () => {
  it('creates the key file on first use, mode 0600, with one Ed25519 key', () => {
    const path = keyFile();
    const keys = SigningKeys.open(path, systemClock);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(readFileSync(path, 'utf8')) as { keys: { kid: string; crv: string; d: string }[] };
    expect(stored.keys).toHaveLength(1);
    expect(stored.keys[0]).toMatchObject({ kid: keys.current().kid, crv: 'Ed25519' });
    // A second open reads the same key instead of making another.
    expect(SigningKeys.open(path, systemClock).current().kid).toBe(keys.current().kid);
    expect(JSON.stringify(keys.publicJwks())).not.toContain(stored.keys[0]!.d);
  });

  it.each([
    ['not JSON', 'not json'],
    ['no keys', '{"keys":[]}'],
    ['a key of another kind', '{"keys":[{"kid":"k","kty":"RSA","n":"x","e":"AQAB","d":"y"}]}'],
  ])('refuses a key file holding %s with signing_key_unavailable', async (_, text) => {
    const path = keyFile();
    writeFileSync(path, text, { mode: 0o600 });
    await expectAppError(() => SigningKeys.open(path, systemClock), 'signing_key_unavailable');
  });

  it('rotation adds a current key and retires the previous one; old retired keys are pruned', () => {
    const path = keyFile();
    const first = SigningKeys.open(path, systemClock).current().kid;
    const start = Date.now();
    const second = rotateSigningKey(path, new Date(start));
    expect(second).toMatchObject({ retiredKid: first, pruned: 0 });
    expect(SigningKeys.open(path, systemClock).current().kid).toBe(second.kid);
    const third = rotateSigningKey(path, new Date(start + (RETIRED_KEY_OVERLAP_SECONDS + 1) * 1000));
    expect(third).toMatchObject({ retiredKid: second.kid, pruned: 1 });
    const kids = SigningKeys.open(path, systemClock).publicJwks().keys.map((key) => (key as { kid: string }).kid);
    expect(kids).toEqual([second.kid, third.kid]);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });
});

describe('mintToken and TokenVerifier', () => {
  const path = keyFile();
  const keys = SigningKeys.open(path, systemClock);
  const verifier = () => new TokenVerifier(keys);

  it('mints a 900-second EdDSA JWT with the expected claims, and accepts it', async () => {
    const minted = await mintToken(keys, SUBJECT);
    expect(minted.expiresIn).toBe(900);
    const header = decodeProtectedHeader(minted.accessToken);
    expect(header).toEqual({ alg: 'EdDSA', kid: keys.current().kid, typ: 'JWT' });
    const payload = decodeJwt(minted.accessToken);
    expect(payload).toMatchObject({ iss: TOKEN_ISSUER, aud: TOKEN_AUDIENCE, sub: SUBJECT.partnerId, kp: SUBJECT.keyPairId });
    expect(payload.exp! - payload.iat!).toBe(900);
    // Traceable: <partner>.<key pair>.<issued at, ms>.<random hex>.
    expect(payload.jti).toMatch(new RegExp(`^${SUBJECT.partnerId}\\.${SUBJECT.keyPairId}\\.\\d{13}\\.[0-9a-f]{16}$`));
    expect(payload.test).toBeUndefined();

    const claims = await verifier().verify(minted.accessToken);
    expect(claims).toEqual({ ...SUBJECT, test: false, jti: payload.jti, exp: payload.exp, issuedAtMs: Number(String(payload.jti).split('.')[2]) });
    expect(Math.floor(claims.issuedAtMs / 1000)).toBe(payload.iat);
  });

  it('marks a test token and names no key pair', async () => {
    const minted = await mintToken(keys, { partnerId: SUBJECT.partnerId, keyPairId: null }, 60);
    expect(decodeJwt(minted.accessToken)).toMatchObject({ test: true });
    expect(decodeJwt(minted.accessToken).kp).toBeUndefined();
    expect(await verifier().verify(minted.accessToken)).toMatchObject({ keyPairId: null, test: true });
  });

  it('gives each token its own jti', async () => {
    const [a, b] = await Promise.all([mintToken(keys, SUBJECT), mintToken(keys, SUBJECT)]);
    expect(a.claims.jti).not.toBe(b.claims.jti);
  });

  it('accepts a hand-crafted token with the right shape (so the refusals below are about their one change)', async () => {
    expect(await verifier().verify(await craft(keys))).toMatchObject(SUBJECT);
  });

  it('verifies an expired token as genuine, and the verdict refuses it as expired (expiry is judged once, there)', async () => {
    const iat = nowSeconds() - 1_000;
    const claims = await verifier().verify(await craft(keys, { claims: { iat, exp: iat + 900 } }));
    expect(claims).toMatchObject({ ...SUBJECT, exp: iat + 900 });
    expect(tokenRefusal(claims, null, null, null, Date.now())).toBe('token_expired');
    expect(refusalError('token_expired', 'gate')).toMatchObject({ code: 'unauthorized', message: 'the token has expired' });
  });

  it('a token remembered while it lived is refused by the verdict once it has expired', async () => {
    const check = verifier();
    const minted = await mintToken(keys, SUBJECT, 60);
    const claims = await check.verify(minted.accessToken);
    expect(tokenRefusal(claims, null, null, null, Date.now())).not.toBe('token_expired');
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 61_000);
    expect(tokenRefusal(await check.verify(minted.accessToken), null, null, null, Date.now())).toBe('token_expired');
  });

  it('refuses a token whose payload was changed', async () => {
    const [header, , signature] = (await mintToken(keys, SUBJECT)).accessToken.split('.');
    const forged = { ...decodeJwt((await mintToken(keys, SUBJECT)).accessToken), sub: 'ptn_01JD9999999999999999999999' };
    await expectAppError(verifier().verify(`${header}.${base64url(forged)}.${signature}`), 'unauthorized');
  });

  it('refuses a token whose signature was changed', async () => {
    const token = (await mintToken(keys, SUBJECT)).accessToken;
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const middle = Math.floor(signature.length / 2);
    const flipped = signature.slice(0, middle) + (signature[middle] === 'A' ? 'B' : 'A') + signature.slice(middle + 1);
    await expectAppError(verifier().verify(`${header}.${payload}.${flipped}`), 'unauthorized');
    await expectAppError(verifier().verify(`${header}.${payload}.`), 'unauthorized');
  });

  it("refuses alg 'none'", async () => {
    const payload = decodeJwt((await mintToken(keys, SUBJECT)).accessToken);
    const header = { alg: 'none', kid: keys.current().kid, typ: 'JWT' };
    await expectAppError(verifier().verify(`${base64url(header)}.${base64url(payload)}.`), 'unauthorized');
  });

  it('refuses HS256 signed with the public key (algorithm confusion)', async () => {
    const publicX = (keys.publicJwks().keys[0] as { x: string }).x;
    const token = await craft(keys, { header: { alg: 'HS256' }, key: new TextEncoder().encode(publicX) });
    await expectAppError(verifier().verify(token), 'unauthorized');
  });

  it('refuses a token signed by a key it does not know, under an unknown or a known kid', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    await expectAppError(verifier().verify(await craft(keys, { header: { kid: randomUUID() }, key: privateKey })), 'unauthorized');
    await expectAppError(verifier().verify(await craft(keys, { key: privateKey })), 'unauthorized');
    await expectAppError(verifier().verify(await craft(keys, { header: { kid: undefined } })), 'unauthorized');
  });

  it.each([
    ['a wrong issuer', { iss: 'someone-else' }],
    ['a wrong audience', { aud: 'partner-api/v2' }],
    ['no subject', { sub: undefined }],
    ['no jti', { jti: undefined }],
    ['no expiry', { exp: undefined }],
    ['a lifetime over 900 seconds', { exp: Math.floor(Date.now() / 1000) + 3_600 }],
    ['an issue time in the future', { iat: Math.floor(Date.now() / 1000) + 600, exp: Math.floor(Date.now() / 1000) + 1_200 }],
    ['neither a key pair nor the test mark', { kp: undefined }],
    ['a key pair id that is not a string', { kp: 42 }],
  ])('refuses a token with %s', async (_, claims) => {
    await expectAppError(verifier().verify(await craft(keys, { claims })), 'unauthorized');
  });

  it('refuses a token with another typ, and garbage', async () => {
    await expectAppError(verifier().verify(await craft(keys, { header: { typ: 'at+jwt' } })), 'unauthorized');
    for (const garbage of ['', 'a.b.c', 'not a token', 'a.b']) {
      await expectAppError(verifier().verify(garbage), 'unauthorized');
    }
  });
});

describe('signing-key rotation and verification', () => {
  it('still verifies tokens of the retired key within the overlap, and signs new ones with the new key', async () => {
    const path = keyFile();
    const before = SigningKeys.open(path, systemClock);
    const old = await mintToken(before, SUBJECT);
    const { kid, retiredKid } = rotateSigningKey(path, new Date());
    expect(retiredKid).toBe(before.current().kid);

    const after = SigningKeys.open(path, systemClock);
    expect(after.current().kid).toBe(kid);
    expect(await new TokenVerifier(after).verify(old.accessToken)).toMatchObject(SUBJECT);
    const fresh = await mintToken(after, SUBJECT);
    expect(decodeProtectedHeader(fresh.accessToken).kid).toBe(kid);
    expect(await new TokenVerifier(after).verify(fresh.accessToken)).toMatchObject(SUBJECT);
  });

  it('refuses a token the retired key signed after its retirement (a leaked retired key mints nothing)', async () => {
    const path = keyFile();
    const before = SigningKeys.open(path, systemClock);
    const retiredKey = before.current();
    rotateSigningKey(path, new Date(Date.now() - 120_000));
    const after = SigningKeys.open(path, systemClock);
    const signedAfterRetirement = await craft(after, { header: { kid: retiredKey.kid }, key: retiredKey.key });
    await expectAppError(new TokenVerifier(after).verify(signedAfterRetirement), 'unauthorized');
    const signedBefore = await craft(after, {
      header: { kid: retiredKey.kid },
      key: retiredKey.key,
      claims: { iat: nowSeconds() - 180, exp: nowSeconds() + 600 },
    });
    expect(await new TokenVerifier(after).verify(signedBefore)).toMatchObject({ partnerId: SUBJECT.partnerId });
  });

  it('refuses tokens of a key retired longer ago than the overlap', async () => {
    const path = keyFile();
    const old = await mintToken(SigningKeys.open(path, systemClock), SUBJECT);
    rotateSigningKey(path, new Date(Date.now() - (RETIRED_KEY_OVERLAP_SECONDS + 1) * 1000));
    const after = SigningKeys.open(path, systemClock);
    const error = await expectAppError(new TokenVerifier(after).verify(old.accessToken), 'unauthorized');
    expect(error.message).toMatch(/retired|unknown/);
  });

  it('the retired key stops verifying once the overlap has passed on the clock', async () => {
    const path = keyFile();
    const old = await mintToken(SigningKeys.open(path, systemClock), SUBJECT, 60);
    rotateSigningKey(path, new Date());
    const after = SigningKeys.open(path, systemClock);
    expect(after.verificationKey(decodeProtectedHeader(old.accessToken).kid)).toBeDefined();
    const later = Date.now() + (RETIRED_KEY_OVERLAP_SECONDS + 1) * 1000;
    expect(after.verificationKey(decodeProtectedHeader(old.accessToken).kid, later)).toBeUndefined();
    expect(after.verificationKey(after.current().kid, later)).toBeDefined();
  });

  it('a running verifier picks up a rotation from the file and drops remembered verdicts when told', async () => {
    const path = keyFile();
    const keys = SigningKeys.open(path, systemClock);
    const verifier = new TokenVerifier(keys);
    const old = await mintToken(keys, SUBJECT);
    await verifier.verify(old.accessToken);

    rotateSigningKey(path, new Date(Date.now() - (RETIRED_KEY_OVERLAP_SECONDS + 1) * 1000));
    expect(keys.poll().state).toBe('reloaded');
    expect(keys.poll().state).toBe('unchanged');
    verifier.keysChanged();
    await expectAppError(verifier.verify(old.accessToken), 'unauthorized');
    expect(await verifier.verify((await mintToken(keys, SUBJECT)).accessToken)).toMatchObject(SUBJECT);
  });
});

describe.each(BACKENDS)('mintTestToken on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const keys = SigningKeys.open(keyFile(), systemClock);

    it('mints a verifiable test token with the asked lifetime, and records it', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      for (const ttl of [1, 60, 900]) {
        const minted = await mintTestToken(ctx.db, ALICE, keys, partner.name, ttl);
        expect(minted.expiresIn).toBe(ttl);
        const payload = decodeJwt(minted.accessToken);
        expect(payload.exp! - payload.iat!).toBe(ttl);
        // A one-second token may be gone by the time it is checked; its lifetime is what matters here.
        if (ttl === 1) continue;
        expect(await new TokenVerifier(keys).verify(minted.accessToken)).toMatchObject({
          partnerId: partner.id,
          keyPairId: null,
          test: true,
        });
      }
      const minted = await mintTestToken(ctx.db, ALICE, keys, partner.id);
      expect(minted.expiresIn).toBe(900);
      expect(await auditCount(ctx.db, partner.id)).toBe(5);
    });

    it('issues the token at the database\'s time (its clock), not at this host\'s', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      const clock = new TestClock(Date.UTC(2031, 0, 2, 3, 4, 5, 678));
      const minted = await mintTestToken({ ...ctx.db, clock }, ALICE, keys, partner.id, 1);
      expect(minted.claims.issuedAtMs).toBe(clock.now());
      expect(decodeJwt(minted.accessToken)).toMatchObject({ iat: Math.floor(clock.now() / 1000), exp: Math.floor(clock.now() / 1000) + 1 });
    });

    it.each([0, -1, 901, 3_600, 1.5, Number.NaN, Number.POSITIVE_INFINITY])('refuses a ttl of %s', async (ttl) => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      const error = await expectAppError(mintTestToken(ctx.db, ALICE, keys, partner.id, ttl), 'invalid_argument');
      expect(error.message).toMatch(/900/);
      expect(await auditCount(ctx.db, partner.id)).toBe(1);
    });

    it('refuses a disabled partner with partner_disabled, and an unknown one', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      await setPartnerStatus(ctx.db, ALICE, partner.id, 'disabled');
      const events = await auditCount(ctx.db, partner.id);
      await expectAppError(mintTestToken(ctx.db, ALICE, keys, partner.id, 60), 'partner_disabled');
      expect(await auditCount(ctx.db, partner.id)).toBe(events);
      await expectAppError(mintTestToken(ctx.db, ALICE, keys, 'nobody-here', 60), 'partner_not_found');
    });
  });
});
