import { compactVerify, decodeJwt, decodeProtectedHeader } from 'jose';
import type { Database } from '../../db/client.js';
import { testTokenEventByJti } from '../../db/repositories/audit.js';
import { keyPairByAccessKey, keyPairById, keyPairByKid, secretHashOf, type KeyPairRow } from '../../db/repositories/key-pairs.js';
import { isPrivateKeyPem, parsePublicKey, publicKeyOfPrivatePem } from '../rules/public-keys.js';
import { partnerById, partnerGateRow, type PartnerRow } from '../../db/repositories/partners.js';
import { AppError } from '../../errors.js';
import { masked } from '../../text.js';
import { ACCESS_KEY_PREFIX, KEY_PAIR_ID_PATTERN, parseKey, PARTNER_ID_PATTERN, SECRET_KEY_PREFIX, unwrapPasted } from '../rules/identifiers.js';
import { keyPairStanding, tokensLiveUntil, type KeyPairState } from '../rules/key-pair-state.js';
import { rulesFromColumn } from './networks.js';
import { printable } from './partners.js';
import { verifySecret } from '../rules/secrets.js';
import { SIGNING_ALGORITHM, type SigningKeys } from './signing-keys.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import { issuedAtMsOf, parseTokenId, TOKEN_AUDIENCE, TOKEN_ISSUER } from './tokens.js';
import type { RefusalReason } from '../../reasons.js';
import { exchangeRefusal, tokenRefusal } from '../rules/verdict.js';

export type LookupKind = 'access_key' | 'secret_key' | 'key_pair_id' | 'token' | 'token_id' | 'kid' | 'public_key' | 'private_key';

export interface TokenFacts {
  jti: string | null;
  kid: string | null;
  issuedAt: Date | null;
  expiresAt: Date | null;
  test: boolean;
  /** The payload as decoded (never trusted unless `genuine`). */
  claims: Record<string, unknown>;
  /** False for token ids issued before they named their partner. */
  traceable: boolean;
}

/**
 * What contains a leak, as a typed action on its target (each front end says it its own way: the CLI as a
 * command line, the secret-scanning receiver by doing it): `rotate_keys` a new pair now, and with
 * `revokeIssuedTokens` every token of the partner refused; `revoke_keys` exactly that pair (it mints
 * nothing more and its tokens are refused); `revoke_tokens` every token of the partner issued before
 * `issuedBefore` (the lookup's now): named, so that doing it again moves nothing.
 */
export type Containment =
  | { action: 'rotate_keys'; partnerId: string; keyPairId: string; revokeIssuedTokens: boolean }
  | { action: 'revoke_keys'; partnerId: string; keyPairId: string }
  | { action: 'revoke_tokens'; partnerId: string; issuedBefore: Date };

/** Why a lookup found nothing or could not trace a value, for the front end's next step (`AppError.field`). */
const LOOKUP_FIELDS = {
  /** The value is a partner id: the partner itself is shown elsewhere. */
  partnerId: 'partner_id',
  /** A secret of the old format: only its access key traces it. */
  accessKey: 'access_key',
  /** A token id of the old format: only the token itself, or containment by partner. */
  token: 'token',
} as const;

export interface LookupResult {
  kind: LookupKind;
  partner: PartnerRow | null;
  /** The pair's stored columns (its state now is `pairState`). */
  pair: KeyPairRow | null;
  /** The pair's state now (active, retiring, superseded, revoked, expired); null without a pair. */
  pairState: KeyPairState | null;
  /** The pair's state (for a key, a pair id) or the token's (active, expired, revoked, forged). */
  status: string;
  /** A secret matches its stored hash / a token's signature verifies; null when it cannot be told (key ids, token ids). */
  genuine: boolean | null;
  /** Would be accepted now (the verdict, verdict.ts): the pair mints (with its secret) / the server accepts the token. */
  accepted: boolean;
  /** The reason code of a refusal (docs/reasons.md); null when accepted. */
  reason: RefusalReason | null;
  /**
   * The partner's network rules when it has some: `accepted` then holds only from an address they allow
   * (lookup has no client address to check). Null: any address.
   */
  network: string[] | null;
  /** Until when it stays accepted unless contained (a token's expiry, a pair's expiry), null for no end or not accepted. */
  acceptedUntil: Date | null;
  token: TokenFacts | null;
  /** What it means, in one sentence. */
  note: string;
  /**
   * What contains the leak; null when there is nothing of ours to contain (a forged token, a wrong secret, a
   * pair already revoked, a token already refused or expired).
   */
  contain: Containment | null;
}

