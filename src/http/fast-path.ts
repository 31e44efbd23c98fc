// The data path's fast lane: the usual data request (GET, a plain path under the base path, `company_id`
// alone in the query, one bearer token, no body, no CORS origin) is gated, counted against the partner's
// limits, and forwarded straight from node:http, without Fastify's request lifecycle. It runs exactly the same
// checks as the Fastify route (routes/data.ts, gate.ts, edges.ts, forwarding.ts, limits.ts) and answers only
// a 200 of the engine itself. Anything else, and every refusal (a 429 too: a refused request consumes no
// allowance), is handed to Fastify untouched, which gates it again and answers it as before; once the engine
// has been asked, the answer and the allowance taken travel with the request (`preForwarded`), so neither the
// engine is asked nor the allowance taken twice.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { AccessState } from '../domain/access.js';
import type { TokenClaims, TokenVerifier } from '../domain/tokens.js';
import { BASE_PATH } from './config.js';
import { requestHeadProblem } from './edges.js';
import type { EngineResponse, Forwarder } from './forwarder.js';
import { engineRequestHeaders, engineResponseHeaders, engineTarget } from './forwarding.js';
import { bearerTokenOf, urlCarriesKeyMaterial } from './gate.js';
import { rateLimitHeaders, type DataLimits, type Decision, type Policy, type Taken } from './limits.js';

/** What the fast lane learnt before handing a request to Fastify: the engine's answer or failure, the id. */
export interface PreForwarded {
  requestId: string;
  engine?: EngineResponse;
  /** How long the engine took to answer (0 when it did not). */
  engineMs: number;
  error?: unknown;
  /** The partner's allowance taken for this request, when it has limits. */
  limit?: Taken;
}

const PRE_FORWARDED = Symbol('partnerctl.preForwarded');

export function preForwardedOf(request: IncomingMessage): PreForwarded | undefined {
  return (request as unknown as Record<symbol, PreForwarded | undefined>)[PRE_FORWARDED];
}

/** One finished request, for the request log (and whatever else counts requests: usage, metrics). */
export interface FinishedRequest {
  requestId: string;
  partnerId: string | null;
  /** The company the request was authorised for. */
  companyId: string | null;
  method: string;
  url: string;
  status: number;
  durationMs: number;
  /** How long the engine took to answer; 0 when it was not asked or did not answer. */
  engineMs: number;
}

export interface FastLaneDeps {
  verifier: TokenVerifier;
  access: AccessState;
  limits?: DataLimits;
  forwarder: Forwarder;
  /** The engine's path prefix (its URL's path without a trailing slash). */
  prefix: string;
  corsOn: boolean;
  /** True for a path that another route under the base path may serve (watchOtherRoutes). */
  otherRoute: (path: string) => boolean;
  /** True once the server is closing: Fastify then answers (with `Connection: close`). */
  closing: () => boolean;
  /** Called once per request answered here, after the answer is handed to the socket. */
  finished: (request: FinishedRequest) => void;
}

