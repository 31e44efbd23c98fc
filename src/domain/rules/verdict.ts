// Whether a credential is accepted now: ONE decision for the gate (its cached path and its loading path),
// the token exchange and `lookup`. Each caller only gathers the snapshot (from memory, from the database);
// the rules are here, pure, against an instant read from the caller's clock. A refusal is a stable reason
// code (docs/reasons.md), never words: each front end says it its own way.
import { AppError } from '../../errors.js';
import type { AssertionFault, RefusalReason } from '../../reasons.js';
import { keyPairState, type StoredPairState } from './key-pair-state.js';

/** What the rules need about a partner. */
export interface PartnerSnapshot {
  status: string;
  /** The brake (ms): tokens issued before it are refused (revoke-tokens, revoke-keys, rotate --revoke-issued-tokens). */
  tokensRevokedBefore: number | null;
  /** The partner's network rules as a matcher; null: any address. */
  allows: ((address: string) => boolean) | null;
  /** The partner's open recording windows (docs/decisions.md): a company (null: any) and the end (ms). */
  recording?: ReadonlyArray<{ readonly companyId: string | null; readonly endsAt: number }>;
}

/** What the rules need about a key pair. */
export interface PairSnapshot extends StoredPairState {
  partnerId: string;
}

/** What the rules need about a verified token (TokenClaims has it all). */
interface TokenSnapshot {
  partnerId: string;
  /** Null for an operator's test token. */
  keyPairId: string | null;
  /** Expiry, seconds since the epoch. */
  exp: number;
  issuedAtMs: number;
}

/**
 * The client's address; `null` when the caller has none (`lookup`): the network rules are then not
 * checked, and the caller says the answer depends on them.
 */
type ClientAddress = string | null;

function addressRefused(partner: PartnerSnapshot, client: ClientAddress): boolean {
  return client !== null && partner.allows !== null && !partner.allows(client);
}

/**
 * A token on a data request, its signature already verified. Null: accepted. Refused: expired, its partner
 * unknown or disabled, issued before the partner's brake, minted by a pair that is unknown, of another
 * partner or revoked (superseded and expired pairs' tokens live out their lifetime), or from an address
 * outside the partner's network rules. `partner` null: no such partner; `pair` null: no such pair (ignored
 * for a test token). Allocation-free: the gate's cached path calls it per request.
 */
export function tokenRefusal(
  token: TokenSnapshot,
  partner: PartnerSnapshot | null,
  pair: PairSnapshot | null,
  client: ClientAddress,
  now: number,
): RefusalReason | null {
  if (token.exp * 1000 <= now) return 'token_expired';
  if (partner === null) return 'partner_unknown';
  if (partner.status !== 'active') return 'partner_disabled';
  if (partner.tokensRevokedBefore !== null && token.issuedAtMs < partner.tokensRevokedBefore) return 'tokens_revoked';
  if (token.keyPairId !== null) {
    if (pair === null || pair.partnerId !== token.partnerId) return 'pair_unknown';
    if (pair.status === 'revoked') return 'pair_revoked';
  }
  if (addressRefused(partner, client)) return 'address_not_allowed';
  return null;
}

/** Which kinds of key pair a partner's keys may exchange with (`set-credentials --allow`). */
export const CREDENTIALS_POLICIES = ['secret', 'public-key', 'both'] as const;
export type CredentialsPolicy = (typeof CREDENTIALS_POLICIES)[number];

/** Whether a partner's policy lets a pair of this kind (`secret`, `public_key`) exchange. */
export function kindAllowed(policy: string, kind: string): boolean {
  if (policy === 'both') return true;
  return policy === 'secret' ? kind === 'secret' : kind === 'public_key';
}

/**
 * What the presented credential proved: true (the pair's secret, or an assertion its key signed and whose
 * claims hold), false (a wrong secret, or a secret for a pair that has none), an assertion's fault, or null
 * (nothing presented: `lookup` of an access key, a pair id or a kid).
 */
export type Proof = boolean | AssertionFault | null;

/**
 * A key pair presented at the token endpoint, with its secret or a client assertion. Null: it mints a token
 * now. The network rules come first (the answer says nothing of the credential), then the credential
 * (`proof`), the pair's state (active, or retiring within its overlap), its partner, and the partner's
 * credentials policy (the pair's kind). The same rules for both kinds of pair.
 */
export function exchangeRefusal(
  pair: (PairSnapshot & { kind: string }) | null,
  partner: (PartnerSnapshot & { credentialsPolicy: string }) | null,
  proof: Proof,
  client: ClientAddress,
  now: number,
): RefusalReason | null {
  if (pair === null) return 'pair_unknown';
  if (partner !== null && addressRefused(partner, client)) return 'address_not_allowed';
  if (proof === false) return 'secret_mismatch';
  if (typeof proof === 'string') return proof;
  const state = keyPairState(pair, now);
  if (state === 'revoked') return 'pair_revoked';
  if (state === 'expired') return 'pair_expired';
  if (state === 'superseded') return 'pair_superseded';
  if (partner === null) return 'partner_unknown';
  if (partner.status !== 'active') return 'partner_disabled';
  if (!kindAllowed(partner.credentialsPolicy, pair.kind)) return 'credential_kind_not_allowed';
  return null;
}

/**
 * The company part of a data request, for a token already accepted: the company must be mapped to the
 * token's partner (`mapped`). An id that is not a company id is the same answer as an unmapped one.
 */
export function companyRefusal(validCompanyId: boolean, mapped: boolean): RefusalReason | null {
  return validCompanyId && mapped ? null : 'company_not_mapped';
}

/**
 * The error a refusal is thrown as, with its reason code: the codes, statuses and messages the API has
 * always answered. At the token endpoint every refusal but the address looks the same (it tells nothing of
 * which part was wrong); the address refusal never names the rules; on a data request an unmapped company
 * is 404, as one that does not exist. The reason is for records and support, never for the answer's body.
 */
export function refusalError(reason: RefusalReason, at: 'exchange' | 'gate'): AppError {
  if (reason === 'address_not_allowed') return new AppError('address_not_allowed', 'this client address is not allowed for the partner', { reason });
  if (at === 'exchange') return new AppError('invalid_credentials', 'the access key and secret key are not valid', { reason });
  if (reason === 'company_not_mapped') return new AppError('not_found', 'no such company', { reason });
  if (reason === 'token_expired') return new AppError('unauthorized', 'the token has expired', { reason });
  return new AppError('unauthorized', 'the token is no longer accepted', { reason });
}
