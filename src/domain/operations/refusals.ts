// What the gate's refusals on record say (docs/decisions.md): one refusal explained in words a partner can
// be told, with what would change the answer as a typed remedy (the CLI renders it as a command line), and
// the refusals of a window counted. Reads only; nothing here decides anything.
import type { Database } from '../../db/client.js';
import { timeOfRequestId } from '../../request-id.js';
import {
  decisionByRequestId,
  oldestDecisionAt,
  decisionCounts,
  latestDecisions,
  unrecordedCounts,
  type DecisionCount,
  type DecisionFilter,
  type DecisionGrouping,
  type DecisionRow,
} from '../../db/repositories/decisions.js';
import { testTokenLifetime } from '../../db/repositories/audit.js';
import { activeKeyPair, keyPairById } from '../../db/repositories/key-pairs.js';
import { partnerById, partnerGateRow } from '../../db/repositories/partners.js';
import { AppError } from '../../errors.js';
import { isValidCompanyId, validateRequestId } from '../rules/validation.js';
import { rulesFromColumn } from './networks.js';
import { findPartner } from './partners.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import { parseTokenId } from './tokens.js';
import { ANSWER_CAUSES, RECORD_CAUSES, RECORDED_CAUSE, type AnswerCause } from '../../reasons.js';
import { HELD_BY, type HeldBy } from '../runtime/decision-records.js';

/** What an operator can do to change the answer, as a typed action (each front end says it its own way). */
export type Remedy =
  | { action: 'map_company'; partnerName: string; companyId: string }
  | { action: 'enable_partner'; partnerName: string }
  | { action: 'issue_keys'; partnerName: string }
  | { action: 'look_up_key_pair'; partnerName: string; keyPairId: string };

/**
 * Who can change the answer: the partner's client (its request, its pace, its credentials), an operator
 * (with a command when `remedy` names one), the engine's owners, the database's.
 */
export type Actor = 'client' | 'operator' | 'engine_owners' | 'database_owners';

export interface Explanation {
  decision: DecisionRow;
  /** The rule that refused it, or what failed, in words a partner can be told. */
  explanation: string;
  /** Who can act on it: `operator` whenever there is a remedy; null for a success recorded in a window (nothing to mend). */
  actor: Actor | null;
  remedy: Remedy | null;
}

/** Who can act on each cause when no operator's command would change the answer. */
const ACTOR_OF: Record<AnswerCause, Actor> = {
  partner_unknown: 'client',
  partner_disabled: 'operator',
  pair_unknown: 'client',
  pair_revoked: 'client',
  pair_superseded: 'client',
  pair_expired: 'client',
  secret_mismatch: 'client',
  assertion_invalid: 'client',
  assertion_expired: 'client',
  assertion_audience: 'client',
  assertion_replayed: 'client',
  credential_kind_not_allowed: 'client',
  token_invalid: 'client',
  token_expired: 'client',
  tokens_revoked: 'client',
  address_not_allowed: 'operator',
  // With a remedy (map-company) an operator acts; without one the id is one no mapping accepts: the client's.
  company_not_mapped: 'client',
  token_missing: 'client',
  api_key_in_request: 'client',
  credentials_malformed: 'client',
  rate_limited: 'client',
  quota_exceeded: 'client',
  exchange_throttled: 'client',
  engine_error: 'engine_owners',
  engine_refused: 'client',
  engine_timeout: 'engine_owners',
  engine_unreachable: 'engine_owners',
  engine_not_configured: 'operator',
  database_unavailable: 'database_owners',
  stale_budget_spent: 'database_owners',
  signing_key_unavailable: 'operator',
  clock_skewed: 'operator',
  internal_error: 'operator',
  request_timeout: 'client',
  body_too_large: 'client',
  request_malformed: 'client',
  unsupported_media_type: 'client',
  expectation_failed: 'client',
  not_found: 'client',
  method_not_allowed: 'client',
};

