import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import type { IncomingMessage, ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import { AppError } from '../../errors.js';
import { failoverStore } from '../counters/token-throttles.js';
import { bareEntry, watchOtherRoutes } from '../data-path/bare-entry.js';
import { createForwarder } from '../data-path/forwarder.js';
import { DataPath } from '../data-path/pipeline.js';
import { ClientAddresses, compileTrust, type ClientAddress } from '../protocol/client-address.js';
import { installExpectHandling, requestHeadProblem } from '../protocol/edges.js';
import { envelope, sendError } from '../protocol/errors.js';
import { registerDataRoutes } from '../routes/data.js';
import type { AppDeps } from '../routes/deps.js';
import { registerHealthRoutes } from '../routes/health.js';
import { registerOpenApiRoute } from '../routes/openapi.js';
import { registerSecretScanningRoutes } from '../routes/secret-scanning.js';
import { registerTokenRoutes } from '../routes/token.js';
import { createFinish } from './request-log.js';

export type { AppDeps } from '../routes/deps.js';

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

/** Builds the public API (no listen): plugins, the JSON body parser, error handling, routes. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, logger } = deps;
  // PUBLIC_API_TRUSTED_PROXIES: the same trust function for the client address of every step and for
  // Fastify's own `request.ip`.
  const addresses = new ClientAddresses(compileTrust(config.trustedProxies));
  const trustProxy = addresses.trustProxy;
  const app = Fastify({
    ...(trustProxy === undefined ? {} : { trustProxy }),
    logger: false,
    genReqId: () => randomUUID(),
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

  // Before any route: which paths under the base path are not the data routes' (bare-entry.ts).
  const otherRoute = watchOtherRoutes(app);

  app.decorateRequest('dataRequest', null);
  app.decorateRequest('partnerId', null);
  app.decorateRequest('exchangeKeyPairId', undefined);
  app.decorateRequest('rawBody', null);
  app.decorateRequest('bodyBytes', null);
  app.decorateRequest('serverFailure', null);
  app.decorateRequest('refusalReason', null);
  app.decorateRequest('client', null as unknown as ClientAddress);

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
    request.client = addresses.of(request.raw);
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
  // The last step of every request Fastify answers (the data path's own answers call it themselves).
  const finish = createFinish(logger, deps.metrics ?? null, deps.usage ?? null, deps.decisions ?? null, deps.exposure ?? null);
  app.addHook('onResponse', (request, reply, done) => {
    const data = request.dataRequest;
    const token = data ? (data.claims ?? data.presented) : null;
    finish({
      requestId: request.id,
      partnerId: data?.claims?.partnerId ?? null,
      companyId: data?.companyId ?? null,
      companyNamed: data?.companyNamed ?? null,
      keyPairId: token === null ? (request.exchangeKeyPairId ?? null) : token.keyPairId,
      tokenId: token === null ? null : token.jti,
      reason: request.refusalReason,
      method: request.method,
      url: request.raw.url ?? '',
      status: reply.statusCode,
      durationMs: reply.elapsedTime,
      engineMs: data?.engineMs ?? 0,
      // A request Fastify refused before its first hook (a malformed URL) has its client computed here.
      client: (request.client ?? addresses.of(request.raw)).address,
      traceId: data?.trace?.traceId ?? null,
      spans: data?.spans ?? null,
      ...(request.exchangeKeyPairId === undefined
        ? {}
        : {
            exchange: {
              keyPairId: request.exchangeKeyPairId,
              partnerId: request.partnerId,
              userAgent: typeof request.headers['user-agent'] === 'string' ? request.headers['user-agent'] : undefined,
            },
          }),
      ...(request.serverFailure === null ? {} : { failure: request.serverFailure }),
    });
    done();
  });

  app.setErrorHandler((error, request, reply) => sendError(reply, request, error));
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
          exposedHeaders: ['X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'traceresponse'],
          maxAge: 600,
          strictPreflight: false,
        });
      },
    });
  }

  registerHealthRoutes(app, deps);
  registerOpenApiRoute(app);
  registerTokenRoutes(app, deps);
  // PUBLIC_API_SECRET_SCANNING=github: GitHub's alerts; otherwise the path is unknown like any other (404).
  if (config.secretScanning && deps.keys) registerSecretScanningRoutes(app, { ...deps, keys: deps.keys }, config.secretScanning);
  const pipeline = dataPath(app, deps);
  registerDataRoutes(app, pipeline);
  // The usual data request needs nothing of Fastify's intake: Node's listener hands it to the same pipeline.
  const [fastify] = app.server.listeners('request') as ((request: IncomingMessage, response: ServerResponse) => void)[];
  if (fastify) {
    let closing = false;
    app.addHook('preClose', (done) => {
      closing = true;
      done();
    });
    app.server.removeListener('request', fastify);
    app.server.on('request', bareEntry(pipeline, { corsOn: config.corsOrigins.length > 0, otherRoute, closing: () => closing, finish, addresses }, fastify));
  }
  return app;
}

/** The data path on this app's configuration: the engine's pool (closed with the app), the gate's state, the limits. */
function dataPath(app: FastifyInstance, deps: AppDeps): DataPath {
  const { config } = deps;
  const upstream = config.upstream;
  let forwarder = deps.forwarder ?? null;
  if (forwarder === null && upstream) {
    const own = createForwarder(upstream, { timeoutMs: config.upstreamTimeoutMs });
    forwarder = own;
    // Closing the app closes the pooled engine connections too, so a stopped server holds no sockets.
    app.addHook('onClose', async () => own.close());
  }
  return new DataPath({
    verifier: deps.verifier,
    access: deps.access,
    limits: deps.limits ?? null,
    forwarder,
    prefix: upstream ? upstream.pathname.replace(/\/+$/, '') : '',
    corsOn: config.corsOrigins.length > 0,
    logger: deps.logger,
    spans: deps.spans ?? null,
  });
}
