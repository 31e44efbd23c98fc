import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';

/**
 * An engine that sends its headers, then one byte every 300 ms for 6 s: the upstream timeout covers its whole
 * answer, and SIGTERM waits no longer than the drain time (upstream timeout + 1 s) for it, or for a client
 * still sending its request.
 */

interface Trickler {
  url: string;
  /** When each engine connection closed, in ms since the epoch. */
  closedAt: number[];
  requests: number;
  close(): Promise<void>;
}

async function startTrickler(): Promise<Trickler> {
  const state: Trickler = { url: '', closedAt: [], requests: 0, close: async () => {} };
  const server: Server = createServer((req, res) => {
    state.requests++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '21' });
    const body = '{"engine":"trickled"}';
    let sent = 0;
    const timer = setInterval(() => {
      if (sent >= body.length || res.destroyed) {
        clearInterval(timer);
        res.end();
        return;
      }
      res.write(body[sent++]!);
    }, 300);
    res.on('close', () => clearInterval(timer));
  });
  server.on('connection', (socket) => socket.on('close', () => state.closedAt.push(Date.now())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

describe('an engine trickling its body, a client trickling its request', () => {
  let backend: TestBackend;
  let engine: Trickler;
  let token: string;
  let server: Served | undefined;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    await runCli(['create-partner', '--name', 'Patient'], backend.env);
    await runCli(['map-company', 'Patient', '--company', 'acme', '--yes'], backend.env);
    token = (await runCli(['mint-test-token', 'Patient', '--json'], backend.env)).json().access_token;
    engine = await startTrickler();
  });
  afterEach(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    server = undefined;
  });
  afterAll(async () => {
    await engine?.close();
    await backend?.dispose();
  });

  const start = async () =>
    (server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: engine.url, PUBLIC_API_UPSTREAM_TIMEOUT_MS: '1000' }));

  it('answers 504 upstream_timeout once the upstream timeout runs out, headers and body together, and closes the engine connection', async () => {
    const served = await start();
    const closedBefore = engine.closedAt.length;
    const started = Date.now();
    const response = await fetch(`${served.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
    const elapsed = Date.now() - started;
    expect(response.status).toBe(504);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('upstream_timeout');
    expect(elapsed).toBeGreaterThanOrEqual(950);
    // The engine's whole answer would take 6.3 s: cut at the 1 s timeout (a loaded machine's slack beside it).
    expect(elapsed).toBeLessThan(4_000);
    // The engine's connection is closed (not kept for the next request while the engine still writes).
    await vi.waitFor(() => expect(engine.closedAt.length).toBeGreaterThan(closedBefore), { timeout: 10_000, interval: 10 });
    expect(engine.closedAt.at(-1)! - started).toBeLessThan(4_000);
  }, 20_000);

  it('stops on SIGTERM: the drain time (upstream timeout + 1 s) closes what is left while the engine trickles and a client still sends its request, and it exits within its bound', async () => {
    const served = await start();
    const { hostname, port } = new URL(served.url);
    // A client sending its body one byte every 200 ms (the request timeout, 30 s, would let it go on).
    let connected = false;
    const slowClient = connect(Number(port), hostname, () => {
      connected = true;
      slowClient.write(
        `POST /public/v1/prices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
      );
    });
    slowClient.on('error', () => {});
    const dribble = setInterval(() => slowClient.writable && slowClient.write(' '), 200);
    const slowClientClosed = new Promise<number>((resolve) => slowClient.on('close', () => resolve(Date.now())));
    // And a request at the engine.
    const requestsBefore = engine.requests;
    const atEngine = fetch(`${served.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
    // Both under way before the signal: the slow client connected, the engine sent the request.
    await vi.waitFor(() => expect(connected && engine.requests > requestsBefore).toBe(true), { timeout: 10_000, interval: 10 });
    const signalled = Date.now();
    served.child.kill('SIGTERM');
    try {
      const response = await atEngine;
      expect(response.status).toBe(504);
      const code = await served.exited;
      const stoppedAfter = Date.now() - signalled;
      expect(code).toBe(0);
      // The drain (the upstream timeout + 1 s) closes the slow client's connection; the exit comes after the
      // writes, whose bound is 10 s more (docs/server.md: "at most the upstream timeout + 11 s"): a loaded
      // machine took the exit to 3.8 s here with nothing to write.
      expect((await slowClientClosed) - signalled).toBeLessThan(1_000 + 1_000 + 1_500);
      console.log(`[slow-engine] exited ${stoppedAfter} ms after SIGTERM`);
      expect(stoppedAfter).toBeLessThan(1_000 + 11_000);
      expect(served.stderr()).toMatch(/stopped/);
    } finally {
      clearInterval(dribble);
      slowClient.destroy();
    }
  }, 60_000);
});
