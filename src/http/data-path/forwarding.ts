// The forwarding contract with the engines (README "The forwarding contract"): which path, which headers
// and which answers cross the gateway. Plain functions over plain values, so the hot path stays cheap.
import { AppError } from '../../errors.js';
import { envelope } from '../protocol/errors.js';
import type { ClientAddress } from '../protocol/client-address.js';
import { BASE_PATH } from '../protocol/paths.js';

// A dot segment, plain or percent-encoded, also with `;parameters` (`..;x` is `..` to servlet containers and
// others), would let the path climb out of the engine's base path.
const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}((;|%3b)[^/]*)?(\/|$)/i;
// Escapes an engine would decode into a control character, a slash or a backslash.
const FORBIDDEN_ESCAPE = /%(?:[01][0-9a-f]|7f|2f|5c)/i;
// The scheme and authority of an absolute-form request target (RFC 9112 §3.2.2): http or https only.
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * The engine path (with the query as sent) for a request target under the base path. It comes from the
 * target's path, never from character positions in the raw target: an absolute-form target
 * (`http://host/public/v1/x`) has its scheme and authority removed first, and a target whose path is not
 * the base path or below it is refused.
 */
export function engineTarget(rawUrl: string, prefix: string): string {
  let url = rawUrl;
  if (url.charCodeAt(0) !== 47 /* / */) {
    const authority = ABSOLUTE_FORM.exec(url);
    if (!authority) throw new AppError('invalid_request', 'the request target is malformed');
    // Userinfo in a target is deprecated (RFC 9110 §4.2.4) and has no business reaching an engine.
    if (authority[0].includes('@')) throw new AppError('invalid_request', 'the request target must not carry userinfo');
    url = url.slice(authority[0].length);
  }
  if (url.includes('#')) throw new AppError('invalid_request', 'the request target must not carry a fragment');
  const queryStart = url.indexOf('?');
  const path = queryStart < 0 ? url : url.slice(0, queryStart);
  const query = queryStart < 0 ? '' : url.slice(queryStart);
  if (!path.startsWith(BASE_PATH) || (path.length > BASE_PATH.length && path.charCodeAt(BASE_PATH.length) !== 47)) {
    throw new AppError('invalid_request', 'the request target is malformed');
  }
  const rest = path.slice(BASE_PATH.length);
  if (rest.includes('%') || rest.includes('.') || rest.includes('\\')) {
    if (FORBIDDEN_ESCAPE.test(rest)) {
      throw new AppError('invalid_request', 'the path must not carry encoded control characters, slashes or backslashes');
    }
    let decoded: string;
    try {
      decoded = decodeURIComponent(rest);
    } catch {
      throw new AppError('invalid_request', 'the path is not validly percent-encoded');
    }
    if (DOT_SEGMENT.test(rest) || DOT_SEGMENT.test(decoded) || rest.includes('\\') || decoded.includes('\\')) {
      throw new AppError('invalid_request', 'the path must not contain dot segments or backslashes');
    }
  }
  return prefix + (rest === '' ? '/' : rest) + query;
}

// Hop-by-hop headers (RFC 9110 §7.6.1, plus the obsolete proxy-connection): never passed on, either way.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'];

// Hop-by-hop headers, the caller's credentials, framing the gateway sets itself, and the headers the gateway
// owns (replaced by its own values).
const DROPPED_REQUEST_HEADERS = new Set([
  ...HOP_BY_HOP,
  'authorization',
  'proxy-authorization',
  'expect',
  'host',
  'content-length',
  'x-partner-id',
  'x-company-id',
  'x-request-id',
  // What a client could say about itself that an engine would believe: its address and scheme (the gateway
  // is the engine's only client), and the headers some frameworks route by instead of the path or method
  // (IIS and Symfony's X-Original-URL / X-Rewrite-URL, method-override middleware).
  'forwarded',
  'x-real-ip',
  'x-client-ip',
  'x-original-url',
  'x-rewrite-url',
  'x-http-method-override',
  'x-http-method',
  'x-method-override',
  // The trace context: the engine gets the gateway's (its parent is the gateway's span), never the client's.
  'traceparent',
  'tracestate',
]);
// Letters, digits and hyphens only, as nginx accepts by default (ignore_invalid_headers): an underscore, a
// dot or any other token character is how `X-Partner_Id` would pass for `X-Partner-Id` at an engine that
// folds `_` and `-` together (CGI, WSGI, Rack, PHP).
const FORWARDABLE_NAME = /^[A-Za-z0-9-]+$/;

/** The names a Connection header lists, lower-cased. */
function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null;
  // The usual values name no other header.
  if (value === 'keep-alive' || value === 'close' || value === 'Keep-Alive' || value === 'Close') return null;
  const tokens = new Set<string>();
  for (const part of (Array.isArray(value) ? value.join(',') : value).split(',')) {
    const token = part.trim().toLowerCase();
    if (token !== '') tokens.add(token);
  }
  return tokens;
}

export interface GatewayHeaders {
  partnerId: string;
  companyId: string;
  requestId: string;
  /** The body's length, null when none is forwarded. */
  contentLength: number | null;
  /** The client as the gateway determined it: the engine's X-Forwarded-For and X-Forwarded-Proto. */
  client: ClientAddress;
  /** The trace context whose parent is the gateway's span. */
  traceparent: string;
  /** The client's tracestate, passed through; undefined when none (or no valid traceparent). */
  tracestate: string | undefined;
}

/**
 * The headers the engine receives, as a flat [name, value, …] list in the client's order: every client
 * header except hop-by-hop ones (and those its Connection header names), credentials, names that are not
 * plain letters, digits and hyphens, and the gateway's own, which are then set from the verified request:
 * the partner, the company, the request id, the client's address and scheme, the trace context.
 */
