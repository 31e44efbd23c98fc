// Every reason a request or an exchange is refused with (docs/reasons.md): one union, shared by the
// verdict that decides them, AppError that carries them, the finished record and the records on file.
/** Every reason code, in the order docs/reasons.md explains them. */
export const REFUSAL_REASONS = [
  'partner_unknown',
  'partner_disabled',
  'pair_unknown',
  'pair_revoked',
  'pair_superseded',
  'pair_expired',
  'secret_mismatch',
  'assertion_invalid',
  'assertion_expired',
  'assertion_audience',
  'assertion_replayed',
  'credential_kind_not_allowed',
  'token_invalid',
  'token_expired',
  'tokens_revoked',
  'address_not_allowed',
  'company_not_mapped',
] as const;

export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** Why a client assertion (private_key_jwt) does not prove its pair: the assertion's part of the verdict. */
export type AssertionFault = Extract<RefusalReason, `assertion_${string}`>;

/**
 * Every reason the gate refuses with and records (docs/reasons.md): the verdict's, and the refusals around
 * it, before a credential is looked at (no token, an unreadable one, API keys where a token belongs, a
 * malformed exchange) or after it is accepted (the partner's limit and quota, the exchange's throttles).
 */
export const GATE_REFUSAL_REASONS = [
  ...REFUSAL_REASONS,
  'token_missing',
  'api_key_in_request',
  'credentials_malformed',
  'rate_limited',
  'quota_exceeded',
  'exchange_throttled',
] as const;

export type GateRefusalReason = (typeof GATE_REFUSAL_REASONS)[number];

/**
 * Every cause the server itself gives an answer that is not a success (docs/reasons.md): the engine's
 * failures, its dependencies' (the database, the signing keys, the clock) and the request's own faults
 * before any credential was read. With the gate's reasons they are one vocabulary (ANSWER_CAUSES).
 */
export const SERVER_CAUSES = [
  'engine_error',
  'engine_refused',
  'engine_timeout',
  'engine_unreachable',
  'engine_not_configured',
  'database_unavailable',
  'stale_budget_spent',
  'signing_key_unavailable',
  'clock_skewed',
  'internal_error',
  'request_timeout',
  'body_too_large',
  'request_malformed',
  'unsupported_media_type',
  'expectation_failed',
  'not_found',
  'method_not_allowed',
] as const;

export type ServerCause = (typeof SERVER_CAUSES)[number];

/** The one vocabulary of causes on record: why an answer was not a success. */
export const ANSWER_CAUSES = [...GATE_REFUSAL_REASONS, ...SERVER_CAUSES] as const;

export type AnswerCause = (typeof ANSWER_CAUSES)[number];

/** The cause on record of a success inside a recording window (docs/decisions.md): not a refusal, a record. */
export const RECORDED_CAUSE = 'recorded';

/** Every cause a record can carry: the answer causes, and `recorded`. */
export const RECORD_CAUSES = [...ANSWER_CAUSES, RECORDED_CAUSE] as const;
