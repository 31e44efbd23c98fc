// One table of stable error codes: each maps to an HTTP status (for serve) and an exit code (for the CLI).
// Only the CLI entry point and the HTTP error handler turn an AppError into an exit code or a response.
import type { AnswerCause } from './reasons.js';

export const EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  notFound: 3,
  conflict: 4,
  unavailable: 5,
  /** The change is committed, but a live serve instance did not confirm it within --wait (a receipt's unconfirmed). */
  notConfirmed: 6,
  forbidden: 7,
  cancelled: 130,
} as const;

const CODES = {
  invalid_argument: { status: 400, exit: EXIT.usage },
  missing_argument: { status: 400, exit: EXIT.usage },
  confirmation_required: { status: 400, exit: EXIT.usage },
  invalid_request: { status: 400, exit: EXIT.usage },
  invalid_credentials: { status: 401, exit: EXIT.error },
  unauthorized: { status: 401, exit: EXIT.error },
  invalid_signature: { status: 401, exit: EXIT.error },
  permission_denied: { status: 403, exit: EXIT.forbidden },
  // A partner with network rules (set-network), reached from an address outside them.
  address_not_allowed: { status: 403, exit: EXIT.error },
  not_found: { status: 404, exit: EXIT.notFound },
  partner_not_found: { status: 404, exit: EXIT.notFound },
  method_not_allowed: { status: 405, exit: EXIT.error },
  request_timeout: { status: 408, exit: EXIT.error },
  active_key_pair_exists: { status: 409, exit: EXIT.conflict },
  no_active_key_pair: { status: 409, exit: EXIT.conflict },
  partner_exists: { status: 409, exit: EXIT.conflict },
  // A public key is registered to one key pair, once (a revoked pair's key never comes back).
  public_key_exists: { status: 409, exit: EXIT.conflict },
  webhook_exists: { status: 409, exit: EXIT.conflict },
  partner_disabled: { status: 409, exit: EXIT.conflict },
  concurrent_update: { status: 409, exit: EXIT.conflict },
  payload_too_large: { status: 413, exit: EXIT.error },
  expectation_failed: { status: 417, exit: EXIT.error },
  unsupported_media_type: { status: 415, exit: EXIT.error },
  rate_limited: { status: 429, exit: EXIT.error },
  cancelled: { status: 400, exit: EXIT.cancelled },
  internal_error: { status: 500, exit: EXIT.error },
  bad_gateway: { status: 502, exit: EXIT.unavailable },
  upstream_unavailable: { status: 503, exit: EXIT.unavailable },
  database_unavailable: { status: 503, exit: EXIT.unavailable },
  // An SQLite path other than the default where no file exists: a typo must not create an empty database.
  database_not_found: { status: 503, exit: EXIT.notFound },
  schema_out_of_date: { status: 503, exit: EXIT.unavailable },
  // Rows in the audit trail that the chain does not hold, below its start: writes wait for the owner's repair.
  audit_chain_broken: { status: 503, exit: EXIT.unavailable },
  signing_key_unavailable: { status: 503, exit: EXIT.unavailable },
  // GitHub's secret-scanning key list could not be fetched, so an alert's signature cannot be checked yet.
  key_list_unavailable: { status: 503, exit: EXIT.unavailable },
  clock_skewed: { status: 503, exit: EXIT.unavailable },
  upstream_timeout: { status: 504, exit: EXIT.unavailable },
  not_confirmed: { status: 504, exit: EXIT.notConfirmed },
} as const satisfies Record<string, { status: number; exit: number }>;

export type ErrorCode = keyof typeof CODES;

/**
 * What to do next, as a token each front end words for itself (the CLI names its commands and flags:
 * src/cli/hints.ts); for errors of the layers below the front ends, which write no command line.
 */
export type NextStep = 'check_database_url' | 'migrate' | 'migrate_when_idle' | 'migration_status' | 'migrate_after_renames' | 'check_commit_outcome';

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  /** The input the error is about (`name`, `company_id`…), so that each front end can name its own flag or field. */
  readonly field: string | undefined;
  /** Why the answer is not a success, when its thrower knows better than its code (a refused credential's reason, a spent staleness budget): docs/reasons.md. */
  readonly reason: AnswerCause | undefined;
  /** What to do next, for the front end to word (after `hint`, the layer's own words). */
  readonly next: NextStep | undefined;

  constructor(code: ErrorCode, message: string, options: { hint?: string; field?: string; reason?: AnswerCause; next?: NextStep; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.hint = options.hint;
    this.field = options.field;
    this.reason = options.reason;
    this.next = options.next;
  }

  get status(): number {
    return CODES[this.code].status;
  }

  get exitCode(): number {
    return CODES[this.code].exit;
  }
}

export function statusOf(code: ErrorCode): number {
  return CODES[code].status;
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}

/** The first non-empty line of an error's message: enough for one line on a terminal. */
export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split('\n').find((line) => line.trim() !== '') ?? text;
}
