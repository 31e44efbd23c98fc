import type { AppError, ErrorCode, NextStep } from '../errors.js';

// The domain names what went wrong and the input it concerns (`field`); the CLI says which flag that is and
// what to type next. (The HTTP API has its own words.)
const NEXT_STEP: Partial<Record<ErrorCode, string>> = {
  partner_not_found: "see 'partnerctl list-partners'",
  partner_exists: 'add --if-not-exists to reuse it',
  webhook_exists: "add --if-not-exists to reuse it, or 'partnerctl webhooks remove' it first",
  active_key_pair_exists: "use 'partnerctl rotate-keys' to replace it",
  no_active_key_pair: "use 'partnerctl issue-keys' to issue one",
  partner_disabled: "'partnerctl enable-partner' first",
  schema_out_of_date: "run 'partnerctl db migrate' once as the database's owner",
  database_unavailable: 'run again with --debug to see the database error',
  audit_chain_broken: "'partnerctl audit' shows them; once removed, 'partnerctl audit verify' checks the chain",
};

/** The CLI's words for a next step the layers below name as a token. */
const NEXT_STEP_WORDS: Record<NextStep, string> = {
  check_database_url: 'check DATABASE_URL / --database-url (or the context in use), and that the database server is running',
  migrate: "run 'partnerctl db migrate' once as the database's owner",
  migrate_when_idle: "stop the servers using it, run 'partnerctl db migrate', then start them again",
  migration_status: "see 'partnerctl db status' for the state of the history",
  migrate_after_renames: "then run 'partnerctl db migrate' again (there is no rename command)",
  check_commit_outcome: "before running it again, see whether it did: 'partnerctl audit --limit 5' lists the last changes recorded",
};

/** Where to look next for an error about this input: follows the domain's own hint (a "did you mean"). */
const NEXT_STEP_OF_FIELD: Record<string, string> = {
  partner: "see 'partnerctl list-partners'",
  secret_key: "use 'partnerctl lookup' on it",
  declared_public_key: "rotate to the declared key first ('partnerctl rotate-keys <partner> --public-key FILE'), then apply again",
  webhook: "see 'partnerctl webhooks list'",
  head: "the hash 'partnerctl audit head' printed",
  request_id: "'partnerctl refusals' lists the refusals on record with their request ids",
  token_id: "run 'partnerctl exposure' on the token's key pair or its partner instead",
  change_id: "the change id is the number the not_confirmed hint names ('partnerctl receipt N'), change_id in the command's --json",
  signing_key_file:
    "restore the file from a backup (every serve instance and the CLI must share it); if it is truly lost, 'partnerctl signing-key rotate --new-file' starts a new one",
};

const FLAG_OF: Record<string, string> = {
  name: '--name <name>',
  company_id: '--company <company_id>',
  rate: '--rate <n>/<s|m|h>',
  burst: '--burst <n>',
  daily_quota: '--daily-quota <n>',
  clear: '--clear',
  key_pair: '--key-pair <kp_id>',
  allow: '--allow <cidr>',
  url: '--url <https://…> (http:// only with --insecure)',
  reason: '--reason <code> (docs/reasons.md lists them)',
  cause: '--cause <code> (docs/reasons.md lists them)',
  public_key: '--public-key <file|-> (a PEM SPKI or a JWK: Ed25519, EC P-256, or RSA of at least 2048 bits)',
};

/** The flag that gives each field a domain message starts with. */
const FLAG_NAMED: Record<string, string> = {
  action: '--action',
  after_switch: '--after-switch',
  cursor: '--cursor',
  description: '--description',
  events: '--events',
  for: '--for',
  head: '--head',
  issued_before: '--issued-before',
  limit: '--limit',
  overlap: '--overlap',
  principal: '--principal',
  ttl: '--ttl',
  url: '--url',
  wait: '--wait',
};

/**
 * The error's message in the CLI's words: a domain message about a field opens with the field's name
 * ("limit must be…", "events: …"), which the CLI turns into the flag that gives it ("--limit must be…").
 */
export function messageFor(error: AppError): string {
  const { field, message } = error;
  const flag = field === undefined ? undefined : FLAG_NAMED[field];
  const opensWithField = flag !== undefined && message.startsWith(field!) && /^[ :]/.test(message.slice(field!.length));
  return opensWithField ? `${flag}${message.slice(field!.length)}` : message;
}

export function hintFor(error: AppError): string | undefined {
  if (error.next !== undefined) return error.hint ? `${error.hint}; ${NEXT_STEP_WORDS[error.next]}` : NEXT_STEP_WORDS[error.next];
  const next = error.field === undefined ? (error.code === 'audit_chain_broken' ? NEXT_STEP[error.code] : undefined) : NEXT_STEP_OF_FIELD[error.field];
  if (error.hint) return next ? `${error.hint} ${next}` : error.hint;
  if (next) return next;
  // What to do about this kind of error comes before how to spell the flag it concerns.
  return NEXT_STEP[error.code] ?? (error.field ? FLAG_OF[error.field] : undefined);
}