/** Who acts on a recorded cause (an unknown one, from a newer server: the operator). */
function actorOf(cause: string, remedy: Remedy | null): Actor | null {
  if (cause === RECORDED_CAUSE) return null;
  return remedy !== null ? 'operator' : (ACTOR_OF[cause as AnswerCause] ?? 'operator');
}

function at(date: Date | number): string {
  return new Date(date).toISOString();
}

const MINUTE_MS = 60_000;
/** How long after its answer a record is written at the latest (a write each second, retried up to 5 s apart). */
const WRITTEN_WITHIN_MS = 10_000;

/**
 * Why nothing is on record for a request id, from the time it carries (UUIDv7): not written yet, older than
 * what is kept, answered in a minute where the cap held records back (with the counts), or a success.
 */
async function nothingOnRecord(db: Database, requestId: string): Promise<string> {
  const shown = requestId.slice(0, 64);
  const made = timeOfRequestId(requestId);
  if (made === null) {
    return `nothing is on record for request ${shown}, and its id carries no time (not an id of this version's servers): it was a success, or older than the retention, or not written yet`;
  }
  const now = db.clock.now();
  if (made > now - WRITTEN_WITHIN_MS) {
    return `nothing is on record for request ${shown} yet: it was answered at ${at(made)}, and servers write within ${WRITTEN_WITHIN_MS / 1000} s; try again`;
  }
  const oldest = await oldestDecisionAt(db.sql);
  if (oldest === null || made < oldest.getTime()) {
    return `nothing is on record for request ${shown}: it was answered at ${at(made)}, before ${oldest === null ? 'any record kept' : `the oldest record kept (${at(oldest)})`}; records are pruned past the retention (PUBLIC_API_DECISION_RETENTION)`;
  }
  const minute = Math.floor(made / MINUTE_MS) * MINUTE_MS;
  const held = await unrecordedCounts(db.sql, { since: new Date(minute), until: new Date(minute + MINUTE_MS) });
  const total = [...held.values()].reduce((sum, count) => sum + count, 0);
  if (total > 0) {
    const kinds = [...held].map(([cap, count]) => `${count} ${heldByWords(cap)}`).join(', ');
    return `nothing is on record for request ${shown}: it was answered at ${at(made)}, in a minute where the caps held back ${total} records (${kinds}); it may be one of them`;
  }
  return `nothing is on record for request ${shown}: it was answered at ${at(made)} and no cap held anything back that minute, so it was a success (successes are on record only inside a recording window)`;
}

/** Which cap held records back, in words. */
function heldByWords(cap: string): string {
  if (cap === 'overflow') return "beyond a server's buffer";
  if (cap === 'instance') return "over a server's total per minute";
  return `over a cap per ${cap.replace('_', ' ')}`;
}

/**
 * The answer recorded for `requestId`, whichever instance answered it, explained. A request id with nothing
 * on record is `not_found`, saying why from the time the id carries.
 */
export async function explainRequest(db: Database, requestId: string): Promise<Explanation> {
  const id = validateRequestId(requestId.trim());
  const decision = await decisionByRequestId(db.sql, id);
  if (!decision) throw new AppError('not_found', await nothingOnRecord(db, id), { field: 'request_id' });
  const { explanation, remedy } = await explain(db, decision);
  return { decision, explanation, actor: actorOf(decision.reason, remedy), remedy };
}

/** How long the refused token lived: its own lifetime where it is known (a test token's from its mint). */
async function tokenLifetime(db: Database, tokenId: string | null): Promise<string> {
  const parsed = tokenId === null ? null : parseTokenId(tokenId);
  if (parsed === null) return `tokens from the token endpoint live ${TOKEN_TTL_SECONDS / 60} minutes, test tokens as long as they were minted for`;
  const issued = `issued ${at(parsed.issuedAtMs)}`;
  if (parsed.keyPairId !== null) return `${issued}; tokens from the token endpoint live ${TOKEN_TTL_SECONDS / 60} minutes`;
  const seconds = await testTokenLifetime(db.sql, parsed.partnerId, tokenId!);
  return seconds === null ? `${issued}, a test token` : `${issued}, a test token minted to live ${seconds} s, until ${at(parsed.issuedAtMs - (parsed.issuedAtMs % 1000) + seconds * 1000)}`;
}

