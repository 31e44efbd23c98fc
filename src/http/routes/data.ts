import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { AppError } from '../../errors.js';
import { BASE_PATH } from '../config.js';
import type { AppDeps } from '../context.js';
import { sendError } from '../errors.js';
import { authenticate, companyOf } from '../gate.js';
import { methodNotAllowed } from './method-not-allowed.js';

const DATA_METHODS: HTTPMethods[] = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];

// Hop-by-hop headers (RFC 9110 §7.6.1), the caller's credentials, and the headers we set ourselves.
const DROPPED_REQUEST_HEADERS = [
  'authorization',
  'proxy-authorization',
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
  'x-partner-id',
  'x-company-id',
  'x-request-id',
];
const DROPPED_RESPONSE_HEADERS = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'x-request-id',
]);

// A dot segment, plain or percent-encoded, would let the path climb out of the engine's base path.
const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|$)/i;

function upstreamPath(request: FastifyRequest, prefix: string): string {
  const url = request.raw.url ?? '';
  const queryStart = url.indexOf('?');
  const path = url.slice(BASE_PATH.length, queryStart < 0 ? url.length : queryStart);
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    throw new AppError('invalid_request', 'the path is not validly percent-encoded');
  }
  if (DOT_SEGMENT.test(path) || DOT_SEGMENT.test(decoded) || path.includes('\\') || decoded.includes('\\')) {
    throw new AppError('invalid_request', 'the path must not contain dot segments or backslashes');
  }
  return prefix + (path === '' ? '/' : path);
}

/** A Vary value (one header or several) with Origin in it, once; `*` already covers it. */
export function withOrigin(vary: string | string[]): string {
  const names = (Array.isArray(vary) ? vary.join(',') : vary)
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.includes('*') || names.some((name) => name.toLowerCase() === 'origin')) return names.join(', ');
  return [...names, 'Origin'].join(', ');
}

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
  const { access, verifier, config, limits } = deps;
  const upstream = config.upstream;
  const prefix = upstream ? upstream.pathname.replace(/\/+$/, '') : '';

  const rewriteRequestHeaders = (request: FastifyRequest, headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    for (const name of DROPPED_REQUEST_HEADERS) delete headers[name];
    if (request.rawBody === null) delete headers['content-length'];
    headers['x-partner-id'] = request.claims!.partnerId;
    headers['x-company-id'] = request.companyId!;
    headers['x-request-id'] = request.id;
    return headers;
  };
  const corsOn = config.corsOrigins.length > 0;
  const rewriteHeaders = (headers: IncomingHttpHeaders): IncomingHttpHeaders => {
    for (const name of Object.keys(headers)) {
      if (DROPPED_RESPONSE_HEADERS.has(name) || name.startsWith('access-control-')) delete headers[name];
    }
    // The engine's Vary replaces the one the CORS plugin set, and the answer depends on Origin too.
    if (corsOn && headers.vary !== undefined) headers.vary = withOrigin(headers.vary);
    return headers;
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    if (!upstream) throw new AppError('upstream_unavailable', 'no recommendation engine is configured');
    const source = upstreamPath(request, prefix);
    return reply.from(source, {
      ...(request.rawBody !== null ? { body: request.rawBody, contentType: request.headers['content-type'] ?? 'application/json' } : {}),
      timeout: config.upstreamTimeoutMs,
      rewriteRequestHeaders: (_request, headers) => rewriteRequestHeaders(request, headers as IncomingHttpHeaders),
      rewriteHeaders: (headers) => rewriteHeaders(headers as IncomingHttpHeaders),
      onError: (_reply, { error }) => {
        sendError(reply, request, upstreamFailure(error as Error));
      },
    });
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
