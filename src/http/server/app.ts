// The HTTP kernel: one Fastify app for every endpoint of the public API, with one implementation each of
// the concerns around a request. The client's address, the request id and the head checks (the first hook),
// CORS (@fastify/cors, one policy), body reading (protocol/json-body.ts: no body is read before a route
// asks), the answer writer for errors (protocol/errors.ts `sendError`) and the finished record (the last
// hook). The routes (routes/*.ts) are each one function whose body is their order.
import { createServer, METHODS } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import corsPlugin from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors.js';
import { newRequestId } from '../../request-id.js';
import { failoverStore } from '../counters/token-throttles.js';
import type { Forwarder } from '../data-path/forwarder.js';
import { parseQueryString } from '../data-path/gate.js';
import { ClientAddresses, compileTrust, type ClientAddress } from '../protocol/client-address.js';
import { CorsPolicy } from '../protocol/cors.js';
import { installExpectHandling, requestHeadProblem } from '../protocol/edges.js';
import { envelope, sendError } from '../protocol/errors.js';
import { newRecord, type FinishedRequest } from '../protocol/finished-request.js';
import { registerDataRoutes } from '../routes/data.js';
import type { AppDeps } from '../routes/deps.js';
import { registerHealthRoutes } from '../routes/health.js';
import { registerOpenApiRoute } from '../routes/openapi.js';
import { registerSecretScanningRoutes } from '../routes/secret-scanning.js';
import { registerTokenRoutes } from '../routes/token.js';
import { limitConnections } from './connections.js';
import { createFinish } from './request-log.js';

export type { AppDeps } from '../routes/deps.js';

// Fastify's default: idle keep-alive connections are closed after this long.
const KEEP_ALIVE_TIMEOUT_MS = 72_000;
// A data path is routed by its whole rest: no length of its own beyond what the server takes for a head.
const MAX_PATH_PARAM_LENGTH = 65_536;

/** Fastify's schema compilers, for a server whose routes declare no schema: building one is a mistake, said at start. */
function noSchemaCompiler(): never {
  throw new Error('a route declares a JSON schema: routes read bodies with the strict parser (protocol/json-body.ts) and declare none');
}