async function explain(db: Database, d: DecisionRow): Promise<{ explanation: string; remedy: Remedy | null }> {
  const partner = d.partnerId === null ? null : await partnerById(db.sql, d.partnerId);
  const who = partner ? `partner ${partner.name} (${partner.id})` : 'the partner';
  const pair = d.keyPairId === null ? null : await keyPairById(db.sql, d.keyPairId);
  const newKeys = async (): Promise<Remedy | null> =>
    partner && !(await activeKeyPair(db.sql, partner.id)) ? { action: 'issue_keys', partnerName: partner.name } : null;
  const useCurrent = 'the client must exchange the partner\'s current key pair';
  switch (d.reason) {
    case 'company_not_mapped':
      return {
        explanation: `company ${d.companyId ?? '(none)'} is not mapped to ${partner?.name ?? 'the partner'}: the partner may only ask for companies mapped to it`,
        // No mapping can change the answer for an id no mapping accepts (control characters, too long).
        remedy: partner && d.companyId !== null && isValidCompanyId(d.companyId) ? { action: 'map_company', partnerName: partner.name, companyId: d.companyId } : null,
      };
    case 'tokens_revoked': {
      const issued = d.tokenId === null ? null : parseTokenId(d.tokenId)?.issuedAtMs;
      const brake = partner ? (await partnerGateRow(db.sql, partner.id))?.tokensRevokedBefore : null;
      const when = issued == null ? 'the token was issued' : `token issued ${at(issued)}`;
      return { explanation: `${when} before the brake of ${brake == null ? 'its partner' : at(brake)}: the client must exchange again`, remedy: null };
    }
    case 'token_expired':
      return { explanation: `the token had expired (${await tokenLifetime(db, d.tokenId)}): the client must exchange again`, remedy: null };
    case 'token_invalid':
      return {
        explanation: 'the token is not one of ours (its signature, issuer or audience), or the Authorization header is not "Bearer <token>": the client must send a token from the token endpoint',
        remedy: null,
      };
    case 'token_missing':
      return { explanation: 'the request carried no bearer token: the client must exchange its keys at the token endpoint and send "Authorization: Bearer <token>"', remedy: null };
    case 'api_key_in_request':
      return { explanation: 'the request carried API keys (in its URL, a header or its body): keys go only to the token endpoint, data requests carry the bearer token', remedy: null };
    case 'credentials_malformed':
      return {
        explanation:
          'the token request held neither exactly access_key and secret_key (as strings, each once) nor a client assertion (client_assertion_type jwt-bearer and client_assertion; grant_type client_credentials in a form)',
        remedy: null,
      };
    case 'secret_mismatch':
      return { explanation: `the secret key presented is not the secret of key pair ${d.keyPairId ?? '?'}: ${useCurrent}`, remedy: null };
    case 'assertion_invalid':
      return {
        explanation: `the client assertion does not prove key pair ${d.keyPairId ?? '(none: it names no issuer, or is not a JWT)'}: its signature, its alg (the registered key's, ${pair?.publicKeyAlg ?? 'never none or HS*'}), its kid (${pair?.kid ?? 'the key\'s thumbprint'}), iss and sub (the access key), its jti, or its lifetime (exp at most 5 minutes after iat, iat not ahead of the server's clock by more than 30 s)`,
        remedy: null,
      };
    case 'assertion_expired':
      return { explanation: 'the client assertion was past its exp: the client must sign a fresh assertion for each exchange', remedy: null };
    case 'assertion_audience':
      return {
        explanation: "the client assertion's aud named neither the token endpoint's public URL (PUBLIC_API_TOKEN_URL) nor its issuer URL, or the server has none configured",
        remedy: null,
      };
    case 'assertion_replayed':
      return {
        explanation: 'the client assertion\'s jti had been accepted before and the assertion had not expired: a client signs a new jti for every exchange; a replay by someone else means the assertion was copied in transit or from a log',
        remedy: null,
      };
    case 'credential_kind_not_allowed':
      return {
        explanation: `${who} may exchange only ${partner?.credentialsPolicy === 'secret' ? 'shared secrets' : 'client assertions signed with a registered public key'} (set-credentials), and key pair ${d.keyPairId ?? '?'} is ${pair?.kind === 'public_key' ? 'a public-key pair' : 'a shared-secret pair'}`,
        remedy: null,
      };
    case 'pair_unknown':
      return {
        explanation: d.route === 'exchange' ? 'the access key matches no key pair issued here' : `the token names a key pair that is not ${who}'s`,
        remedy: null,
      };
    case 'pair_revoked':
      return { explanation: `key pair ${d.keyPairId} was revoked${pair?.revokedAt ? ` at ${at(pair.revokedAt)}` : ''}: it mints nothing and its tokens are refused; ${useCurrent}`, remedy: await newKeys() };
    case 'pair_superseded':
      return { explanation: `key pair ${d.keyPairId} was superseded${pair?.supersededAt ? ` at ${at(pair.supersededAt)}` : ''} by a rotation: ${useCurrent}`, remedy: await newKeys() };
    case 'pair_expired':
      return { explanation: `key pair ${d.keyPairId} expired${pair?.expiresAt ? ` at ${at(pair.expiresAt)}` : ''}: ${useCurrent}`, remedy: await newKeys() };
    case 'partner_unknown':
      return { explanation: 'the credential names a partner that does not exist here', remedy: null };
    case 'partner_disabled':
      return {
        explanation: `${who} is ${partner?.status === 'disabled' ? '' : 'was '}disabled: its keys mint nothing and its tokens are refused`,
        remedy: partner?.status === 'disabled' ? { action: 'enable_partner', partnerName: partner.name } : null,
      };
    case 'address_not_allowed': {
      const rules = partner ? rulesFromColumn((await partnerGateRow(db.sql, partner.id))?.allowFrom ?? null) : [];
      // Never "allow the caller": a genuine credential presented from outside the rules may be a leaked one.
      return {
        explanation: `the client address ${d.clientAddress} is outside ${who}'s network rules (${rules.length > 0 ? rules.join(', ') : 'none now'}): if the address is the partner's own, its network rules must include it; if not, the credential was used from elsewhere and may be out (look its key pair up before changing anything)`,
        remedy: partner && d.keyPairId !== null ? { action: 'look_up_key_pair', partnerName: partner.name, keyPairId: d.keyPairId } : null,
      };
    }
    case 'rate_limited':
      return { explanation: `${who} was over its rate limit: the client must slow down and retry after the Retry-After it was sent`, remedy: null };
    case 'quota_exceeded':
      return { explanation: `${who} had used up its daily quota: it resets at 00:00 UTC`, remedy: null };
    case 'exchange_throttled':
      return {
        explanation: 'too many token requests from this address or for this access key: the client should keep its token for its lifetime instead of exchanging for every call',
        remedy: null,
      };
    case RECORDED_CAUSE:
      return {
        explanation: `a success (status ${d.status}), on record because a recording window of ${who} was open: ${d.method ?? '?'} ${d.path ?? '?'}${d.companyId === null ? '' : ` for company ${d.companyId}`} from ${d.clientAddress}${d.keyPairId === null ? '' : `, key pair ${d.keyPairId}`}${d.tokenId === null ? '' : `, token ${d.tokenId}`}${engineFacts(d)}`,
        remedy: null,
      };
    default:
      return { explanation: serverCause(d), remedy: null };
  }
}