const JWT_SHAPE = /^[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * What a leaked value is and whose: an access key, a secret key (traced by the pair id it carries, then
 * confirmed against the argon2 hash), a key-pair id, a JWT (valid, expired or forged) or a token id.
 * Malformed values (a wrong checksum included) are `invalid_argument`; values that match nothing are
 * `not_found`. Reads only; `keys` is opened by the caller when the value is a token.
 */
export async function lookup(db: Database, value: string, openKeys: () => Promise<SigningKeys | null>): Promise<LookupResult> {
  // A key (PEM or JWK) is read as it is: its public half names the pair (issue 39).
  if (value.includes('-----BEGIN') || value.trim().startsWith('{')) return lookupKeyMaterial(db, value);
  // A value pasted with its quotes, `SECRET=`, `Bearer ` or a trailing comma is the value itself.
  const text = unwrapPasted(value);
  if (text.startsWith(ACCESS_KEY_PREFIX) || text.startsWith(SECRET_KEY_PREFIX)) return lookupKey(db, text);
  if (KEY_PAIR_ID_PATTERN.test(text)) {
    const pair = await keyPairById(db.sql, text);
    if (!pair) throw notFound(`no key pair '${text}'`);
    return pairResult(db, 'key_pair_id', pair, null);
  }
  if (PARTNER_ID_PATTERN.test(text)) {
    throw new AppError('invalid_argument', `'${text}' is a partner id, not a key or a token`, { field: LOOKUP_FIELDS.partnerId });
  }
  if (JWT_SHAPE.test(text)) return lookupToken(db, text, await openKeys());
  if (KID_SHAPE.test(text)) {
    const pair = await keyPairByKid(db.sql, text);
    if (pair) return pairResult(db, 'kid', pair, null);
  }
  const parsed = parseTokenId(text);
  if (parsed) return lookupTokenId(db, text, parsed);
  if (UUID.test(text)) return lookupOldTokenId(db, text);
  throw new AppError(
    'invalid_argument',
    // Whatever it is, it may be a credential: never more than a masked prefix of it in a message.
    `${masked(text)} is not an access key (pctl_ak_…), a secret key (pctl_sk_…), a key-pair id (kp_…), a token (JWT), a token id, a registered kid or a key (PEM, JWK)`,
  );
}

/** An RFC 7638 SHA-256 thumbprint: 43 base64url characters. */
const KID_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/**
 * A public key (PEM SPKI or JWK) or a private key (PEM): the pair registered with its public half. A private
 * key is used only to derive that half, in memory; it is neither kept nor returned, and no message quotes it.
 * A private key that matches is a leak of the pair (genuine); a public key is not a secret (genuine: null).
 */
async function lookupKeyMaterial(db: Database, text: string): Promise<LookupResult> {
  if (isPrivateKeyPem(text)) {
    const derived = await publicKeyOfPrivatePem(text);
    if (!derived) throw new AppError('invalid_argument', 'the PEM block is not a private key this tool reads (PKCS#8, SEC1 or PKCS#1)');
    const pair = await keyPairByKid(db.sql, derived.kid);
    if (!pair) throw notFound(`no key pair is registered with this private key's public half (kid ${derived.kid})`);
    return pairResult(db, 'private_key', pair, true);
  }
  const { kid } = await parsePublicKey(text);
  const pair = await keyPairByKid(db.sql, kid);
  if (!pair) throw notFound(`no key pair is registered with this public key (kid ${kid})`);
  return pairResult(db, 'public_key', pair, null);
}

function notFound(message: string, field?: string): AppError {
  return new AppError('not_found', message, field ? { field } : {});
}

async function lookupKey(db: Database, text: string): Promise<LookupResult> {
  const parsed = parseKey(text);
  if (parsed.kind === 'access_key') {
    const pair = await keyPairByAccessKey(db.sql, text);
    if (!pair) throw notFound('no key pair has this access key');
    return pairResult(db, 'access_key', pair, null);
  }
  if (parsed.legacy) {
    throw notFound(
      'this secret key has the format issued before secrets named their key pair: it cannot be traced from the secret alone (only its hash is stored)',
      LOOKUP_FIELDS.accessKey,
    );
  }
  const pair = await keyPairById(db.sql, parsed.keyPairId);
  if (!pair) throw notFound(`no key pair '${parsed.keyPairId}' (the pair this secret names)`);
  const hash = await secretHashOf(db.sql, pair.id);
  const genuine = hash !== null && (await verifySecret(hash, text));
  return pairResult(db, 'secret_key', pair, genuine);
}

async function pairResult(db: Database, kind: LookupKind, pair: KeyPairRow, genuine: boolean | null): Promise<LookupResult> {
  const now = db.clock.now();
  const [partner, gate] = await Promise.all([partnerById(db.sql, pair.partnerId), partnerGateRow(db.sql, pair.partnerId)]);
  const standing = keyPairStanding(pair, now);
  const status = standing.state;
  // No client address here: the network rules are named, not checked.
  const reason = exchangeRefusal(pair, gate && { ...gate, allows: null }, genuine, null, now);
  const accepted = reason === null;
  const network = networkOf(gate);
  const liveUntil = status === 'active' || status === 'retiring' ? null : tokensLiveUntil({ ...pair, ...standing }, gate?.tokensRevokedBefore ?? null, now);
  const retiring =
    status === 'retiring'
      ? `retiring: it still exchanges until ${pair.retiresAt?.toISOString()} (or the overlap is finished); ${
          pair.switchedAt ? `the partner switched to the new pair at ${pair.switchedAt.toISOString()}` : 'the partner has not switched to the new pair yet'
        }`
      : null;
  const revokePair: Containment = { action: 'revoke_keys', partnerId: pair.partnerId, keyPairId: pair.id };
  // The genuine secret presented from outside the partner's network rules is a secret someone else holds.
  const outside =
    genuine === null && pair.unlistedRefusedAt !== null
      ? `its genuine secret was presented from ${pair.unlistedRefusedAddress ?? 'an unknown address'} at ${pair.unlistedRefusedAt.toISOString()}, outside the partner's network rules: the secret is out; `
      : null;
  let note: string;
  let contain: Containment | null;
  if (genuine === false) {
    note = `this is not the secret of ${pair.id}: it matches no stored hash, so nothing of ours leaked`;
    contain = null;
  } else if (genuine === null && outside === null) {
    // An access key goes with every exchange and a pair id is in audit events and webhook payloads, a kid and
    // a public key are public by design: none lets anyone in, and containing on their word alone would break
    // the partner's integration for nothing.
    const what = kind === 'access_key' ? 'an access key' : kind === 'key_pair_id' ? 'a key-pair id' : kind === 'kid' ? 'a key id (kid)' : 'a public key';
    const state = retiring ?? `the pair is ${status}`;
    note = `${what} alone is not a secret: nothing leaked unless its secret key did (look that up if so); ${state}`;
    contain = null;
  } else if (status === 'active' && pair.kind === 'public_key') {
    // A rotation would issue a secret pair: the partner registers a new public key instead (issue-keys --public-key).
    note = 'the active pair, its private key out: revoke it now (it mints nothing more and its tokens are refused at once); the partner then registers a new public key';
    contain = revokePair;
  } else if (status === 'active') {
    note = 'the active pair: rotate it now and refuse every token the partner holds';
    contain = { action: 'rotate_keys', partnerId: pair.partnerId, keyPairId: pair.id, revokeIssuedTokens: true };
  } else if (status === 'retiring') {
    note = `${retiring}; revoke it now: its tokens are refused at once and the new pair is untouched`;
    contain = revokePair;
  } else if (status === 'revoked') {
    note = 'already revoked: it mints nothing and its tokens are refused; nothing to contain';
    contain = null;
  } else if (liveUntil === null) {
    note = `${status}: it mints nothing and no token it minted can still be live (tokens live 15 minutes); nothing to contain`;
    contain = null;
  } else {
    note = `${status}: it mints nothing, but tokens it minted may be live until ${new Date(liveUntil).toISOString()}; revoke it to refuse them`;
    contain = revokePair;
  }
  if (outside !== null) note = `${outside}${note}`;
  return {
    kind,
    partner,
    pair,
    pairState: status,
    status,
    genuine,
    accepted,
    reason,
    network: accepted ? network : null,
    acceptedUntil: accepted ? (status === 'retiring' ? pair.retiresAt : pair.expiresAt) : null,
    token: null,
    note: accepted && network ? `${note}; ${onlyFrom(network)}` : note,
    contain,
  };
}

/** The partner's network rules, or null when it has none. */
function networkOf(gate: { allowFrom: string | null } | null): string[] | null {
  const rules = rulesFromColumn(gate?.allowFrom ?? null);
  return rules.length > 0 ? rules : null;
}

function onlyFrom(network: string[]): string {
  return `accepted only from the partner's network rules (${network.join(', ')}): lookup has no client address to check`;
}

function decode(text: string): { header: Record<string, unknown>; claims: Record<string, unknown> } {
  try {
    return { header: decodeProtectedHeader(text) as Record<string, unknown>, claims: decodeJwt(text) as Record<string, unknown> };
  } catch {
    throw new AppError('invalid_argument', 'not a well-formed token: its header or payload is not base64url JSON');
  }
}

async function signatureGenuine(
  text: string,
  header: Record<string, unknown>,
  claims: Record<string, unknown>,
  keys: SigningKeys | null,
  now: number,
): Promise<boolean | null> {
  if (!keys) return null;
  if (header.alg !== SIGNING_ALGORITHM || typeof header.kid !== 'string') return false;
  const iat = timeClaim(claims.iat);
  const issuedMs = iat !== null ? iat * 1000 : now;
  const key = keys.verificationKey(header.kid, issuedMs) ?? keys.verificationKey(header.kid);
  if (!key) return false;
  try {
    await compactVerify(text, key, { algorithms: [SIGNING_ALGORITHM] });
  } catch {
    return false;
  }
  const audience = claims.aud;
  return claims.iss === TOKEN_ISSUER && (audience === TOKEN_AUDIENCE || (Array.isArray(audience) && audience.includes(TOKEN_AUDIENCE)));
}

/** The latest instant a Date can hold, in seconds (±8.64e15 ms). */
const MAX_DATE_SECONDS = 8.64e12;

/**
 * A time claim (seconds since the epoch) as a number a Date can hold; null when absent or absurd (a forged
 * `iat` of 1e20 or `exp` of 1e300): such a token is not ours, and its dates are not printed.
 */
function timeClaim(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && Math.abs(value) <= MAX_DATE_SECONDS - TOKEN_TTL_SECONDS ? value : null;
}

/** Without the signing keys (a CLI host without the key file) the token is traced, but `genuine` is null. */
async function lookupToken(db: Database, text: string, keys: SigningKeys | null): Promise<LookupResult> {
  const { header, claims } = decode(text);
  const sub = typeof claims.sub === 'string' ? claims.sub : null;
  const partner = sub ? await partnerById(db.sql, sub) : null;
  if (!partner) throw notFound(sub ? `the token names partner '${printable(sub)}', which does not exist here` : 'the token names no partner (no sub claim)');
  const genuine = await signatureGenuine(text, header, claims, keys, db.clock.now());
  const test = claims.test === true && claims.kp === undefined;
  const keyPairId = typeof claims.kp === 'string' ? claims.kp : null;
  const pair = keyPairId ? await keyPairById(db.sql, keyPairId) : null;
  const iat = timeClaim(claims.iat);
  const exp = timeClaim(claims.exp);
  const jti = typeof claims.jti === 'string' ? claims.jti : null;
  const issuedAtMs = iat === null ? null : jti ? issuedAtMsOf(jti, partner.id, keyPairId, iat) : iat * 1000;
  const retiredAt = keys?.retiredAt(typeof header.kid === 'string' ? header.kid : undefined) ?? null;
  const signedWhileCurrent = retiredAt === null || iat === null || iat <= retiredAt / 1000 + 30;
  const facts: TokenFacts = {
    jti,
    kid: typeof header.kid === 'string' ? header.kid : null,
    issuedAt: issuedAtMs === null ? null : new Date(issuedAtMs),
    expiresAt: exp === null ? null : new Date(exp * 1000),
    test,
    claims,
    traceable: true,
  };
  const absurd = (claims.iat !== undefined && iat === null) || (claims.exp !== undefined && exp === null);
  const validShape = !absurd && iat !== null && exp !== null && iat >= 0 && exp - iat <= TOKEN_TTL_SECONDS && (test || pair !== null);
  const verdict = genuine === null ? null : genuine && validShape && signedWhileCurrent;
  return tokenResult(db, 'token', partner, keyPairId, pair, facts, verdict, issuedAtMs);
}

async function lookupTokenId(db: Database, jti: string, parsed: NonNullable<ReturnType<typeof parseTokenId>>): Promise<LookupResult> {
  const partner = await partnerById(db.sql, parsed.partnerId);
  if (!partner) throw notFound(`the token id names partner '${parsed.partnerId}', which does not exist here`);
  const pair = parsed.keyPairId ? await keyPairById(db.sql, parsed.keyPairId) : null;
  if (parsed.keyPairId && !pair) throw notFound(`the token id names key pair '${parsed.keyPairId}', which does not exist here`);
  let ttl = TOKEN_TTL_SECONDS;
  if (!parsed.keyPairId) {
    const event = await testTokenEventByJti(db.sql, jti);
    const details = event ? (JSON.parse(event.details) as { jti?: string; ttl?: number }) : null;
    if (details?.jti === jti && typeof details.ttl === 'number') ttl = details.ttl;
  }
  const iat = Math.floor(parsed.issuedAtMs / 1000);
  const facts: TokenFacts = {
    jti,
    kid: null,
    issuedAt: new Date(parsed.issuedAtMs),
    expiresAt: new Date((iat + ttl) * 1000),
    test: parsed.keyPairId === null,
    claims: {},
    traceable: true,
  };
  return tokenResult(db, 'token_id', partner, parsed.keyPairId, pair, facts, null, parsed.issuedAtMs);
}

/** Token ids from before they named their partner: only test tokens can be traced, through the audit trail. */
async function lookupOldTokenId(db: Database, jti: string): Promise<LookupResult> {
  const event = await testTokenEventByJti(db.sql, jti);
  const details = event ? (JSON.parse(event.details) as { jti?: string; ttl?: number }) : null;
  const partner = event?.partnerId && details?.jti === jti ? await partnerById(db.sql, event.partnerId) : null;
  if (!event || !partner || !details) {
    throw notFound(
      'this token id was issued before token ids named their partner and key pair: it cannot be traced',
      LOOKUP_FIELDS.token,
    );
  }
  const ttl = typeof details.ttl === 'number' ? details.ttl : TOKEN_TTL_SECONDS;
  const iat = Math.floor(event.at.getTime() / 1000);
  const facts: TokenFacts = {
    jti,
    kid: null,
    issuedAt: event.at,
    expiresAt: new Date((iat + ttl) * 1000),
    test: true,
    claims: {},
    traceable: false,
  };
  return tokenResult(db, 'token_id', partner, null, null, facts, null, event.at.getTime());
}

const TOKEN_NOTES: Partial<Record<RefusalReason, string>> = {
  partner_unknown: 'refused: its partner does not exist here',
  partner_disabled: 'refused: the partner is disabled',
  tokens_revoked: "refused: the partner's tokens issued before it were revoked",
  pair_unknown: 'refused: the key pair it names is not one of its partner\'s',
  pair_revoked: 'refused: the key pair that minted it is revoked',
};

async function tokenResult(
  db: Database,
  kind: LookupKind,
  partner: PartnerRow,
  keyPairId: string | null,
  pair: KeyPairRow | null,
  facts: TokenFacts,
  genuine: boolean | null,
  issuedAtMs: number | null,
): Promise<LookupResult> {
  const gate = await partnerGateRow(db.sql, partner.id);
  const now = db.clock.now();
  const snapshot = {
    partnerId: partner.id,
    // A token that is not a test token and names no pair is refused as one whose pair is unknown.
    keyPairId: facts.test ? null : (keyPairId ?? ''),
    // No expiry claim, or an absurd one: refused as expired. No issue time: before any brake.
    exp: facts.expiresAt === null ? 0 : facts.expiresAt.getTime() / 1000,
    issuedAtMs: issuedAtMs ?? Number.NEGATIVE_INFINITY,
  };
  const verdict = tokenRefusal(snapshot, gate && { ...gate, allows: null }, pair, null, now);
  const reason: RefusalReason | null = genuine === false ? 'token_invalid' : verdict;
  const network = networkOf(gate);
  let status: string;
  let note: string;
  if (reason === 'token_invalid') {
    status = 'forged';
    note = 'its signature does not verify with any of our signing keys (or its claims are not ours): the server refuses it';
  } else if (reason === 'token_expired') {
    status = 'expired';
    note = 'it has expired: the server refuses it';
  } else if (reason !== null) {
    status = 'revoked';
    note = TOKEN_NOTES[reason] ?? `refused: ${reason}`;
  } else {
    status = 'active';
    note = `accepted until it expires; contain it as below (the partner's client re-exchanges its keys once)`;
  }
  const accepted = reason === null;
  return {
    kind,
    partner,
    pair,
    pairState: pair ? keyPairStanding(pair, now).state : null,
    status,
    genuine,
    accepted,
    reason,
    network: accepted ? network : null,
    acceptedUntil: accepted ? facts.expiresAt : null,
    token: facts,
    note: accepted && network ? `${note}; ${onlyFrom(network)}` : note,
    // An expired or refused token has nothing left to contain.
    contain: accepted ? { action: 'revoke_tokens', partnerId: partner.id, issuedBefore: new Date(now) } : null,
  };
}