/** An answer written straight on the socket, still as an envelope, for what never becomes a request; its request id. */
function answerOnSocket(clock: Clock, socket: Duplex, status: string, code: string, message: string): string {
  const id = newRequestId(clock.now());
  const body = JSON.stringify(envelope(code, message, id));
  socket.end(
    `HTTP/1.1 ${status}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${id}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
  return id;
}

/** An answer's Content-Length as a number of bytes; null when it sent none (a streamed body) or a strange one. */
function contentLength(header: number | string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header;
  const bytes = typeof value === 'number' ? value : value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : Number.NaN;
  return Number.isSafeInteger(bytes) ? bytes : null;
}

/**
 * A request so broken that Node's parser gave up (or too slow to arrive): answered on the socket, and its
 * finished record handed to `finish` like any other's (no method or path was read).
 */
function clientErrors(clock: Clock, finish: (finished: FinishedRequest) => void): (error: NodeJS.ErrnoException, socket: Socket) => void {
  return (error, socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const address = socket.remoteAddress ?? '';
    const [status, answered] =
      error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, answerOnSocket(clock, socket, '408 Request Timeout', 'request_timeout', 'the request was not received in time')]
        : [400, answerOnSocket(clock, socket, '400 Bad Request', 'invalid_request', 'the request is malformed')];
    const record = newRecord(answered, '-', '', address);
    record.status = status;
    record.reason = status === 408 ? 'request_timeout' : 'request_malformed';
    finish(record);
  };
}

/** Builds the public API (no listen): the kernel's hooks, then every route. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, logger } = deps;
  // PUBLIC_API_TRUSTED_PROXIES: one trust function, one client address per request.
  const trusted = compileTrust(config.trustedProxies);
  const addresses = new ClientAddresses(trusted);
  const connections = { total: config.maxConnections, perAddress: config.maxConnectionsPerAddress, idleMs: config.requestTimeoutMs, trusted };
  const cors = new CorsPolicy(config.corsOrigins);
  const finish = createFinish(deps.db.clock, logger, deps.metrics ?? null, deps.usage ?? null, deps.decisions ?? null, deps.exposure ?? null, deps.access);
  const upstream = config.upstream;
  // undici is loaded only for an engine to forward to (without one, data requests are 503 and it is not needed).
  const ownForwarder =
    deps.forwarder === undefined && upstream ? (await import('../data-path/forwarder.js')).createForwarder(upstream, { timeoutMs: config.upstreamTimeoutMs }) : null;
  const forwarder: Forwarder | null = deps.forwarder ?? ownForwarder;
  const app = Fastify({
    logger: false,
    // Ids that carry their time (UUIDv7): `explain` of one with nothing on record can say why.
    genReqId: () => newRequestId(deps.db.clock.now()),
    requestIdHeader: false,
    // New requests arriving while closing are served like any other (with Connection: close); the listener is already closed.
    return503OnClosing: false,
    clientErrorHandler: clientErrors(deps.db.clock, finish),
    routerOptions: { maxParamLength: MAX_PATH_PARAM_LENGTH, querystringParser: parseQueryString },
    // Node would answer a Host-less HTTP/1.1 request with a bare 400 of its own; requestHeadProblem answers
    // it as an envelope instead. A client trickling a request (a slow body, say) is cut off after
    // requestTimeoutMs, checked every second (Node 20 arms the check only when the timeout is given to the
    // server's constructor).
    serverFactory: (handler) => {
      const server = createServer({ requireHostHeader: false, connectionsCheckingInterval: 1_000, requestTimeout: config.requestTimeoutMs }, handler);
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      limitConnections(server, connections);
      return server;
    },
    frameworkErrors: (error, request, reply) => {
      sendError(reply, request, error);
    },
    // No route declares a schema (bodies go through the strict parser, answers are written by the routes), so
    // Fastify's schema compilers are never wanted; left to its defaults it loads Ajv and fast-json-stringify
    // at every start (BENCHMARKS.md). A route given a schema fails at start, naming why.
    schemaController: { compilersFactory: { buildValidator: noSchemaCompiler, buildSerializer: noSchemaCompiler } },
  });

  // Every method Node's parser takes is routed (CONNECT never becomes a request): on a path that exists, one
  // it does not serve is a 405 with Allow, not a 404.
  for (const method of METHODS) if (method !== 'CONNECT' && !app.supportedMethods.includes(method)) app.addHttpMethod(method, { hasBody: true });

  if (ownForwarder !== null) {
    // Closing the app closes the pooled engine connections too, so a stopped server holds no sockets.
    app.addHook('onClose', async () => ownForwarder.close());
  }

  app.decorateRequest('client', null as unknown as ClientAddress);
  app.decorateRequest('facts', null as unknown as FinishedRequest);

  // No body is read before a route asks for it (protocol/json-body.ts): a gate or a throttle comes first.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  // The first hook of every request: who the client is, the request id on the answer, a head we can read.
  app.addHook('onRequest', (request, reply, done) => {
    const client = addresses.of(request.raw);
    request.client = client;
    request.facts = newRecord(request.id, request.method, request.raw.url ?? '', client.address);
    reply.header('x-request-id', request.id);
    done(requestHeadProblem(request.raw) ?? undefined);
  });
  // Expect: 100-continue exactly, or 417 as an envelope.
  installExpectHandling(app.server);
  // Without a listener Node drops CONNECT requests without a word.
  app.server.on('connect', (_request, socket: Duplex) => {
    answerOnSocket(deps.db.clock, socket, '405 Method Not Allowed', 'method_not_allowed', 'CONNECT is not served');
  });
  // The last hook of every request: its one finished record.
  app.addHook('onResponse', (request, reply, done) => {
    const record = request.facts ?? newRecord(request.id, request.method, request.raw.url ?? '', '');
    // A request Fastify refused before the first hook (a malformed URL) has its client determined here.
    if (request.client === null) record.client = addresses.of(request.raw).address;
    record.status = reply.statusCode;
    record.durationMs = reply.elapsedTime;
    record.bytes = contentLength(reply.getHeader('content-length'));
    finish(record);
    done();
  });

  app.setErrorHandler((error, request, reply) => sendError(reply, request, error));
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, request, new AppError('not_found', 'no such resource'));
  });

  // With REDIS_URL the throttles count across instances (this instance's alone while Redis is down).
  await app.register(rateLimit, { global: false, ...(deps.redis ? { store: failoverStore(deps.redis) } : {}) });
  if (cors.on) {
    await app.register(corsPlugin, {
      delegator: (request, callback) => {
        const origin = cors.allowedOrigin(request.raw);
        callback(null, origin === undefined ? { origin: false } : cors.pluginOptions(origin));
      },
    });
  }

  registerHealthRoutes(app, deps);
  registerOpenApiRoute(app);
  registerTokenRoutes(app, deps);
  registerDataRoutes(app, deps, forwarder, cors.on);
  // PUBLIC_API_SECRET_SCANNING=github: GitHub's alerts; otherwise the path is unknown like any other (404).
  if (config.secretScanning && deps.keys) registerSecretScanningRoutes(app, { ...deps, keys: deps.keys }, config.secretScanning);
  return app;
}
