// Issue 24, end to end: a real `serve` behind a real reverse proxy on loopback (a small Node proxy that
// connects from 127.0.0.2 and appends its peer to X-Forwarded-For, as nginx's $proxy_add_x_forwarded_for
// does), and direct clients, each from an address of its own in 127/8. Trusted: only 127.0.0.2.
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';
import { backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';

const PROXY_SOURCE = '127.0.0.2';
const PAST_STALENESS_BOUND_MS = 1_300;

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One HTTP request from a chosen loopback source address. */
function send(url: string, options: { from: string; method?: string; headers?: Record<string, string>; body?: string }): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, localAddress: options.from, agent: false }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }));
    });
    request.on('error', reject);
    request.end(options.body);
  });
}

/** The balancer: from 127.0.0.2 to serve, X-Forwarded-For as received plus its peer, X-Forwarded-Proto https. */
async function startProxy(target: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const headers = { ...req.headers };
    const peer = req.socket.remoteAddress!;
    headers['x-forwarded-for'] = headers['x-forwarded-for'] ? `${headers['x-forwarded-for']}, ${peer}` : peer;
    headers['x-forwarded-proto'] = 'https';
    const upstream = httpRequest(`${target}${req.url}`, { method: req.method, headers, localAddress: PROXY_SOURCE, agent: false }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.3', resolve));
  return {
    url: `http://127.0.0.3:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A local OTLP/HTTP receiver (the exporter's JSON encoding): every span it was sent. */
interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: number | string } }[];
}
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; bodies: string[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        bodies.push(body);
        const document = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: ReceivedSpan[] }[] }[] };
        for (const resource of document.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, ms = 3_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > until) return value;
    await sleep(100);
  }
}

const attribute = (span: ReceivedSpan, key: string) => span.attributes.find((a) => a.key === key)?.value.stringValue;

describe.concurrent.each(BACKENDS)('behind a trusted balancer (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let server: Served;
    let proxy: Awaited<ReturnType<typeof startProxy>>;
    // Spans are exported on SQLite's run; PostgreSQL's runs with tracing off (ids only).
    const exporting = provider === 'sqlite';

    // In-process: the server behind the balancer is the subject here, not the CLI's process.
    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      // biome-ignore lint/suspicious/noExplicitAny: the CLI's JSON documents, asserted field by field
      return result.json<any>();
    };
    const partner = async (name: string) => {
      await cli('create-partner', '--name', name);
      await cli('map-company', name, '--company', 'acme');
      return (await cli('issue-keys', name)) as { access_key: string; secret_key: string; key_pair_id: string };
    };
    const exchange = (base: string, from: string, keys: { access_key: string; secret_key: string }, headers: Record<string, string> = {}) =>
      send(`${base}/public/v1/auth/token`, {
        from,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
    const data = (base: string, from: string, token: string, headers: Record<string, string> = {}) =>
      send(`${base}/public/v1/prices?company_id=acme`, { from, headers: { authorization: `Bearer ${token}`, ...headers } });
    const tokenOf = (reply: Reply) => {
      expect(reply.status, reply.body).toBe(200);
      return (JSON.parse(reply.body) as { access_token: string }).access_token;
    };
    const logLines = () =>
      server
        .stdout()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      upstream = await startUpstream();
      receiver = await startReceiver();
      server = await serve({
        ...backend.env,
        PUBLIC_API_UPSTREAM_URL: upstream.url,
        PUBLIC_API_TRUSTED_PROXIES: PROXY_SOURCE,
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '3',
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '1000',
        ...(exporting ? { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url } : {}),
      });
      proxy = await startProxy(server.url);
    });

    afterAll(async () => {
      await proxy?.close();
      server?.child.kill('SIGTERM');
      await server?.exited;
      await upstream?.close();
      await receiver?.close();
      await backend?.dispose();
    });

    it('gives two partners behind the balancer separate per-address limits; an untrusted peer gets one bucket whatever it says', async () => {
      const first = await partner('Throttle A');
      const second = await partner('Throttle B');
      for (let i = 0; i < 3; i++) expect((await exchange(proxy.url, '127.0.0.21', first)).status).toBe(200);
      const limited = await exchange(proxy.url, '127.0.0.21', first);
      expect(limited.status).toBe(429);
      expect(JSON.parse(limited.body).error.code).toBe('rate_limited');
      // Same balancer, another client address: its own bucket.
      expect((await exchange(proxy.url, '127.0.0.22', second)).status).toBe(200);
      // A direct (untrusted) client's X-Forwarded-For changes nothing: its bucket is its own address's.
      for (let i = 0; i < 3; i++) expect((await exchange(server.url, '127.0.0.23', second, { 'x-forwarded-for': `127.0.0.${30 + i}` })).status).toBe(200);
      expect((await exchange(server.url, '127.0.0.23', second, { 'x-forwarded-for': '127.0.0.40' })).status).toBe(429);
      // The request log is written in batches, off the answer's path: wait for the lines of the four direct exchanges.
      const clients = await vi.waitFor(
        () => {
          const found = logLines()
            .filter((line) => line.path === '/public/v1/auth/token')
            .map((line) => line.client);
          expect(found.filter((client) => client === '127.0.0.23')).toHaveLength(4);
          return found;
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(clients).toContain('127.0.0.21');
      expect(clients).toContain('127.0.0.22');
      expect(clients).toContain('127.0.0.23');
      expect(clients).not.toContain('127.0.0.40');
      expect(clients).not.toContain(PROXY_SOURCE);
    });

    it('tells the engine the client address the gateway determined, never a forged one', async () => {
      const keys = await partner('Forwarded');
      const token = tokenOf(await exchange(proxy.url, '127.0.0.51', keys));
      upstream.received.length = 0;
      // A forged chain: the client says it is 198.51.100.7; the balancer appends its real peer.
      expect((await data(proxy.url, '127.0.0.51', token, { 'x-forwarded-for': '198.51.100.7' })).status).toBe(200);
      expect((await data(server.url, '127.0.0.52', token, { 'x-forwarded-for': '198.51.100.7', 'x-forwarded-proto': 'https' })).status).toBe(200);
      const [viaProxy, direct] = upstream.received;
      expect(viaProxy!.headers['x-forwarded-for']).toBe('127.0.0.51');
      expect(viaProxy!.headers['x-forwarded-proto']).toBe('https');
      expect(direct!.headers['x-forwarded-for']).toBe('127.0.0.52');
      expect(direct!.headers['x-forwarded-proto']).toBe('http');
    });

    it('refuses and allows exactly by the network rules, on the exchange and data requests, within a second of a change', async () => {
      const keys = await partner('Fenced');
      const set = await cli('set-network', 'Fenced', '--allow', '127.0.0.61/32');
      expect(set).toMatchObject({ network: { allow: ['127.0.0.61/32'] }, changed: true });
      await sleep(PAST_STALENESS_BOUND_MS);
      const token = tokenOf(await exchange(proxy.url, '127.0.0.61', keys));
      expect((await data(proxy.url, '127.0.0.61', token)).status).toBe(200);
      // Another client behind the balancer, even naming the allowed address in a forged chain.
      const refused = await data(proxy.url, '127.0.0.62', token, { 'x-forwarded-for': '127.0.0.61' });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body).error.code).toBe('address_not_allowed');
      expect(refused.body).not.toContain('127.0.0.61');
      // A direct client claiming the allowed address.
      expect((await data(server.url, '127.0.0.61', token, { 'x-forwarded-for': '127.0.0.61' })).status).toBe(200);
      expect((await data(server.url, '127.0.0.63', token, { 'x-forwarded-for': '127.0.0.61' })).status).toBe(403);
      const wrongSecret = await exchange(proxy.url, '127.0.0.62', { ...keys, secret_key: `${keys.secret_key.slice(0, -4)}${keys.secret_key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}` });
      expect(wrongSecret.status).toBe(403);
      expect((await exchange(proxy.url, '127.0.0.62', keys)).status).toBe(403);

      // Rules changed: the old address is refused and the new one allowed within a second.
      await cli('set-network', 'Fenced', '--allow', '127.0.0.62');
      await sleep(PAST_STALENESS_BOUND_MS);
      expect((await data(proxy.url, '127.0.0.61', token)).status).toBe(403);
      expect((await data(proxy.url, '127.0.0.62', token)).status).toBe(200);
      expect((await exchange(proxy.url, '127.0.0.62', keys)).status).toBe(200);
      await cli('set-network', 'Fenced', '--clear');
      await sleep(PAST_STALENESS_BOUND_MS);
      expect((await data(proxy.url, '127.0.0.64', token)).status).toBe(200);
    });

    it('serves a partner allowed from 0.0.0.0/0 or ::/0, and refuses with 403 (not 500 or 503) under rules written around set-network', async () => {
      const keys = await partner('Open');
      for (const [rule, from] of [['0.0.0.0/0', '127.0.0.71'], ['::/0', '127.0.0.72']] as const) {
        expect(await cli('set-network', 'Open', '--allow', rule)).toMatchObject({ network: { allow: [rule] } });
        await sleep(PAST_STALENESS_BOUND_MS);
        const token = tokenOf(await exchange(server.url, from, keys));
        expect((await data(server.url, from, token)).status).toBe(200);
      }
      const token = tokenOf(await exchange(server.url, '127.0.0.73', keys));
      // A rule the matcher cannot use, written straight into the database (and the revision moved, as a change does).
      const db = await openDatabase(resolveDatabase(backend.url, {}));
      try {
        const [row] = await db.sql.query<{ id: string }>("SELECT id FROM partners WHERE name = 'Open'");
        await db.sql.query("UPDATE partner_networks SET allow_from = '10.0.0.0/99' WHERE partner_id = $1", [row!.id]);
        await db.sql.query('UPDATE revision SET value = value + 1 WHERE id = 1');
      } finally {
        await db.close();
      }
      await sleep(PAST_STALENESS_BOUND_MS);
      for (const reply of [await exchange(server.url, '127.0.0.74', keys), await data(server.url, '127.0.0.74', token)]) {
        expect(reply.status, reply.body).toBe(403);
        expect(JSON.parse(reply.body).error.code).toBe('address_not_allowed');
      }
      expect(server.stderr()).toContain("network rules '10.0.0.0/99' cannot be used");
      await cli('set-network', 'Open', '--clear');
    });

    it('records a genuine secret refused from an unlisted address, and lookup and list-keys show it', async () => {
      const keys = await partner('Leaky');
      await cli('set-network', 'Leaky', '--allow', '203.0.113.0/24');
      await sleep(PAST_STALENESS_BOUND_MS);
      const before = await cli('lookup', keys.access_key);
      expect(before.refused_from_unlisted_address_at).toBeNull();
      // A wrong secret from there is refused the same way, and is no sign of the secret being known.
      expect((await exchange(proxy.url, '127.0.0.71', { ...keys, secret_key: `${keys.secret_key.slice(0, -4)}${keys.secret_key.endsWith('AAAA') ? 'BBBB' : 'AAAA'}` })).status).toBe(403);
      await sleep(500);
      expect((await cli('lookup', keys.access_key)).refused_from_unlisted_address_at).toBeNull();
      expect((await exchange(proxy.url, '127.0.0.72', keys)).status).toBe(403);
      const after = await eventually(
        () => cli('lookup', keys.access_key),
        (found) => found.refused_from_unlisted_address_at !== null,
      );
      expect(after.refused_from_unlisted_address).toBe('127.0.0.72');
      expect(Date.parse(after.refused_from_unlisted_address_at)).toBeGreaterThan(Date.now() - 60_000);
      const listed = await cli('list-keys', '--partner', 'Leaky');
      expect(listed.keys[0]).toMatchObject({ key_pair_id: keys.key_pair_id, refused_from_unlisted_address: '127.0.0.72' });
    });

    it('continues a client trace: the engine gets the gateway span as parent and the tracestate; the answer and the log carry the trace id', async () => {
      const keys = await partner('Traced');
      const token = tokenOf(await exchange(proxy.url, '127.0.0.81', keys));
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const clientSpan = '00f067aa0ba902b7';
      upstream.received.length = 0;
      const reply = await data(proxy.url, '127.0.0.81', token, { traceparent: `00-${traceId}-${clientSpan}-01`, tracestate: 'vendor=abc' });
      expect(reply.status).toBe(200);
      const sent = upstream.received[0]!.headers;
      const [version, engineTrace, engineParent, flags] = String(sent.traceparent).split('-');
      expect([version, engineTrace, flags]).toEqual(['00', traceId, '01']);
      expect(engineParent).toMatch(/^[0-9a-f]{16}$/);
      expect(engineParent).not.toBe(clientSpan);
      expect(sent.tracestate).toBe('vendor=abc');
      const [, answeredTrace, gatewaySpan] = String(reply.headers.traceresponse).split('-');
      expect(answeredTrace).toBe(traceId);

      // No traceparent, or an invalid one: a new trace, named the same to the engine and the client.
      const variants: Record<string, string>[] = [{}, { traceparent: `00-${'0'.repeat(32)}-${clientSpan}-01`, tracestate: 'dropped=1' }];
      for (const headers of variants) {
        upstream.received.length = 0;
        const fresh = await data(proxy.url, '127.0.0.81', token, headers);
        expect(fresh.status).toBe(200);
        const engineHeaders = upstream.received[0]!.headers;
        const newTrace = String(engineHeaders.traceparent).split('-')[1];
        expect(newTrace).toMatch(/^[0-9a-f]{32}$/);
        expect(newTrace).not.toBe('0'.repeat(32));
        expect(String(fresh.headers.traceresponse).split('-')[1]).toBe(newTrace);
        expect(engineHeaders.tracestate).toBeUndefined();
      }
      const line = await vi.waitFor(
        () => {
          const found = logLines().find((entry) => entry.trace_id === traceId);
          expect(found).toBeDefined();
          return found;
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(line).toMatchObject({ status: 200, client: '127.0.0.81', path: '/public/v1/prices' });

      if (!exporting) return;
      // The spans reach the OTLP/HTTP receiver: request (child of the client's span), gate and engine
      // (children of the request); the engine was told the engine span is its parent.
      const spans = await eventually(
        async () => receiver.spans.filter((span) => span.traceId === traceId),
        (found) => found.length >= 3,
        5_000,
      );
      const request = spans.find((span) => span.name === 'GET /public/v1/prices')!;
      const gate = spans.find((span) => span.name === 'gate')!;
      const engine = spans.find((span) => span.name === 'engine')!;
      expect(request.parentSpanId).toBe(clientSpan);
      expect(request.spanId).toBe(gatewaySpan);
      expect(gate.parentSpanId).toBe(request.spanId);
      expect(engine.parentSpanId).toBe(request.spanId);
      expect(engine.spanId).toBe(engineParent);
      const partnerId = (await cli('show-partner', 'Traced')).partner_id;
      expect(attribute(request, 'partnerctl.partner_id')).toBe(partnerId);
      expect(attribute(gate, 'partnerctl.partner_id')).toBe(partnerId);
      expect(attribute(gate, 'partnerctl.company_id')).toBe('acme');
      const exported = receiver.bodies.join('\n');
      expect(exported).not.toContain(token);
      expect(exported).not.toContain(keys.secret_key);
      expect(exported).not.toContain('Bearer');
    });
  });
});