/** The engine's part of a record: its status, its time and the trace id to find it in the engine's logs. */
function engineFacts(d: DecisionRow): string {
  const parts = [
    ...(d.engineStatus !== null ? [`status ${d.engineStatus}`] : []),
    ...(d.engineMs !== null ? [`after ${d.engineMs} ms`] : []),
    ...(d.traceId !== null ? [`trace id ${d.traceId}`] : []),
  ];
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}

/** An answer the server gave of its own (docs/reasons.md, the second table): what failed, and whose it is to mend. */
function serverCause(d: DecisionRow): string {
  switch (d.reason) {
    case 'engine_error':
      return `the recommendation engine failed the request${engineFacts(d)}: the engine's owners can find it by its trace id or request id; the client may retry later`;
    case 'engine_refused':
      return `the recommendation engine refused the request as sent${engineFacts(d)}: the client must change the request`;
    case 'engine_timeout':
      return `the recommendation engine did not answer within the upstream timeout (PUBLIC_API_UPSTREAM_TIMEOUT_MS)${engineFacts(d)}: the engine's owners must look at its latency`;
    case 'engine_unreachable':
      return `the recommendation engine could not be reached (connection refused, reset or closed)${engineFacts(d)}: the engine's owners must bring it back`;
    case 'engine_not_configured':
      return 'no recommendation engine is configured for this server (PUBLIC_API_UPSTREAM_URL): an operator must configure one';
    case 'database_unavailable':
      return 'the database did not answer in time: the gate could not decide and answered 503; the database\'s owners must restore it (the client may retry)';
    case 'stale_budget_spent':
      return 'the database did not answer for longer than the staleness budget (PUBLIC_API_STALE_BUDGET) allows serving from held state: the database\'s owners must restore it';
    case 'signing_key_unavailable':
      return 'the server could not read its signing keys: an operator must check its signing-key file or database rows';
    case 'clock_skewed':
      return "the server's clock is off the database's: it issues no token until an operator corrects it";
    case 'internal_error':
      return 'the server failed the request: an operator finds why in its log by the request id';
    case 'request_timeout':
      return 'the client did not send its whole request within the request timeout (PUBLIC_API_REQUEST_TIMEOUT_MS)';
    case 'body_too_large':
      return 'the request body is larger than the server takes (PUBLIC_API_BODY_LIMIT_BYTES): the client must send less';
    case 'request_malformed':
      return `the request was malformed (${d.method ?? '?'} ${d.path ?? '?'}): the client must send a request the API describes`;
    case 'unsupported_media_type':
      return 'the request body was not application/json';
    case 'expectation_failed':
      return 'the request carried an Expect header other than 100-continue';
    case 'not_found':
      return `no such resource: ${d.method ?? '?'} ${d.path ?? '?'}`;
    case 'method_not_allowed':
      return `method ${d.method ?? '?'} is not served on ${d.path ?? '?'}`;
    default:
      return `not a success (${d.reason})`;
  }
}

