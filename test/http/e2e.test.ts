import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PartnerClient } from '@partnerctl/client';
import { REQUEST_LOG_FLUSH_MS } from '../../src/http/server/server.js';
import { inForceWithin } from '../support/bounds.js';
import { runBinary, runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { startUpstream, UUID, type TestUpstream } from './support.js';

/** Raw HTTP/1.1 on a socket, for what fetch will not send (two Authorization headers, dot segments). */
function rawRequest(url: string, text: string): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    // write, not end: a half-closed connection may be dropped before an asynchronous answer.
    const socket = connect(Number(port), hostname, () => socket.write(text));
    socket.setTimeout(10_000, () => socket.destroy());
    let data = '';
    socket.setEncoding('utf8').on('data', (chunk) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', body = ''] = data.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), headers: head, body });
    });
  });
}

describe.each(BACKENDS)('partnerctl serve end to end (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let server: Served;
    let keys: { partner_id: string; access_key: string; secret_key: string };

    // The commands in-process: the server's process is the subject here, not theirs.
    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };
    const exchange = (accessKey: string, secretKey: string) =>
      fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: accessKey, secret_key: secretKey }),
      });
    const data = (token: string, company = 'acme') =>
      fetch(`${server.url}/public/v1/prices?company_id=${company}`, { headers: { authorization: `Bearer ${token}` } });

    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') await (await openMigrated(backend)).close();
      upstream = await startUpstream();
      await cli('create-partner', '--name', 'e2e');
      keys = (await cli('issue-keys', 'e2e')) as typeof keys;
      await cli('map-company', 'e2e', '--company', 'acme');
      server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '1000' });
    });
    afterAll(async () => {
      if (server && server.child.exitCode === null) {
        server.child.kill('SIGKILL');
        await server.exited;
      }
      await upstream?.close();
      await backend?.dispose();
    });

    it('prints one startup line with the real port', () => {
      expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(server.url).not.toMatch(/:0$/);
      expect(server.stderr()).toContain(`(${provider} `);
    });

    it('exchanges CLI-made keys and forwards a data request to the engine', async () => {
      const response = await exchange(keys.access_key, keys.secret_key);
      expect(response.status).toBe(200);
      const { access_token: token } = (await response.json()) as { access_token: string };
      const got = await data(token);
      expect(got.status).toBe(200);
      expect(got.headers.get('x-request-id')).toMatch(UUID);
      const seen = upstream.received.at(-1)!;
      expect(seen.url).toBe('/prices?company_id=acme');
      expect(seen.headers['x-partner-id']).toBe(keys.partner_id);
      expect(seen.headers.authorization).toBeUndefined();
    });

    it('the rotation story, with keys rotated by the CLI while the server runs', async () => {
      const oldToken = ((await (await exchange(keys.access_key, keys.secret_key)).json()) as { access_token: string }).access_token;
      const rotated = (await cli('rotate-keys', 'e2e')) as typeof keys;
      expect((await exchange(keys.access_key, keys.secret_key)).status).toBe(401);
      expect((await data(oldToken)).status).toBe(200);
      const newResponse = await exchange(rotated.access_key, rotated.secret_key);
      expect(newResponse.status).toBe(200);
      const newToken = ((await newResponse.json()) as { access_token: string }).access_token;
      expect((await data(newToken)).status).toBe(200);

      // Exit 0 is the receipt: the running server confirmed the revocation before the command returned, so the
      // token is refused now, not after a wait.
      const leaked = (await cli('rotate-keys', 'e2e', '--revoke-issued-tokens')) as typeof keys;
      const refused = await data(newToken);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('unauthorized');
      keys = { ...keys, ...leaked };
    });

    it('unmapping with the CLI takes effect within the 1 s bound', async () => {
      const client = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: keys.access_key, secretKey: keys.secret_key });
      // The promise (docs/server.md, the data-request gate): a change is in force within the 1 s staleness bound
      // of its commit; 100 ms of slack for the command's exit. Polled, not slept: a change stays in force once it
      // is, and every request sent after 1.1 s must see it (however late a loaded machine answers it).
      const BOUND_MS = 1_000 + 100;
      await cli('map-company', 'e2e', '--company', 'temp-co');
      await inForceWithin(BOUND_MS, async () => expect((await client.get('/x', 'temp-co')).status).toBe(200));
      await cli('unmap-company', 'e2e', '--company', 'temp-co');
      await inForceWithin(BOUND_MS, () => expect(client.get('/x', 'temp-co')).rejects.toMatchObject({ status: 404, code: 'not_found' }));
      client.close();
    });

    it('refuses two Authorization headers, extra whitespace and dot segments over the wire', async () => {
      const token = ((await (await exchange(keys.access_key, keys.secret_key)).json()) as { access_token: string }).access_token;
      const host = new URL(server.url).host;
      const twice = await rawRequest(
        server.url,
        `GET /public/v1/x?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
      );
      expect(twice.status).toBe(401);
      expect(JSON.parse(twice.body).error.code).toBe('unauthorized');
      const spaced = await rawRequest(
        server.url,
        `GET /public/v1/x?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer  ${token}\r\nConnection: close\r\n\r\n`,
      );
      expect(spaced.status).toBe(401);
      const before = upstream.received.length;
      for (const path of ['/public/v1/../admin', '/public/v1/a/%2e%2e/admin', '/public/v1/a/./b', '/public/v1/%2e%2e']) {
        const climbed = await rawRequest(
          server.url,
          `GET ${path}?company_id=acme HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
        );
        expect(climbed.status, path).toBe(400);
        expect(JSON.parse(climbed.body).error.request_id).toMatch(UUID);
      }
      expect(upstream.received.length).toBe(before);
      const garbage = await rawRequest(server.url, 'GARBAGE\r\n\r\n');
      expect(garbage.status).toBe(400);
      expect(JSON.parse(garbage.body).error.code).toBe('invalid_request');
    });

    it('logs one JSON line per request without secrets or tokens', async () => {
      // The log reaches the pipe in batches, at least every 250 ms (docs/server.md, Logs): a line can arrive a
      // quarter second after its answer, later on a loaded machine (the batch's timer and the write wait for a
      // busy event loop). Lines go out in order, so once this request's line is there, every earlier request's
      // is too: waited for, within the flush interval plus 1.75 s of slack, not read once.
      const last = await fetch(`${server.url}/healthz`);
      const lastId = last.headers.get('x-request-id');
      expect(lastId).toMatch(UUID);
      await vi.waitFor(() => expect(server.stdout()).toMatch(new RegExp(`"request_id":"${lastId}"[^\\n]*\\n`)), {
        timeout: REQUEST_LOG_FLUSH_MS + 1_750,
        interval: 20,
      });
      const lines = server
        .stdout()
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(lines.length).toBeGreaterThan(5);
      for (const line of lines.filter((entry) => entry.request_id)) {
        expect(line).toHaveProperty('method');
        expect(line).toHaveProperty('status');
        expect(String(line.path)).not.toContain('?');
      }
      expect(server.stdout()).not.toContain(keys.secret_key);
      expect(server.stdout()).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/);
    });

    it('on SIGTERM finishes the request in flight, then exits 0', async () => {
      const token = ((await (await exchange(keys.access_key, keys.secret_key)).json()) as { access_token: string }).access_token;
      upstream.respond = () => ({ delayMs: 800, body: '{"slow":true}' });
      const before = upstream.received.length;
      const inFlight = data(token);
      // In flight when the signal comes: the engine has it, and answers 800 ms later.
      await vi.waitFor(() => expect(upstream.received.length).toBeGreaterThan(before), { timeout: 10_000, interval: 10 });
      server.child.kill('SIGTERM');
      const response = await inFlight;
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ slow: true });
      expect(await server.exited).toBe(0);
      upstream.respond = () => ({});
      await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
    });
  });
});

describe('partnerctl serve configuration errors', () => {
  it('refuses bad settings with one clear message and a non-zero exit', async () => {
    const backend = await createBackend('sqlite');
    try {
      const result = await runBinary(['serve', '--port', '0'], {
        ...backend.env,
        PUBLIC_API_UPSTREAM_URL: 'ftp://engine',
        PUBLIC_API_CORS_ORIGINS: '*',
        PUBLIC_API_UPSTREAM_TIMEOUT_MS: 'soon',
      });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('PUBLIC_API_UPSTREAM_URL');
      expect(result.stderr).toContain('PUBLIC_API_CORS_ORIGINS');
      expect(result.stderr).toContain('PUBLIC_API_UPSTREAM_TIMEOUT_MS');
    } finally {
      await backend.dispose();
    }
  });
});
