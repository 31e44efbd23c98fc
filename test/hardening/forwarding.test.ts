import { beforeAll, describe, expect, it } from 'vitest';
import { gatewayUnderTest, rawHttp, UUID, type provision, type recordingEngine, type Seen, type serveInProcess } from './support.js';

/**
 * The forwarding contract (README) probed from outside: the real `partnerctl serve`, raw sockets for what
 * fetch will not send, and an engine that records every byte it receives.
 */

const headerNames = (seen: Seen) => seen.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
const headerValues = (seen: Seen, name: string) => seen.rawHeaders.filter((_, i) => i % 2 === 1 && seen.rawHeaders[i - 1]!.toLowerCase() === name);

describe('the forwarding contract, against the real server', () => {
  let engine: Awaited<ReturnType<typeof recordingEngine>>;
  let served: Awaited<ReturnType<typeof serveInProcess>>;
  let partner: Awaited<ReturnType<typeof provision>>;
  let token: string;
  let host: string;

  const raw = (lines: string[], body?: Buffer) => rawHttp(served.url, `${lines.join('\r\n')}\r\n\r\n`, body);
  const get = (target: string, extra: string[] = []) =>
    raw([`GET ${target} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${token}`, 'Connection: close', ...extra]);

  const gateway = gatewayUnderTest('forwarding-probe');
  beforeAll(() => {
    ({ engine, served, partner, token, host } = gateway);
  });

  describe('paths (item 1)', () => {
    it('forwards an absolute-form target by its parsed path, never outside the base path', async () => {
      const cases: [string, string][] = [
        ['http://abc-admin/public/v1/x?company_id=acme', '/api/x?company_id=acme'],
        ['http://abc/public/v1/x/y?company_id=acme', '/api/x/y?company_id=acme'],
        [`HTTP://${host}/public/v1?company_id=acme`, '/api/?company_id=acme'],
        ['/public/v1/x?company_id=acme', '/api/x?company_id=acme'],
      ];
      for (const [target, expected] of cases) {
        engine.seen.length = 0;
        const response = await get(target);
        expect(response.status, `${target}: ${response.body}`).toBe(200);
        expect(engine.seen.map((seen) => seen.url), target).toEqual([expected]);
      }
    });

    it('refuses targets that would leave the base path, and forwards nothing', async () => {
      for (const target of [
        'http://abc-admin/public/v1-admin/x?company_id=acme',
        'http://x/public/v1/../admin?company_id=acme',
        'http://x/public/v1/%2e%2e/admin?company_id=acme',
        'http://x/public/v1/a/%2E%2E/%2E%2E/admin?company_id=acme',
        'http://x/public/v1/a\\..\\admin?company_id=acme',
        'http://x/other/v1/x?company_id=acme',
      ]) {
        const response = await get(target);
        expect(response.status, `${target}: ${response.body}`).toBeGreaterThanOrEqual(400);
        expect(response.status, target).toBeLessThan(500);
        expect(JSON.parse(response.body).error.request_id, target).toMatch(UUID);
      }
      expect(engine.seen).toEqual([]);
    });
  });

  describe('request headers (item 2)', () => {
    it('never forwards a client header that could pass for a gateway-owned one, nor any name with an underscore', async () => {
      const response = await get('/public/v1/x?company_id=acme', [
        'X-Partner_Id: ptn_forged',
        'X_Company_Id: forged',
        'X-Request_Id: forged',
        'x_partner_id: ptn_forged',
        'X-PARTNER-ID: ptn_forged',
        'X.Partner.Id: ptn_forged',
        'X-Custom_Thing: gone',
        'X-Custom: kept',
      ]);
      expect(response.status, response.body).toBe(200);
      const [seen] = engine.seen;
      const names = headerNames(seen!);
      expect(names.filter((name) => /[^a-z0-9-]/.test(name))).toEqual([]);
      expect(headerValues(seen!, 'x-partner-id')).toEqual([partner.partnerId]);
      expect(headerValues(seen!, 'x-company-id')).toEqual(['acme']);
      expect(headerValues(seen!, 'x-request-id')).toEqual([response.headers['x-request-id']]);
      expect(headerValues(seen!, 'x-custom')).toEqual(['kept']);
      expect(names).not.toContain('authorization');
    });

    it('drops the request headers the client names in Connection', async () => {
      const response = await raw([
        'GET /public/v1/x?company_id=acme HTTP/1.1',
        `Host: ${host}`,
        `Authorization: Bearer ${token}`,
        'Connection: close, X-Hop-Secret',
        'X-Hop-Secret: 1',
      ]);
      expect(response.status, response.body).toBe(200);
      expect(headerNames(engine.seen[0]!)).not.toContain('x-hop-secret');
    });
  });

  describe('response headers (items 3 and 10)', () => {
    it("removes the headers the engine names in its Connection header, and Server and X-Powered-By", async () => {
      engine.answer = () => ({
        headers: [
          ['content-type', 'application/json'],
          ['connection', 'X-Engine-Hop, keep-alive'],
          ['x-engine-hop', 'internal'],
          ['server', 'EngineServer/1.2.3'],
          ['x-powered-by', 'Express'],
          ['x-engine-version', '7'],
        ],
      });
      const response = await get('/public/v1/x?company_id=acme');
      expect(response.status).toBe(200);
      expect(response.body).toBe('{"engine":"ok"}');
      expect(response.headers['x-engine-hop']).toBeUndefined();
      expect(response.headers.server).toBeUndefined();
      expect(response.headers['x-powered-by']).toBeUndefined();
      expect(response.headers['x-engine-version']).toBe('7');
    });
  });

  describe('bodies (item 4)', () => {
    it('forwards the body byte for byte', async () => {
      const body = Buffer.from('{ "company_id" : "acme",\n "note": "é€😀 \\ud800 \\u0000", "n": 1.50e+2 }\n', 'utf8');
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Connection: close'],
        body,
      );
      expect(response.status, response.body).toBe(200);
      expect(engine.seen[0]!.body.equals(body)).toBe(true);
      expect(headerValues(engine.seen[0]!, 'content-length')).toEqual([String(body.length)]);
    });

    it('refuses a body that is not valid UTF-8 with 400, and forwards nothing', async () => {
      for (const bad of [
        Buffer.concat([Buffer.from('{"company_id":"acme","note":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
        Buffer.concat([Buffer.from('{"company_id":"acme","company'), Buffer.from([0xc0, 0xaf]), Buffer.from('_id":"other"}')]),
        Buffer.concat([Buffer.from('{"company_id":"acme","x":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
      ]) {
        const response = await raw(
          ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', `Content-Length: ${bad.length}`, 'Connection: close'],
          bad,
        );
        expect(response.status, response.body).toBe(400);
        expect(JSON.parse(response.body).error.code).toBe('invalid_request');
      }
      expect(engine.seen).toEqual([]);
    });
  });

  describe("the engine's errors as envelopes (item 10)", () => {
    const envelopeOf = (response: { status: number | null; headers: Record<string, string>; body: string }) => {
      const parsed = JSON.parse(response.body) as { error: { code: string; message: string; request_id: string } };
      expect(Object.keys(parsed)).toEqual(['error']);
      expect(Object.keys(parsed.error).sort()).toEqual(['code', 'message', 'request_id']);
      expect(parsed.error.request_id).toBe(response.headers['x-request-id']);
      expect(response.headers['content-type']).toMatch(/^application\/json/);
      return parsed.error;
    };

    it('answers a plain-text engine error as an envelope with a fixed message, keeping the status, never showing the body', async () => {
      engine.answer = () => ({
        status: 500,
        headers: [['content-type', 'text/plain'], ['server', 'gunicorn'], ['x-powered-by', 'PHP/8']],
        body: 'Traceback (most recent call last):\n  File "/srv/engine/app.py", line 12\nKeyError: secret_db_password',
      });
      const response = await get('/public/v1/x?company_id=acme');
      expect(response.status).toBe(500);
      const error = envelopeOf(response);
      expect(error.code).toBe('engine_error');
      expect(response.body).not.toMatch(/Traceback|app\.py|secret_db_password/);
      expect(response.headers.server).toBeUndefined();
      expect(response.headers['x-powered-by']).toBeUndefined();
      expect(engine.seen).toHaveLength(1);
      // The engine's body is in the log, bounded, with the request id.
      await expect.poll(() => served.stdout()).toContain('the engine answered an error');
      const line = served
        .stdout()
        .split('\n')
        .find((text) => text.includes(error.request_id) && text.includes('engine_body'));
      expect(line).toContain('Traceback');
    });

    it("keeps an engine envelope's code and message, with our request id", async () => {
      engine.answer = () => ({
        status: 409,
        headers: [['content-type', 'application/json; charset=utf-8']],
        body: JSON.stringify({ error: { code: 'rule_exists', message: 'a rule with this name exists', request_id: 'engine-own' } }),
      });
      const response = await get('/public/v1/rules?company_id=acme');
      expect(response.status).toBe(409);
      const error = envelopeOf(response);
      expect(error).toMatchObject({ code: 'rule_exists', message: 'a rule with this name exists' });
      expect(error.request_id).toMatch(UUID);
    });

    it('keeps the status and Retry-After of a 503 or a 429, and never retries', async () => {
      for (const status of [503, 429]) {
        engine.seen.length = 0;
        engine.answer = () => ({ status, headers: [['content-type', 'application/json'], ['retry-after', '3']], body: '{"engine":"busy"}' });
        const response = await get('/public/v1/x?company_id=acme');
        expect(response.status).toBe(status);
        expect(envelopeOf(response).code).toBe(status === 503 ? 'engine_unavailable' : 'rate_limited');
        expect(response.headers['retry-after']).toBe('3');
        expect(engine.seen).toHaveLength(1);
      }
    });

    it("answers an engine's 401 or 407 as 502 bad_gateway, without the engine's challenge", async () => {
      for (const status of [401, 407]) {
        engine.answer = () => ({
          status,
          headers: [['content-type', 'application/json'], ['www-authenticate', 'Basic realm="engine"'], ['proxy-authenticate', 'Basic']],
          body: JSON.stringify({ error: { code: 'unauthorized', message: 'engine credentials rejected' } }),
        });
        const response = await get('/public/v1/x?company_id=acme');
        expect(response.status).toBe(502);
        expect(envelopeOf(response).code).toBe('bad_gateway');
        expect(response.headers['www-authenticate']).toBeUndefined();
        expect(response.headers['proxy-authenticate']).toBeUndefined();
      }
    });

    it('passes successful answers through unchanged', async () => {
      const body = Buffer.from('{"prices":[1,2],"note":"é"}', 'utf8');
      engine.answer = () => ({ status: 201, headers: [['content-type', 'application/vnd.engine+json'], ['etag', '"v1"'], ['set-cookie', 'a=1'], ['set-cookie', 'b=2']], body });
      const response = await get('/public/v1/x?company_id=acme');
      expect(response.status).toBe(201);
      expect(response.body).toBe(body.toString('utf8'));
      expect(response.headers['content-type']).toBe('application/vnd.engine+json');
      expect(response.headers.etag).toBe('"v1"');
    });
  });
});
