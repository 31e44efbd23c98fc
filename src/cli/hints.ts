import type { AppError, ErrorCode } from '../errors.js';

// The domain names what went wrong; the CLI says what to type next. (The HTTP API has its own words.)
const NEXT_STEP: Partial<Record<ErrorCode, string>> = {
  partner_not_found: "see 'partnerctl list-partners'",
  partner_exists: 'add --if-not-exists to reuse it',
  webhook_exists: "add --if-not-exists to reuse it, or 'partnerctl webhooks remove' it first",
  active_key_pair_exists: "use 'partnerctl rotate-keys' to replace it",
  no_active_key_pair: "use 'partnerctl issue-keys' to issue one",
  partner_disabled: "'partnerctl enable-partner' first",
};

const FLAG_OF: Record<string, string> = {
  name: '--name <name>',
  company_id: '--company <company_id>',
  rate: '--rate <n>/<s|m|h>',
  burst: '--burst <n>',
  daily_quota: '--daily-quota <n>',
  clear: '--clear',
  key_pair: '--key-pair <kp_id>',
};

export function hintFor(error: AppError): string | undefined {
  if (error.hint) return error.hint;
  if (error.field && FLAG_OF[error.field]) return FLAG_OF[error.field];
  return NEXT_STEP[error.code];
}
