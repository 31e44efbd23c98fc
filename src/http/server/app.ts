import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import corsPlugin from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance } from 'fastify';
import { AppError } from '../../errors.js';
import { failoverStore } from '../counters/token-throttles.js';
import { createForwarder, type Forwarder } from '../data-path/forwarder.js';
import { DataHandler } from '../data-path/handler.js';
import { ClientAddresses, compileTrust, type ClientAddress } from '../protocol/client-address.js';
import { CorsPolicy } from '../protocol/cors.js';
import { installExpectHandling, requestHeadProblem } from '../protocol/edges.js';
import { envelope, sendError } from '../protocol/errors.js';
import { parseJsonBody } from '../protocol/json-body.js';
import type { AppDeps } from '../routes/deps.js';
import { registerHealthRoutes } from '../routes/health.js';
import { registerOpenApiRoute } from '../routes/openapi.js';
import { registerSecretScanningRoutes } from '../routes/secret-scanning.js';
import { registerTokenRoutes } from '../routes/token.js';
import { DataMount } from './data-mount.js';
import { createFinish } from './request-log.js';

export type { AppDeps } from '../routes/deps.js';

// Fastify's default: idle keep-alive connections are closed after this long.
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

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
 * Builds the public API (no listen): the data handler, mounted by path through Fastify's `serverFactory`
 * (data-mount.ts), and Fastify with its plugins, the JSON body parser, error handling and the other routes.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, logger } = deps;
  // PUBLIC_API_TRUSTED_PROXIES: the same trust function for the client address of every step and for
  // Fastify's own `request.ip`.
  const addresses = new ClientAddresses(compileTrust(config.trustedProxies));
  const trustProxy = addresses.trustProxy;
  const cors = new CorsPolicy(config.corsOrigins);
  // The last step of every request: the data handler's records, and Fastify's (onResponse below).
  const finish = createFinish(logger, deps.metrics ?? null, deps.usage ?? null, deps.decisions ?? null, deps.exposure ?? null);
  const upstream = config.upstream;
  const ownForwarder = deps.forwarder === undefined && upstream ? createForwarder(upstream, { timeoutMs: config.upstreamTimeoutMs }) : null;
  const forwarder: Forwarder | null = deps.forwarder ?? ownForwarder;
  const handler = new DataHandler({
    verifier: deps.verifier,
    access: deps.access,
    limits: deps.limits ?? null,
    forwarder,
    prefix: upstream ? upstream.pathname.replace(/\/+$/, '') : '',
    bodyLimit: config.bodyLimitBytes,
    cors,
    addresses,
    logger,
    spans: deps.spans ?? null,
    finish,
  });
  const mount = new DataMount(handler);
  const app = Fastify({
    ...(trustProxy === undefined ? {} : { trustProxy }),
    logger: false,
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    bodyLimit: config.bodyLimitBytes,
    // New requests arriving while closing are served like any other; the listener is already closed.
    return503OnClosing: false,
    clientErrorHandler,
    // Node would answer a Host-less HTTP/1.1 request with a bare 400 of its own; requestHeadProblem answers
    // it as an envelope instead. A client trickling a request (a slow body, say) is cut off after
    // requestTimeoutMs, checked every second (Node 20 arms the check only when the timeout is given to the
    // server's constructor).
    serverFactory: mount.serverFactory(
      { requireHostHeader: false, connectionsCheckingInterval: 1_000, requestTimeout: config.requestTimeoutMs },
      KEEP_ALIVE_TIMEOUT_MS,
    ),
    frameworkErrors: (error, request, reply) => {
      sendError(reply, request, error);
    },
  });

  // Before any route: which paths under the base path are Fastify's (data-mount.ts).
  mount.watch(app);
  app.addHook('preClose', (done) => {
    handler.closing = true;
    done();
  });
  if (ownForwarder !== null) {
    // Closing the app closes the pooled engine connections too, so a stopped server holds no sockets.
    app.addHook('onClose', async () => ownForwarder.close());
  }

  app.decorateRequest('partnerId', null);
  app.decorateRequest('exchangeKeyPairId', undefined);
  app.decorateRequest('rawBody', null);
  app.decorateRequest('serverFailure', null);
  app.decorateRequest('refusalReason', undefined);
  app.decorateRequest('client', null as unknown as ClientAddress);

  // JSON only, strictly UTF-8, as on the data path (protocol/json-body.ts).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    let body: ReturnType<typeof parseJsonBody>;
    try {
      body = parseJsonBody(bytes as Buffer);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    if (body === null) {
      done(null, undefined);
      return;
    }
    request.rawBody = body.text;
    done(null, body.value);
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
  // The finished record of every request Fastify answers (the data handler writes its own).
  app.addHook('onResponse', (request, reply, done) => {
    finish({
      requestId: request.id,
      partnerId: null,
      companyId: null,
      companyNamed: null,
      keyPairId: request.exchangeKeyPairId ?? null,
      tokenId: null,
      method: request.method,
      url: request.raw.url ?? '',
      status: reply.statusCode,
      durationMs: reply.elapsedTime,
      engineMs: 0,
      // A request Fastify refused before its first hook (a malformed URL) has its client computed here.
      client: (request.client ?? addresses.of(request.raw)).address,
      traceId: null,
      spans: null,
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
      ...(request.refusalReason === undefined ? {} : { reason: request.refusalReason }),
    });
    done();
  });

  app.setErrorHandler((error, request, reply) => sendError(reply, request, error));
  app.setNotFoundHandler((request, reply) => {
    sendError(reply, request, new AppError('not_found', 'no such resource'));
  });

  // With REDIS_URL the token endpoint's throttles count across instances (this instance's alone while Redis is down).
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
  // PUBLIC_API_SECRET_SCANNING=github: GitHub's alerts; otherwise the path is unknown like any other (404).
  if (config.secretScanning && deps.keys) registerSecretScanningRoutes(app, { ...deps, keys: deps.keys }, config.secretScanning);
  return app;
}
