import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { TestBackend } from '../support/backends.js';
import { cliOk, gatewayUnderTest, provision, rawHttp, tokenFor, UUID, type recordingEngine, type Seen, type serveInProcess } from './support.js';

/**
 * The usual data request (GET, company_id alone, one bearer token) goes from the server's listener straight
 * to the data handler (src/http/data-path/handler.ts, mounted by src/http/server/data-mount.ts): its answers,
 * refusals included, are written once, logged once, with the engine asked once.
 */

const header = (seen: Seen, name: string) => seen.rawHeaders.find((_, i) => i % 2 === 1 && seen.rawHeaders[i - 1]!.toLowerCase() === name);

describe('the usual data request through the one data handler, against the real server', () => {
  let backend: TestBackend;
  let engine: Awaited<ReturnType<typeof recordingEngine>>;
  let served: Awaited<ReturnType<typeof serveInProcess>>;
  let partner: Awaited<ReturnType<typeof provision>>;
  let token: string;
  // Partners with limits of their own (set before the server starts, so no staleness bound to wait out).
  let limited: Awaited<ReturnType<typeof provision>>;
  let crowded: Awaited<ReturnType<typeof provision>>;

  const usualWith = (bearer: string) =>
    rawHttp(
      served.url,
      [`GET /public/v1/recommendations?company_id=acme HTTP/1.1`, `Host: ${new URL(served.url).host}`, `Authorization: Bearer ${bearer}`, 'Accept: application/json', 'Connection: close'].join('\r\n') +
        '\r\n\r\n',
    );
  const usual = () => usualWith(token);

  const gateway = gatewayUnderTest('data-handler-probe', {
    prepare: async (backend) => {
      limited = await provision(backend, 'data-handler-limited', ['acme']);
      await cliOk(backend, 'set-limits', limited.partnerId, '--rate', '4/h', '--burst', '4');
      crowded = await provision(backend, 'data-handler-crowded', ['acme']);
      await cliOk(backend, 'set-limits', crowded.partnerId, '--rate', '5/h', '--burst', '5');
    },
  });
  beforeAll(() => {
    ({ backend, engine, served, partner, token } = gateway);
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
    // The request log is written in batches (at most 250 ms apart): wait for the line.
    const line = await vi.waitFor(
      () => {
        const found = served
          .stdout()
          .split('\n')
          .filter((text) => text.includes(response.headers['x-request-id']!))
          .map((text) => JSON.parse(text) as Record<string, unknown>);
        expect(found.length).toBeGreaterThan(0);
        return found;
      },
      { timeout: 10_000, interval: 50 },
    );
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

  it('an engine 204 is answered without a body, the engine asked once', async () => {
    engine.answer = () => ({ status: 204, headers: [], body: '' });
    const response = await usual();
    expect(response.status).toBe(204);
    expect(response.body).toBe('');
    expect(engine.seen).toHaveLength(1);
  });

  it('a path another route serves (the token endpoint, the OpenAPI document) is never the data handler\'s', async () => {
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

  it('a refused request gets the refusal envelope and reaches no engine', async () => {
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

  it('a partner with limits: each answer says what is left, taken once per request even when the engine fails, then 429', async () => {
    const bearer = await tokenFor(served.url, limited.accessKey, limited.secretKey);
    const first = await usualWith(bearer);
    expect(first.status, first.body).toBe(200);
    expect(first.headers['ratelimit-limit']).toBe('4');
    expect(first.headers['ratelimit-remaining']).toBe('3');
    expect(Number(first.headers['ratelimit-reset'])).toBeGreaterThan(0);
    // An engine failure after the allowance was taken: answered without taking again.
    engine.answer = () => ({ status: 500, headers: [['content-type', 'text/plain']], body: 'boom' });
    const failed = await usualWith(bearer);
    expect(failed.status, failed.body).toBe(500);
    expect(failed.headers['ratelimit-remaining']).toBe('2');
    engine.answer = () => ({});
    expect((await usualWith(bearer)).headers['ratelimit-remaining']).toBe('1');
    expect((await usualWith(bearer)).headers['ratelimit-remaining']).toBe('0');
    expect(engine.seen).toHaveLength(4);
    for (let i = 0; i < 2; i++) {
      const refused = await usualWith(bearer);
      expect(refused.status, refused.body).toBe(429);
      expect(JSON.parse(refused.body).error.code).toBe('rate_limited');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(refused.headers['ratelimit-remaining']).toBe('0');
      expect(refused.headers['x-request-id']).toMatch(UUID);
    }
    // Refusals consume nothing and reach no engine.
    expect(engine.seen).toHaveLength(4);
  });

  it('a partner with limits under concurrent requests: exactly its burst accepted, the rest 429, the engine asked for each accepted one', async () => {
    const bearer = await tokenFor(served.url, crowded.accessKey, crowded.secretKey);
    const answers = await Promise.all(Array.from({ length: 14 }, () => usualWith(bearer)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(5);
    expect(statuses.filter((status) => status === 429)).toHaveLength(9);
    expect(engine.seen).toHaveLength(5);
    const remaining = answers.filter((answer) => answer.status === 200).map((answer) => Number(answer.headers['ratelimit-remaining']));
    expect(remaining.sort()).toEqual([0, 1, 2, 3, 4]);
  });
});
