// The gate's reading of a data request: its credentials (one bearer token, never an API key), its query and
// its company. Plain functions over Node's request.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { parse as parseQuery } from 'fast-querystring';
import { ACCESS_KEY_PREFIX, SECRET_KEY_PREFIX } from '../../domain/rules/identifiers.js';
import { AppError, isAppError } from '../../errors.js';
import type { AnswerCause } from '../../reasons.js';
import { refuseCompanyIdAliases } from '../protocol/edges.js';
import type { RequestBody } from '../protocol/json-body.js';

// Compact JWS: three base64url parts. Anything else (extra spaces, a second scheme, quotes) is refused.
const BEARER = /^[Bb][Ee][Aa][Rr][Ee][Rr] ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/;
const MAX_TOKEN_LENGTH = 4096;
const KEY_HEADER = /^(x-)?(access|secret|api)[-_]?key$/i;
// A key prefix and what follows it, for redaction: the random part is base62.
const KEY_MATERIAL = new RegExp(`(${ACCESS_KEY_PREFIX}|${SECRET_KEY_PREFIX})[0-9A-Za-z]*`, 'g');
const PERCENT_ESCAPE = /%([0-9A-Fa-f]{2})/g;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

function unauthorized(answerHeaders: Record<string, string>, tokenGiven: boolean, message: string, reason?: AnswerCause): AppError {
  answerHeaders['www-authenticate'] = tokenGiven ? 'Bearer error="invalid_token"' : 'Bearer';
  return new AppError('unauthorized', message, { reason: reason ?? (tokenGiven ? 'token_invalid' : 'token_missing') });
}

function apiKeysRefused(): AppError {
  return new AppError('invalid_request', 'API keys are accepted only by POST /public/v1/auth/token, never on data requests', { reason: 'api_key_in_request' });
}

export function carriesKeyMaterial(text: string): boolean {
  return text.includes(SECRET_KEY_PREFIX) || text.includes(ACCESS_KEY_PREFIX);
}

/** Every %XX escape decoded as one character: enough to see ASCII key prefixes spelled with escapes. */
function decodeEscapes(text: string): string {
  return text.includes('%') ? text.replace(PERCENT_ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))) : text;
}

/** Key material in a URL (path or query), as sent or spelled with percent-escapes. */
export function urlCarriesKeyMaterial(url: string): boolean {
  return carriesKeyMaterial(url) || carriesKeyMaterial(decodeEscapes(url));
}

/**
 * A URL or path fit for the log: key material (as sent or percent-escaped) replaced by its prefix and
 * `[redacted]`. Text without any stays exactly as it was.
 */
export function redactKeyMaterial(text: string): string {
  if (carriesKeyMaterial(text)) return text.replace(KEY_MATERIAL, '$1[redacted]');
  const decoded = decodeEscapes(text);
  return carriesKeyMaterial(decoded) ? decoded.replace(KEY_MATERIAL, '$1[redacted]') : text;
}

/**
 * The bearer token from the one Authorization header; a refusal names the scheme in `answerHeaders`
 * (WWW-Authenticate). Node keeps only the first of duplicated Authorization headers, so the raw header list
 * is what tells whether there were two. Headers that look like API keys are refused outright.
 */
export function bearerToken(raw: readonly string[], answerHeaders: Record<string, string>): string {
  let seen = 0;
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const headerValue = raw[i + 1]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      seen++;
      value = headerValue;
    } else if (KEY_HEADER.test(name) || carriesKeyMaterial(headerValue)) {
      throw apiKeysRefused();
    }
  }
  if (seen === 0 || value === undefined) throw unauthorized(answerHeaders, false, 'a bearer token is required');
  if (seen > 1) throw unauthorized(answerHeaders, true, 'send exactly one Authorization header');
  if (value.length > MAX_TOKEN_LENGTH) throw unauthorized(answerHeaders, true, 'the token is not valid');
  const match = BEARER.exec(value);
  if (!match) throw unauthorized(answerHeaders, value.length > 0, 'the Authorization header must be "Bearer <token>"');
  return match[1]!;
}

/** A refusal of the token itself (not verified, or no longer accepted), as the gate answers it. */
export function tokenRefused(answerHeaders: Record<string, string>, error: unknown): unknown {
  return isAppError(error) && error.code === 'unauthorized' ? unauthorized(answerHeaders, true, error.message, error.reason) : error;
}

