import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { Provider } from '../../src/config.js';
import { againOn503 } from '../support/again.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, serveInProcess, type Served } from '../support/serve.js';

export { serveInProcess };

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The CLI with --json, which must succeed; its JSON output. */
export async function cliOk<T = Record<string, unknown>>(backend: TestBackend, ...args: string[]): Promise<T> {
  const result = await runCli(['--json', '--yes', ...args], backend.env);
  expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
  return result.json<T>();
}

/** A partner made with the real CLI: created, keys issued, companies mapped. */
export async function provision(backend: TestBackend, name: string, companies: string[] = []) {
  const partner = await cliOk<{ partner_id: string }>(backend, 'create-partner', '--name', name);
  const keys = await cliOk(backend, 'issue-keys', partner.partner_id);
  for (const company of companies) await cliOk(backend, 'map-company', partner.partner_id, '--company', company);
  return { partnerId: partner.partner_id as string, keyPairId: keys.key_pair_id as string, accessKey: keys.access_key as string, secretKey: keys.secret_key as string };
}

/** The spawned `partnerctl serve` (for faults from outside the process: a lock another process holds, a file replaced). */
export async function startServeProcess(env: NodeJS.ProcessEnv): Promise<Served & { stop(): Promise<number | null> }> {
  const served = await serve(env);
  return {
    ...served,
    stop: async () => {
      if (served.child.exitCode !== null || served.child.signalCode !== null) return served.child.exitCode;
      served.child.kill('SIGTERM');
      const timer = setTimeout(() => served.child.kill('SIGKILL'), 10_000);
      try {
        return await served.exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

export async function exchange(url: string, accessKey: string, secretKey: string): Promise<Response> {
  return fetch(`${url}/public/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ access_key: accessKey, secret_key: secretKey }),
  });
}

/**
 * A token, for a test whose subject is what comes after the exchange. A 503 is taken again (`againOn503`);
 * any other refusal fails here with its envelope, not later as a 401 for a missing token. A test of the
 * exchange's own answers uses `exchange`.
 */
export async function tokenFor(url: string, accessKey: string, secretKey: string): Promise<string> {
  const response = await againOn503(() => exchange(url, accessKey, secretKey), (answer) => answer.status, 'the exchange');
  const answer = await response.text();
  expect(response.status, answer).toBe(200);
  return (JSON.parse(answer) as { access_token: string }).access_token;
}

/** An engine on loopback that records every byte it receives and answers as told. */
export interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}
export interface EngineAnswer {
  status?: number;
  /** Written as given, in order (duplicates allowed). */
  headers?: [string, string][];
  body?: string | Buffer;
}

export async function recordingEngine() {
  const engine = {
    url: '',
    seen: [] as Seen[],
    answer: (_seen: Seen): EngineAnswer => ({}),
    /** When set, answers instead of `answer`, with Node's request and response (to misbehave). */
    behave: null as ((seen: Seen, req: IncomingMessage, res: ServerResponse) => void) | null,
    server: undefined as unknown as Server,
  };
  engine.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const seen = { method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) };
      engine.seen.push(seen);
      if (engine.behave) {
        engine.behave(seen, req, res);
        return;
      }
      const answer = engine.answer(seen);
      const body = answer.body ?? '{"engine":"ok"}';
      const headers = answer.headers ?? [['content-type', 'application/json']];
      res.writeHead(answer.status ?? 200, [...headers.flat(), 'content-length', String(Buffer.byteLength(body))]);
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => engine.server.listen(0, '127.0.0.1', resolve));
  engine.url = `http://127.0.0.1:${(engine.server.address() as AddressInfo).port}`;
  return engine;
}

export interface RawResponse {
  /** null when the server closed the connection without answering. */
  status: number | null;
  headers: Record<string, string>;
  body: string;
  /** A socket error seen on our side (EPIPE/ECONNRESET while still writing a refused body). */
  socketError?: string;
}

/**
 * One request written on a raw socket, byte for byte (for what fetch refuses to send: bad framing, two
 * Authorization headers, control bytes). The body is written in slices and writing stops as soon as the
 * server has answered, so a refused huge body does not end in a reset that eats the answer. The client
 * does not half-close unless asked: Node's server (httpAllowHalfOpen false) drops the asynchronous answer of
 * a request whose client has half-closed, which would hide the real answer.
 */
export function rawHttp(
  url: string,
  head: string | Buffer,
  body: Buffer = Buffer.alloc(0),
  options: { halfClose?: boolean; timeoutMs?: number } = {},
): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let socketError: string | undefined;
    const socket = connect(Number(port), hostname, async () => {
      socket.write(head);
      // A big body waits a moment for an early answer (as a client sending Expect: 100-continue would): a
      // server that refuses on the headers alone answers and closes, and bytes still arriving after that
      // close make the kernel reset the connection and drop the answer before we read it.
      if (body.length > 65_536) {
        await new Promise<void>((settled) => {
          const timer = setTimeout(settled, 200);
          socket.once('data', () => {
            clearTimeout(timer);
            settled();
          });
        });
      }
      for (let offset = 0; offset < body.length && chunks.length === 0 && !socket.destroyed; offset += 65_536) {
        const more = socket.write(body.subarray(offset, offset + 65_536));
        if (!more) await new Promise((drained) => socket.once('drain', drained).once('close', drained));
      }
      if (options.halfClose && !socket.destroyed) socket.end();
    });
    socket.setTimeout(options.timeoutMs ?? 15_000, () => socket.destroy());
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (socketError = error.code ?? error.message));
    socket.on('close', () => resolve(parseResponse(Buffer.concat(chunks).toString('utf8'), socketError)));
  });
}

function parseResponse(text: string, socketError: string | undefined): RawResponse {
  // Skip interim 1xx answers (100 Continue).
  let rest = text;
  while (/^HTTP\/1\.[01] 1\d\d /.test(rest)) rest = rest.slice(rest.indexOf('\r\n\r\n') + 4);
  const end = rest.indexOf('\r\n\r\n');
  if (!rest.startsWith('HTTP/') || end < 0) return { status: null, headers: {}, body: '', ...(socketError ? { socketError } : {}) };
  const [statusLine = '', ...lines] = rest.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = rest.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body);
  return { status: Number(statusLine.split(' ')[1]), headers, body, ...(socketError ? { socketError } : {}) };
}

