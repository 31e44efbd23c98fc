import { inject } from 'light-my-request';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { AppError } from '../../src/errors.js';
import type { EngineRequest, Forwarder } from '../../src/http/data-path/forwarder.js';
import { DataHandler } from '../../src/http/data-path/handler.js';
import { ClientAddresses } from '../../src/http/protocol/client-address.js';
import { CorsPolicy } from '../../src/http/protocol/cors.js';
import type { FinishedRequest } from '../../src/http/protocol/finished-request.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { bearer, buildTestApp, seedPartner, UUID, type TestApp } from './support.js';

/** The data handler alone, over the real gate of a test app: what it writes, and the records it finishes. */
describe('the data handler', () => {
  let backend: TestBackend;
  let db: Database;
  let t: TestApp;
  let token: string;
  const finished: FinishedRequest[] = [];
  const sent: EngineRequest[] = [];
  let engine: (request: EngineRequest) => Promise<{ status: number; headers: Record<string, string>; body: Buffer }>;
  let handler: DataHandler;
  const request = (url: string, headers: Record<string, string> = bearer(token)) =>
    inject((req, res) => handler.handle(req, res), { method: 'GET', url, headers });

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    t = await buildTestApp(backend, db, {});
    const partner = await seedPartner(db, ['acme']);
    const exchanged = await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: partner.accessKey, secret_key: partner.secretKey } });
    token = exchanged.json().access_token as string;
    const forwarder: Forwarder = {
      forward: (engineRequest) => {
        sent.push(engineRequest);
        return engine(engineRequest);
      },
      close: async () => {},
    };
    handler = new DataHandler({
      verifier: t.verifier,
      access: t.access,
      limits: null,
      forwarder,
      prefix: '/engine',
      bodyLimit: 1024,
      cors: new CorsPolicy([]),
      addresses: new ClientAddresses(null),
      logger: undefined,
      spans: null,
      finish: (record) => finished.push(record),
    });
  });
  afterAll(async () => {
    await t?.close();
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
    expect(second).toMatchObject({ requestId: refused.headers['x-request-id'], status: 401, partnerId: null, companyId: null });
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

  it('closes the connection after each answer once the server is closing', async () => {
    engine = async () => ({ status: 200, headers: {}, body: Buffer.from('{}') });
    expect((await request('/public/v1/x?company_id=acme')).headers.connection).not.toBe('close');
    handler.closing = true;
    try {
      expect((await request('/public/v1/x?company_id=acme')).headers.connection).toBe('close');
      expect((await request('/public/v1/x?company_id=acme', {})).headers.connection).toBe('close');
    } finally {
      handler.closing = false;
    }
  });

  it('asks the gate nothing asynchronously when its caches answer', async () => {
    engine = async () => ({ status: 200, headers: {}, body: Buffer.from('{}') });
    expect((await request('/public/v1/x?company_id=acme')).statusCode).toBe(200);
    const authenticate = vi.spyOn(t.access, 'authenticate');
    const authorizeCompany = vi.spyOn(t.access, 'authorizeCompany');
    const verify = vi.spyOn(t.verifier, 'verify');
    try {
      sent.length = 0;
      expect((await request('/public/v1/y?company_id=acme')).statusCode).toBe(200);
      expect(sent.map((engineRequest) => engineRequest.path)).toEqual(['/engine/y?company_id=acme']);
      expect(authenticate).not.toHaveBeenCalled();
      expect(authorizeCompany).not.toHaveBeenCalled();
      expect(verify).not.toHaveBeenCalled();
    } finally {
      vi.restoreAllMocks();
    }
  });
});