// The usual query: company_id alone, in characters no query parser decodes.
const PLAIN_COMPANY_QUERY = /^company_id=[A-Za-z0-9_.:~!$'()*,@-]+$/;

export type Query = Record<string, string | string[] | undefined>;

/** A query string as the server reads it (fast-querystring; the usual one, company_id alone, without parsing). */
export function parseQueryString(query: string): Query {
  if (PLAIN_COMPANY_QUERY.test(query)) return { company_id: query.slice(11) };
  return parseQuery(query) as Query;
}

/** Keys anywhere in the raw URL (path or query), or access_key / secret_key query parameters. */
export function refuseKeysInUrl(url: string, query: Query): void {
  if (urlCarriesKeyMaterial(url)) throw apiKeysRefused();
  if (Object.hasOwn(query, 'access_key') || Object.hasOwn(query, 'secret_key')) throw apiKeysRefused();
}

function invalid(message: string): AppError {
  return new AppError('invalid_request', message);
}

/** How many times `name` is a key of the top-level object in valid JSON `text` (JSON.parse keeps only the last). */
export function countTopLevelKey(text: string, name: string): number {
  let depth = 0;
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const start = i;
      for (i++; i < text.length && text.charCodeAt(i) !== 34; i++) if (text.charCodeAt(i) === 92) i++;
      if (depth !== 1) continue;
      let j = i + 1;
      while (j < text.length && (text.charCodeAt(j) === 32 || text.charCodeAt(j) === 9 || text.charCodeAt(j) === 10 || text.charCodeAt(j) === 13)) j++;
      if (text.charCodeAt(j) === 58 && JSON.parse(text.slice(start, i + 1)) === name) count++;
    } else if (c === 123 || c === 91) {
      depth++;
    } else if (c === 125 || c === 93) {
      depth--;
    }
  }
  return count;
}

function carriesBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}

function mayRepeatKey(text: string): boolean {
  const first = text.indexOf('company_id');
  return text.includes('\\u') || (first >= 0 && text.indexOf('company_id', first + 1) >= 0);
}

/**
 * The target company: in the JSON body for POST, PUT and PATCH, in the query otherwise; exactly once, as a
 * non-empty string. The body must not smuggle API keys either.
 */
export function companyOf(request: IncomingMessage, query: Query, body: RequestBody | null): string {
  const method = request.method!;
  // `company%5Fid`, `Company_Id`, `company_id[]`, `;company_id=`: no spelling an engine could read differently.
  refuseCompanyIdAliases(request.url ?? '');
  const fromQuery = Object.hasOwn(query, 'company_id') ? query.company_id : undefined;
  const value0 = body?.value;
  const isObject = typeof value0 === 'object' && value0 !== null && !Array.isArray(value0);
  const fields = isObject ? (value0 as Record<string, unknown>) : undefined;
  const raw = body?.text ?? null;
  if (raw !== null && (carriesKeyMaterial(raw) || (fields && (Object.hasOwn(fields, 'access_key') || Object.hasOwn(fields, 'secret_key'))))) {
    throw apiKeysRefused();
  }
  const fromBody = fields && Object.hasOwn(fields, 'company_id') ? fields.company_id : undefined;
  let value: unknown;
  if (BODY_METHODS.has(method)) {
    if (fromQuery !== undefined) {
      throw invalid(`company_id goes in the JSON body for ${method}, not in the query`);
    }
    if (!isObject) throw invalid(`a ${method} request needs a JSON object body holding company_id`);
    if (raw !== null && mayRepeatKey(raw) && countTopLevelKey(raw, 'company_id') > 1) {
      throw invalid('company_id is given more than once');
    }
    value = fromBody;
  } else {
    if (fromBody !== undefined) throw invalid(`company_id goes in the query for ${method}, not in the body`);
    // The data path never reads a GET or HEAD body, so a company_id in it would go unseen: refuse the body instead.
    if ((method === 'GET' || method === 'HEAD') && carriesBody(request.headers)) {
      throw invalid(`a ${method} request must not carry a body`);
    }
    if (Array.isArray(fromQuery)) throw invalid('company_id is given more than once');
    value = fromQuery;
  }
  if (value === undefined) throw invalid('company_id is required');
  if (typeof value !== 'string' || value === '') throw invalid('company_id must be a non-empty string');
  return value;
}