export function engineRequestHeaders(rawHeaders: readonly string[], connection: string | string[] | undefined, own: GatewayHeaders): string[] {
  const named = connectionTokens(connection);
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (DROPPED_REQUEST_HEADERS.has(lower) || !FORWARDABLE_NAME.test(name) || named?.has(lower) || lower.startsWith('x-forwarded-')) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  out.push('x-partner-id', own.partnerId, 'x-company-id', own.companyId, 'x-request-id', own.requestId);
  // The client's own X-Forwarded-* were dropped above: these say what the gateway determined.
  if (own.client.address !== '') out.push('x-forwarded-for', own.client.address);
  out.push('x-forwarded-proto', own.client.proto, 'traceparent', own.traceparent);
  if (own.tracestate !== undefined) out.push('tracestate', own.tracestate);
  if (own.contentLength !== null) out.push('content-length', String(own.contentLength));
  return out;
}

const DROPPED_RESPONSE_HEADERS = new Set([
  ...HOP_BY_HOP,
  'x-request-id',
  // They name the engine's software to the world.
  'server',
  'x-powered-by',
]);

/**
 * The engine's headers as the client gets them: without hop-by-hop headers (and those its own Connection
 * header names), `Access-Control-*` (CORS is the gateway's), its `X-Request-Id`, `Server` and `X-Powered-By`.
 */
export function engineResponseHeaders(headers: Record<string, string | string[] | undefined>, corsOn: boolean): Record<string, string | string[]> {
  const named = connectionTokens(headers.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || DROPPED_RESPONSE_HEADERS.has(name) || name.startsWith('access-control-') || named?.has(name)) continue;
    out[name] = value;
  }
  // The engine's Vary replaces the one the CORS plugin set, and the answer depends on Origin too.
  if (corsOn && out.vary !== undefined) out.vary = withOrigin(out.vary);
  return out;
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

/** Stable codes and fixed messages for engine errors whose body is not an envelope. */
const ENGINE_ERRORS: Record<number, [string, string]> = {
  400: ['invalid_request', 'the recommendation engine refused the request as invalid'],
  403: ['forbidden', 'the recommendation engine refused the request'],
  404: ['not_found', 'no such resource'],
  405: ['method_not_allowed', 'method not allowed on this path'],
  409: ['conflict', 'the request conflicts with the current state of the resource'],
  413: ['payload_too_large', 'the request body is too large'],
  415: ['unsupported_media_type', 'the recommendation engine does not accept this body'],
  422: ['unprocessable_request', 'the recommendation engine could not process the request'],
  429: ['rate_limited', 'too many requests'],
  503: ['engine_unavailable', 'the recommendation engine is unavailable right now'],
};
const ENGINE_CLIENT_ERROR: [string, string] = ['request_refused', 'the recommendation engine refused the request'];
const ENGINE_SERVER_ERROR: [string, string] = ['engine_error', 'the recommendation engine could not complete the request'];
const BAD_GATEWAY: [string, string] = ['bad_gateway', 'the recommendation engine could not be reached'];
const ENVELOPE_CODE = /^[a-z][a-z0-9_]{0,63}$/;
const ENVELOPE_MESSAGE_MAX = 500;
const LOGGED_BODY_MAX = 1_024;

export interface TranslatedEngineError {
  status: number;
  body: string;
  /** The engine's own body, cut short, when it did not reach the client (for the log). */
  logBody?: string;
}

/** An engine envelope's code and message, when the body is one (a JSON object holding error.code and error.message). */
function engineEnvelope(headers: Record<string, string | string[] | undefined>, body: Buffer): [string, string] | null {
  const type = headers['content-type'];
  if (body.length === 0 || body.length > 65_536 || typeof type !== 'string' || !/^application\/(?:[\w.+-]*\+)?json\b/i.test(type)) return null;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { error?: { code?: unknown; message?: unknown } };
    const code = parsed?.error?.code;
    const message = parsed?.error?.message;
    if (typeof code === 'string' && ENVELOPE_CODE.test(code) && typeof message === 'string' && message.length <= ENVELOPE_MESSAGE_MAX) {
      return [code, message];
    }
  } catch {
    // Not JSON: answered with the fixed envelope below.
  }
  return null;
}

/**
 * An engine's 4xx/5xx as the spec's envelope (section 7) with our request id: its status kept, its code and
 * message kept when it already sent an envelope, a stable code and a fixed message otherwise (its body then
 * goes to the log only). An engine's 401 or 407 is the gateway's credentials failing at the engine, not the
 * partner's token: 502 bad_gateway, so a client does not re-exchange in a loop.
 */
export function engineErrorEnvelope(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  body: Buffer,
  requestId: string,
): TranslatedEngineError {
  const logBody = body.length > 0 ? body.subarray(0, LOGGED_BODY_MAX).toString('utf8') : undefined;
  if (status === 401 || status === 407) {
    return { status: 502, body: JSON.stringify(envelope(BAD_GATEWAY[0], BAD_GATEWAY[1], requestId)), ...(logBody !== undefined ? { logBody } : {}) };
  }
  const own = engineEnvelope(headers, body);
  if (own) return { status, body: JSON.stringify(envelope(own[0], own[1], requestId)) };
  const [code, message] = ENGINE_ERRORS[status] ?? (status >= 500 ? ENGINE_SERVER_ERROR : ENGINE_CLIENT_ERROR);
  return { status, body: JSON.stringify(envelope(code, message, requestId)), ...(logBody !== undefined ? { logBody } : {}) };
}
