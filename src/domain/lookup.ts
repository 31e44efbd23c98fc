import { compactVerify, decodeJwt, decodeProtectedHeader } from 'jose';
import type { Database } from '../db/client.js';
import { testTokenEventByJti } from '../db/repositories/audit.js';
import { keyPairByAccessKey, keyPairById, secretHashOf, type KeyPairRow } from '../db/repositories/key-pairs.js';
import { partnerById, partnerGateRow, type PartnerRow } from '../db/repositories/partners.js';
import { AppError } from '../errors.js';
import { masked } from '../text.js';
import { ACCESS_KEY_PREFIX, KEY_PAIR_ID_PATTERN, parseKey, PARTNER_ID_PATTERN, SECRET_KEY_PREFIX, unwrapPasted } from './identifiers.js';
import { effectiveStatus } from './key-pairs.js';
import { printable } from './partners.js';
import { verifySecret } from './secrets.js';
import { SIGNING_ALGORITHM, type SigningKeys } from './signing-keys.js';
import { issuedAtMsOf, parseTokenId, TOKEN_AUDIENCE, TOKEN_ISSUER, TOKEN_TTL_SECONDS } from './tokens.js';

export type LookupKind = 'access_key' | 'secret_key' | 'key_pair_id' | 'token' | 'token_id';

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

export interface LookupResult {
  kind: LookupKind;
  partner: PartnerRow | null;
  pair: KeyPairRow | null;
  /** The pair's status (active, superseded, revoked, expired) or the token's (active, expired, revoked, forged). */
  status: string;
  /** A secret matches its stored hash / a token's signature verifies; null when it cannot be told (key ids, token ids). */
  genuine: boolean | null;
  /** Would be accepted now: the pair mints (with its secret) / the server accepts the token. */
  accepted: boolean;
  /** Until when it stays accepted unless contained (a token's expiry, a pair's expiry), null for no end or not accepted. */
  acceptedUntil: Date | null;
  token: TokenFacts | null;
  /** What it means, in one sentence. */
  note: string;
  /**
   * The one command that contains the leak; null when there is nothing of ours to contain (a forged token, a
   * wrong secret, a pair already revoked, a token already refused or expired).
   */
  contain: string | null;
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
  // A value pasted with its quotes, `SECRET=`, `Bearer ` or a trailing comma is the value itself.
  const text = unwrapPasted(value);
  if (text.startsWith(ACCESS_KEY_PREFIX) || text.startsWith(SECRET_KEY_PREFIX)) return lookupKey(db, text);
  if (KEY_PAIR_ID_PATTERN.test(text)) {
    const pair = await keyPairById(db.sql, text);
    if (!pair) throw notFound(`no key pair '${text}'`);
    return pairResult(db, 'key_pair_id', pair, null);
  }
  if (PARTNER_ID_PATTERN.test(text)) {
    throw new AppError('invalid_argument', `'${text}' is a partner id, not a key or a token: see 'partnerctl show-partner ${text}'`);
  }
  if (JWT_SHAPE.test(text)) return lookupToken(db, text, await openKeys());
  const parsed = parseTokenId(text);
  if (parsed) return lookupTokenId(db, text, parsed);
  if (UUID.test(text)) return lookupOldTokenId(db, text);
  throw new AppError(
    'invalid_argument',
    // Whatever it is, it may be a credential: never more than a masked prefix of it in a message.
    `${masked(text)} is not an access key (pctl_ak_…), a secret key (pctl_sk_…), a key-pair id (kp_…), a token (JWT) or a token id`,
  );
}

function notFound(message: string, hint?: string): AppError {
  return new AppError('not_found', message, hint ? { hint } : {});
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
      "run 'partnerctl lookup <access key>' with the access key it was used with",
    );
  }
  const pair = await keyPairById(db.sql, parsed.keyPairId);
  if (!pair) throw notFound(`no key pair '${parsed.keyPairId}' (the pair this secret names)`);
  const hash = await secretHashOf(db.sql, pair.id);
  const genuine = hash !== null && (await verifySecret(hash, text));
  return pairResult(db, 'secret_key', pair, genuine);
}

/**
 * When a token the pair minted may still be live until (ms), or null when none can be: a pair that stopped
 * minting (superseded, retired, expired) more than 15 minutes ago, never minted, or whose tokens are all
 * refused (revoked, or the partner's brake came after its last token). last_used_at is noted at most once a
 * minute, hence the minute's margin.
 */
function tokensLiveUntil(pair: KeyPairRow, brake: number | null, status: string): number | null {
  if (status === 'revoked' || pair.lastUsedAt === null) return null;
  const stoppedAt = status === 'expired' ? pair.expiresAt?.getTime() : pair.supersededAt?.getTime();
  const lastMint = Math.min(pair.lastUsedAt.getTime() + 60_000, stoppedAt ?? Number.POSITIVE_INFINITY);
  if (brake !== null && brake > lastMint) return null;
  const until = lastMint + TOKEN_TTL_SECONDS * 1000;
  return until > Date.now() ? until : null;
}