export interface RefusalsOptions {
  /** A partner id, name, access key or key-pair id; every partner when absent. */
  partner?: string;
  since: Date;
  until: Date;
  reason?: string;
  by?: DecisionGrouping;
  /** How many of the latest refusals to list. */
  examples: number;
}

export interface RefusalsReport {
  partnerId: string | null;
  since: Date;
  until: Date;
  counts: DecisionCount[];
  latest: DecisionRow[];
  /** Answers recorded in the window (of the filter: the partner's, a reason's). */
  recorded: number;
  /**
   * Answers not recorded, per cap that held them back; with a partner, every one of the partner's, whichever
   * cap held it (recorded + held back = every answer it had). Not filtered by reason: the counters have none.
   */
  unrecorded: Record<HeldBy, number>;
}


/** What the caps held back (counted, not recorded) from the minute `since` falls in to `until`, by cap. */
async function heldBackIn(db: Database, since: Date, until: Date, partnerId: string | undefined): Promise<Record<HeldBy, number>> {
  const held = await unrecordedCounts(db.sql, {
    since: new Date(Math.floor(since.getTime() / MINUTE_MS) * MINUTE_MS),
    until,
    ...(partnerId !== undefined ? { partnerId } : {}),
  });
  return Object.fromEntries(HELD_BY.map((cap) => [cap, held.get(cap) ?? 0])) as Record<HeldBy, number>;
}

