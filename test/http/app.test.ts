import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { openApiDocument } from '../../src/http/openapi/document.js';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { TcpRelay } from '../support/relay.js';
import { bearer, buildTestApp, seedPartner, startUpstream, UUID, type TestApp, type TestUpstream } from './support.js';

type Injected = { statusCode: number; headers: Record<string, unknown>; json(): unknown; body: string };

function expectEnvelope(response: Injected, status: number, code: string) {
  expect(response.statusCode, response.body).toBe(status);
  const body = response.json() as { error: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'request_id']);
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toMatch(UUID);
  expect(response.headers['x-request-id']).toBe(body.error.request_id);
  return body;
}

describe.each(BACKENDS)('app (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    let token: string;

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
      const partner = await seedPartner(db);
      const exchange = await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: partner.accessKey, secret_key: partner.secretKey } });
      token = exchange.json().access_token;
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('answers unknown routes anywhere with a 404 not_found envelope and a fresh request id', async () => {
      const first = expectEnvelope(await t.inject({ method: 'GET', url: '/nope' }), 404, 'not_found');
      const second = expectEnvelope(await t.inject({ method: 'POST', url: '/public/v2/x', payload: {} }), 404, 'not_found');
      expect(first.error.request_id).not.toBe(second.error.request_id);
      expectEnvelope(await t.inject({ method: 'OPTIONS', url: '/' }), 404, 'not_found');
    });

    it('ignores a request id sent by the client', async () => {
      const response = await t.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'mine' } });
      expect(response.headers['x-request-id']).toMatch(UUID);
    });

    it('serves /healthz and /readyz with the provider', async () => {
      const health = await t.inject({ method: 'GET', url: '/healthz' });
      expect(health.statusCode).toBe(200);
      expect(health.json()).toEqual({ status: 'ok' });
      expect(health.headers['x-request-id']).toMatch(UUID);
      const ready = await t.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode).toBe(200);
      // The revision this instance's caches reflect (the services confirmed it once at start).
      // On PostgreSQL, this host's clock against the database server's (the same host here: within the tolerance).
      const clock = provider === 'postgresql' ? { clock: { offset_ms: expect.any(Number), status: 'ok' } } : {};
      expect(ready.json()).toEqual({ status: 'ok', database: provider, applied_revision: t.services.access.appliedRevision, ...clock });
      expect(ready.json().applied_revision).toEqual(expect.any(Number));
      const wrong = await t.inject({ method: 'POST', url: '/healthz' });
      expectEnvelope(wrong, 405, 'method_not_allowed');
      expect(wrong.headers.allow).toBe('GET, HEAD');
    });

    it('/readyz reads the revision row through the plain-SQL connection, within the 1 s staleness bound, with the 503 envelope when it fails', async () => {
      const sqlProbe = vi.spyOn(db.sql, 'query');
      try {
        expect((await t.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
        expect(sqlProbe).toHaveBeenCalledWith('SELECT value FROM revision WHERE id = 1');
        sqlProbe.mockRejectedValueOnce(new Error('connection refused by 10.0.0.7:5432'));
        const failed = expectEnvelope(await t.inject({ method: 'GET', url: '/readyz' }), 503, 'database_unavailable');
        expect(failed.error.message).toContain(provider);
        expect(failed.error.message).not.toContain('10.0.0.7');
        sqlProbe.mockImplementationOnce(() => new Promise(() => {}));
        const started = Date.now();
        expectEnvelope(await t.inject({ method: 'GET', url: '/readyz' }), 503, 'database_unavailable');
        expect(Date.now() - started).toBeGreaterThanOrEqual(900);
        expect(Date.now() - started).toBeLessThan(3_000);
      } finally {
        vi.restoreAllMocks();
      }
    });

    it('logs why /readyz failed at warn (name, code, first line), never anything shaped like a key or token', async () => {
      const secret = `pctl_sk_${'S'.repeat(43)}`;
      const jwt = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJwdG4ifQ.c2lnbmF0dXJl';
      const failure = Object.assign(new Error(`server closed the connection (${secret} ${jwt})\nsecond line with ${secret}`), {
        code: 'ECONNRESET',
        cause: new SyntaxError(`Unexpected token in JSON: "d":"${secret}"`),
      });
      const sqlProbe = vi.spyOn(db.sql, 'query').mockRejectedValueOnce(failure);
      try {
        const response = await t.inject({ method: 'GET', url: '/readyz' });
        expectEnvelope(response, 503, 'database_unavailable');
        const requestId = response.headers['x-request-id'];
        const warn = t.logLines.find((line) => line.level === 40 && line.request_id === requestId);
        expect(warn).toMatchObject({
          status: 503,
          err: { name: 'AppError', code: 'database_unavailable', message: 'readiness probe failed' },
          causes: [{ name: 'Error', code: 'ECONNRESET', message: 'server closed the connection ([redacted] [redacted])' }, { name: 'SyntaxError' }],
        });
        const text = t.logText.join('');
        expect(text).not.toContain('S'.repeat(43));
        expect(text).not.toContain(jwt);
        expect(text).not.toContain('second line');
      } finally {
        sqlProbe.mockRestore();
      }
    });

    it('serves an OpenAPI 3.1 document without authentication', async () => {
      const response = await t.inject({ method: 'GET', url: '/public/v1/openapi.json' });
      expect(response.statusCode).toBe(200);
      const doc = response.json();
      expect(doc.openapi).toBe('3.1.0');
      expect(doc.info.version).toBe('1.0.0');
      expect(doc.servers.map((server: { url: string }) => server.url)).toEqual(['/public/v1']);
      expect(doc.paths['/auth/token'].post.responses['401']).toBeDefined();
      expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
      expect(doc.components.schemas.ErrorEnvelope.properties.error.required).toEqual(['code', 'message', 'request_id']);
      expect(doc.components.schemas.ErrorCode.enum).toContain('invalid_credentials');
      expect(doc.components.schemas.ErrorCode.enum).toContain('request_timeout');
      expect(doc.components.schemas.ErrorCode['x-status'].request_timeout).toBe(408);
      expect(JSON.stringify(doc.paths['/{path}'])).toContain('company_id');
      expect(response.json()).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
      expectEnvelope(await t.inject({ method: 'DELETE', url: '/public/v1/openapi.json' }), 405, 'method_not_allowed');
    });

    it('refuses methods the data endpoints do not take with 405 and Allow', async () => {
      for (const url of ['/public/v1/x?company_id=acme', '/public/v1?company_id=acme', '/public/v1/?company_id=acme']) {
        for (const method of ['TRACE', 'PROPFIND', 'PURGE'] as const) {
          const response = await t.inject({ method, url, headers: bearer(token) });
          expectEnvelope(response, 405, 'method_not_allowed');
          expect(response.headers.allow, `${method} ${url}`).toBe('GET, HEAD, DELETE, OPTIONS, POST, PUT, PATCH');
        }
      }
    });

    it('sends no CORS headers at all when no origins are configured, preflights included', async () => {
      const headers = { origin: 'https://app.example.com', 'access-control-request-method': 'GET' };
      const preflight = await t.inject({ method: 'OPTIONS', url: '/public/v1/x', headers });
      expectEnvelope(preflight, 401, 'unauthorized');
      const simple = await t.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), origin: 'https://app.example.com' } });
      expect(simple.statusCode).toBe(200);
      for (const response of [preflight, simple]) {
        expect(Object.keys(response.headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
      }
    });

    it('allows exactly the configured origins', async () => {
      const withCors = await buildTestApp(backend, db, {
        PUBLIC_API_UPSTREAM_URL: upstream.url,
        PUBLIC_API_CORS_ORIGINS: 'https://app.example.com, https://admin.example.com',
      });
      try {
        const allowed = await withCors.inject({
          method: 'OPTIONS',
          url: '/public/v1/x',
          headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
        });
        expect(allowed.statusCode).toBe(204);
        expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.com');
        expect(String(allowed.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
        const get = await withCors.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), origin: 'https://admin.example.com' } });
        expect(get.statusCode).toBe(200);
        expect(get.headers['access-control-allow-origin']).toBe('https://admin.example.com');
        expect(String(get.headers['access-control-expose-headers'])).toContain('X-Request-Id');
        for (const origin of ['https://evil.example.com', 'https://app.example.com.evil.com', 'http://app.example.com', 'null']) {
          const refused = await withCors.inject({ method: 'OPTIONS', url: '/public/v1/x', headers: { origin, 'access-control-request-method': 'GET' } });
          expectEnvelope(refused, 401, 'unauthorized');
          expect(refused.headers['access-control-allow-origin']).toBeUndefined();
          const plain = await withCors.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), origin } });
          expect(plain.headers['access-control-allow-origin']).toBeUndefined();
        }
      } finally {
        await withCors.close();
      }
    });

    it("keeps Origin in Vary when CORS is on and the engine sends its own Vary, without duplicating it", async () => {
      const withCors = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_CORS_ORIGINS: 'https://app.example.com' });
      try {
        const get = async (app: TestApp, vary: string | undefined, origin = 'https://app.example.com') => {
          upstream.respond = () => (vary === undefined ? {} : { headers: { vary } });
          const response = await app.inject({ method: 'GET', url: '/public/v1/x?company_id=acme', headers: { ...bearer(token), origin } });
          expect(response.statusCode).toBe(200);
          return response.headers.vary;
        };
        expect(await get(withCors, 'Accept-Encoding')).toBe('Accept-Encoding, Origin');
        expect(await get(withCors, 'Accept-Encoding', 'https://other.example.com')).toBe('Accept-Encoding, Origin');
        expect(await get(withCors, 'origin, Accept-Language')).toBe('origin, Accept-Language');
        expect(await get(withCors, '*')).toBe('*');
        expect(await get(withCors, undefined)).toBe('Origin');
        // CORS off: the engine's Vary is passed through as it is.
        expect(await get(t, 'Accept-Encoding')).toBe('Accept-Encoding');
        expect(await get(t, undefined)).toBeUndefined();
      } finally {
        upstream.respond = () => ({});
        await withCors.close();
      }
    });

    it('answers 405 on the data paths through the shared helper: Allow lists exactly the data methods', async () => {
      for (const method of ['TRACE', 'QUERY'] as const) {
        const response = await t.inject({ method, url: '/public/v1/x/y?company_id=acme', headers: bearer(token), payload: 'not json' });
        expectEnvelope(response, 405, 'method_not_allowed');
        expect(response.headers.allow).toBe('GET, HEAD, DELETE, OPTIONS, POST, PUT, PATCH');
      }
    });

    it('maps framework errors to envelopes: bad URL encoding, bad content length', async () => {
      const bad = await t.inject({ method: 'GET', url: '/public/v1/%E0%A4%A?company_id=acme', headers: bearer(token) });
      expect(bad.statusCode).toBe(400);
      expect(bad.json().error.request_id).toMatch(UUID);
    });
  });
});

