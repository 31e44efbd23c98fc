import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statusOf, type ErrorCode } from '../../src/errors.js';
import { openApiDocument } from '../../src/http/openapi/document.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { rawHttp, serveInProcess, tokenFor, type RawResponse } from '../hardening/support.js';
import { seedPartner, UUID, type SeededPartner } from './support.js';

/**
 * The OpenAPI document against the real `partnerctl serve`: each request below is sent on a raw socket, and
 * its answer must be one the document describes for that path and method (status, content type, envelope,
 * the headers it promises), or, for a method the document does not describe, 405 with an Allow that lists
 * the described ones. Every described operation is exercised at least once.
 */

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is walked as plain JSON; each test asserts what it reads
type Doc = Record<string, any>;
const BASE = '/public/v1';
const ORIGIN = 'https://app.example.com';
// The engine answers in a millisecond; what the limits leave is for a loaded machine's scheduling (an engine, a
// server and this test in one process), never a guess of its speed. The slow engine answers well past the
// upstream timeout (504), and the request timeout (408 for a head or body that never ends) is longer than both.
const UPSTREAM_TIMEOUT_MS = 1_000;
const ENGINE_SLOW_MS = 3_000;
const REQUEST_TIMEOUT_MS = 2_000;
const DOC_METHODS = ['get', 'head', 'options', 'post', 'put', 'patch', 'delete', 'trace'];

interface Probe {
  label: string;
  method: string;
  /** After the base path, query included. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Content-Length declared larger than the body, which then never completes (the request timeout). */
  declaredLength?: number;
  /** The head is sent without its final blank line (the request timeout, during the headers). */
  unfinishedHead?: boolean;
  noHost?: boolean;
  server?: 'main' | 'bare';
  status: number;
  code?: string;
}