/** Refusals of a window counted by reason (and company or address), the latest ones, and what the cap held back. */
export async function refusalsReport(db: Database, options: RefusalsOptions): Promise<RefusalsReport> {
  if (options.reason !== undefined && !(ANSWER_CAUSES as readonly string[]).includes(options.reason)) {
    throw new AppError('invalid_argument', `no reason code '${options.reason.slice(0, 40)}' (docs/reasons.md lists them)`, { field: 'reason' });
  }
  const partnerId = options.partner === undefined ? undefined : (await findPartner(db.sql, options.partner)).id;
  const filter: DecisionFilter = {
    since: options.since,
    until: options.until,
    // Not the successes a recording window put on record: they are no refusals.
    statusFrom: 400,
    ...(partnerId !== undefined ? { partnerId } : {}),
    ...(options.reason !== undefined ? { reason: options.reason } : {}),
  };
  const [counts, latest, unrecorded] = await Promise.all([
    decisionCounts(db.sql, filter, options.by),
    latestDecisions(db.sql, filter, options.examples),
    heldBackIn(db, options.since, options.until, partnerId),
  ]);
  return {
    partnerId: partnerId ?? null,
    since: options.since,
    until: options.until,
    counts,
    latest,
    recorded: counts.reduce((sum, count) => sum + count.refusals, 0),
    unrecorded,
  };
}

export interface RequestsOptions {
  /** A partner id, name, access key or key-pair id; every partner when absent. */
  partner?: string;
  since: Date;
  until: Date;
  /** Statuses from and to (inclusive): a class (5xx) or one status. */
  status?: { from: number; to: number };
  cause?: string;
  company?: string;
  address?: string;
  limit: number;
}

export interface RequestsReport {
  partnerId: string | null;
  since: Date;
  until: Date;
  /** The recorded answers, newest first. */
  requests: DecisionRow[];
  /** What the caps held back in the window, per cap (the partner's with a partner): not filtered further. */
  unrecorded: Record<HeldBy, number>;
}

/** The recorded answers of a window and filter, newest first, with what the caps held back. */
export async function requestsReport(db: Database, options: RequestsOptions): Promise<RequestsReport> {
  if (options.cause !== undefined && !(RECORD_CAUSES as readonly string[]).includes(options.cause)) {
    throw new AppError('invalid_argument', `no cause '${options.cause.slice(0, 40)}' (docs/reasons.md lists them)`, { field: 'cause' });
  }
  const partnerId = options.partner === undefined ? undefined : (await findPartner(db.sql, options.partner)).id;
  const filter: DecisionFilter = {
    since: options.since,
    until: options.until,
    ...(partnerId !== undefined ? { partnerId } : {}),
    ...(options.cause !== undefined ? { reason: options.cause } : {}),
    ...(options.status !== undefined ? { statusFrom: options.status.from, statusTo: options.status.to } : {}),
    ...(options.company !== undefined ? { companyId: options.company } : {}),
    ...(options.address !== undefined ? { clientAddress: options.address } : {}),
  };
  const [requests, unrecorded] = await Promise.all([
    latestDecisions(db.sql, filter, options.limit),
    heldBackIn(db, options.since, options.until, partnerId),
  ]);
  return {
    partnerId: partnerId ?? null,
    since: options.since,
    until: options.until,
    requests,
    unrecorded,
  };
}