describe.skipIf(!backendAvailable('postgresql'))('readiness when the database goes away (postgresql)', () => {
  /**
   * A migrated database that the app reaches through a relay, which the test cuts (every connection dropped,
   * every new one refused). The relay is restored before the app closes, so its close writes what it holds at
   * once rather than retrying up to its 10 s shutdown bound against a database that is gone.
   */
  async function cuttable() {
    const backend = await createBackend('postgresql', { migrated: true });
    const target = new URL(backend.url);
    const relay = await TcpRelay.start(target.hostname, Number(target.port || 5432));
    const db = await openDatabase(resolveDatabase(TcpRelay.through(backend.url, relay), {}));
    return {
      backend,
      db,
      cut: () => relay.set('refuse'),
      close: async (t: TestApp) => {
        relay.set('forward');
        await t.close();
        await db.close();
        await relay.close();
        await backend.dispose();
      },
    };
  }

  it('answers /readyz with 503 database_unavailable, naming the provider and nothing internal (no staleness budget)', async () => {
    const { backend, db, cut, close } = await cuttable();
    const t = await buildTestApp(backend, db, { PUBLIC_API_STALE_BUDGET: '0' });
    try {
      expect((await t.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
      cut();
      const response = await t.inject({ method: 'GET', url: '/readyz' });
      const body = expectEnvelope(response, 503, 'database_unavailable');
      expect(body.error.message).toContain('postgresql');
      expect(body.error.message).not.toMatch(/partnerctl_test_|127\.0\.0\.1|5432/);
      expect((await t.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await close(t);
    }
  });

  it('within a staleness budget: 200 degraded, naming the revision it serves from and its age; 503 once the budget is spent', async () => {
    const { backend, db, cut, close } = await cuttable();
    const t = await buildTestApp(backend, db, { PUBLIC_API_STALE_BUDGET: '3s' });
    try {
      expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({ status: 'ok', database: 'postgresql' });
      cut();
      await vi.waitFor(async () => expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({ status: 'degraded' }), {
        timeout: 2_500,
      });
      const degraded = await t.app.inject({ method: 'GET', url: '/readyz' });
      expect(degraded.statusCode).toBe(200);
      expect(degraded.json()).toMatchObject({
        status: 'degraded',
        database: 'unreachable',
        serving_from_revision: t.access.appliedRevision,
        state_age_s: expect.any(Number),
        serving_until: expect.any(String),
      });
      await vi.waitFor(async () => expect((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(503), { timeout: 4_000 });
      expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await close(t);
    }
  });
});
