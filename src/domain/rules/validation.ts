import { AppError } from '../../errors.js';

// C0 and C1 control characters, DEL, and the Unicode line/paragraph separators and bidi controls that
// make a name print differently from what it is.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

const PARTNER_NAME_MAX = 100;
export const COMPANY_ID_MAX = 128;

export function validatePartnerName(value: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new AppError('invalid_argument', 'partner name must not be empty', { field: 'name' });
  }
  if (value !== value.trim()) {
    throw new AppError('invalid_argument', 'partner name must not start or end with white space', { field: 'name' });
  }
  if ([...value].length > PARTNER_NAME_MAX) {
    throw new AppError('invalid_argument', `partner name is longer than ${PARTNER_NAME_MAX} characters`, { field: 'name' });
  }
  if (CONTROL.test(value)) {
    throw new AppError('invalid_argument', 'partner name contains a control character', { field: 'name' });
  }
  const reserved = /^(ptn_|kp_|pctl_)/i.exec(value);
  if (reserved) {
    throw new AppError(
      'invalid_argument',
      `partner name must not start with '${reserved[1]}' (partner ids, key-pair ids and keys start with ptn_, kp_ and pctl_)`,
      { field: 'name' },
    );
  }
  return value.normalize('NFC');
}

/** Company ids are the engines' identifiers: visible ASCII, no spaces, 1 to 128 characters. */
export function isValidCompanyId(value: unknown): value is string {
  return typeof value === 'string' && /^[\x21-\x7e]{1,128}$/.test(value);
}

export function validateCompanyId(value: string): string {
  if (!isValidCompanyId(value)) {
    const text: string = String(value ?? '');
    const problem =
      text === ''
        ? 'must not be empty'
        : text.length > COMPANY_ID_MAX
          ? `is longer than ${COMPANY_ID_MAX} characters`
          : 'may hold only visible ASCII characters (no spaces or control characters)';
    throw new AppError('invalid_argument', `company id ${problem}`, { field: 'company_id' });
  }
  return value;
}

const DURATION_UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `90d`, `12h`, `30m`, `45s` -> milliseconds; `flag` names the option in the message. */
export function parseDuration(value: string, flag: string, options: { allowZero?: boolean } = {}): number {
  const match = /^(\d{1,6})([smhd])$/.exec(value);
  const ms = match ? Number(match[1]) * DURATION_UNITS[match[2]!]! : 0;
  if (!match || (ms <= 0 && !options.allowZero)) {
    const what = options.allowZero ? 'a duration such as 15m, 1h or 0s' : 'a positive duration such as 90d, 12h, 30m or 45s';
    throw new AppError('invalid_argument', `${flag} must be ${what}, got '${value.slice(0, 40)}'`);
  }
  return ms;
}

/** Milliseconds -> the shortest exact `90d`, `12h`, `30m`, `45s` (whole seconds; `0s`). */
export function formatDuration(ms: number): string {
  const seconds = Math.round(ms / 1000);
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60]] as const) {
    if (seconds > 0 && seconds % size === 0) return `${seconds / size}${unit}`;
  }
  return `${seconds}s`;
}

/** An ISO time (`2026-11-22T03:00:00Z`, `2026-11-22`) or a duration back from now (`2h`). */
export function parseTimeOrDuration(value: string, flag: string, now: number): Date {
  if (/^\d{1,6}[smhd]$/.test(value)) return new Date(now - parseDuration(value, flag));
  const date = /^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) ? new Date(value) : null;
  if (!date || Number.isNaN(date.getTime())) {
    throw new AppError('invalid_argument', `${flag} must be an ISO time (2026-11-22T03:00:00Z) or a duration back from now (2h, 7d), got '${value.slice(0, 40)}'`);
  }
  return date;
}

// A request id as the server hands them out (error.request_id, X-Request-Id): a UUID.
const REQUEST_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A request id to look up; anything else is a usage error, never a search that finds nothing. */
export function validateRequestId(value: string): string {
  if (!REQUEST_ID.test(value)) {
    throw new AppError('invalid_argument', 'the request id must be a UUID, as error.request_id and the X-Request-Id header give it');
  }
  return value.toLowerCase();
}
