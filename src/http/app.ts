import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import { pino, type Logger } from 'pino';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { AppDeps } from './context.js';
import { installExpectHandling, requestHeadProblem } from './edges.js';
import { describeError, envelope, loggableChain, sendError } from './errors.js';
import { redactKeyMaterial } from './gate.js';
import { preForwardedOf, watchOtherRoutes, type FinishedRequest } from './fast-path.js';
import { failoverStore } from './limits.js';
import { responseObserver } from './metrics.js';
import { registerDataRoutes } from './routes/data.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerOpenApiRoute } from './routes/openapi.js';
import { registerTokenRoutes } from './routes/token.js';

export type { AppDeps } from './context.js';

const LOGGED_PATH_MAX = 512;
// ignoreBOM: a byte-order mark stays in the text, so the text and the forwarded bytes say the same.
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** An answer written straight on the socket, still as an envelope, for what never becomes a request. */
function answerOnSocket(socket: Duplex, status: string, code: string, message: string): void {
  const id = randomUUID();
  const body = JSON.stringify(envelope(code, message, id));
  socket.end(
    `HTTP/1.1 ${status}\r\n` +
      'Content-Type: application/json; charset=utf-8\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${id}\r\n` +
      'Connection: close\r\n\r\n' +
      body,
  );
}

/** A request so broken that Node's parser gave up. */
function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    answerOnSocket(socket, '408 Request Timeout', 'request_timeout', 'the request was not received in time');
    return;
  }
  answerOnSocket(socket, '400 Bad Request', 'invalid_request', 'the request is malformed');
}

/**
 * The path for the log, without the query and with any key material redacted: some lines (a 404 outside the
 * base path, a malformed request) are written before the gate has looked at the URL.
 */
function pathOf(request: FastifyRequest): string {
  const url = request.raw.url ?? '';
  const queryStart = url.indexOf('?');
  return redactKeyMaterial(queryStart < 0 ? url : url.slice(0, queryStart)).slice(0, LOGGED_PATH_MAX);
}

/**
 * The one line per request, formatted here rather than by pino (the same JSON keys pino would write, ISO
 * time) and handed to the logger's own destination: a fifth of the request's cost was pino's generic
 * serialisation. Undefined when info lines are off.
 */
function requestLineWriter(logger: Logger): ((request: FastifyRequest, reply: FastifyReply) => void) | undefined {
  if (!logger.isLevelEnabled('info')) return undefined;
  const stream = (logger as unknown as Record<symbol, { write(line: string): unknown }>)[pino.symbols.streamSym];
  if (!stream) return (request, reply) => logger.info(requestFields(request, reply));
  return (request, reply) => {
    const exchange = request.exchangeKeyPairId === undefined ? '' : exchangeFields(request);
    stream.write(requestLine(request.id, request.partnerId, exchange, request.method, pathOf(request), reply.statusCode, reply.elapsedTime));
  };
}

/** The same line for a request the fast lane answered (fast-path.ts). */
function fastLineWriter(logger: Logger): ((request: FinishedRequest) => void) | undefined {
  if (!logger.isLevelEnabled('info')) return undefined;
  const stream = (logger as unknown as Record<symbol, { write(line: string): unknown }>)[pino.symbols.streamSym];
  const pathOfUrl = (url: string) => {
    const queryStart = url.indexOf('?');
    return redactKeyMaterial(queryStart < 0 ? url : url.slice(0, queryStart)).slice(0, LOGGED_PATH_MAX);
  };
  if (!stream) {
    return (request) =>
      logger.info({
        request_id: request.requestId,
        partner_id: request.partnerId ?? undefined,
        method: request.method,
        path: pathOfUrl(request.url),
        status: request.status,
        duration_ms: Math.round(request.durationMs * 100) / 100,
      });
  }
  return (request) => stream.write(requestLine(request.requestId, request.partnerId, '', request.method, pathOfUrl(request.url), request.status, request.durationMs));
}