function dechunk(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const lineEnd = rest.indexOf('\r\n');
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!(size > 0)) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

/** The envelope every refusal must be: a 4xx, JSON {error:{code,message,request_id}}, the id also in X-Request-Id. */
export function expectEnvelope4xx(response: RawResponse, label: string): { code: string; request_id: string } {
  if (response.status === null) throw new Error(`${label}: the connection closed without an answer (${response.socketError ?? 'no socket error'})`);
  expect(response.status, `${label}: ${response.body.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
  expect(response.status, `${label}: ${response.body.slice(0, 200)}`).toBeLessThan(500);
  let parsed: { error?: { code?: unknown; message?: unknown; request_id?: unknown } };
  try {
    parsed = JSON.parse(response.body);
  } catch {
    throw new Error(`${label}: answered ${response.status} without a JSON envelope: ${JSON.stringify(response.body.slice(0, 200))}`);
  }
  expect(typeof parsed.error?.code, label).toBe('string');
  expect(typeof parsed.error?.message, label).toBe('string');
  expect(parsed.error?.request_id, label).toMatch(UUID);
  expect(response.headers['x-request-id'], label).toBe(parsed.error?.request_id);
  return parsed.error as { code: string; request_id: string };
}

/** Plain SQL on the test's database, independent of the code under test ($1, $2, … each used once, in order). */
export interface Probe {
  rows<Row = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<Row[]>;
  close(): Promise<void>;
}

export async function openProbe(backend: TestBackend): Promise<Probe> {
  if (backend.provider === 'sqlite') {
    const connection = new BetterSqlite3(backend.url.replace(/^file:/, ''), { timeout: 15_000 });
    return {
      rows: async <Row>(sql: string, params: unknown[] = []) => {
        const statement = connection.prepare(sql.replace(/\$\d+/g, '?'));
        if (!statement.reader) {
          statement.run(...params);
          return [];
        }
        return statement.all(...params) as Row[];
      },
      close: async () => void connection.close(),
    };
  }
  const client = new pg.Client({ connectionString: backend.url });
  await client.connect();
  return {
    rows: async <Row>(sql: string, params: unknown[] = []) => (await client.query(sql, params)).rows as Row[],
    close: () => client.end(),
  };
}

/** What a failed command must not have changed: the audit trail's length and the revision number. */
export async function writeMarks(probe: Probe): Promise<{ audit: number; revision: number }> {
  const [audit] = await probe.rows<{ n: number | string }>('SELECT COUNT(*) AS n FROM audit_events');
  const [revision] = await probe.rows<{ value: number | string }>('SELECT value FROM revision WHERE id = 1');
  return { audit: Number(audit!.n), revision: Number(revision?.value ?? 0) };
}

export async function pairsOf(probe: Probe, partnerId: string): Promise<{ id: string; status: string; access_key: string }[]> {
  return probe.rows('SELECT id, status, access_key FROM key_pairs WHERE partner_id = $1 ORDER BY created_at, id', [partnerId]);
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export type { Provider };

/**
 * The hardening suites' gateway under test: a fresh SQLite backend, one partner (`name`) mapped to
 * `companies`, a recording engine, the real `partnerctl serve` in front of it and a token. Registers its own
 * hooks (call inside a describe): set up before all, the engine reset before each, all stopped after. Read the
 * fields inside tests or later hooks; `prepare` runs before the server starts (more partners, limits).
 */
export function gatewayUnderTest(name: string, options: { companies?: string[]; upstreamTimeoutMs?: number; prepare?: (backend: TestBackend) => Promise<void> } = {}) {
  const gateway = {
    backend: undefined as unknown as TestBackend,
    engine: undefined as unknown as Awaited<ReturnType<typeof recordingEngine>>,
    served: undefined as unknown as Awaited<ReturnType<typeof serveInProcess>>,
    partner: undefined as unknown as Awaited<ReturnType<typeof provision>>,
    token: '',
    host: '',
  };
  beforeAll(async () => {
    gateway.backend = await createBackend('sqlite', { migrated: true });
    gateway.engine = await recordingEngine();
    gateway.partner = await provision(gateway.backend, name, options.companies ?? ['acme']);
    await options.prepare?.(gateway.backend);
    gateway.served = await serveInProcess({
      ...gateway.backend.env,
      PUBLIC_API_UPSTREAM_URL: `${gateway.engine.url}/api`,
      PUBLIC_API_UPSTREAM_TIMEOUT_MS: String(options.upstreamTimeoutMs ?? 2000),
    });
    gateway.host = new URL(gateway.served.url).host;
    gateway.token = await tokenFor(gateway.served.url, gateway.partner.accessKey, gateway.partner.secretKey);
  });
  beforeEach(() => {
    gateway.engine.seen.length = 0;
    gateway.engine.answer = () => ({});
    gateway.engine.behave = null;
  });
  afterAll(async () => {
    await gateway.served?.stop();
    gateway.engine?.server.closeAllConnections();
    await new Promise((resolve) => gateway.engine?.server.close(resolve));
    await gateway.backend?.dispose();
  });
  return gateway;
}
