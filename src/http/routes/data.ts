import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError } from '../../errors.js';
import { BASE_PATH } from '../config.js';
import type { AppDeps } from '../context.js';
import { sendError } from '../errors.js';
import { createFastLane, preForwardedOf, type FinishedRequest } from '../fast-path.js';
import { createForwarder, type EngineResponse, type Forwarder } from '../forwarder.js';
import { engineErrorEnvelope, engineRequestHeaders, engineResponseHeaders, engineTarget } from '../forwarding.js';
import { authenticate, companyOf } from '../gate.js';
import { methodNotAllowed } from './method-not-allowed.js';

export { withOrigin } from '../forwarding.js';

const DATA_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];

function upstreamFailure(error: Error & { statusCode?: number; code?: string }): AppError {
  const timedOut = error.statusCode === 504 || /TIMEOUT/i.test(error.code ?? '');
  return timedOut
    ? new AppError('upstream_timeout', 'the recommendation engine did not answer in time', { cause: error })
    : new AppError('bad_gateway', 'the recommendation engine could not be reached', { cause: error });
}

/**
 * Every path under the base path other than the token and document routes: gate, then forward. The gate
 * runs before the body is read (token, partner and key-pair status), then again after it (company).
 */
export function registerDataRoutes(
  app: FastifyInstance,
  deps: AppDeps,
  lane?: { finished: (request: FinishedRequest) => void; otherRoute: (path: string) => boolean },
): void {
  const { access, verifier, config, limits, logger } = deps;
  const upstream = config.upstream;
  const prefix = upstream ? upstream.pathname.replace(/\/+$/, '') : '';
  const corsOn = config.corsOrigins.length > 0;
  let forwarder: Forwarder | undefined = deps.forwarder;
  if (!forwarder && upstream) {
    const own = createForwarder(upstream, { timeoutMs: config.upstreamTimeoutMs });
    forwarder = own;
    // Closing the app closes the pooled engine connections too, so a stopped server holds no sockets.
    app.addHook('onClose', async () => own.close());
  }

  const answer = (request: FastifyRequest, reply: FastifyReply, engine: EngineResponse): FastifyReply => {
    const headers = engineResponseHeaders(engine.headers, corsOn);
    if (engine.status < 400) return reply.code(engine.status).headers(headers).send(engine.body);
    const translated = engineErrorEnvelope(engine.status, engine.headers, engine.body, request.id);
    if (translated.logBody !== undefined && logger) {
      logger.warn({ request_id: request.id, engine_status: engine.status, engine_body: translated.logBody }, 'the engine answered an error');
    }
    for (const name of ['content-type', 'content-length', 'content-encoding', 'content-range', 'etag', 'last-modified', 'www-authenticate', 'proxy-authenticate']) {
      delete headers[name];
    }
    return reply.code(translated.status).headers(headers).type('application/json; charset=utf-8').send(translated.body);
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    if (!forwarder) throw new AppError('upstream_unavailable', 'no recommendation engine is configured');
    const target = engineTarget(request.raw.url ?? '', prefix);
    const body = request.bodyBytes;
    let engine: EngineResponse;
    // The fast lane asked the engine already and handed the answer over (fast-path.ts).
    const pre = preForwardedOf(request.raw);
    if (pre) {
      if (pre.engine) {
        request.engineMs = pre.engineMs;
        return answer(request, reply, pre.engine);
      }
      return sendError(reply, request, upstreamFailure(pre.error as Error));
    }
    const sent = performance.now();
    try {
      engine = await forwarder.forward({
        method: request.method,
        path: target,
        headers: engineRequestHeaders(request.raw.rawHeaders, request.headers.connection, {
          partnerId: request.claims!.partnerId,
          companyId: request.companyId!,
          requestId: request.id,
          contentLength: body === null ? null : body.length,
        }),
        body,
      });
    } catch (error) {
      return sendError(reply, request, upstreamFailure(error as Error));
    }
    // The engine's answer arrived: its time, for the usage counts and the metrics.
    request.engineMs = performance.now() - sent;
    return answer(request, reply, engine);
  };

  const options = {
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      request.claims = await authenticate(request, reply, verifier, access);
      // Before the body is read: a partner over its limit costs no more than this. A request the fast lane
      // forwarded already took its share of the allowance there.
      if (limits) {
        const taken = preForwardedOf(request.raw)?.limit;
        if (taken) limits.answer(taken, reply);
        else await limits.enforce(request.claims.partnerId, reply);
      }
    },
    preHandler: async (request: FastifyRequest) => {
      const companyId = companyOf(request);
      // The token, partner and pair were checked in onRequest; only the company is left.
      await access.authorizeCompany(request.claims!, companyId);
      request.companyId = companyId;
    },
  };
  app.route({ method: DATA_METHODS, url: BASE_PATH, ...options, handler });
  app.route({ method: DATA_METHODS, url: `${BASE_PATH}/*`, ...options, handler });
  methodNotAllowed(app, BASE_PATH, DATA_METHODS);
  methodNotAllowed(app, `${BASE_PATH}/*`, DATA_METHODS);

  // The usual data request skips Fastify's lifecycle (fast-path.ts); everything else reaches the routes above.
  if (forwarder && lane) {
    const [fastify] = app.server.listeners('request') as ((request: IncomingMessage, response: ServerResponse) => void)[];
    if (fastify) {
      let closing = false;
      app.addHook('preClose', (done) => {
        closing = true;
        done();
      });
      app.server.removeListener('request', fastify);
      app.server.on('request', createFastLane({ verifier, access, limits, forwarder, prefix, corsOn, closing: () => closing, ...lane }, fastify));
    }
  }
}