// The log's ISO time, made once per millisecond rather than once per line.
let lastStampMs = 0;
let lastStamp = '';
function isoNow(): string {
  const now = Date.now();
  if (now !== lastStampMs) {
    lastStampMs = now;
    lastStamp = new Date(now).toISOString();
  }
  return lastStamp;
}

function requestLine(id: string, partnerId: string | null, exchange: string, method: string, path: string, status: number, elapsedMs: number): string {
  const partner = partnerId === null ? '' : `,"partner_id":${JSON.stringify(partnerId)}`;
  return (
    `{"level":30,"time":"${isoNow()}","request_id":${JSON.stringify(id)}${partner}${exchange},"method":${JSON.stringify(method)},` +
    `"path":${JSON.stringify(path)},"status":${status},"duration_ms":${Math.round(elapsedMs * 100) / 100}}\n`
  );
}

const USER_AGENT_LOGGED_MAX = 120;

/** A token exchange's trace (accepted or refused): the pair its access key named, the client; never a key or a token. */
function exchangeFields(request: FastifyRequest): string {
  const agent = request.headers['user-agent'];
  const shown = typeof agent === 'string' ? redactKeyMaterial(agent).slice(0, USER_AGENT_LOGGED_MAX) : null;
  return `,"key_pair_id":${JSON.stringify(request.exchangeKeyPairId ?? null)},"client":${JSON.stringify(request.ip)},"user_agent":${JSON.stringify(shown)}`;
}

function requestFields(request: FastifyRequest, reply: FastifyReply): Record<string, unknown> {
  return {
    request_id: request.id,
    partner_id: request.partnerId ?? undefined,
    ...(request.exchangeKeyPairId === undefined ? {} : JSON.parse(`{${exchangeFields(request).slice(1)}}`)),
    method: request.method,
    path: pathOf(request),
    status: reply.statusCode,
    duration_ms: Math.round(reply.elapsedTime * 100) / 100,
  };
}