const BASE_PREFIX = `${BASE_PATH}/`;
// Letters, digits, `_` and `-` in non-empty segments: nothing that the path checks of engineTarget could
// refuse (no `%`, `.`, `\`), nothing the router could read differently (no `//`, no trailing `/`).
const PLAIN_PATH = /^\/public\/v1(?:\/[A-Za-z0-9_-]+)+$/;
// A company_id value that no query parser decodes: no `%`, `+`, `&`, `;`, `#`, `=`, `[`, `]`, visible ASCII.
const PLAIN_COMPANY = /^[A-Za-z0-9_.:~!$'()*,@-]{1,128}$/;

/**
 * Every route under the base path other than the data routes (the token endpoint, the OpenAPI document, and
 * whatever is added later), collected as Fastify registers them: a path one of them could match never takes
 * the fast lane. Install before any route is registered.
 */
export function watchOtherRoutes(app: FastifyInstance): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  app.addHook('onRoute', (route) => {
    const url = route.url;
    if (!url.startsWith(BASE_PATH) || url === BASE_PATH || url === `${BASE_PATH}/*`) return;
    const dynamic = url.search(/[:*(]/);
    if (dynamic < 0) exact.add(url);
    else prefixes.push(url.slice(0, dynamic));
  });
  return (path) => exact.has(path) || (prefixes.length > 0 && prefixes.some((prefix) => path.startsWith(prefix)));
}

/**
 * The fast lane as a node:http request listener in front of Fastify's own (`next`). Returns true when it
 * took the request (answered it, or will hand it to `next` itself).
 */
export function createFastLane(deps: FastLaneDeps, next: (request: IncomingMessage, response: ServerResponse) => void) {
  const { verifier, access, limits, forwarder, prefix, corsOn, closing, otherRoute, finished } = deps;
  // Requests passed to Fastify from inside the lane (after a refusal), so a later failure cannot pass them twice.
  const handedOver = new WeakSet<IncomingMessage>();
  const toFastify = (request: IncomingMessage, response: ServerResponse): void => {
    handedOver.add(request);
    next(request, response);
  };

  const eligible = (request: IncomingMessage): string | null => {
    if (request.method !== 'GET') return null;
    const url = request.url!;
    if (!url.startsWith(BASE_PREFIX)) return null;
    const queryStart = url.indexOf('?');
    if (queryStart < 0) return null;
    const path = url.slice(0, queryStart);
    const query = url.slice(queryStart + 1);
    if (!query.startsWith('company_id=') || otherRoute(path) || !PLAIN_PATH.test(path)) return null;
    const company = query.slice(11);
    if (!PLAIN_COMPANY.test(company)) return null;
    const headers = request.headers;
    if (
      headers['content-length'] !== undefined ||
      headers['transfer-encoding'] !== undefined ||
      headers.expect !== undefined ||
      (corsOn && headers.origin !== undefined)
    ) {
      return null;
    }
    if (requestHeadProblem(request) !== null || urlCarriesKeyMaterial(url)) return null;
    return company;
  };

  const lane = (request: IncomingMessage, response: ServerResponse, company: string, token: string, started: number): Promise<void> | undefined => {
    // From the caches alone when they can say (the usual case), else the same checks, waiting.
    const claims = verifier.verifiedNow(token);
    if (claims !== undefined && access.admitsNow(claims, company) === true) {
      const policy = limits ? limits.knownPolicy(claims.partnerId) : null;
      if (policy !== undefined) return takeThenForward(request, response, company, claims, started, policy);
    }
    return gateWaiting(request, response, company, token).then((gated) => (gated === undefined ? undefined : takeThenForward(request, response, company, gated.claims, started, gated.policy)));
  };

  /** One request from the partner's allowance, if it has limits (after every other check), then forward; refused: Fastify answers. */
  const takeThenForward = (request: IncomingMessage, response: ServerResponse, company: string, claims: TokenClaims, started: number, policy: Policy | null): Promise<void> | undefined => {
    if (policy === null) return forward(request, response, company, claims, started, undefined);
    const decided = limits!.take(claims.partnerId, policy);
    const go = (decision: Decision): Promise<void> | undefined => {
      if (decision.allowed) return forward(request, response, company, claims, started, { decision, policy });
      toFastify(request, response);
      return undefined;
    };
    return decided instanceof Promise ? decided.then(go) : go(decided);
  };

  /** The gate with every check that may wait; undefined when the request was handed to Fastify. */
  const gateWaiting = async (request: IncomingMessage, response: ServerResponse, company: string, token: string): Promise<{ claims: TokenClaims; policy: Policy | null } | undefined> => {
    try {
      const claims = await verifier.verify(token);
      await access.authenticate(claims);
      const policy = limits ? await limits.policy(claims.partnerId) : null;
      await access.authorizeCompany(claims, company);
      return { claims, policy };
    } catch {
      // A refusal (or a database that cannot say): Fastify answers it, with the same checks.
      toFastify(request, response);
      return undefined;
    }
  };

  const forward = async (request: IncomingMessage, response: ServerResponse, company: string, claims: TokenClaims, started: number, limit: Taken | undefined) => {
    const requestId = randomUUID();
    let engine: EngineResponse;
    const sent = performance.now();
    try {
      engine = await forwarder.forward({
        method: 'GET',
        path: engineTarget(request.url!, prefix),
        headers: engineRequestHeaders(request.rawHeaders, request.headers.connection, {
          partnerId: claims.partnerId,
          companyId: company,
          requestId,
          contentLength: null,
        }),
        body: null,
      });
    } catch (error) {
      handOver(request, { requestId, engineMs: 0, error, limit });
      toFastify(request, response);
      return;
    }
    const engineMs = performance.now() - sent;
    const type = engine.headers['content-type'];
    if (engine.status !== 200 || typeof type !== 'string') {
      handOver(request, { requestId, engine, engineMs, limit });
      toFastify(request, response);
      return;
    }
    const headers = engineResponseHeaders(engine.headers, corsOn) as Record<string, string | string[] | number>;
    // As the Fastify route answers: the gateway's RateLimit-* headers unless the engine sent its own.
    if (limit) {
      const rate = rateLimitHeaders(limit.decision);
      for (const name in rate) headers[name] ??= rate[name]!;
    }
    headers['x-request-id'] = requestId;
    headers['content-length'] = engine.body.length;
    response.writeHead(200, headers);
    response.end(engine.body);
    finished({
      requestId,
      partnerId: claims.partnerId,
      companyId: company,
      method: 'GET',
      url: request.url!,
      status: 200,
      durationMs: performance.now() - started,
      engineMs,
    });
  };

  return (request: IncomingMessage, response: ServerResponse): void => {
    const started = performance.now();
    // A pipelined request behind one still being answered (its response not yet given the socket) goes
    // through Fastify like its predecessor, so the engine sees them in the order they came.
    const company = response.socket === null || closing() ? null : eligible(request);
    const token = company === null ? null : bearerTokenOf(request.rawHeaders);
    if (company === null || token === null) {
      next(request, response);
      return;
    }
    // Only a failure before the lane answered or handed over; a request is never given to Fastify twice.
    const failed = () => {
      if (!response.headersSent && preForwardedOf(request) === undefined && !handedOver.has(request)) next(request, response);
    };
    try {
      lane(request, response, company, token, started)?.catch(failed);
    } catch {
      failed();
    }
  };
}

function handOver(request: IncomingMessage, result: PreForwarded): void {
  (request as unknown as Record<symbol, PreForwarded>)[PRE_FORWARDED] = result;
}
