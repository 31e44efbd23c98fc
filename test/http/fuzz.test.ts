import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { bearer, buildTestApp, seedPartner, startUpstream, UUID, type SeededPartner, type TestApp, type TestUpstream } from './support.js';

const METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'] as const;

describe('malformed requests (sqlite)', () => {
  let backend: TestBackend;
  let db: Database;
  let upstream: TestUpstream;
  let t: TestApp;
  let partner: SeededPartner;
  let token: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    upstream = await startUpstream();
    t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0', PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0' });
    partner = await seedPartner(db, ['acme']);
    token = (await t.app.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: partner.accessKey, secret_key: partner.secretKey } })).json().access_token;
  });
  afterAll(async () => {
    await t?.close();
    await upstream?.close();
    await db?.close();
    await backend?.dispose();
  });

  const body = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.json({ maxDepth: 4 }),
    fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.stringify(value)),
    fc.constantFrom('{"company_id":"acme","company_id":"acme"}', '{"company_id":', '[]', 'null', '{"company_id":7}', '{"company_id":"acme","secret_key":"x"}'),
    fc.nat({ max: 40_000 }).map((size) => `{"company_id":"acme","x":"${'a'.repeat(size)}"}`),
    fc.nat({ max: 5_000 }).map((depth) => '['.repeat(depth) + ']'.repeat(depth)),
  );
  const query = fc.oneof(
    fc.constant(''),
    fc.constant('?company_id=acme&company_id=acme'),
    fc.constant('?company_id='),
    fc.string({ maxLength: 100 }).map((text) => `?${encodeURIComponent(text)}`),
    fc.string({ maxLength: 50 }).map((text) => `?company_id=${encodeURIComponent(text)}`),
    fc.nat({ max: 6_000 }).map((size) => `?company_id=${'x'.repeat(size)}`),
  );
  const path = fc.oneof(
    fc.constantFrom('/public/v1/x', '/public/v1/auth/token', '/public/v1', '/healthz', '/nope', '/public/v1/a/%2e%2e/b', '/public/v1/%E0%A4%A'),
    fc.string({ maxLength: 40 }).map((text) => `/public/v1/${encodeURIComponent(text)}`),
  );
  const headers = fc.record({
    authorization: fc.oneof(
      fc.constant(`Bearer ${'placeholder'}`),
      fc.constant('Bearer'),
      fc.string({ maxLength: 60 }).map((text) => `Bearer ${text.replace(/[^\x21-\x7e]/g, '')}`),
    ),
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x'),
  });

  it('answers 200 generated malformed requests with 4xx envelopes, never a 5xx', async () => {
    let count = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...METHODS), path, query, body, headers, fc.boolean(), async (method, url, search, payload, extra, validToken) => {
        count++;
        const sent = { ...extra, authorization: validToken && extra.authorization === 'Bearer placeholder' ? `Bearer ${token}` : extra.authorization };
        const response = await t.app.inject({ method, url: url + search, headers: sent, ...(method === 'GET' || method === 'HEAD' ? {} : { payload }) });
        expect(response.statusCode, `${method} ${url}${search.slice(0, 80)}`).toBeLessThan(500);
        if (response.statusCode >= 400 && method !== 'HEAD') {
          const envelope = response.json();
          expect(envelope.error.request_id).toMatch(UUID);
          expect(response.headers['x-request-id']).toBe(envelope.error.request_id);
        }
      }),
      { numRuns: 200 },
    );
    expect(count).toBeGreaterThanOrEqual(200);
    const ok = await t.app.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: bearer(token) });
    expect(ok.statusCode).toBe(200);
  });
});
