import { createPrivateKey, generateKeyPairSync, randomUUID, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { RETIRED_KEY_OVERLAP_SECONDS, rotateSigningKey } from '../../src/domain/operations/signing-keys.js';
import { TOKEN_AUDIENCE, TOKEN_ISSUER } from '../../src/domain/operations/tokens.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { startUpstream, type TestUpstream } from '../http/support.js';
import { expectEnvelope4xx, provision, rawHttp, serveInProcess, tokenFor, type RawResponse } from './support.js';

/**
 * Forged and tampered tokens sent to the real `partnerctl serve`. Where data.test.ts already sends a token
 * (alg none without kid, HS256 under a made-up secret, a changed subject, a cut signature, double space,
 * another scheme), this sends the harder variants: the server's own signing key with wrong claims, the
 * public key as an HMAC secret, a key embedded in the header, a retired key past its overlap.
 */

interface StoredKey {
  kid: string;
  x: string;
  d: string;
  retired_at?: string;
}

const b64 = (value: object | string) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const nowSeconds = () => Math.floor(Date.now() / 1000);

describe.each(BACKENDS)('forged tokens against partnerctl serve (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let server: Awaited<ReturnType<typeof serveInProcess>>;
    let alice: Awaited<ReturnType<typeof provision>>;
    let bob: Awaited<ReturnType<typeof provision>>;
    let token: string;
    let keyFile: string;

    const readKeys = () => (JSON.parse(readFileSync(keyFile, 'utf8')) as { keys: StoredKey[] }).keys;
    const currentKey = () => readKeys().filter((key) => !key.retired_at).at(-1)!;
    const privateKeyOf = (key: StoredKey): KeyObject => createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x, d: key.d }, format: 'jwk' });

    /** A token signed with the server's own current key (or `key`), with the service's claims unless overridden. */
    const sign = async (claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}, key?: KeyObject | Uint8Array) => {
      const current = currentKey();
      const iat = nowSeconds();
      const payload: Record<string, unknown> = { iss: TOKEN_ISSUER, aud: TOKEN_AUDIENCE, sub: alice.partnerId, kp: alice.keyPairId, jti: randomUUID(), iat, exp: iat + 900, ...claims };
      for (const name of Object.keys(payload)) if (payload[name] === undefined) delete payload[name];
      return new SignJWT(payload).setProtectedHeader({ alg: 'EdDSA', kid: current.kid, typ: 'JWT', ...header } as { alg: string }).sign(key ?? privateKeyOf(current));
    };

    const send = (authorization: string[] | Buffer[]): Promise<RawResponse> => {
      const host = new URL(server.url).host;
      const lines = authorization.map((value) => Buffer.concat([Buffer.from('Authorization: '), Buffer.from(value), Buffer.from('\r\n')]));
      const head = Buffer.concat([Buffer.from(`GET /public/v1/prices?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n`), ...lines, Buffer.from('\r\n')]);
      return rawHttp(server.url, head);
    };
    const expectRefused = async (label: string, authorization: string | string[] | Buffer) => {
      const response = await send(Array.isArray(authorization) ? authorization : [authorization as string]);
      const error = expectEnvelope4xx(response, label);
      expect(response.status, label).toBe(401);
      expect(error.code, label).toBe('unauthorized');
      expect(response.headers['www-authenticate'], label).toBe('Bearer error="invalid_token"');
    };
    const expectAccepted = async (label: string, authorization: string) => {
      const response = await send([authorization]);
      expect(response.status, `${label}: ${response.body}`).toBe(200);
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      keyFile = join(backend.dir, 'signing-keys.json');
      await (await openMigrated(backend)).close();
      upstream = await startUpstream();
      alice = await provision(backend, 'alice', ['acme']);
      bob = await provision(backend, 'bob', ['acme']);
      server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0' });
      token = await tokenFor(server.url, alice.accessKey, alice.secretKey);
    });
    afterAll(async () => {
      await server?.stop();
      await upstream?.close();
      await backend?.dispose();
    });

    it('accepts a token the test signs with the server key (so each refusal below is about its one change)', async () => {
      await expectAccepted('real token', `Bearer ${token}`);
      await expectAccepted('hand-signed token', `Bearer ${await sign()}`);
      // RFC 9110 §11.1: the auth-scheme is case-insensitive, as the gate documents.
      await expectAccepted('lowercase scheme', `bearer ${token}`);
      await expectAccepted('uppercase scheme', `BEARER ${token}`);
    });

    it('refuses alg none and algorithm confusion (HS256 keyed with the Ed25519 public key)', async () => {
      const current = currentKey();
      const [, payload] = (await sign()).split('.');
      const publicRaw = Buffer.from(current.x, 'base64url');
      const publicPem = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: current.x, d: current.d }, format: 'jwk' })
        .export({ format: 'pem', type: 'pkcs8' })
        .toString()
        .replace('PRIVATE', 'PUBLIC');
      const cases: [string, string][] = [
        ['alg none with the current kid', `${b64({ alg: 'none', kid: current.kid, typ: 'JWT' })}.${payload}.`],
        ['alg None', `${b64({ alg: 'None', kid: current.kid, typ: 'JWT' })}.${payload}.`],
        ['alg NONE with a bogus signature', `${b64({ alg: 'NONE', kid: current.kid, typ: 'JWT' })}.${payload}.${b64('x')}`],
        ['HS256 keyed with the public x (base64url text)', await sign({}, { alg: 'HS256' }, new TextEncoder().encode(current.x))],
        ['HS256 keyed with the raw public key bytes', await sign({}, { alg: 'HS256' }, new Uint8Array(publicRaw))],
        ['HS256 keyed with a PEM of the key', await sign({}, { alg: 'HS256' }, new TextEncoder().encode(publicPem))],
        ['HS512 keyed with the public x', await sign({}, { alg: 'HS512' }, new TextEncoder().encode(current.x.repeat(3)))],
        ['HS256 keyed with the kid', await sign({}, { alg: 'HS256' }, new TextEncoder().encode(current.kid))],
      ];
      for (const [label, forged] of cases) await expectRefused(label, `Bearer ${forged}`);
    });

    /** RFC 7797: a header asking for the payload unencoded, really signed with the server's key. */
    const unencodedPayload = () => {
      const current = currentKey();
      const header = b64({ alg: 'EdDSA', kid: current.kid, typ: 'JWT', crit: ['b64'], b64: false });
      const iat = nowSeconds();
      const raw = JSON.stringify({ iss: TOKEN_ISSUER, aud: TOKEN_AUDIENCE, sub: alice.partnerId, kp: alice.keyPairId, jti: randomUUID(), iat, exp: iat + 900 });
      const signature = cryptoSign(null, Buffer.from(`${header}.${raw}`), privateKeyOf(current)).toString('base64url');
      return `${header}.${b64(raw)}.${signature}`;
    };

    /** A header marking an extension critical that the verifier does not know, really signed with the server's key. */
    const criticalExtension = () => {
      const current = currentKey();
      const header = b64({ alg: 'EdDSA', kid: current.kid, typ: 'JWT', crit: ['x-policy'], 'x-policy': 'allow-all' });
      const iat = nowSeconds();
      const payload = b64({ iss: TOKEN_ISSUER, aud: TOKEN_AUDIENCE, sub: alice.partnerId, kp: alice.keyPairId, jti: randomUUID(), iat, exp: iat + 900 });
      return `${header}.${payload}.${cryptoSign(null, Buffer.from(`${header}.${payload}`), privateKeyOf(current)).toString('base64url')}`;
    };

    it('refuses unknown kids, foreign keys and keys smuggled in the header', async () => {
      const { privateKey, publicKey } = generateKeyPairSync('ed25519');
      const jwk = publicKey.export({ format: 'jwk' });
      const cases: [string, string][] = [
        ['unknown kid, foreign key', await sign({}, { kid: randomUUID() }, privateKey)],
        ['current kid, foreign key', await sign({}, {}, privateKey)],
        ['foreign key embedded as jwk', await sign({}, { kid: undefined, jwk }, privateKey)],
        ['foreign key embedded as jwk beside the current kid', await sign({}, { jwk }, privateKey)],
        ['a jku pointing at loopback', await sign({}, { kid: 'attacker', jku: 'http://127.0.0.1:1/jwks.json' }, privateKey)],
        ['no kid', await sign({}, { kid: undefined })],
        ['a path as kid', await sign({}, { kid: '../../signing-keys.json' })],
        ['a numeric kid', await sign({}, { kid: 1 })],
        ['crit b64=false', unencodedPayload()],
        ['an unknown crit', criticalExtension()],
        ['typ at+jwt', await sign({}, { typ: 'at+jwt' })],
      ];
      for (const [label, forged] of cases) await expectRefused(label, `Bearer ${forged}`);
    });

    it('refuses altered payloads and signatures', async () => {
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as Record<string, unknown>;
      const other = (await sign({ jti: 'other' })).split('.')[2]!;
      const middle = Math.floor(signature.length / 2);
      const flipped = signature.slice(0, middle) + (signature[middle] === 'A' ? 'Q' : 'A') + signature.slice(middle + 1);
      const cases: [string, string][] = [
        ['exp pushed a day ahead', `${header}.${b64({ ...claims, exp: (claims.exp as number) + 86_400 })}.${signature}`],
        ['kp of another partner', `${header}.${b64({ ...claims, kp: bob.keyPairId })}.${signature}`],
        ['test: true added', `${header}.${b64({ ...claims, test: true, kp: undefined })}.${signature}`],
        ['payload with a trailing space', `${header}.${b64(`${Buffer.from(payload, 'base64url').toString()} `)}.${signature}`],
        ['a flipped signature character', `${header}.${payload}.${flipped}`],
        ['the signature of another token', `${header}.${payload}.${other}`],
        ['an empty signature', `${header}.${payload}.`],
        ['a header re-encoded with another kid', `${b64({ alg: 'EdDSA', kid: randomUUID(), typ: 'JWT' })}.${payload}.${signature}`],
        ['a doubled signature', `${header}.${payload}.${signature}${signature}`],
        ['padding added', `${header}.${payload}.${signature}==`],
      ];
      for (const [label, forged] of cases) await expectRefused(label, `Bearer ${forged}`);
    });

    it('refuses tokens signed with the real key whose claims are wrong', async () => {
      const now = nowSeconds();
      const cases: [string, Record<string, unknown>][] = [
        ['expired', { iat: now - 1_000, exp: now - 100 }],
        ['expired a second ago', { iat: now - 901, exp: now - 1 }],
        ['not yet valid (nbf in the future)', { nbf: now + 600 }],
        ['issued far in the future', { iat: now + 3_600, exp: now + 4_500 }],
        ['a wrong issuer', { iss: 'partnerctl-evil' }],
        ['no issuer', { iss: undefined }],
        ['a wrong audience', { aud: 'partner-api/v2' }],
        ['an audience list without ours', { aud: ['partner-api/v2', 'admin'] }],
        ['a lifetime of a day', { exp: now + 86_400 }],
        ['no expiry', { exp: undefined }],
        ['the key pair of another partner', { kp: bob.keyPairId }],
        ['an unknown key pair', { kp: 'kp_01JD0000000000000000000000' }],
        ['an unknown partner', { sub: 'ptn_01JD0000000000000000000000', kp: undefined, test: true }],
        ['a kp that is not a string', { kp: { id: alice.keyPairId } }],
      ];
      for (const [label, claims] of cases) await expectRefused(label, `Bearer ${await sign(claims)}`);
    });

    it('refuses malformed Authorization headers and two of them', async () => {
      const forwarded = upstream.received.length;
      const [header, payload, signature] = token.split('.') as [string, string, string];
      const cases: [string, string | string[] | Buffer][] = [
        ['a tab after the scheme', `Bearer\t${token}`],
        ['two spaces and a tab', `Bearer \t${token}`],
        ['a space inside the token', `Bearer ${header}. ${payload}.${signature}`],
        ['a no-break space after the scheme', Buffer.concat([Buffer.from('Bearer'), Buffer.from([0xa0]), Buffer.from(token)])],
        ['a quoted token', `Bearer "${token}"`],
        ['a trailing semicolon', `Bearer ${token};`],
        ['Bearer: as scheme', `Bearer:${token}`],
        ['Bearer= as scheme', `Bearer=${token}`],
        ['the JWT scheme', `JWT ${token}`],
        ['the DPoP scheme', `DPoP ${token}`],
        ['a comma-joined pair', `Bearer ${token}, Bearer ${token}`],
        ['two headers, the second one garbage', [`Bearer ${token}`, 'Bearer garbage.garbage.garbage']],
        ['two headers, the first one garbage', ['Bearer garbage.garbage.garbage', `Bearer ${token}`]],
        ['two headers, one Basic', [`Basic ${Buffer.from('a:b').toString('base64')}`, `Bearer ${token}`]],
        ['a token with four parts', `Bearer ${token}.${signature}`],
      ];
      for (const [label, value] of cases) await expectRefused(label, Buffer.isBuffer(value) ? [value] as unknown as string[] : value);
      expect(upstream.received).toHaveLength(forwarded);
    });

    it('a retired signing key: its tokens pass within the overlap, and are refused once the file says it is past', async () => {
      // The server looks at the key file once a second and says when it reloaded it: wait for that, not a
      // fixed time (a loaded machine delays the look; a token minted before it is signed with the old key).
      const reloads = () => server.stdout().split('\n').filter((line) => line.includes('signing-key file changed on disk')).length;
      const reloaded = (before: number) => vi.waitFor(() => expect(reloads()).toBeGreaterThan(before), { timeout: 10_000, interval: 50 });
      const old = await tokenFor(server.url, alice.accessKey, alice.secretKey);
      let before = reloads();
      const { retiredKid } = rotateSigningKey(keyFile, new Date());
      await reloaded(before);
      await expectAccepted('old key, within its overlap', `Bearer ${old}`);
      const fresh = await tokenFor(server.url, alice.accessKey, alice.secretKey);
      expect(fresh).not.toBe(old);

      // Edit the file as an operator would: the old key retired longer ago than the overlap.
      const keys = readKeys().map((key) =>
        key.kid === retiredKid ? { ...key, retired_at: new Date(Date.now() - (RETIRED_KEY_OVERLAP_SECONDS + 5) * 1000).toISOString() } : key,
      );
      const temporary = `${keyFile}.edit`;
      before = reloads();
      writeFileSync(temporary, JSON.stringify({ keys }, null, 2), { mode: 0o600 });
      renameSync(temporary, keyFile);
      await reloaded(before);
      await expectRefused('old key, past its overlap', `Bearer ${old}`);
      const retired = readKeys().find((key) => key.kid === retiredKid)!;
      await expectRefused('freshly signed with the retired key', `Bearer ${await sign({}, { kid: retired.kid }, privateKeyOf(retired))}`);
      await expectAccepted('new key', `Bearer ${fresh}`);
    });
  });
});
