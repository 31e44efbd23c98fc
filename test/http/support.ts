import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { inject, type InjectOptions, type Response as InjectedResponse } from 'light-my-request';
import type { Database } from '../../src/db/client.js';
import type { AccessState } from '../../src/domain/runtime/access.js';
import { mapCompany } from '../support/domain.js';
import { issueKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import type { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import type { TokenVerifier } from '../../src/domain/operations/tokens.js';
import { buildApp } from '../../src/http/server/app.js';
import { loadConfig } from '../../src/config.js';
import { createServices, type ServicesOptions, type Services } from '../../src/http/server/services.js';
import { againOn503 } from '../support/again.js';
import type { TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { expect } from 'vitest';

export const who = { actor: 'test' };
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface UpstreamReply {
  status?: number;
  headers?: Record<string, string>;
  body?: string;
  delayMs?: number;
}

/** A stand-in recommendation engine on loopback that records every request it receives. */
export interface TestUpstream {
  url: string;
  received: Received[];
  respond: (request: Received) => UpstreamReply;
  close(): Promise<void>;
}

export async function startUpstream(): Promise<TestUpstream> {
  const upstream: TestUpstream = {
    url: '',
    received: [],
    respond: () => ({}),
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const record: Received = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      upstream.received.push(record);
      const reply = upstream.respond(record);
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(reply.status ?? 200, { 'content-type': 'application/json', 'x-engine': 'test', ...reply.headers });
        res.end(reply.body ?? JSON.stringify({ engine: 'ok', method: record.method, url: record.url }));
      };
      if (reply.delayMs) setTimeout(send, reply.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  upstream.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return upstream;
}

export interface SeededPartner {
  partnerId: string;
  name: string;
  keyPairId: string;
  accessKey: string;
  secretKey: string;
}

let partnerCounter = 0;

/** A partner with an active key pair and the given companies mapped, made through the domain functions. */
export async function seedPartner(db: Database, companies: string[] = ['acme'], name = `partner-${process.pid}-${++partnerCounter}`): Promise<SeededPartner> {
  const { partner } = await createPartner(db, who, { name });
  const pair = await issueKeyPair(db, who, partner.id);
  for (const company of companies) await mapCompany(db, who, partner.id, company);
  return { partnerId: partner.id, name, keyPairId: pair.keyPairId, accessKey: pair.accessKey, secretKey: pair.secretKey };
}

export interface TestApp {
  app: FastifyInstance;
  /**
   * One request, in-process, through the server's own listener: the data path's mount included (Fastify's
   * `app.inject` would reach Fastify's routes only).
   */
  inject(options: InjectOptions): Promise<InjectedResponse>;
  keys: SigningKeys;
  access: AccessState;
  verifier: TokenVerifier;
  services: Services;
  logLines: Record<string, unknown>[];
  /** The log exactly as pino wrote it, line by line. */
  logText: string[];
  close(): Promise<void>;
}

/** The app built in-process over a real database, with env-style settings; nothing listens. */
export async function buildTestApp(backend: TestBackend, db: Database, env: NodeJS.ProcessEnv = {}, options: Pick<ServicesOptions, 'clock' | 'metrics' | 'usageFlushMs' | 'decisionCapPerMinute'> = {}): Promise<TestApp> {
  const config = loadConfig(env, {}).server!;
  const logLines: Record<string, unknown>[] = [];
  const logText: string[] = [];
  const { pino } = await import('pino');
  const logger = pino(
    { level: 'info', base: null },
    {
      write: (line: string) => {
        logText.push(line);
        logLines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  const services = await createServices({ server: config, database: db.config, signingKeyFile: join(backend.dir, 'signing-keys.json') }, { logger, db, ...options });
  const { keys, access, verifier } = services;
  let app: FastifyInstance;
  try {
    app = await buildApp({ ...services, config, logger });
    await app.ready();
  } catch (error) {
    await services.close();
    throw error;
  }
  const [listener] = app.server.listeners('request') as Parameters<typeof inject>[0][];
  return {
    app,
    inject: (options) => inject(listener!, options),
    keys,
    access,
    verifier,
    services,
    logLines,
    logText,
    close: async () => {
      await app.close();
      await services.close();
    },
  };
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

/** A secret pair's exchange at the token endpoint, through the kernel (inject), from `remoteAddress`. */
export function exchangeSecret(t: TestApp, keys: { accessKey: string; secretKey: string }, remoteAddress = '127.0.0.1'): Promise<InjectedResponse> {
  return t.inject({ method: 'POST', url: '/public/v1/auth/token', remoteAddress, payload: { access_key: keys.accessKey, secret_key: keys.secretKey } });
}

/** A token for the pair: its exchange must be answered 200 (a 503 is taken again: `againOn503`). */
export async function tokenFor(t: TestApp, keys: { accessKey: string; secretKey: string }, remoteAddress?: string): Promise<string> {
  const response = await againOn503(() => exchangeSecret(t, keys, remoteAddress), (answer) => answer.statusCode, 'the exchange');
  expect(response.statusCode, response.body).toBe(200);
  return response.json().access_token as string;
}

/** `partnerctl --json explain <id>` in-process: it must exit 0; its JSON. */
// biome-ignore lint/suspicious/noExplicitAny: JSON read by the tests' own assertions
export async function explained(env: NodeJS.ProcessEnv, id: string): Promise<Record<string, any>> {
  const result = await runCli(['--json', 'explain', id], env);
  expect(result.code, result.stderr).toBe(0);
  return result.json();
}
