// What the client's tests run against: the operator package's real, built binary (bin/partnerctl at the
// repository root) on a fresh SQLite file, `partnerctl serve` on a loopback port, and a fake recommendation
// engine on loopback that records what reaches it. Nothing here imports the operator's source: the client is
// tested the way a partner meets the API, over HTTP.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The operator CLI of the root package; `npm run build` at the root has built what it runs. */
export const BIN = fileURLToPath(new URL('../../../bin/partnerctl', import.meta.url));
/** This package's folder (packages/client). */
export const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs a command and collects its output; rejects (with both streams) when it exits non-zero. */
export function run(file: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { ...options, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')} failed (${error.message}):\n${stdout}\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface EngineReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
}

/** A stand-in recommendation engine on loopback: records every request, answers 200 {"engine":"ok"} unless told. */
export interface FakeEngine {
  url: string;
  received: Received[];
  respond: (request: Received) => EngineReply;
  close(): Promise<void>;
}

export async function startEngine(): Promise<FakeEngine> {
  const engine: FakeEngine = { url: '', received: [], respond: () => ({}), close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const record: Received = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      engine.received.push(record);
      const reply = engine.respond(record);
      res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', ...reply.headers });
      res.end(reply.body ?? JSON.stringify({ engine: 'ok' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  engine.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return engine;
}

export interface Partner {
  partnerId: string;
  accessKey: string;
  secretKey: string;
}

/** An operator's world: its own folder, SQLite file and signing keys, and the binary run against them. */
export interface Operator {
  env: NodeJS.ProcessEnv;
  /** `partnerctl --json --yes <args>`, which must succeed; its JSON output. */
  cli(...args: string[]): Promise<Record<string, unknown>>;
  /** A partner created with the CLI: keys issued, the given companies mapped. */
  partner(companies?: string[]): Promise<Partner>;
  dispose(): void;
}

let partners = 0;

export function createOperator(): Operator {
  const dir = mkdtempSync(join(tmpdir(), 'partnerctl-client-test-'));
  // An empty file is an empty database, migrated on first use (a path with no file is refused).
  writeFileSync(join(dir, 'partnerctl.db'), '');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: `file:${join(dir, 'partnerctl.db')}`,
    PARTNERCTL_SIGNING_KEY_FILE: join(dir, 'signing-keys.json'),
    XDG_DATA_HOME: join(dir, 'xdg'),
    PARTNERCTL_ACTOR: 'client-tests',
    HOST: '127.0.0.1',
    NO_COLOR: '1',
  };
  const cli = async (...args: string[]) => JSON.parse((await run(process.execPath, [BIN, '--json', '--yes', ...args], { env })).stdout) as Record<string, unknown>;
  return {
    env,
    cli,
    partner: async (companies = ['acme']) => {
      const created = await cli('create-partner', '--name', `client-test-${process.pid}-${++partners}`);
      const partnerId = created.partner_id as string;
      const keys = await cli('issue-keys', partnerId);
      for (const company of companies) await cli('map-company', partnerId, '--company', company);
      return { partnerId, accessKey: keys.access_key as string, secretKey: keys.secret_key as string };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface Served {
  child: ChildProcess;
  /** e.g. http://127.0.0.1:40123 */
  url: string;
  stop(): Promise<void>;
}

/** The real `partnerctl serve --port 0` in front of the engine; its URL read from its startup line on stderr. */
export async function startServe(operator: Operator, engine: FakeEngine): Promise<Served> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--upstream', engine.url], { env: operator.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 30 s: ${stderr}`)), 30_000);
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      const match = /partnerctl serve: listening on (http:\/\/\S+) \(/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`serve exited before listening: ${stderr}`));
    });
  });
  return {
    child,
    url,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
