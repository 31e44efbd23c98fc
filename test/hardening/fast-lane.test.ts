import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { cliOk, provision, rawHttp, recordingEngine, startServe, tokenFor, UUID, type Seen } from './support.js';

/**
 * The usual data request (GET, company_id alone, one bearer token) is answered without Fastify's lifecycle
 * (src/http/fast-path.ts); what it hands over to Fastify must come out as before, with the engine asked once.
 */

const header = (seen: Seen, name: string) => seen.rawHeaders.find((_, i) => i % 2 === 1 && seen.rawHeaders[i - 1]!.toLowerCase() === name);

describe('the data path fast lane, against the real server', () => {
  let backend: TestBackend;
  let engine: Awaited<ReturnType<typeof recordingEngine>>;
  let served: Awaited<ReturnType<typeof startServe>>;
  let partner: Awaited<ReturnType<typeof provision>>;
  let token: string;

  const usual = () =>
    rawHttp(
      served.url,
      [`GET /public/v1/recommendations?company_id=acme HTTP/1.1`, `Host: ${new URL(served.url).host}`, `Authorization: Bearer ${token}`, 'Accept: application/json', 'Connection: close'].join('\r\n') +
        '\r\n\r\n',
    );

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    await cliOk(backend, 'db', 'migrate');
    engine = await recordingEngine();
    partner = await provision(backend, 'fast-lane-probe', ['acme']);
    served = await startServe({ ...backend.env, PUBLIC_API_UPSTREAM_URL: `${engine.url}/api`, PUBLIC_API_UPSTREAM_TIMEOUT_MS: '2000' });
    token = await tokenFor(served.url, partner.accessKey, partner.secretKey);
  });
  beforeEach(() => {
    engine.seen.length = 0;
    engine.answer = () => ({});
  });
  afterAll(async () => {
    await served?.stop();
    engine?.server.closeAllConnections();
    await new Promise((resolve) => engine?.server.close(resolve));
    await backend?.dispose();
  });

  it('forwards the usual request once, with the gateway headers, and logs it with the partner', async () => {
    const response = await usual();
    expect(response.status, response.body).toBe(200);
    expect(response.body).toBe('{"engine":"ok"}');
    expect(response.headers['x-request-id']).toMatch(UUID);
    expect(engine.seen).toHaveLength(1);
    const seen = engine.seen[0]!;
    expect(seen.url).toBe('/api/recommendations?company_id=acme');
    expect(header(seen, 'x-request-id')).toBe(response.headers['x-request-id']);
    expect(header(seen, 'x-partner-id')).toBe(partner.partnerId);
    expect(header(seen, 'x-company-id')).toBe('acme');
    expect(header(seen, 'authorization')).toBeUndefined();
    // The request log is written in batches (at most 250 ms apart).
    await new Promise((resolve) => setTimeout(resolve, 600));
    const line = served
      .stdout()
      .split('\n')
      .filter((text) => text.includes(response.headers['x-request-id']!))
      .map((text) => JSON.parse(text) as Record<string, unknown>);
    expect(line).toHaveLength(1);
    expect(line[0]).toMatchObject({ level: 30, partner_id: partner.partnerId, method: 'GET', path: '/public/v1/recommendations', status: 200 });
  });

  it('an engine error on the usual request becomes the envelope, with the id the engine saw, and the engine is asked once', async () => {
    engine.answer = () => ({ status: 404, headers: [['content-type', 'text/plain']], body: 'nope' });
    const response = await usual();
    expect(response.status, response.body).toBe(404);
    const body = JSON.parse(response.body) as { error: { code: string; request_id: string } };
    expect(body.error.code).toBe('not_found');
    expect(engine.seen).toHaveLength(1);
    expect(body.error.request_id).toBe(header(engine.seen[0]!, 'x-request-id'));
    expect(response.headers['x-request-id']).toBe(body.error.request_id);
  });

  it('an engine 204 is answered by the ordinary path without a body, the engine asked once', async () => {
    engine.answer = () => ({ status: 204, headers: [], body: '' });
    const response = await usual();
    expect(response.status).toBe(204);
    expect(response.body).toBe('');
    expect(engine.seen).toHaveLength(1);
  });

  it('a path another route serves (the token endpoint, the OpenAPI document) never takes the lane', async () => {
    const host = new URL(served.url).host;
    for (const [path, status] of [
      ['/public/v1/auth/token', 405],
      ['/public/v1/openapi.json', 200],
    ] as const) {
      const response = await rawHttp(
        served.url,
        [`GET ${path}?company_id=acme HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${token}`, 'Connection: close'].join('\r\n') + '\r\n\r\n',
      );
      expect(response.status, `${path}: ${response.body}`).toBe(status);
    }
    expect(engine.seen).toEqual([]);
  });

  it('a refused request on the usual path gets the ordinary refusal and reaches no engine', async () => {
    await cliOk(backend, 'unmap-company', partner.partnerId, '--company', 'acme', '--yes');
    // Within the staleness bound.
    let response = await usual();
    for (let tries = 0; tries < 30 && response.status === 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      engine.seen.length = 0;
      response = await usual();
    }
    expect(response.status, response.body).toBe(404);
    expect(JSON.parse(response.body).error.code).toBe('not_found');
    expect(engine.seen).toEqual([]);
  });
});
