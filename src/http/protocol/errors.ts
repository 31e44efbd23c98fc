import type { FastifyReply, FastifyRequest } from 'fastify';
import { isAppError, statusOf, type ErrorCode } from '../../errors.js';
import type { AnswerCause } from '../../reasons.js';
import { newRecord } from './finished-request.js';

export interface ErrorEnvelope {
  error: { code: string; message: string; request_id: string };
}

// 5xx responses never carry an error's own text (it may name files, hosts or queries): only these.
const SERVER_MESSAGES: Partial<Record<ErrorCode, string>> = {
  internal_error: 'the service could not complete the request',
  database_unavailable: 'the service cannot reach its database right now',
  schema_out_of_date: 'the service cannot reach its database right now',
  signing_key_unavailable: 'the service cannot issue or check tokens right now',
  key_list_unavailable: "GitHub's secret-scanning key list cannot be fetched right now; retry later",
  clock_skewed: "this instance's clock is off the database's: it issues no token until that is corrected",
  upstream_unavailable: 'no recommendation engine is configured for this service',
  bad_gateway: 'the recommendation engine could not be reached',
  upstream_timeout: 'the recommendation engine did not answer in time',
};
const SERVER_FALLBACK = 'the service could not complete the request';

/** Fastify's and its plugins' own errors, by code, turned into ours. */
const FRAMEWORK_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_request',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_request',
  FST_ERR_BAD_URL: 'invalid_request',
  FST_ERR_MAX_PARAM_LENGTH: 'invalid_request',
  FST_ERR_ROUTE_MISSING_CONTENT_TYPE: 'invalid_request',
};

const FRAMEWORK_MESSAGES: Partial<Record<ErrorCode, string>> = {
  unsupported_media_type: 'the request body must be application/json',
  payload_too_large: 'the request body is too large',
  invalid_request: 'the request is malformed',
  not_found: 'no such resource',
  method_not_allowed: 'method not allowed on this path',
  rate_limited: 'too many requests',
};

const BY_STATUS: Record<number, ErrorCode> = {
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

/**
 * Any thrown value as a code, a status and a message safe to show: 4xx AppErrors keep their own text,
 * 5xx ones get their code's fixed message, and anything else shows nothing of itself.
 */
export function describeError(error: unknown): { code: ErrorCode; status: number; message: string; internal: boolean } {
  if (isAppError(error)) {
    const status = error.status;
    const message = status >= 500 ? (SERVER_MESSAGES[error.code] ?? SERVER_FALLBACK) : error.message;
    return { code: error.code, status, message, internal: error.code === 'internal_error' };
  }
  const frameworkCode = (error as { code?: unknown } | null)?.code;
  const mapped = typeof frameworkCode === 'string' ? FRAMEWORK_CODES[frameworkCode] : undefined;
  if (mapped) return { code: mapped, status: statusOf(mapped), message: FRAMEWORK_MESSAGES[mapped]!, internal: false };
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = BY_STATUS[status] ?? 'invalid_request';
    return { code, status: statusOf(code), message: FRAMEWORK_MESSAGES[code]!, internal: false };
  }
  return { code: 'internal_error', status: 500, message: SERVER_FALLBACK, internal: true };
}

/** The cause on record of an error the thrower gave no reason for, by its code (docs/reasons.md). */
const CAUSE_BY_CODE: Partial<Record<ErrorCode, AnswerCause>> = {
  bad_gateway: 'engine_unreachable',
  upstream_timeout: 'engine_timeout',
  upstream_unavailable: 'engine_not_configured',
  database_unavailable: 'database_unavailable',
  schema_out_of_date: 'database_unavailable',
  signing_key_unavailable: 'signing_key_unavailable',
  clock_skewed: 'clock_skewed',
  request_timeout: 'request_timeout',
  payload_too_large: 'body_too_large',
  unsupported_media_type: 'unsupported_media_type',
  expectation_failed: 'expectation_failed',
  not_found: 'not_found',
  method_not_allowed: 'method_not_allowed',
  rate_limited: 'rate_limited',
  invalid_request: 'request_malformed',
};

/** Why an error was answered, for the record: the thrower's reason, else its code's cause. */
export function causeOf(error: unknown): AnswerCause {
  if (isAppError(error) && error.reason !== undefined) return error.reason;
  const { code, status } = describeError(error);
  return CAUSE_BY_CODE[code] ?? (status < 500 ? 'request_malformed' : 'internal_error');
}

/** The cause of an answer of this status that no error named (written by a step outside the error writer). */
export function causeOfStatus(status: number): AnswerCause {
  return causeOf({ statusCode: status });
}

export function envelope(code: string, message: string, requestId: string): ErrorEnvelope {
  return { error: { code, message, request_id: requestId } };
}

/** An error's answer: status, the headers it needs, the envelope. */
export interface ErrorAnswer {
  status: number;
  code: ErrorCode;
  /** The error behind a 5xx (database, engine, signing keys, a bug): for the log, never the client. */
  failure: unknown;
  headers: Record<string, string>;
  body: string;
}

/**
 * The one way an error becomes an answer (`sendError` writes it): the envelope with the request id, `WWW-Authenticate: Bearer` on a 401 unless the gate set its
 * own; `safeMessage` replaces the default text. The writer adds X-Request-Id.
 */
export function errorAnswer(error: unknown, requestId: string, safeMessage?: string): ErrorAnswer {
  const described = describeError(error);
  const { code, status } = described;
  const message = safeMessage ?? described.message;
  const body = JSON.stringify(envelope(code, message, requestId));
  const headers: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
  };
  if (status === 401 && code === 'unauthorized') headers['www-authenticate'] = 'Bearer';
  return { status, code, failure: status >= 500 ? error : undefined, headers, body };
}

/**
 * The one writer of error answers, for every endpoint: errorAnswer through Fastify's reply (headers the reply
 * already holds win); the error's 5xx failure and its cause (docs/reasons.md) go to the finished record.
 */
export function sendError(reply: FastifyReply, request: FastifyRequest, error: unknown, safeMessage?: string): FastifyReply {
  const answer = errorAnswer(error, request.id, safeMessage);
  // Fastify may refuse a request before the kernel's first hook (a malformed URL): its record starts here.
  request.facts ??= newRecord(request.id, request.method, request.raw.url ?? '', '');
  if (answer.failure !== undefined) request.facts.failure = answer.failure;
  request.facts.reason = causeOf(error);
  for (const name in answer.headers) if (name === 'content-type' || !reply.hasHeader(name)) reply.header(name, answer.headers[name]!);
  if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', request.id);
  return reply.code(answer.status).send(answer.body);
}
