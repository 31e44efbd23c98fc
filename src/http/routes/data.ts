import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError } from '../../errors.js';
import { BASE_PATH } from '../config.js';
import type { AppDeps } from '../context.js';
import { sendError } from '../errors.js';
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
export function registerDataRoutes(app: FastifyInstance, deps: AppDeps): void {
  const { access, verifier, config, limits, logger } = deps;
  const metrics = deps.metrics ?? null;
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
    metrics?.engineAnswered(request.engineMs);
    return answer(request, reply, engine);
  };

  const options = {
    onRequest: async (request: FastifyRequest, reply: FastifyReply) => {
      request.claims = await authenticate(request, reply, verifier, access);
      // Before the body is read: a partner over its limit costs no more than this.
      if (limits) await limits.enforce(request.claims.partnerId, reply);
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
}