async function pairResult(db: Database, kind: LookupKind, pair: KeyPairRow, genuine: boolean | null): Promise<LookupResult> {
  const partner = await partnerById(db.sql, pair.partnerId);
  const status = effectiveStatus(pair);
  const mints = (status === 'active' || status === 'retiring') && partner?.status === 'active';
  const accepted = genuine !== false && mints;
  const brake = (await partnerGateRow(db.sql, pair.partnerId))?.tokensRevokedBefore ?? null;
  const liveUntil = status === 'active' || status === 'retiring' ? null : tokensLiveUntil(pair, brake, status);
  const retiring =
    status === 'retiring'
      ? `retiring: it still exchanges until ${pair.retiresAt?.toISOString()} (or --finish); ${
          pair.switchedAt ? `the partner switched to the new pair at ${pair.switchedAt.toISOString()}` : 'the partner has not switched to the new pair yet'
        }`
      : null;
  let note: string;
  let contain: string | null;
  if (genuine === false) {
    note = `this is not the secret of ${pair.id}: it matches no stored hash, so nothing of ours leaked`;
    contain = null;
  } else if (kind === 'access_key') {
    // An access key is public by design (it goes with every exchange): alone it lets no one in.
    const state = retiring ?? `the pair is ${status}`;
    note = `an access key alone is not a secret: nothing leaked unless its secret key did (look that up if so); ${state}`;
    contain = null;
  } else if (status === 'active') {
    note = 'the active pair: rotate it now and refuse every token the partner holds';
    contain = `partnerctl rotate-keys ${pair.partnerId} --revoke-issued-tokens --yes`;
  } else if (status === 'retiring') {
    note = `${retiring}; revoke it now: its tokens are refused at once and the new pair is untouched`;
    contain = `partnerctl revoke-keys ${pair.partnerId} --key-pair ${pair.id} --yes`;
  } else if (status === 'revoked') {
    note = 'already revoked: it mints nothing and its tokens are refused; nothing to contain';
    contain = null;
  } else if (liveUntil === null) {
    note = `${status}: it mints nothing and no token it minted can still be live (tokens live 15 minutes); nothing to contain`;
    contain = null;
  } else {
    note = `${status}: it mints nothing, but tokens it minted may be live until ${new Date(liveUntil).toISOString()}; revoke it to refuse them`;
    contain = `partnerctl revoke-keys ${pair.partnerId} --key-pair ${pair.id} --yes`;
  }
  return {
    kind,
    partner,
    pair,
    status,
    genuine,
    accepted,
    acceptedUntil: accepted ? (status === 'retiring' ? pair.retiresAt : pair.expiresAt) : null,
    token: null,
    note,
    contain,
  };
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
): Promise<boolean | null> {
  if (!keys) return null;
  if (header.alg !== SIGNING_ALGORITHM || typeof header.kid !== 'string') return false;
  const iat = timeClaim(claims.iat);
  const issuedMs = iat !== null ? iat * 1000 : Date.now();
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
  const genuine = await signatureGenuine(text, header, claims, keys);
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
  return tokenResult(db, 'token', partner, pair, facts, verdict, issuedAtMs);
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
  return tokenResult(db, 'token_id', partner, pair, facts, null, parsed.issuedAtMs);
}

/** Token ids from before they named their partner: only test tokens can be traced, through the audit trail. */
async function lookupOldTokenId(db: Database, jti: string): Promise<LookupResult> {
  const event = await testTokenEventByJti(db.sql, jti);
  const details = event ? (JSON.parse(event.details) as { jti?: string; ttl?: number }) : null;
  const partner = event?.partnerId && details?.jti === jti ? await partnerById(db.sql, event.partnerId) : null;
  if (!event || !partner || !details) {
    throw notFound(
      'this token id was issued before token ids named their partner and key pair: it cannot be traced',
      "look up the token itself ('partnerctl lookup <jwt>'), or contain by partner with 'partnerctl revoke-tokens <partner>'",
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
  return tokenResult(db, 'token_id', partner, null, facts, null, event.at.getTime());
}

async function tokenResult(
  db: Database,
  kind: LookupKind,
  partner: PartnerRow,
  pair: KeyPairRow | null,
  facts: TokenFacts,
  genuine: boolean | null,
  issuedAtMs: number | null,
): Promise<LookupResult> {
  const brake = (await partnerGateRow(db.sql, partner.id))?.tokensRevokedBefore ?? null;
  const now = Date.now();
  const expired = facts.expiresAt === null || facts.expiresAt.getTime() <= now;
  const braked = brake !== null && (issuedAtMs === null || issuedAtMs < brake);
  const pairRefused = !facts.test && (pair === null || pair.partnerId !== partner.id || pair.status === 'revoked');
  let status: string;
  let note: string;
  if (genuine === false) {
    status = 'forged';
    note = 'its signature does not verify with any of our signing keys (or its claims are not ours): the server refuses it';
  } else if (expired) {
    status = 'expired';
    note = 'it has expired: the server refuses it';
  } else if (braked || pairRefused || partner.status !== 'active') {
    status = 'revoked';
    note = braked
      ? "refused: the partner's tokens issued before it were revoked"
      : pairRefused
        ? 'refused: the key pair that minted it is revoked'
        : 'refused: the partner is disabled';
  } else {
    status = 'active';
    note = `accepted until it expires; contain it with the command below (the partner's client re-exchanges its keys once)`;
  }
  const accepted = status === 'active';
  return {
    kind,
    partner,
    pair,
    status,
    genuine,
    accepted,
    acceptedUntil: accepted ? facts.expiresAt : null,
    token: facts,
    note,
    // An expired or refused token has nothing left to contain.
    contain: genuine === false || !accepted ? null : `partnerctl revoke-tokens ${partner.id} --yes`,
  };
}
