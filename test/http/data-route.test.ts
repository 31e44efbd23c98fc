import { inject } from 'light-my-request';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { AppError } from '../../src/errors.js';
import type { Metrics } from '../../src/http/counters/metrics.js';
import type { EngineRequest, Forwarder } from '../../src/http/data-path/forwarder.js';
import type { FinishedRequest } from '../../src/http/protocol/finished-request.js';
import { buildApp } from '../../src/http/server/app.js';
import { createServices, type Services } from '../../src/http/server/services.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { bearer, seedPartner, UUID } from './support.js';
import { join } from 'node:path';

/** The data route inside the kernel, over the real gate: what it writes, and the one record each request finishes with. */
describe('the data route', () => {
  let backend: TestBackend;
  let db: Database;
  let services: Services;
  let app: FastifyInstance;
  let token: string;
  let listener: Parameters<typeof inject>[0];
  const finished: FinishedRequest[] = [];
  const sent: EngineRequest[] = [];
  let engine: (request: EngineRequest) => Promise<{ status: number; headers: Record<string, string>; body: Buffer }>;
  const request = (url: string, headers: Record<string, string> = bearer(token)) => inject(listener, { method: 'GET', url, headers });

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    const config = loadConfig({ PUBLIC_API_UPSTREAM_URL: 'http://127.0.0.1:9/engine' }, {}).server!;
    services = await createServices({ server: config, database: db.config, signingKeyFile: join(backend.dir, 'signing-keys.json') }, { db });
    const forwarder: Forwarder = {
      forward: (engineRequest) => {
        sent.push(engineRequest);
        return engine(engineRequest);
      },
      close: async () => {},
    };
    // The metrics sink sees every finished record: here it keeps them.
    const recording = { response: (record: FinishedRequest) => finished.push(record) } as unknown as Metrics;
    app = await buildApp({ ...services, config, forwarder, metrics: recording });
    await app.ready();
    listener = app.server.listeners('request')[0] as Parameters<typeof inject>[0];
    const partner = await seedPartner(db, ['acme']);
    const exchanged = await inject(listener, { method: 'POST', url: '/public/v1/auth/token', payload: { access_key: partner.accessKey, secret_key: partner.secretKey } });
    token = exchanged.json().access_token as string;
  });
  afterAll(async () => {
    await app?.close();
    await services?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('finishes every request once, answered or refused, with the id it answered and one duration', async () => {
    engine = async () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"ok":true}') });
    finished.length = 0;
    const answered = await request('/public/v1/x?company_id=acme');
    const refused = await request('/public/v1/x?company_id=acme', {});
    expect(answered.statusCode).toBe(200);
    expect(refused.statusCode).toBe(401);
    expect(finished).toHaveLength(2);
    const [first, second] = finished as [FinishedRequest, FinishedRequest];
    expect(first).toMatchObject({ requestId: answered.headers['x-request-id'], status: 200, companyId: 'acme', url: '/public/v1/x?company_id=acme' });
    expect(first.requestId).toMatch(UUID);
    expect(first.durationMs).toBeGreaterThan(0);
    expect(first.durationMs).toBeGreaterThanOrEqual(first.engineMs);
    expect(first.engineMs).toBeGreaterThan(0);
    expect(second).toMatchObject({ requestId: refused.headers['x-request-id'], status: 401, partnerId: null, companyId: null, reason: 'token_missing' });
    expect(second.requestId).not.toBe(first.requestId);
  });

  it("answers any AppError as its envelope, and keeps a refusal's reason in the finished record", async () => {
    engine = async () => {
      throw new AppError('permission_denied', 'refused for a reason', { reason: 'address_not_allowed' });
    };
    finished.length = 0;
    const response = await request('/public/v1/x?company_id=acme');
    expect(response.statusCode).toBe(403);
    expect(response.json()).toEqual({ error: { code: 'permission_denied', message: 'refused for a reason', request_id: response.headers['x-request-id'] } });
    expect(finished).toHaveLength(1);
    expect(finished[0]).toMatchObject({ status: 403, reason: 'address_not_allowed' });
    // A refusal is no failure of the server: nothing for the error log.
    expect(finished[0]!.failure).toBeUndefined();
  });

  it('answers with the same kernel headers on the token endpoint and a data request, success and error alike', async () => {
    engine = async () => ({ status: 200, headers: {}, body: Buffer.from('{}') });
    const answers = [
      await request('/public/v1/x?company_id=acme'),
      await request('/public/v1/x?company_id=acme', {}),
      await inject(listener, { method: 'POST', url: '/public/v1/auth/token', payload: { access_key: 'pctl_ak_x', secret_key: 'pctl_sk_y' } }),
      await inject(listener, { method: 'GET', url: '/healthz' }),
    ];
    for (const answer of answers) expect(answer.headers['x-request-id']).toMatch(UUID);
    for (const answer of answers.slice(1, 3)) {
      expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(answer.json()).toEqual({ error: { code: expect.any(String), message: expect.any(String), request_id: answer.headers['x-request-id'] } });
    }
  });

  it('asks the gate nothing asynchronously when what it holds answers', async () => {
    engine = async () => ({ status: 200, headers: {}, body: Buffer.from('{}') });
    expect((await request('/public/v1/x?company_id=acme')).statusCode).toBe(200);
    const authenticate = vi.spyOn(services.access, 'authenticate');
    const authorizeCompany = vi.spyOn(services.access, 'authorizeCompany');
    const verify = vi.spyOn(services.verifier, 'verify');
    try {
      sent.length = 0;
      expect((await request('/public/v1/y?company_id=acme')).statusCode).toBe(200);
      expect(sent.map((engineRequest) => engineRequest.path)).toEqual(['/engine/y?company_id=acme']);
      // Each check asked once, each answering at once: no promise.
      for (const check of [verify, authenticate, authorizeCompany]) {
        expect(check).toHaveBeenCalledTimes(1);
        expect(check.mock.results[0]!.value).not.toBeInstanceOf(Promise);
      }
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('closes the connection after each answer once the server is closing', async () => {
    engine = async () => ({ status: 200, headers: {}, body: Buffer.from('{}') });
    expect((await request('/public/v1/x?company_id=acme')).headers.connection).not.toBe('close');
    const closing = app.close();
    await vi.waitFor(async () => expect((await request('/public/v1/x?company_id=acme')).headers.connection).toBe('close'));
    expect((await request('/public/v1/x?company_id=acme', {})).headers.connection).toBe('close');
    await closing;
  });
});
