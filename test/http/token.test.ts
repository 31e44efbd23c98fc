import { keyPairById } from '../../src/db/repositories/key-pairs.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { rotateKeyPair, revokeKeyPair } from '../../src/domain/operations/key-pairs.js';
import { setPartnerStatus } from '../../src/domain/operations/partners.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { buildTestApp, seedPartner, UUID, who, type SeededPartner, type TestApp } from './support.js';

const TOKEN = '/public/v1/auth/token';

describe.each(BACKENDS)('POST /public/v1/auth/token (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let t: TestApp;
    let partner: SeededPartner;

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      t = await buildTestApp(backend, db, { PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '1000', PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '1000' });
      partner = await seedPartner(db);
    });
    afterAll(async () => {
      await t?.close();
      await db?.close();
      await backend?.dispose();
    });

    const exchange = (payload: unknown, headers: Record<string, string> = {}) =>
      t.inject({ method: 'POST', url: TOKEN, payload: payload as string, headers: { 'content-type': 'application/json', ...headers } });

    function expectEnvelope(response: { statusCode: number; headers: Record<string, unknown>; json(): unknown }, status: number, code: string) {
      expect(response.statusCode).toBe(status);
      const body = response.json() as { error: { code: string; message: string; request_id: string } };
      expect(body.error.code).toBe(code);
      expect(typeof body.error.message).toBe('string');
      expect(body.error.request_id).toMatch(UUID);
      expect(response.headers['x-request-id']).toBe(body.error.request_id);
      return body;
    }

    it('exchanges a valid key pair for a bearer token of 900 s', async () => {
      const response = await exchange({ access_key: partner.accessKey, secret_key: partner.secretKey });
      expect(response.statusCode).toBe(200);
      expect(response.headers['x-request-id']).toMatch(UUID);
      expect(response.headers['cache-control']).toBe('no-store');
      const body = response.json();
      expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'token_type']);
      expect(body.token_type).toBe('Bearer');
      expect(body.expires_in).toBe(900);
      expect(body.access_token.split('.')).toHaveLength(3);
      const claims = await t.verifier.verify(body.access_token);
      expect(claims.partnerId).toBe(partner.partnerId);
      expect(claims.keyPairId).toBe(partner.keyPairId);
    });

    it('records the pair last-used time', async () => {
      // Written off the request path, shortly after the answer.
      await vi.waitFor(async () => expect((await keyPairById(db.sql, partner.keyPairId))?.lastUsedAt).toBeInstanceOf(Date));
    });

    it('refuses every bad credential with the same 401 invalid_credentials body', async () => {
      const superseded = await seedPartner(db);
      await rotateKeyPair(db, who, superseded.partnerId);
      const revoked = await seedPartner(db);
      await revokeKeyPair(db, who, revoked.partnerId);
      const disabled = await seedPartner(db);
      await setPartnerStatus(db, who, disabled.partnerId, 'disabled');
      const cases = [
        { access_key: 'pctl_ak_0000000000000000000000', secret_key: partner.secretKey },
        { access_key: 'nonsense', secret_key: 'x' },
        { access_key: partner.accessKey, secret_key: `${partner.secretKey.slice(0, -1)}${partner.secretKey.endsWith('x') ? 'y' : 'x'}` },
        { access_key: partner.accessKey, secret_key: '' },
        { access_key: superseded.accessKey, secret_key: superseded.secretKey },
        { access_key: revoked.accessKey, secret_key: revoked.secretKey },
        { access_key: disabled.accessKey, secret_key: disabled.secretKey },
      ];
      const bodies = new Set<string>();
      for (const payload of cases) {
        const response = await exchange(payload);
        const body = expectEnvelope(response, 401, 'invalid_credentials');
        expect(response.headers['www-authenticate']).toBeUndefined();
        bodies.add(JSON.stringify({ ...body.error, request_id: undefined }));
      }
      expect(bodies.size).toBe(1);
    });

    it('answers 400 invalid_request to malformed JSON, missing, non-string or extra fields', async () => {
      const cases: unknown[] = [
        '{"access_key": ',
        '[]',
        '"text"',
        'null',
        '42',
        '',
        JSON.stringify({ access_key: partner.accessKey }),
        JSON.stringify({ secret_key: partner.secretKey }),
        JSON.stringify({ access_key: 1, secret_key: partner.secretKey }),
        JSON.stringify({ access_key: partner.accessKey, secret_key: null }),
        JSON.stringify({ access_key: partner.accessKey, secret_key: partner.secretKey, scope: 'all' }),
      ];
      for (const payload of cases) expectEnvelope(await exchange(payload), 400, 'invalid_request');
    });

    it('answers 415 to a body that is neither JSON nor a form, and to no content type with a body', async () => {
      // 39: a form is read (OAuth clients send their client assertion so), and holds an assertion or nothing.
      expectEnvelope(await exchange('access_key=a&secret_key=b', { 'content-type': 'application/x-www-form-urlencoded' }), 400, 'invalid_request');
      expectEnvelope(await exchange('{}', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      const bare = await t.inject({ method: 'POST', url: TOKEN, payload: Buffer.from('{}') });
      expect([400, 415]).toContain(bare.statusCode);
      expect(bare.json().error.request_id).toMatch(UUID);
    });

    it('answers 413 to a body over 16 KiB', async () => {
      const payload = JSON.stringify({ access_key: partner.accessKey, secret_key: 'x'.repeat(17 * 1024) });
      expectEnvelope(await exchange(payload), 413, 'payload_too_large');
    });

    it('answers 405 with Allow: POST to every other method', async () => {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
        const response = await t.inject({ method, url: TOKEN });
        expectEnvelope(response, 405, 'method_not_allowed');
        expect(response.headers.allow).toBe('POST');
      }
    });

    it('throttles per access key and per client address with 429 and Retry-After', async () => {
      const limited = await buildTestApp(backend, db, { PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '3', PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '5' });
      try {
        const send = (accessKey: string, remoteAddress: string) =>
          limited.inject({
            method: 'POST',
            url: TOKEN,
            remoteAddress,
            payload: { access_key: accessKey, secret_key: 'wrong' },
          });
        // Per key: the fourth guess at one key is refused, whatever address it comes from.
        for (let i = 0; i < 3; i++) expect((await send(partner.accessKey, `10.0.0.${i + 1}`)).statusCode).toBe(401);
        const perKey = await send(partner.accessKey, '10.0.0.99');
        expectEnvelope(perKey, 429, 'rate_limited');
        expect(Number(perKey.headers['retry-after'])).toBeGreaterThan(0);
        // Per address: the sixth request from one address is refused, whatever key it names.
        for (let i = 0; i < 5; i++) {
          expect((await send(`pctl_ak_${String(i).padStart(22, '0')}`, '10.1.0.1')).statusCode).toBe(401);
        }
        const perAddress = await send('pctl_ak_9999999999999999999999', '10.1.0.1');
        expectEnvelope(perAddress, 429, 'rate_limited');
        expect(Number(perAddress.headers['retry-after'])).toBeGreaterThan(0);
        // A valid exchange from a fresh address with a fresh key still works.
        const other = await seedPartner(db);
        const ok = await limited.inject({
          method: 'POST',
          url: TOKEN,
          remoteAddress: '10.2.0.1',
          payload: { access_key: other.accessKey, secret_key: other.secretKey },
        });
        expect(ok.statusCode).toBe(200);
      } finally {
        await limited.close();
      }
    });

    it("failed guesses at a partner's access key do not lock the partner out of the per-key throttle", async () => {
      const limited = await buildTestApp(backend, db, { PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '30', PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0' });
      try {
        const victim = await seedPartner(db);
        const wrong = `${victim.secretKey.slice(0, -1)}${victim.secretKey.endsWith('x') ? 'y' : 'x'}`;
        const send = (secretKey: string, i: number) =>
          limited.inject({ method: 'POST', url: TOKEN, remoteAddress: `10.9.${i >> 8}.${i & 255}`, payload: { access_key: victim.accessKey, secret_key: secretKey } });
        // The partner's earlier, legitimate exchange (argon2 verified once).
        expect((await send(victim.secretKey, 0)).statusCode).toBe(200);
        const statuses: number[] = [];
        for (let i = 1; i <= 34; i++) statuses.push((await send(wrong, i)).statusCode);
        // The first exchange, not yet known good, counted: 29 guesses are answered, the rest refused.
        expect(statuses).toEqual([...Array<number>(29).fill(401), ...Array<number>(5).fill(429)]);
        for (let i = 0; i < 3; i++) {
          const ok = await send(victim.secretKey, 100 + i);
          expect(ok.statusCode).toBe(200);
          expect(ok.headers['retry-after']).toBeUndefined();
          expectEnvelope(await send(wrong, 200 + i), 429, 'rate_limited');
        }
      } finally {
        await limited.close();
      }
    });

    it('never logs the secret, the token or the body', async () => {
      const response = await exchange({ access_key: partner.accessKey, secret_key: partner.secretKey });
      const token = response.json().access_token as string;
      const text = JSON.stringify(t.logLines);
      expect(text).not.toContain(partner.secretKey);
      expect(text).not.toContain(token);
      const line = t.logLines.find((entry) => entry.request_id === response.headers['x-request-id']);
      expect(line).toMatchObject({ method: 'POST', path: TOKEN, status: 200, partner_id: partner.partnerId });
      expect(typeof line?.duration_ms).toBe('number');
    });
  });
});