/** Builds the public API (no listen): plugins, the JSON body parser, error handling, routes. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, logger } = deps;
  const app = Fastify({
    logger: false,
    // A request the fast lane handed over keeps the id the engine already saw.
    genReqId: (raw) => preForwardedOf(raw)?.requestId ?? randomUUID(),
    requestIdHeader: false,
    bodyLimit: config.bodyLimitBytes,
    // New requests arriving while closing are served like any other; the listener is already closed.
    return503OnClosing: false,
    clientErrorHandler,
    // Node would answer a Host-less HTTP/1.1 request with a bare 400 of its own; the hook below answers it as
    // an envelope instead.
    // A client trickling a request (a slow body, say) is cut off after requestTimeoutMs, checked every second.
    // Node 20 arms the check only when the timeout is given to its constructor, hence it is in `http` too.
    requestTimeout: config.requestTimeoutMs,
    http: { requireHostHeader: false, connectionsCheckingInterval: 1_000, requestTimeout: config.requestTimeoutMs },
    frameworkErrors: (error, request, reply) => {
      sendError(reply, request, error);
    },
  });

  // Before any route: which paths under the base path are not the data routes' (fast-path.ts).
  const otherRoute = watchOtherRoutes(app);

  app.decorateRequest('claims', null);
  app.decorateRequest('partnerId', null);
  app.decorateRequest('companyId', null);
  app.decorateRequest('exchangeKeyPairId', undefined);
  app.decorateRequest('rawBody', null);
  app.decorateRequest('bodyBytes', null);
  app.decorateRequest('serverFailure', null);
  app.decorateRequest('engineMs', 0);

  // Only JSON is accepted, and only as UTF-8 (RFC 8259): a body that is not valid UTF-8 is refused, since the
  // gate and an engine could read different members out of it. The bytes are kept as received so data
  // requests forward them byte for byte; the text is what the gate reads.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    const buffer = bytes as Buffer;
    if (buffer.length === 0) {
      done(null, undefined);
      return;
    }
    let body: string;
    let value: unknown;
    try {
      body = strictUtf8.decode(buffer);
    } catch {
      done(new AppError('invalid_request', 'the request body is not valid UTF-8'), undefined);
      return;
    }
    try {
      value = JSON.parse(body);
    } catch {
      done(new AppError('invalid_request', 'the request body is not valid JSON'), undefined);
      return;
    }
    request.rawBody = body;
    request.bodyBytes = buffer;
    done(null, value);
  });

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // Host exactly once and valid, no repeated single-valued header, no transfer or content coding we cannot read.
    const problem = requestHeadProblem(request.raw);
    if (problem) {
      done(problem);
      return;
    }
    done();
  });
  // Expect: 100-continue exactly, or 417 as an envelope.
  installExpectHandling(app.server);
  // Without a listener Node drops CONNECT requests without a word.
  app.server.on('connect', (_request, socket: Duplex) => {
    answerOnSocket(socket, '405 Method Not Allowed', 'method_not_allowed', 'CONNECT is not served');
  });
  if (logger) {
    const requestLine = requestLineWriter(logger);
    app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done) => {
      if (request.serverFailure !== null) {
        // Why a 503/502/504 happened (the client only sees a fixed message): names, codes, first lines.
        const [err, ...causes] = loggableChain(request.serverFailure);
        logger.warn({ request_id: request.id, status: reply.statusCode, err, causes }, 'request failed: a dependency is unavailable');
      }
      requestLine?.(request, reply);
      done();
    });
  }

  // Metrics and usage counts, once the answer is finished (nothing is written on the request path); the fast
  // lane's answers are counted by `finished` below.
  const observe = responseObserver(deps.metrics ?? null, deps.usage ?? null);
  if (observe) {
    app.addHook('onResponse', (request, reply, done) => {
      observe({
        requestId: request.id,
        partnerId: request.claims?.partnerId ?? null,
        companyId: request.companyId ?? null,
        method: request.method,
        url: request.raw.url ?? '',
        status: reply.statusCode,
        durationMs: reply.elapsedTime,
        engineMs: request.engineMs,
      });
      done();
    });
  }

  app.setErrorHandler((error, request, reply) => {
    const described = describeError(error);
    if (described.internal && logger) {
      const [err, ...causes] = loggableChain(error);
      logger.error({ request_id: request.id, err, ...(causes.length > 0 ? { causes } : {}) }, 'request failed');
    }
    return sendError(reply, request, error);
  });
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, request, new AppError('not_found', 'no such resource'));
  });

  // With REDIS_URL the token endpoint's throttles count across instances (this instance's alone while Redis is down).
  await app.register(rateLimit, { global: false, ...(deps.redis ? { store: failoverStore(deps.redis) } : {}) });
  if (config.corsOrigins.length > 0) {
    const allowed = new Set(config.corsOrigins);
    await app.register(cors, {
      // Only allowed origins get CORS handling (preflights included); any other request is an ordinary one.
      delegator: (request, callback) => {
        const origin = request.headers.origin;
        if (typeof origin !== 'string' || !allowed.has(origin)) {
          callback(null, { origin: false });
          return;
        }
        callback(null, {
          origin,
          methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
          allowedHeaders: ['Authorization', 'Content-Type'],
          exposedHeaders: ['X-Request-Id', 'Retry-After', 'WWW-Authenticate'],
          maxAge: 600,
          strictPreflight: false,
        });
      },
    });
  }

  registerHealthRoutes(app, deps);
  registerOpenApiRoute(app);
  registerTokenRoutes(app, deps);
  // Requests the fast lane answers never reach Fastify's hooks: this is their onResponse (the request log,
  // metrics and usage counts, as the onResponse hooks above do for the others).
  const fastLine = logger ? fastLineWriter(logger) : undefined;
  const finished = (request: FinishedRequest): void => {
    fastLine?.(request);
    observe?.(request);
  };
  registerDataRoutes(app, deps, { finished, otherRoute });
  return app;
}
