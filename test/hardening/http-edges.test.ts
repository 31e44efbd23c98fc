import { beforeAll, describe, expect, it } from 'vitest';
import { expectEnvelope4xx, gatewayUnderTest, rawHttp, UUID, type RawResponse, type recordingEngine, type serveInProcess } from './support.js';

/**
 * RFC 9110/9112 edge cases an attacker of a gateway tries, against the real `partnerctl serve` with raw
 * sockets and an engine that records what reaches it (or misbehaves on purpose). One case per behaviour;
 * whatever is refused is refused with the envelope and never reaches the engine.
 */
describe('HTTP edge cases, against the real server', () => {
  let engine: Awaited<ReturnType<typeof recordingEngine>>;
  let served: Awaited<ReturnType<typeof serveInProcess>>;
  let token: string;
  let host: string;

  const raw = (lines: string[], body?: Buffer) => rawHttp(served.url, `${lines.join('\r\n')}\r\n\r\n`, body);
  /** A GET with a token, a Host unless `extra` replaces it, and Connection: close. */
  const get = (target: string, extra: string[] = [], options: { host?: boolean } = {}) =>
    raw([`GET ${target} HTTP/1.1`, ...(options.host === false ? [] : [`Host: ${host}`]), `Authorization: Bearer ${token}`, 'Connection: close', ...extra]);
  const refused = (response: RawResponse, label: string, status?: number) => {
    const error = expectEnvelope4xx(response, label);
    if (status !== undefined) expect(response.status, `${label}: ${response.body}`).toBe(status);
    expect(engine.seen, `${label}: reached the engine`).toEqual([]);
    return error;
  };
  const post = (body: string | Buffer, extra: string[] = [], target = '/public/v1/items') => {
    const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
    return raw(
      [`POST ${target} HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', `Content-Length: ${bytes.length}`, 'Connection: close', ...extra],
      bytes,
    );
  };

  const gateway = gatewayUnderTest('edges-probe', { companies: ['acme', 'other'], upstreamTimeoutMs: 1000 });
  beforeAll(() => {
    ({ engine, served, token, host } = gateway);
  });

  describe('Host (exactly one, valid, on HTTP/1.1)', () => {
    it('refuses an HTTP/1.1 request without Host', async () => {
      refused(await get('/public/v1/x?company_id=acme', [], { host: false }), 'no Host', 400);
    });

    it('refuses two Host headers, even when they agree', async () => {
      refused(await get('/public/v1/x?company_id=acme', [`Host: ${host}`]), 'same Host twice', 400);
      refused(await get('/public/v1/x?company_id=acme', ['Host: engine.internal']), 'two different Hosts', 400);
    });

    it('refuses a Host with characters no host may hold', async () => {
      for (const bad of ['a b', 'evil.example/path', 'user@evil.example', 'a\\b', 'a,b', '[::1', 'x:port', 'x:99999999', '']) {
        refused(await get('/public/v1/x?company_id=acme', [`Host: ${bad}`], { host: false }), `Host ${JSON.stringify(bad)}`, 400);
      }
    });

    it('serves names, IPv4 and IPv6 literals, with or without a port', async () => {
      for (const good of ['partner-api.example', 'localhost:8080', '127.0.0.1', '[::1]:443', '[2001:db8::1]', 'API.EXAMPLE.']) {
        engine.seen.length = 0;
        const response = await get('/public/v1/x?company_id=acme', [`Host: ${good}`], { host: false });
        expect(response.status, `Host ${good}: ${response.body}`).toBe(200);
        expect(engine.seen, good).toHaveLength(1);
      }
    });

    it('HTTP/1.0 without Host is served (Host is optional there)', async () => {
      const response = await raw(['GET /public/v1/x?company_id=acme HTTP/1.0', `Authorization: Bearer ${token}`]);
      expect(response.status, response.body).toBe(200);
    });
  });

  describe('the path never reaches the engine with control characters or dot segments', () => {
    it('refuses percent-encoded control characters (%00-%1f, %7f) anywhere in the path', async () => {
      for (const code of [0x00, 0x01, 0x09, 0x0a, 0x0d, 0x1b, 0x1f, 0x7f]) {
        const encoded = `%${code.toString(16).padStart(2, '0')}`;
        for (const target of [`/public/v1/x${encoded}y?company_id=acme`, `/public/v1/${encoded.toUpperCase()}?company_id=acme`]) {
          refused(await get(target), target, 400);
        }
      }
    });

    it('refuses raw control bytes in the request target', async () => {
      for (const byte of [0x00, 0x01, 0x7f]) {
        const head = Buffer.concat([
          Buffer.from('GET /public/v1/x'),
          Buffer.from([byte]),
          Buffer.from(`?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`),
        ]);
        refused(await rawHttp(served.url, head), `raw byte ${byte}`, 400);
      }
    });

    it('refuses dot segments: plain, percent-encoded, mixed, and with ;parameters', async () => {
      for (const segment of ['..', '.', '%2e%2e', '%2E.', '.%2e', '%2e', '..;', '..;x=1', '.;', '%2e%2e;', '..%3b', '%2e%2e%3Bjsessionid=1', '..%2f', '%252e%252e']) {
        for (const target of [`/public/v1/${segment}/admin?company_id=acme`, `/public/v1/a/${segment}?company_id=acme`]) {
          refused(await get(target), target, 400);
        }
      }
    });

    it('forwards names that merely contain dots', async () => {
      for (const [target, expected] of [
        ['/public/v1/prices.json?company_id=acme', '/api/prices.json?company_id=acme'],
        ['/public/v1/...?company_id=acme', '/api/...?company_id=acme'],
        ['/public/v1/a..b/.well?company_id=acme', '/api/a..b/.well?company_id=acme'],
      ] as const) {
        engine.seen.length = 0;
        const response = await get(target);
        expect(response.status, `${target}: ${response.body}`).toBe(200);
        expect(engine.seen.map((seen) => seen.url)).toEqual([expected]);
      }
    });

    it('refuses overlong UTF-8 and %u escapes for dots (broken percent-encoding)', async () => {
      for (const target of ['/public/v1/%c0%ae%c0%ae/admin?company_id=acme', '/public/v1/%u002e%u002e/admin?company_id=acme', '/public/v1/%e0%80%ae?company_id=acme']) {
        refused(await get(target), target, 400);
      }
    });

    it('refuses an encoded slash or backslash, which engines decode into a path separator', async () => {
      for (const target of ['/public/v1/a%2f..%2fadmin?company_id=acme', '/public/v1/a%5cb?company_id=acme', '/public/v1/a%2Fb?company_id=acme']) {
        refused(await get(target), target, 400);
      }
    });
  });

  describe('request targets in other forms', () => {
    it('refuses absolute-form with userinfo', async () => {
      refused(await get(`http://user:pass@${host}/public/v1/x?company_id=acme`), 'userinfo', 400);
      refused(await get(`http://@${host}/public/v1/x?company_id=acme`), 'empty userinfo', 400);
    });

    it('refuses absolute-form with a scheme other than http or https', async () => {
      for (const scheme of ['ftp', 'file', 'gopher', 'javascript']) {
        // 404 from the router or 400 from the forwarding contract: either way refused, never forwarded.
        refused(await get(`${scheme}://x/public/v1/x?company_id=acme`), scheme);
      }
    });

    it('forwards absolute-form with an IPv6 authority by its path', async () => {
      const response = await get('http://[::1]:8080/public/v1/x?company_id=acme');
      expect(response.status, response.body).toBe(200);
      expect(engine.seen.map((seen) => seen.url)).toEqual(['/api/x?company_id=acme']);
    });

    it('answers OPTIONS * (asterisk-form) with an envelope, never forwarding it', async () => {
      const error = refused(await raw(['OPTIONS * HTTP/1.1', `Host: ${host}`, 'Connection: close']), 'OPTIONS *');
      expect(error.code).toBeTruthy();
    });

    it('answers CONNECT (authority-form) with a 405 envelope', async () => {
      const error = refused(await raw([`CONNECT engine.internal:443 HTTP/1.1`, 'Host: engine.internal:443']), 'CONNECT', 405);
      expect(error.code).toBe('method_not_allowed');
    });
  });

  describe('company_id: the gate and the engine always read the same one', () => {
    it('refuses company_id given twice in the query', async () => {
      refused(await get('/public/v1/x?company_id=acme&company_id=other'), 'twice', 400);
      refused(await get('/public/v1/x?company_id=acme&company_id=acme'), 'twice, same value', 400);
    });

    it('refuses array spellings that PHP, Rails and qs read as company_id', async () => {
      for (const query of ['company_id[]=acme', 'company_id[0]=acme', 'company_id[x]=other&company_id=acme', 'company_id%5B%5D=other&company_id=acme']) {
        refused(await get(`/public/v1/x?${query}`), query, 400);
      }
    });

    it('refuses percent-encoded and case-variant spellings of the name next to the real one', async () => {
      for (const query of [
        'company_id=acme&company%5Fid=other',
        'company%5fid=acme',
        'company_id=acme&Company_Id=other',
        'COMPANY_ID=other&company_id=acme',
        'company_id=acme&company-id=other',
        'company_id=acme&company.id=other',
        'company_id=acme&company%20id=other',
        'company_id=acme&company+id=other',
        'company_id=acme&%63ompany_id=other',
        'company_id=acme&company_id%00=other',
      ]) {
        refused(await get(`/public/v1/x?${query}`), query, 400);
      }
    });

    it('refuses a semicolon-separated second company_id, which some engines split on', async () => {
      refused(await get('/public/v1/x?company_id=acme;company_id=other'), 'semicolon', 400);
    });

    it('forwards other parameters that merely start with company', async () => {
      const response = await get('/public/v1/x?company_id=acme&company_name=x&companyid2=y');
      expect(response.status, response.body).toBe(200);
      expect(engine.seen).toHaveLength(1);
    });

    it('refuses company_id twice in a JSON body, also when one spelling uses escapes', async () => {
      for (const body of [
        '{"company_id":"acme","company_id":"other"}',
        '{"company_id":"acme","company\\u005fid":"other"}',
        '{"company\\u005Fid":"other","company_id":"acme"}',
        '{"company_id":"acme","\\u0063ompany_id":"other"}',
      ]) {
        refused(await post(body), body, 400);
      }
    });

    it('reads a JSON member name spelled with escapes as JSON does, and forwards the same bytes', async () => {
      // `company\u005fid` is the name company_id for every JSON parser, the gate's and the engine's alike.
      const body = '{"company\\u005fid":"acme"}';
      const response = await post(body);
      expect(response.status, response.body).toBe(200);
      expect(engine.seen[0]!.body.toString()).toBe(body);
      engine.seen.length = 0;
      refused(await post('{"company\\u005fid":"not-mapped"}'), 'escaped name, unmapped company', 404);
    });
  });

  describe('Expect', () => {
    it('answers an expectation other than 100-continue with 417 and an envelope', async () => {
      for (const expectation of ['200-ok', 'something', '100-continue, x']) {
        const error = refused(await post('{"company_id":"acme"}', [`Expect: ${expectation}`]), `Expect: ${expectation}`, 417);
        expect(error.code).toBe('expectation_failed');
      }
    });

    it('answers 100 Continue, then forwards the body, without the Expect header', async () => {
      const { connect } = await import('node:net');
      const { hostname, port } = new URL(served.url);
      const body = '{"company_id":"acme","n":1}';
      const text = await new Promise<string>((resolve, reject) => {
        let received = '';
        let sentBody = false;
        const socket = connect(Number(port), hostname, () => {
          socket.write(
            [`POST /public/v1/items HTTP/1.1`, `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json',
              `Content-Length: ${body.length}`, 'Expect: 100-continue', 'Connection: close', '', ''].join('\r\n'),
          );
        });
        socket.on('data', (chunk) => {
          received += chunk.toString('latin1');
          if (!sentBody && received.startsWith('HTTP/1.1 100 ')) {
            sentBody = true;
            socket.write(body);
          }
        });
        socket.on('error', reject);
        socket.on('close', () => resolve(received));
        socket.setTimeout(5_000, () => socket.destroy());
      });
      expect(text).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
      expect(engine.seen).toHaveLength(1);
      expect(engine.seen[0]!.body.toString()).toBe(body);
      expect(engine.seen[0]!.rawHeaders.map((name) => name.toLowerCase())).not.toContain('expect');
    });

    it('refuses Expect: 100-continue with a bad token before reading the body', async () => {
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, 'Authorization: Bearer nope', 'Content-Type: application/json', 'Content-Length: 20', 'Expect: 100-continue', 'Connection: close'],
      );
      expect(response.status).toBe(401);
      expect(engine.seen).toEqual([]);
    });
  });

  describe('framing', () => {
    it('refuses Transfer-Encoding together with Content-Length', async () => {
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Content-Length: 4', 'Transfer-Encoding: chunked', 'Connection: close'],
        Buffer.from('16\r\n{"company_id":"acme"}\r\n0\r\n\r\n'),
      );
      refused(response, 'TE + CL', 400);
    });

    it('refuses two different Content-Length values', async () => {
      refused(
        await raw(['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Content-Length: 21', 'Content-Length: 5', 'Connection: close'], Buffer.from('{"company_id":"acme"}')),
        'two Content-Lengths',
        400,
      );
    });

    it('refuses a Transfer-Encoding other than chunked', async () => {
      for (const coding of ['gzip, chunked', 'chunked, identity', 'xchunked', 'chunked\t']) {
        const response = await raw(
          ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', `Transfer-Encoding: ${coding}`, 'Connection: close'],
          Buffer.from('15\r\n{"company_id":"acme"}\r\n0\r\n\r\n'),
        );
        expect(response.status === null || (response.status >= 400 && response.status < 500), `${coding}: ${response.status}`).toBe(true);
      }
      expect(engine.seen).toEqual([]);
    });

    it('reads chunk extensions and forwards the body alone, with a Content-Length', async () => {
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Connection: close'],
        Buffer.from('a;name=value\r\n{"company_\r\nb;x\r\nid":"acme"}\r\n0\r\n\r\n'),
      );
      expect(response.status, response.body).toBe(200);
      expect(engine.seen[0]!.body.toString()).toBe('{"company_id":"acme"}');
      const names = engine.seen[0]!.rawHeaders.map((name) => name.toLowerCase());
      expect(names).not.toContain('transfer-encoding');
      expect(names).toContain('content-length');
    });

    it('never forwards chunked trailers (an identity header in a trailer stays with the gateway)', async () => {
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Trailer: X-Partner-Id', 'Connection: close'],
        Buffer.from('15\r\n{"company_id":"acme"}\r\n0\r\nX-Partner-Id: ptn_forged\r\nX-Company-Id: other\r\n\r\n'),
      );
      expect(response.status, response.body).toBe(200);
      const seen = engine.seen[0]!;
      expect(seen.body.toString()).toBe('{"company_id":"acme"}');
      const values = seen.rawHeaders.filter((_, i) => i % 2 === 1);
      expect(values).not.toContain('ptn_forged');
      expect(values).not.toContain('other');
    });

    it('refuses malformed chunk sizes', async () => {
      for (const size of ['0x15', '+15', '-1', '15 ', 'zz', '1'.repeat(20)]) {
        const response = await raw(
          ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Connection: close'],
          Buffer.from(`${size}\r\n{"company_id":"acme"}\r\n0\r\n\r\n`),
        );
        expect(response.status === null || (response.status >= 400 && response.status < 500), `${JSON.stringify(size)}: ${response.status}`).toBe(true);
      }
      expect(engine.seen).toEqual([]);
    });

    it('refuses a GET whose body comes chunked', async () => {
      refused(
        await raw(['GET /public/v1/x?company_id=acme HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', 'Transfer-Encoding: chunked', 'Connection: close'], Buffer.from('2\r\n{}\r\n0\r\n\r\n')),
        'chunked GET body',
        400,
      );
    });

    it('answers an HTTP/2 connection preface on the HTTP/1.1 port with a 4xx, never forwarding it', async () => {
      const response = await rawHttp(served.url, 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
      expect(response.status === null || (response.status >= 400 && response.status < 500), String(response.status)).toBe(true);
      expect(engine.seen).toEqual([]);
    });

    it('refuses obs-fold (a header continued on the next line)', async () => {
      refused(await get('/public/v1/x?company_id=acme', ['X-Folded: first', ' second']), 'obs-fold', 400);
    });

    it('refuses a header section larger than the limit with an envelope', async () => {
      refused(await get('/public/v1/x?company_id=acme', [`X-Big: ${'a'.repeat(70_000)}`]), 'huge header');
    });

    it('refuses a Content-Encoding on the request body, which the gate could not read as the engine would', async () => {
      for (const coding of ['gzip', 'deflate', 'br', 'identity, gzip']) {
        refused(await post('{"company_id":"acme"}', [`Content-Encoding: ${coding}`]), coding, 415);
      }
    });

    it('refuses two Content-Type headers', async () => {
      refused(await post('{"company_id":"acme"}', ['Content-Type: application/x-www-form-urlencoded']), 'two Content-Types', 400);
    });
  });

  describe('request headers a client could use to mislead an engine', () => {
    it('never forwards what the client says about its address, scheme or host, nor path and method overrides (the gateway says who the client is)', async () => {
      const response = await get('/public/v1/x?company_id=acme', [
        'Forwarded: for=10.0.0.1;host=admin.internal;proto=https',
        'X-Forwarded-For: 10.0.0.1',
        'X-Forwarded-Host: admin.internal',
        'X-Forwarded-Proto: https',
        'X-Forwarded-Prefix: /admin',
        'X-Real-IP: 10.0.0.1',
        'X-Client-IP: 10.0.0.1',
        'X-Original-URL: /admin/delete-all',
        'X-Rewrite-URL: /admin/delete-all',
        'X-HTTP-Method-Override: DELETE',
        'X-HTTP-Method: DELETE',
        'X-Method-Override: DELETE',
        'X-Kept: yes',
      ]);
      expect(response.status, response.body).toBe(200);
      const raw = engine.seen[0]!.rawHeaders;
      const names = raw.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
      // Only the gateway's own X-Forwarded-For and X-Forwarded-Proto, once each: the client as the gateway
      // determined it (a direct client here: its peer address), never the client's claims.
      expect(names.filter((name) => /forwarded|real-ip|client-ip|original-url|rewrite-url|method/.test(name))).toEqual(['x-forwarded-for', 'x-forwarded-proto']);
      const value = (name: string) => raw[raw.findIndex((entry, i) => i % 2 === 0 && entry.toLowerCase() === name) + 1];
      expect(value('x-forwarded-for')).toBe('127.0.0.1');
      expect(value('x-forwarded-proto')).toBe('http');
      expect(names).toContain('x-kept');
    });

    it('refuses a JSON body labelled with a charset other than UTF-8 (415)', async () => {
      for (const type of ['application/json; charset=utf-16', 'application/json; charset=iso-8859-1', 'application/json;Charset="latin1"']) {
        const body = Buffer.from('{"company_id":"acme"}');
        const response = await raw(
          ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, `Content-Type: ${type}`, `Content-Length: ${body.length}`, 'Connection: close'],
          body,
        );
        refused(response, type, 415);
      }
      const utf8 = Buffer.from('{"company_id":"acme"}');
      const response = await raw(
        ['POST /public/v1/items HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json; charset=UTF-8', `Content-Length: ${utf8.length}`, 'Connection: close'],
        utf8,
      );
      expect(response.status, response.body).toBe(200);
    });
  });

  describe('HEAD', () => {
    it('forwards HEAD and answers without a body, keeping the connection usable', async () => {
      engine.answer = () => ({ headers: [['content-type', 'application/json']], body: '' });
      const { connect } = await import('node:net');
      const { hostname, port } = new URL(served.url);
      const text = await new Promise<string>((resolve) => {
        let received = '';
        const socket = connect(Number(port), hostname, () => {
          socket.write(`HEAD /public/v1/x?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\n\r\n`);
          socket.write(`GET /public/v1/y?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`);
        });
        socket.on('data', (chunk) => (received += chunk.toString('latin1')));
        socket.on('close', () => resolve(received));
        socket.setTimeout(5_000, () => socket.destroy());
      });
      const answers = text.split(/(?=HTTP\/1\.1 \d{3} )/);
      expect(answers, text).toHaveLength(2);
      expect(answers[0]).toMatch(/^HTTP\/1\.1 200 /);
      expect(answers[0]!.endsWith('\r\n\r\n'), 'HEAD answer carries no body').toBe(true);
      expect(answers[1]).toMatch(/^HTTP\/1\.1 200 /);
      expect(engine.seen.map((seen) => `${seen.method} ${seen.url}`)).toEqual(['HEAD /api/x?company_id=acme', 'GET /api/y?company_id=acme']);
    });

    it('refuses a HEAD request that carries a body (400, no body in a HEAD answer)', async () => {
      const response = await raw(['HEAD /public/v1/x?company_id=acme HTTP/1.1', `Host: ${host}`, `Authorization: Bearer ${token}`, 'Content-Length: 5', 'Connection: close'], Buffer.from('hello'));
      expect(response.status).toBe(400);
      expect(response.headers['x-request-id']).toMatch(UUID);
      expect(response.body).toBe('');
      expect(engine.seen).toEqual([]);
    });
  });

  describe('request ids', () => {
    it("never takes the client's X-Request-Id; the engine and the client see the gateway's own", async () => {
      for (const supplied of ['evil"<script>', 'a'.repeat(5_000), '../../etc/passwd', 'id\\u0000', '']) {
        engine.seen.length = 0;
        const response = await get('/public/v1/x?company_id=acme', [`X-Request-Id: ${supplied}`]);
        expect(response.status, response.body).toBe(200);
        expect(response.headers['x-request-id']).toMatch(UUID);
        const forwarded = engine.seen[0]!.rawHeaders.filter((_, i, all) => i % 2 === 1 && all[i - 1]!.toLowerCase() === 'x-request-id');
        expect(forwarded).toEqual([response.headers['x-request-id']]);
      }
    });
  });

  describe('engines that misbehave', () => {
    const expectGatewayError = (response: RawResponse, status: number, code: string) => {
      expect(response.status, response.body).toBe(status);
      const parsed = JSON.parse(response.body) as { error: { code: string; request_id: string } };
      expect(parsed.error.code).toBe(code);
      expect(parsed.error.request_id).toBe(response.headers['x-request-id']);
    };

    it('an engine that closes the connection before answering: 502 bad_gateway', async () => {
      engine.behave = (_seen, req) => req.socket.destroy();
      expectGatewayError(await get('/public/v1/x?company_id=acme'), 502, 'bad_gateway');
    });

    it('an engine that closes in the middle of its body: 502 bad_gateway, never a truncated 200', async () => {
      engine.behave = (_seen, _req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"partial":');
        setTimeout(() => res.socket?.destroy(), 20);
      };
      expectGatewayError(await get('/public/v1/x?company_id=acme'), 502, 'bad_gateway');
    });

    it('an engine that sends a huge header: 502 bad_gateway', async () => {
      engine.behave = (_seen, _req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'x-huge': 'h'.repeat(200_000) });
        res.end('{}');
      };
      expectGatewayError(await get('/public/v1/x?company_id=acme'), 502, 'bad_gateway');
    });

    it('an engine that answers 103 Early Hints first: the client gets the final answer only', async () => {
      engine.behave = (_seen, _req, res) => {
        res.writeEarlyHints({ link: '</internal/style.css>; rel=preload' });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"final":true}');
      };
      const response = await get('/public/v1/x?company_id=acme');
      expect(response.status, response.body).toBe(200);
      expect(response.body).toBe('{"final":true}');
      expect(response.headers.link).toBeUndefined();
    });

    it('an engine that never answers: 504 upstream_timeout', async () => {
      engine.behave = () => {};
      expectGatewayError(await get('/public/v1/x?company_id=acme'), 504, 'upstream_timeout');
    });

    it('an engine that answers 101 Switching Protocols is not followed: 502 bad_gateway', async () => {
      engine.behave = (_seen, req) => {
        req.socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
        setTimeout(() => req.socket.destroy(), 50);
      };
      expectGatewayError(await get('/public/v1/x?company_id=acme'), 502, 'bad_gateway');
    });
  });
});
