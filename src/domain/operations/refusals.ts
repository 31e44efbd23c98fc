// What the gate's refusals on record say (docs/decisions.md): one refusal explained in words a partner can
// be told, with what would change the answer as a typed remedy (the CLI renders it as a command line), and
// the refusals of a window counted. Reads only; nothing here decides anything.
import type { Database } from '../../db/client.js';
import {
  decisionByRequestId,
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
import { GATE_REFUSAL_REASONS } from '../../reasons.js';

/** What an operator can do to change the answer, as a typed action (each front end says it its own way). */
export type Remedy =
  | { action: 'map_company'; partnerName: string; companyId: string }
  | { action: 'enable_partner'; partnerName: string }
  | { action: 'issue_keys'; partnerName: string }
  | { action: 'look_up_key_pair'; partnerName: string; keyPairId: string };

export interface Explanation {
  decision: DecisionRow;
  /** The rule that refused it, in words a partner can be told. */
  explanation: string;
  remedy: Remedy | null;
}

function at(date: Date | number): string {
  return new Date(date).toISOString();
}

/**
 * The refusal recorded for `requestId`, whichever instance answered it, explained. A request id with no
 * refusal on record is `not_found`, saying what that means.
 */
export async function explainRequest(db: Database, requestId: string): Promise<Explanation> {
  const decision = await decisionByRequestId(db.sql, validateRequestId(requestId.trim()));
  if (!decision) {
    throw new AppError(
      'not_found',
      `no refusal is on record for request ${requestId.trim().slice(0, 64)}: the gate accepted it, or it was answered before the gate ` +
        '(a malformed request, an unknown path), or it is older than the retention, or its instance has not written it yet (within seconds)',
      { field: 'request_id' },
    );
  }
  const { explanation, remedy } = await explain(db, decision);
  return { decision, explanation, remedy };
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
    default:
      return { explanation: `refused (${d.reason})`, remedy: null };
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
  /** Refusals not recorded under the cap, per key kind (`address`, `partner`, `overflow`); only the partner's with a partner. */
  unrecorded: { address: number; partner: number; overflow: number };
}

const MINUTE_MS = 60_000;

/** Refusals of a window counted by reason (and company or address), the latest ones, and what the cap held back. */
export async function refusalsReport(db: Database, options: RefusalsOptions): Promise<RefusalsReport> {
  if (options.reason !== undefined && !(GATE_REFUSAL_REASONS as readonly string[]).includes(options.reason)) {
    throw new AppError('invalid_argument', `no reason code '${options.reason.slice(0, 40)}' (docs/reasons.md lists them)`, { field: 'reason' });
  }
  const partnerId = options.partner === undefined ? undefined : (await findPartner(db.sql, options.partner)).id;
  const filter: DecisionFilter = {
    since: options.since,
    until: options.until,
    ...(partnerId !== undefined ? { partnerId } : {}),
    ...(options.reason !== undefined ? { reason: options.reason } : {}),
  };
  const [counts, latest, unrecorded] = await Promise.all([
    decisionCounts(db.sql, filter, options.by),
    latestDecisions(db.sql, filter, options.examples),
    unrecordedCounts(db.sql, {
      since: new Date(Math.floor(options.since.getTime() / MINUTE_MS) * MINUTE_MS),
      until: options.until,
      ...(partnerId !== undefined ? { partnerId } : {}),
    }),
  ]);
  return {
    partnerId: partnerId ?? null,
    since: options.since,
    until: options.until,
    counts,
    latest,
    unrecorded: { address: unrecorded.get('address') ?? 0, partner: unrecorded.get('partner') ?? 0, overflow: unrecorded.get('overflow') ?? 0 },
  };
}