/** A stand-in engine: echoes, or resets, stalls, or answers an error envelope with a chosen status. */
async function startEngine(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const url = req.url ?? '';
      if (url.includes('__reset')) {
        req.socket.destroy();
        return;
      }
      const status = /__status\/(\d{3})/.exec(url);
      const send = () => {
        if (res.destroyed) return;
        if (status) {
          // An engine that speaks the envelope, echoing the gateway's request id.
          res.writeHead(Number(status[1]), { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { code: 'engine_code', message: 'the engine refused', request_id: req.headers['x-request-id'] } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ method: req.method, url }));
      };
      if (url.includes('__slow')) setTimeout(send, ENGINE_SLOW_MS);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/engine`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function send(url: string, probe: Probe): Promise<RawResponse> {
  const lines = [`${probe.method} ${BASE}${probe.path} HTTP/1.1`];
  if (!probe.noHost) lines.push('Host: api.example.com');
  lines.push('Connection: close');
  for (const [name, value] of Object.entries(probe.headers ?? {})) lines.push(`${name}: ${value}`);
  const body = Buffer.from(probe.body ?? '', 'utf8');
  if (probe.body !== undefined || probe.declaredLength !== undefined) lines.push(`Content-Length: ${probe.declaredLength ?? body.length}`);
  const head = lines.join('\r\n') + (probe.unfinishedHead ? '\r\n' : '\r\n\r\n');
  return rawHttp(url, head, body, { timeoutMs: 10_000 });
}

function pathKey(path: string): string {
  const bare = path.split('?')[0]!;
  if (bare === '/auth/token' || bare === '/openapi.json') return bare;
  return bare === '' || bare === '/' ? '/' : '/{path}';
}

function resolveRef(document: Doc, value: Doc): Doc {
  if (typeof value.$ref !== 'string') return value;
  return (value.$ref as string)
    .slice(2)
    .split('/')
    .reduce((node: Doc, key) => node[key], document);
}

describe('the OpenAPI document against the real server (sqlite)', () => {
  const document = JSON.parse(JSON.stringify(openApiDocument())) as Doc;
  const codes = document.components.schemas.ErrorCode.enum as string[];
  const seen = new Set<string>();
  let backend: TestBackend;
  let engine: Awaited<ReturnType<typeof startEngine>>;
  let main: Awaited<ReturnType<typeof serveInProcess>>;
  let bare: Awaited<ReturnType<typeof serveInProcess>>;
  let partner: SeededPartner;
  let token: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    const db = await openMigrated(backend);
    partner = await seedPartner(db, ['acme']);
    await db.close();
    engine = await startEngine();
    main = await serveInProcess({
      ...backend.env,
      PUBLIC_API_UPSTREAM_URL: engine.url,
      PUBLIC_API_UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
      PUBLIC_API_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      PUBLIC_API_CORS_ORIGINS: ORIGIN,
      PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '3',
      LOG_LEVEL: 'silent',
    });
    bare = await serveInProcess({ ...backend.env, LOG_LEVEL: 'silent' });
    token = await tokenFor(main.url, partner.accessKey, partner.secretKey);
  });
  afterAll(async () => {
    await main?.stop();
    await bare?.stop();
    await engine?.close();
    await backend?.dispose();
  });

  /** Sends the probe and checks its answer against the document; returns the answer. */
  async function check(probe: Probe): Promise<RawResponse> {
    const response = await send(probe.server === 'bare' ? bare.url : main.url, probe);
    const label = `${probe.label}: ${probe.method} ${probe.path}`;
    expect(response.status, `${label}: ${response.body.slice(0, 300)}`).toBe(probe.status);
    const status = response.status!;
    expect(response.headers['x-request-id'], label).toMatch(UUID);
    const key = pathKey(probe.path);
    const item = document.paths[key] as Doc;
    const operation = item[probe.method.toLowerCase()] as Doc | undefined;
    if (!operation) {
      // Not described: refused with 405, Allow naming the described methods.
      expect(status, label).toBe(405);
      const allow = (response.headers.allow ?? '').split(',').map((name) => name.trim().toLowerCase());
      const described = DOC_METHODS.filter((method) => item[method]);
      for (const method of allow) expect(described, `${label}: Allow ${method}`).toContain(method);
      for (const method of described.filter((method) => method !== 'options')) expect(allow, `${label}: Allow`).toContain(method);
      return response;
    }
    seen.add(`${probe.method.toLowerCase()} ${key}`);
    const responses = operation.responses as Doc;
    const raw = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
    expect(raw, `${label}: status ${status} is not described`).toBeDefined();
    const described = resolveRef(document, raw as Doc);
    for (const [header, name] of [
      ['WWW-Authenticate', 'www-authenticate'],
      ['Allow', 'allow'],
      ['Retry-After', 'retry-after'],
    ] as const) {
      if (described.headers?.[header] && status !== 429) expect(response.headers[name], `${label}: ${header}`).toBeTruthy();
    }
    if (probe.code === 'rate_limited') expect(response.headers['retry-after'], `${label}: Retry-After`).toMatch(/^\d+$/);
    if (!described.content) {
      expect(response.body, `${label}: no body is described`).toBe('');
      return response;
    }
    const type = (response.headers['content-type'] ?? '').split(';')[0]!.trim();
    const types = Object.keys(described.content as Doc);
    expect(types.includes(type) || types.includes('*/*'), `${label}: content type ${type} not in ${types.join(', ')}`).toBe(true);
    const schemaRef = (described.content as Doc)[type]?.schema?.$ref as string | undefined;
    if (schemaRef?.endsWith('ErrorEnvelope')) {
      const envelope = JSON.parse(response.body) as { error: { code: string; message: string; request_id: string } };
      expect(Object.keys(envelope), label).toEqual(['error']);
      expect(typeof envelope.error.message, label).toBe('string');
      expect(envelope.error.request_id, label).toBe(response.headers['x-request-id']);
      if (schemaRef.endsWith('/ErrorEnvelope') || envelope.error.code !== 'engine_code') {
        expect(codes, label).toContain(envelope.error.code);
        expect(statusOf(envelope.error.code as ErrorCode), label).toBe(status);
      }
      if (probe.code) expect(envelope.error.code, label).toBe(probe.code);
    } else if (schemaRef?.endsWith('/Token')) {
      const body = JSON.parse(response.body) as Record<string, unknown>;
      expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 900 });
      expect(typeof body.access_token).toBe('string');
    } else if (type === 'application/json') {
      JSON.parse(response.body);
    }
    return response;
  }

  const auth = () => ({ authorization: `Bearer ${token}` });
  const jsonHeaders = () => ({ ...auth(), 'content-type': 'application/json' });
  const company = JSON.stringify({ company_id: 'acme', x: 1 });
  const tokenBody = () => JSON.stringify({ access_key: partner.accessKey, secret_key: partner.secretKey });
  const preflight = { origin: ORIGIN, 'access-control-request-method': 'POST' };

  it('the token endpoint', async () => {
    const json = { 'content-type': 'application/json' };
    await check({ label: 'exchange', method: 'POST', path: '/auth/token', headers: json, body: tokenBody(), status: 200 });
    await check({ label: 'bad JSON', method: 'POST', path: '/auth/token', headers: json, body: '{', status: 400, code: 'invalid_request' });
    await check({ label: 'extra member', method: 'POST', path: '/auth/token', headers: json, body: '{"access_key":"a","secret_key":"b","c":1}', status: 400 });
    const wrong = JSON.stringify({ access_key: partner.accessKey, secret_key: `${partner.secretKey}x` });
    await check({ label: 'wrong secret', method: 'POST', path: '/auth/token', headers: json, body: wrong, status: 401, code: 'invalid_credentials' });
    await check({ label: 'not JSON', method: 'POST', path: '/auth/token', headers: { 'content-type': 'text/plain' }, body: 'x', status: 415 });
    await check({ label: 'too big', method: 'POST', path: '/auth/token', headers: json, body: JSON.stringify({ access_key: 'a', secret_key: 'b'.repeat(17_000) }), status: 413 });
    await check({ label: 'no Host', method: 'POST', path: '/auth/token', noHost: true, headers: json, body: tokenBody(), status: 400 });
    await check({ label: 'trickled body', method: 'POST', path: '/auth/token', headers: json, body: '{"access_key"', declaredLength: 200, status: 408, code: 'request_timeout' });
    await check({ label: 'Expect other than 100-continue', method: 'POST', path: '/auth/token', headers: { ...json, expect: 'x-ray' }, body: tokenBody(), status: 417, code: 'expectation_failed' });
    await check({ label: 'gzip body', method: 'POST', path: '/auth/token', headers: { ...json, 'content-encoding': 'gzip' }, body: tokenBody(), status: 415 });
    const guess = JSON.stringify({ access_key: 'pctl_ak_guessedguessedguessed', secret_key: 'pctl_sk_x' });
    for (let i = 0; i < 3; i++) await check({ label: `guess ${i}`, method: 'POST', path: '/auth/token', headers: json, body: guess, status: 401 });
    await check({ label: 'throttled', method: 'POST', path: '/auth/token', headers: json, body: guess, status: 429, code: 'rate_limited' });
    await check({ label: 'OPTIONS', method: 'OPTIONS', path: '/auth/token', status: 405, code: 'method_not_allowed' });
    await check({ label: 'preflight', method: 'OPTIONS', path: '/auth/token', headers: preflight, status: 204 });
    for (const method of ['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'TRACE']) {
      await check({ label: 'other method', method, path: '/auth/token', status: 405 });
    }
  });

  it('the document itself, without a token', async () => {
    const got = await check({ label: 'GET', method: 'GET', path: '/openapi.json', status: 200 });
    expect(JSON.parse(got.body)).toEqual(document);
    const head = await check({ label: 'HEAD', method: 'HEAD', path: '/openapi.json', status: 200 });
    expect(head.headers['content-type']).toMatch(/^application\/json/);
    await check({ label: 'OPTIONS', method: 'OPTIONS', path: '/openapi.json', status: 405 });
    await check({ label: 'preflight', method: 'OPTIONS', path: '/openapi.json', headers: { origin: ORIGIN, 'access-control-request-method': 'GET' }, status: 204 });
    await check({ label: 'no Host', method: 'GET', path: '/openapi.json', noHost: true, status: 400 });
    await check({ label: 'HEAD without Host', method: 'HEAD', path: '/openapi.json', noHost: true, status: 400 });
    await check({ label: 'unfinished head', method: 'GET', path: '/openapi.json', unfinishedHead: true, status: 408 });
    await check({ label: 'Expect other than 100-continue', method: 'GET', path: '/openapi.json', headers: { expect: 'nope' }, status: 417 });
    await check({ label: 'two Hosts', method: 'GET', path: '/openapi.json', headers: { host: 'b.example.com' }, status: 400 });
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'TRACE']) await check({ label: 'other method', method, path: '/openapi.json', status: 405 });
  });

  it('the data routes, at the base path and at any depth, every described method', async () => {
    for (const path of ['', '/', '/x', '/prices/sku/A1', '/auth/token/x', '/openapi.json/x']) {
      const query = `${path}?company_id=acme`;
      for (const method of ['GET', 'HEAD', 'DELETE', 'OPTIONS']) await check({ label: 'forwarded', method, path: query, headers: auth(), status: 200 });
      for (const method of ['POST', 'PUT', 'PATCH']) await check({ label: 'forwarded', method, path, headers: jsonHeaders(), body: company, status: 200 });
      await check({ label: 'not described', method: 'TRACE', path: query, headers: auth(), status: 405 });
    }
    await check({ label: 'DELETE with a JSON body', method: 'DELETE', path: '/x?company_id=acme', headers: jsonHeaders(), body: '{"why":"old"}', status: 200 });
  });

  it('the data routes refuse what the document says they refuse', async () => {
    const x = '/x?company_id=acme';
    await check({ label: 'no token', method: 'GET', path: x, status: 401, code: 'unauthorized' });
    await check({ label: 'no token, HEAD', method: 'HEAD', path: '?company_id=acme', status: 401 });
    await check({ label: 'bad token', method: 'DELETE', path: x, headers: { authorization: 'Bearer a.b.c' }, status: 401 });
    await check({ label: 'plain OPTIONS is a data request', method: 'OPTIONS', path: '/x', headers: { origin: 'https://other.example.com' }, status: 401 });
    await check({ label: 'preflight', method: 'OPTIONS', path: '/x', headers: preflight, status: 204 });
    await check({ label: 'preflight at the base', method: 'OPTIONS', path: '', headers: preflight, status: 204 });
    await check({ label: 'unmapped', method: 'GET', path: '/x?company_id=other', headers: auth(), status: 404, code: 'not_found' });
    await check({ label: 'never valid', method: 'GET', path: `/x?company_id=${'a'.repeat(129)}`, headers: auth(), status: 404, code: 'not_found' });
    await check({ label: 'unmapped in body', method: 'PATCH', path: '/x', headers: jsonHeaders(), body: '{"company_id":"other"}', status: 404 });
    await check({ label: 'no company', method: 'GET', path: '/x', headers: auth(), status: 400, code: 'invalid_request' });
    await check({ label: 'company twice', method: 'HEAD', path: '/x?company_id=acme&company_id=acme', headers: auth(), status: 400 });
    await check({ label: 'company in the query of a POST', method: 'POST', path: x, headers: jsonHeaders(), body: company, status: 400 });
    await check({ label: 'dot segment', method: 'GET', path: '/a/%2e%2e/b?company_id=acme', headers: auth(), status: 400 });
    await check({ label: 'GET with a body', method: 'GET', path: x, headers: jsonHeaders(), body: '{}', status: 400 });
    await check({ label: 'keys on a data request', method: 'PUT', path: '/x', headers: jsonHeaders(), body: '{"company_id":"acme","secret_key":"s"}', status: 400 });
    await check({ label: 'not JSON', method: 'POST', path: '/x', headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x', status: 415 });
    await check({ label: 'not JSON, OPTIONS', method: 'OPTIONS', path: x, headers: { ...auth(), 'content-type': 'text/plain' }, body: 'x', status: 415 });
    const big = JSON.stringify({ company_id: 'acme', x: 'a'.repeat(1_100_000) });
    await check({ label: 'too big', method: 'PUT', path: '/x', headers: jsonHeaders(), body: big, status: 413, code: 'payload_too_large' });
    await check({ label: 'too big, DELETE', method: 'DELETE', path: x, headers: jsonHeaders(), body: big, status: 413 });
    await check({ label: 'trickled body', method: 'POST', path: '/x', headers: jsonHeaders(), body: '{"company_id"', declaredLength: 200, status: 408 });
    await check({ label: 'no Host', method: 'GET', path: x, noHost: true, headers: auth(), status: 400 });
    await check({ label: 'invalid Host', method: 'GET', path: x, noHost: true, headers: { ...auth(), host: 'a,b' }, status: 400 });
    await check({ label: 'encoded control character', method: 'GET', path: '/a%00b?company_id=acme', headers: auth(), status: 400 });
    await check({ label: 'company_id alias', method: 'GET', path: '/x?company_id=acme&Company_Id=other', headers: auth(), status: 400 });
    await check({ label: 'gzip body', method: 'PUT', path: '/x', headers: { ...jsonHeaders(), 'content-encoding': 'gzip' }, body: company, status: 415 });
    await check({ label: 'Expect other than 100-continue', method: 'PUT', path: '/x', headers: { ...jsonHeaders(), expect: 'x' }, body: company, status: 417, code: 'expectation_failed' });
    await check({ label: 'Expect, HEAD', method: 'HEAD', path: x, headers: { ...auth(), expect: 'x' }, status: 417 });
  });

  it('the data routes pass the engine\'s failures on as described', async () => {
    await check({ label: 'engine reset', method: 'GET', path: '/__reset?company_id=acme', headers: auth(), status: 502, code: 'bad_gateway' });
    await check({ label: 'engine slow', method: 'POST', path: '/__slow', headers: jsonHeaders(), body: company, status: 504, code: 'upstream_timeout' });
    await check({ label: 'engine slow, HEAD', method: 'HEAD', path: '/__slow?company_id=acme', headers: auth(), status: 504 });
    for (const status of [400, 404, 409, 422, 429, 500, 503]) {
      await check({ label: `engine ${status}`, method: 'GET', path: `/__status/${status}?company_id=acme`, headers: auth(), status });
    }
    await check({ label: 'no engine', server: 'bare', method: 'GET', path: '/x?company_id=acme', headers: auth(), status: 503, code: 'upstream_unavailable' });
    await check({ label: 'no engine, base', server: 'bare', method: 'PATCH', path: '', headers: jsonHeaders(), body: company, status: 503 });
  });

  it('exercised every described operation', () => {
    const described = Object.entries(document.paths as Record<string, Doc>).flatMap(([path, item]) =>
      DOC_METHODS.filter((method) => item[method]).map((method) => `${method} ${path}`),
    );
    expect(described.filter((operation) => !seen.has(operation))).toEqual([]);
  });
});
