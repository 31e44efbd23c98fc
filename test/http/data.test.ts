import { createServer } from 'node:net';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { mapCompany, unmapCompany } from '../support/domain.js';
import { rotateKeyPair, revokeKeyPair } from '../../src/domain/operations/key-pairs.js';
import { setPartnerStatus } from '../../src/domain/operations/partners.js';
import { mintTestToken } from '../../src/domain/operations/test-tokens.js';
import { mintToken, TOKEN_AUDIENCE, TOKEN_ISSUER } from '../../src/domain/operations/tokens.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { bearer, buildTestApp, seedPartner, startUpstream, tokenFor, UUID, who, type SeededPartner, type TestApp, type TestUpstream } from './support.js';

type Injected = { statusCode: number; headers: Record<string, unknown>; json(): unknown; body: string };

/** The same text with one character (well inside it, so every bit of it counts) replaced by another. */
function flipCharacter(text: string, index: number): string {
  return text.slice(0, index) + (text[index] === 'A' ? 'B' : 'A') + text.slice(index + 1);
}

function expectEnvelope(response: Injected, status: number, code: string) {
  expect(response.statusCode, response.body).toBe(status);
  const body = response.json() as { error: { code: string; message: string; request_id: string } };
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toMatch(UUID);
  expect(response.headers['x-request-id']).toBe(body.error.request_id);
  return body;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.concurrent.each(BACKENDS)('data requests (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    let partner: SeededPartner;
    let token: string;


    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      // 1 s: short enough for the timeout tests, long enough for a first forward on a loaded machine (300 ms was not).
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: `${upstream.url}/engine/`, PUBLIC_API_UPSTREAM_TIMEOUT_MS: '1000' });
      partner = await seedPartner(db, ['acme', 'globex']);
      token = await tokenFor(t, partner);
    });
    beforeEach(() => {
      upstream.received.length = 0;
      upstream.respond = () => ({});
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    describe('forwarding', () => {
      it('forwards a GET: path after the base, query, partner and company headers, no Authorization', async () => {
        upstream.respond = () => ({ status: 207, headers: { 'x-engine-version': '7', 'x-request-id': 'engine-own' }, body: '{"prices":[1,2]}' });
        const response = await t.inject({
          method: 'GET',
          url: '/public/v1/recommendations/items?company_id=acme&limit=5',
          headers: { ...bearer(token), 'x-partner-id': 'forged', 'x-company-id': 'forged', 'x-request-id': 'forged', 'x-custom': 'kept' },
        });
        expect(response.statusCode).toBe(207);
        expect(response.body).toBe('{"prices":[1,2]}');
        expect(response.headers['x-engine-version']).toBe('7');
        expect(response.headers['x-request-id']).toMatch(UUID);
        expect(upstream.received).toHaveLength(1);
        const seen = upstream.received[0]!;
        expect(seen.method).toBe('GET');
        expect(seen.url).toBe('/engine/recommendations/items?company_id=acme&limit=5');
        expect(seen.headers.authorization).toBeUndefined();
        expect(seen.headers['x-partner-id']).toBe(partner.partnerId);
        expect(seen.headers['x-company-id']).toBe('acme');
        expect(seen.headers['x-request-id']).toBe(response.headers['x-request-id']);
        expect(seen.headers['x-custom']).toBe('kept');
        const line = t.logLines.find((entry) => entry.request_id === response.headers['x-request-id']);
        expect(line).toMatchObject({ partner_id: partner.partnerId, method: 'GET', path: '/public/v1/recommendations/items', status: 207 });
        expect(JSON.stringify(t.logLines)).not.toContain(token);
      });

      it('forwards a POST body byte for byte, company_id from the body', async () => {
        const payload = '{ "company_id": "globex", "items": [ {"sku": "a"} ] }';
        const response = await t.inject({
          method: 'POST',
          url: '/public/v1/recommendations?dry_run=1',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          payload,
        });
        expect(response.statusCode).toBe(200);
        const seen = upstream.received[0]!;
        expect(seen.method).toBe('POST');
        expect(seen.url).toBe('/engine/recommendations?dry_run=1');
        expect(seen.body).toBe(payload);
        expect(seen.headers['content-type']).toBe('application/json');
        expect(seen.headers['x-company-id']).toBe('globex');
      });

      it('forwards PUT, PATCH, DELETE and HEAD with the same method', async () => {
        for (const method of ['PUT', 'PATCH'] as const) {
          const response = await t.inject({ method, url: '/public/v1/rules/1', headers: bearer(token), payload: { company_id: 'acme', rule: 1 } });
          expect(response.statusCode).toBe(200);
        }
        expect((await t.inject({ method: 'DELETE', url: '/public/v1/rules/1?company_id=acme', headers: bearer(token) })).statusCode).toBe(200);
        expect((await t.inject({ method: 'HEAD', url: '/public/v1/rules?company_id=acme', headers: bearer(token) })).statusCode).toBe(200);
        expect(upstream.received.map((seen) => `${seen.method} ${seen.url}`)).toEqual([
          'PUT /engine/rules/1',
          'PATCH /engine/rules/1',
          'DELETE /engine/rules/1?company_id=acme',
          'HEAD /engine/rules?company_id=acme',
        ]);
      });

      it("answers the engine's own errors as envelopes, keeping the status, and does not retry them", async () => {
        upstream.respond = () => ({ status: 503, headers: { 'retry-after': '3' }, body: '{"engine":"busy"}' });
        const response = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) });
        const body = expectEnvelope(response, 503, 'engine_unavailable');
        expect(JSON.stringify(body)).not.toContain('busy');
        expect(response.headers['retry-after']).toBe('3');
        expect(upstream.received).toHaveLength(1);
      });

      it('answers 504 upstream_timeout when the engine is too slow', async () => {
        upstream.respond = () => ({ delayMs: 3_000 });
        expectEnvelope(await t.inject({ method: 'GET', url: '/public/v1/slow?company_id=acme', headers: bearer(token) }), 504, 'upstream_timeout');
      });

      it('answers 502 bad_gateway when the engine is unreachable', async () => {
        const down = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
        try {
          const response = await down.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) });
          const body = expectEnvelope(response, 502, 'bad_gateway');
          expect(body.error.message).not.toMatch(/127\.0\.0\.1|ECONNREFUSED/);
        } finally {
          await down.close();
        }
      });

      it('logs why a 502 or 504 happened at warn, with the request id, and nothing of the token', async () => {
        const down = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
        try {
          const response = await down.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) });
          expect(response.statusCode).toBe(502);
          const warn = down.logLines.find((line) => line.level === 40 && line.request_id === response.headers['x-request-id']);
          expect(warn).toMatchObject({ status: 502, err: { name: 'AppError', code: 'bad_gateway' } });
          const causes = warn!.causes as { name?: string; code?: string; message?: string }[];
          expect(causes.length).toBeGreaterThan(0);
          expect(JSON.stringify(causes)).toMatch(/ECONNREFUSED/);
          expect(down.logText.join('')).not.toContain(token);
        } finally {
          await down.close();
        }
        const logged = t.logLines.length;
        upstream.respond = () => ({ delayMs: 3_000 });
        const slow = await t.inject({ method: 'GET', url: '/public/v1/slow?company_id=acme', headers: bearer(token) });
        expect(slow.statusCode).toBe(504);
        const lines = t.logLines.slice(logged).filter((line) => line.request_id === slow.headers['x-request-id']);
        expect(lines.map((line) => line.level)).toEqual([40, 30]);
        expect(lines[0]).toMatchObject({ status: 504, err: { code: 'upstream_timeout' } });
        expect((lines[0]!.causes as unknown[]).length).toBeGreaterThan(0);
        // A 4xx and a 200 get the request line only.
        upstream.respond = () => ({});
        const fine = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=nowhere', headers: bearer(token) });
        expect(fine.statusCode).toBe(404);
        const ok = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) });
        for (const response of [fine, ok]) {
          expect(t.logLines.filter((line) => line.request_id === response.headers['x-request-id']).map((line) => line.level)).toEqual([30]);
        }
      });

      it('answers 503 upstream_unavailable when no engine is configured, after the gate', async () => {
        const none = await buildTestApp(backend, db, {});
        try {
          expectEnvelope(await none.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) }), 503, 'upstream_unavailable');
          expectEnvelope(await none.inject({ method: 'GET', url: '/public/v1/x?company_id=acme' }), 401, 'unauthorized');
        } finally {
          await none.close();
        }
      });
    });

    describe('authentication', () => {
      const get = (headers: Record<string, string>) => t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers });

      it('answers 401 with WWW-Authenticate: Bearer when no token is sent', async () => {
        const response = await get({});
        expectEnvelope(response, 401, 'unauthorized');
        expect(response.headers['www-authenticate']).toBe('Bearer');
      });

      it('answers 401 with error="invalid_token" to malformed, tampered, foreign or wrongly-signed tokens', async () => {
        const [header, payload, signature] = token.split('.') as [string, string, string];
        const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
        const altered = Buffer.from(JSON.stringify({ ...claims, sub: 'ptn_00000000000000000000000000' })).toString('base64url');
        const hs256 = await new SignJWT({ kp: partner.keyPairId })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setIssuer(TOKEN_ISSUER)
          .setAudience(TOKEN_AUDIENCE)
          .setSubject(partner.partnerId)
          .setJti('j')
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(new TextEncoder().encode('a-shared-secret-of-enough-length!!'));
        const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${payload}.`;
        const values = [
          'Bearer',
          `Basic ${Buffer.from('a:b').toString('base64')}`,
          token,
          `Bearer  ${token}`,
          `Bearer ${token} x`,
          `Token ${token}`,
          `Bearer ${header}.${altered}.${signature}`,
          `Bearer ${header}.${payload}.${flipCharacter(signature, 10)}`,
          `Bearer ${hs256}`,
          `Bearer ${none}`,
          `Bearer ${none}x`,
          `Bearer ${'a'.repeat(5000)}.b.c`,
        ];
        for (const value of values) {
          const response = await get({ authorization: value });
          expectEnvelope(response, 401, 'unauthorized');
          expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
        }
        expect(upstream.received).toHaveLength(0);
      });

      it('answers 401 to an expired token', async () => {
        // exp is whole seconds from iat = floor(now): a lifetime of 2 s leaves at least 1 s for the first request
        // (with 1 s, a token minted late in a second could expire before it).
        const { accessToken, claims } = await mintToken(t.keys, { partnerId: partner.partnerId, keyPairId: partner.keyPairId }, 2);
        expect((await get(bearer(accessToken))).statusCode).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, claims.exp * 1000 - Date.now() + 50));
        expectEnvelope(await get(bearer(accessToken)), 401, 'unauthorized');
      });

      it("accepts an operator's test token", async () => {
        const { accessToken } = await mintTestToken(db, who, t.keys, partner.partnerId, 60);
        expect((await get(bearer(accessToken))).statusCode).toBe(200);
      });

      it('refuses API keys on data requests with 400 invalid_request', async () => {
        const cases = [
          t.inject({ method: 'GET', url: `/public/v1/x?company_id=acme&access_key=${partner.accessKey}`, headers: bearer(token) }),
          t.inject({ method: 'GET', url: `/public/v1/x?company_id=acme&s=${partner.secretKey}`, headers: bearer(token) }),
          t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), 'x-api-key': 'k' } }),
          t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), 'x-secret-key': partner.secretKey } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { company_id: 'acme', secret_key: 'x' } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { company_id: 'acme', note: partner.accessKey } }),
        ];
        for (const response of await Promise.all(cases)) expectEnvelope(response, 400, 'invalid_request');
        expect(upstream.received).toHaveLength(0);
      });

      it('refuses key material in the path with 400, with or without a token, and never logs it', async () => {
        const logged = t.logText.length;
        const encoded = partner.secretKey.replace(/_/g, '%5F');
        const cases = [
          { url: `/public/v1/x/${partner.secretKey}?company_id=acme`, headers: bearer(token) },
          { url: `/public/v1/x/${partner.secretKey}?company_id=acme`, headers: {} },
          { url: `/public/v1/x/${partner.secretKey}`, headers: { authorization: 'Bearer a.b.c' } },
          { url: `/public/v1/${partner.accessKey}/items?company_id=acme`, headers: bearer(token) },
          { url: `/public/v1/x/${encoded}?company_id=acme`, headers: bearer(token) },
          { url: `/public/v1/x/${encoded}?company_id=acme`, headers: {} },
        ];
        for (const { url, headers } of cases) {
          const response = await t.inject({ method: 'GET', url, headers });
          expectEnvelope(response, 400, 'invalid_request');
          expect(response.headers['www-authenticate']).toBeUndefined();
        }
        expect(upstream.received).toHaveLength(0);
        const text = t.logText.slice(logged).join('');
        expect(t.logText.length - logged).toBe(cases.length);
        const random = partner.secretKey.slice('pctl_sk_'.length);
        expect(text).not.toContain(random);
        expect(text).not.toContain(partner.accessKey.slice('pctl_ak_'.length));
        expect(text).toContain('/public/v1/x/pctl_sk_[redacted]');
      });

      it('refuses keys in the query with 400 before looking for a token', async () => {
        const cases = [
          `/public/v1/x?company_id=acme&access_key=anything`,
          `/public/v1/x?company_id=acme&secret_key=anything`,
          `/public/v1/x?company_id=acme&s=${partner.secretKey}`,
        ];
        for (const url of cases) {
          const response = await t.inject({ method: 'GET', url });
          expectEnvelope(response, 400, 'invalid_request');
          expect(response.headers['www-authenticate']).toBeUndefined();
        }
        expect(upstream.received).toHaveLength(0);
      });

      it('redacts key material in the logged path of requests that never reach the gate', async () => {
        const logged = t.logText.length;
        const outside = await t.inject({ method: 'GET', url: `/elsewhere/${partner.secretKey}` });
        expectEnvelope(outside, 404, 'not_found');
        const wrongMethod = await t.inject({ method: 'TRACE', url: `/public/v1/x/${partner.secretKey}` });
        expect(wrongMethod.statusCode).toBe(405);
        const encoded = await t.inject({ method: 'GET', url: `/elsewhere/pctl%5Fsk%5F${partner.secretKey.slice(8)}` });
        expectEnvelope(encoded, 404, 'not_found');
        const text = t.logText.slice(logged).join('');
        expect(t.logText.length - logged).toBe(3);
        expect(text).not.toContain(partner.secretKey.slice('pctl_sk_'.length));
        expect(text).toContain('/elsewhere/pctl_sk_[redacted]');
        expect(upstream.received).toHaveLength(0);
      });

      it('checks the token, partner and pair once per request, then only the company', async () => {
        const authenticate = vi.spyOn(t.access, 'authenticate');
        const authorize = vi.spyOn(t.access, 'authorize');
        const authorizeCompany = vi.spyOn(t.access, 'authorizeCompany');
        try {
          expect((await t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) })).statusCode).toBe(200);
          expectEnvelope(await t.inject({ method: 'GET', url: '/public/v1/x?company_id=nowhere', headers: bearer(token) }), 404, 'not_found');
          // Each check once per request, whether it answered from memory or read.
          expect(authenticate).toHaveBeenCalledTimes(2);
          expect(authorizeCompany).toHaveBeenCalledTimes(2);
          // An unmapped company is never admitted from the caches: the database says no.
          expect(authorizeCompany).toHaveBeenCalledWith(expect.anything(), 'nowhere');
          expect(authorize).not.toHaveBeenCalled();
        } finally {
          vi.restoreAllMocks();
        }
      });

      it('refuses a token of a revoked pair or of a disabled partner, within the 1 s bound', async () => {
        const revoked = await seedPartner(db);
        const disabled = await seedPartner(db);
        const revokedToken = await tokenFor(t, revoked);
        const disabledToken = await tokenFor(t, disabled);
        const getFor = (who: string) => t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(who) });
        expect((await getFor(revokedToken)).statusCode).toBe(200);
        expect((await getFor(disabledToken)).statusCode).toBe(200);
        await revokeKeyPair(db, who, revoked.partnerId);
        await setPartnerStatus(db, who, disabled.partnerId, 'disabled');
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expectEnvelope(await getFor(revokedToken), 401, 'unauthorized');
        expectEnvelope(await getFor(disabledToken), 401, 'unauthorized');
        await setPartnerStatus(db, who, disabled.partnerId, 'active');
        await t.access.refresh();
        // Enabling restores the keys, not the tokens issued before: the client exchanges once more.
        expectEnvelope(await getFor(disabledToken), 401, 'unauthorized');
        expect((await getFor(await tokenFor(t, disabled))).statusCode).toBe(200);
      });

      it('rotation: old keys refused, old token valid until expiry; with revocation every earlier token dies at once', async () => {
        const rotating = await seedPartner(db);
        const oldToken = await tokenFor(t, rotating);
        const rotated = await rotateKeyPair(db, who, rotating.partnerId);
        await t.access.refresh();
        const oldKeys = await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: rotating.accessKey, secret_key: rotating.secretKey } });
        expectEnvelope(oldKeys, 401, 'invalid_credentials');
        const getWith = (value: string) => t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(value) });
        expect((await getWith(oldToken)).statusCode).toBe(200);
        const newToken = await tokenFor(t, { ...rotating, accessKey: rotated.accessKey, secretKey: rotated.secretKey });
        expect((await getWith(newToken)).statusCode).toBe(200);

        await rotateKeyPair(db, who, rotating.partnerId, { revokeIssuedTokens: true });
        await t.access.refresh();
        // A leak: the superseded pair is revoked too, so no token minted before the command survives.
        expectEnvelope(await getWith(oldToken), 401, 'unauthorized');
        expectEnvelope(await getWith(newToken), 401, 'unauthorized');
      });
    });

    describe('company_id', () => {
      it('answers 400 invalid_request when it is missing, empty, not a string, repeated or misplaced', async () => {
        const cases = [
          t.inject({ method: 'GET', url: '/public/v1/x', headers: bearer(token) }),
          t.inject({ method: 'GET', url: '/public/v1/x?company_id=', headers: bearer(token) }),
          t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme&company_id=globex', headers: bearer(token) }),
          t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme&company%5Fid=acme', headers: bearer(token) }),
          t.inject({ method: 'DELETE', url: '/public/v1/x', headers: bearer(token), payload: { company_id: 'acme' } }),
          t.inject({ method: 'DELETE', url: '/public/v1/x?company_id=acme', headers: bearer(token), payload: { company_id: 'acme' } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { other: 1 } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { company_id: '' } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { company_id: 7 } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: { company_id: ['acme'] } }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: bearer(token), payload: [{ company_id: 'acme' }] }),
          t.inject({ method: 'POST', url: '/public/v1/x?company_id=acme', headers: bearer(token), payload: { company_id: 'acme' } }),
          t.inject({ method: 'POST', url: '/public/v1/x?company_id=acme', headers: bearer(token) }),
          t.inject({
            method: 'POST',
            url: '/public/v1/x',
            headers: { ...bearer(token), 'content-type': 'application/json' },
            payload: '{"company_id":"acme","company_id":"globex"}',
          }),
          t.inject({
            method: 'PUT',
            url: '/public/v1/x',
            headers: { ...bearer(token), 'content-type': 'application/json' },
            payload: '{"company_id":"acme","nested":{"company_id":"x"},"company\\u005fid":"globex"}',
          }),
          t.inject({ method: 'POST', url: '/public/v1/x', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: '{"company_id":' }),
        ];
        for (const response of await Promise.all(cases)) expectEnvelope(response, 400, 'invalid_request');
        expect(upstream.received).toHaveLength(0);
      });

      it('accepts a nested company_id beside the top-level one', async () => {
        const response = await t.inject({
          method: 'POST',
          url: '/public/v1/x',
          headers: { ...bearer(token), 'content-type': 'application/json' },
          payload: '{"company_id":"acme","nested":{"company_id":"other"}}',
        });
        expect(response.statusCode).toBe(200);
      });

      it('answers 415 to a non-JSON body on a data request', async () => {
        const response = await t.inject({ method: 'POST', url: '/public/v1/x', headers: { ...bearer(token), 'content-type': 'text/plain' }, payload: 'company_id=acme' });
        expectEnvelope(response, 415, 'unsupported_media_type');
      });

      it('answers the same 404 not_found to an unmapped and to a nonexistent company', async () => {
        const other = await seedPartner(db, ['initech']);
        const unmapped = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=initech', headers: bearer(token) });
        const missing = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=no-such-company', headers: bearer(token) });
        const strange = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=a%20b', headers: bearer(token) });
        const bodies = [unmapped, missing, strange].map((response) => {
          const body = expectEnvelope(response, 404, 'not_found');
          return JSON.stringify({ ...body.error, request_id: undefined });
        });
        expect(new Set(bodies).size).toBe(1);
        expect(other.partnerId).not.toBe(partner.partnerId);
        expect(upstream.received).toHaveLength(0);
      });

      it('follows mapping changes within the 1 s staleness bound', async () => {
        const request = () => t.inject({ method: 'GET', url: '/public/v1/x?company_id=umbrella', headers: bearer(token) });
        expectEnvelope(await request(), 404, 'not_found');
        await mapCompany(db, who, partner.partnerId, 'umbrella');
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expect((await request()).statusCode).toBe(200);
        await unmapCompany(db, who, partner.partnerId, 'umbrella');
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        expectEnvelope(await request(), 404, 'not_found');
      });
    });
  });
});
