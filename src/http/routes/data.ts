// A data request: every request under the base path that no other route serves. One function whose body is
// its order: read, gate, limit, body, authorise, forward, answer. The kernel (server/app.ts) gives it its
// request id, client, head checks and CORS before, and writes its errors and its finished record after.
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { AppError } from '../../errors.js';
import type { EngineResponse, Forwarder } from '../data-path/forwarder.js';
import { engineErrorEnvelope, engineRequestHeaders, engineResponseHeaders, engineTarget } from '../data-path/forwarding.js';
import { bearerToken, companyOf, refuseKeysInUrl, tokenRefused, type Query } from '../data-path/gate.js';
import { readJsonBody, type RequestBody } from '../protocol/json-body.js';
import { BASE_PATH } from '../protocol/paths.js';
import { traceContextOf, traceparentOf } from '../protocol/trace-context.js';
import type { AppDeps } from './deps.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** The methods a data path takes. */
const DATA_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
const BODY_METHODS = new Set(['DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']);

// The engine's own framing and what it says of its body: an error answer is the gateway's envelope instead.
const ENGINE_ERROR_DROPPED = ['content-type', 'content-length', 'content-encoding', 'content-range', 'etag', 'last-modified', 'www-authenticate', 'proxy-authenticate'];

/** What a failed forward answers: the contract's own refusal as it is, the engine's failure as 502 or 504. */
function upstreamFailure(thrown: unknown): AppError {
  if (thrown instanceof AppError) return thrown;
  const error = thrown as Error & { statusCode?: number; code?: string };
  const timedOut = error.statusCode === 504 || /TIMEOUT/i.test(error.code ?? '');
  return timedOut
    ? new AppError('upstream_timeout', 'the recommendation engine did not answer in time', { cause: error })
    : new AppError('bad_gateway', 'the recommendation engine could not be reached', { cause: error });
}

/** The path of a request target, without its query (for span names). */
function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart < 0 ? url : url.slice(0, queryStart);
}

export function registerDataRoutes(app: FastifyInstance, deps: AppDeps, forwarder: Forwarder | null, corsOn: boolean): void {
  const { verifier, access, limits, spans: spanExport, logger } = deps;
  const upstream = deps.config.upstream;
  const prefix = upstream ? upstream.pathname.replace(/\/+$/, '') : '';
  const bodyLimit = deps.config.bodyLimitBytes;

  async function dataRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const raw = request.raw;
    const facts = request.facts;
    // Headers every answer to this request carries (WWW-Authenticate, RateLimit-*, traceresponse).
    const headers: Record<string, string> = {};
    try {
      // Read: the trace context, the query (before any credential is looked at).
      const trace = traceContextOf(raw.rawHeaders, request.id, spanExport != null);
      facts.traceId = trace.traceId;
      const spans = spanExport == null ? null : spanExport.start(trace, raw.method!, pathOf(raw.url!), request.client.address);
      facts.spans = spans;
      headers.traceresponse = traceparentOf(trace.traceId, trace.spanId, trace.flags);
      const query = request.query as Query;
      refuseKeysInUrl(raw.url!, query);

      // Gate: one valid bearer token, its partner and minting pair still accepted.
      const token = bearerToken(raw.rawHeaders, headers);
      let claims;
      try {
        const verified = verifier.verify(token);
        claims = verified instanceof Promise ? await verified : verified;
        facts.keyPairId = claims.keyPairId;
        facts.tokenId = claims.jti;
        const refused = access.authenticate(claims, request.client.address);
        if (refused !== undefined) await refused;
      } catch (error) {
        throw tokenRefused(headers, error);
      }
      facts.partnerId = claims.partnerId;

      // Limit: one request from the partner's allowance, before any body is read.
      const limited = limits?.take(claims.partnerId, headers);
      if (limited !== undefined) await limited;

      // Body, then the company it names (query or JSON body), mapped to the token's partner.
      const body: RequestBody | null = BODY_METHODS.has(raw.method!) ? await readJsonBody(raw, bodyLimit) : null;
      const company = companyOf(raw, query, body);
      facts.companyNamed = company;
      const authorized = access.authorizeCompany(claims, company);
      if (authorized !== undefined) await authorized;
      facts.companyId = company;
      spans?.gatePassed(claims.partnerId, company);

      // Forward, by the forwarding contract.
      if (forwarder === null) throw new AppError('upstream_unavailable', 'no recommendation engine is configured');
      const path = engineTarget(raw.url!, prefix);
      const parent = spans === null ? trace.spanId : spans.engineStarted();
      const bytes = body === null ? null : body.bytes;
      const engineHeaders = engineRequestHeaders(raw.rawHeaders, raw.headers.connection, {
        partnerId: claims.partnerId,
        companyId: company,
        requestId: request.id,
        contentLength: bytes === null ? null : bytes.length,
        client: request.client,
        traceparent: traceparentOf(trace.traceId, parent, trace.flags),
        tracestate: trace.state,
      });
      const sentAt = performance.now();
      let engine: EngineResponse;
      try {
        engine = await forwarder.forward({ method: raw.method!, path, headers: engineHeaders, body: bytes });
      } catch (error) {
        facts.engineMs = performance.now() - sentAt;
        spans?.engineEnded(null);
        throw upstreamFailure(error);
      }
      facts.engineMs = performance.now() - sentAt;
      facts.engineStatus = engine.status;
      spans?.engineEnded(engine.status);

      // Answer: a success with the engine's headers (the gateway's own unless the engine sent them), an error
      // as the gateway's envelope (the engine's body to the log).
      const answer: Record<string, string | string[]> = engineResponseHeaders(engine.headers, corsOn);
      for (const name in headers) answer[name] ??= headers[name]!;
      // The client's trace header names the gateway's span, whatever the engine says of its own.
      answer.traceresponse = headers.traceresponse;
      if (engine.status < 400) {
        answer['content-length'] = String(engine.body.length);
        reply.code(engine.status).headers(answer).send(engine.body);
        return;
      }
      const translated = engineErrorEnvelope(engine.status, engine.headers, engine.body, request.id);
      if (translated.logBody !== undefined) {
        logger?.warn({ request_id: request.id, engine_status: engine.status, engine_body: translated.logBody }, 'the engine answered an error');
      }
      // The engine's 401 or 407 is the gateway's credentials failing there: its owners' to act on, like a 5xx.
      facts.reason = translated.status >= 500 ? 'engine_error' : 'engine_refused';
      for (const name of ENGINE_ERROR_DROPPED) delete answer[name];
      answer['content-type'] = 'application/json; charset=utf-8';
      reply.code(translated.status).headers(answer).send(translated.body);
    } catch (error) {
      // The error writer (the kernel's) keeps what the reply holds: this request's own headers win.
      reply.headers(headers);
      throw error;
    }
  }

  for (const url of [BASE_PATH, `${BASE_PATH}/*`]) {
    app.route({ method: DATA_METHODS, url, exposeHeadRoute: false, handler: dataRequest });
    methodNotAllowed(app, url, DATA_METHODS);
  }
}
