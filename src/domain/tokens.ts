import { randomBytes } from 'node:crypto';
import { errors, jwtVerify, SignJWT } from 'jose';
import { systemClock, type Clock } from '../clock.js';
import { AppError } from '../errors.js';
import { SIGNING_ALGORITHM, type SigningKeys } from './signing-keys.js';

export const TOKEN_TTL_SECONDS = 900;
export const TOKEN_ISSUER = 'partnerctl';
export const TOKEN_AUDIENCE = 'partner-api/v1';
const CLOCK_SKEW_SECONDS = 30;
/** Verified tokens a verifier remembers by default. */
export const TOKEN_VERIFIER_CACHE_SIZE = 100_000;

export interface TokenClaims {
  partnerId: string;
  /** The key pair that minted it; null for an operator's test token. */
  keyPairId: string | null;
  test: boolean;
  jti: string;
  /** Expiry, seconds since the epoch. */
  exp: number;
  /** When it was issued, in milliseconds: from the jti of tokens minted since key_lifecycle, else iat x 1000. */
  issuedAtMs: number;
}

/**
 * Token ids name their origin: `<partner id>.<key-pair id or "test">.<issued at, ms>.<64 random bits, hex>`,
 * so a leaked jti is traced to its partner and pair, and its issue time is known to the millisecond.
 */
const TOKEN_ID_FORMAT = /^(ptn_[0-9A-HJKMNP-TV-Z]{26})\.(kp_[0-9A-HJKMNP-TV-Z]{26}|test)\.(\d{13})\.([0-9a-f]{16})$/;

export interface ParsedTokenId {
  partnerId: string;
  keyPairId: string | null;
  issuedAtMs: number;
}

export function parseTokenId(jti: string): ParsedTokenId | null {
  const match = TOKEN_ID_FORMAT.exec(jti);
  if (!match) return null;
  return { partnerId: match[1]!, keyPairId: match[2] === 'test' ? null : match[2]!, issuedAtMs: Number(match[3]) };
}

export interface MintedToken {
  accessToken: string;
  expiresIn: number;
  claims: TokenClaims;
}

export async function mintToken(
  keys: SigningKeys,
  subject: { partnerId: string; keyPairId: string | null },
  ttlSeconds = TOKEN_TTL_SECONDS,
  clock: Clock = systemClock,
): Promise<MintedToken> {
  const { kid, key } = keys.current();
  const issuedAtMs = clock.now();
  const iat = Math.floor(issuedAtMs / 1000);
  const test = subject.keyPairId === null;
  const jti = `${subject.partnerId}.${subject.keyPairId ?? 'test'}.${issuedAtMs}.${randomBytes(8).toString('hex')}`;
  const payload = test ? { test: true } : { kp: subject.keyPairId };
  const accessToken = await new SignJWT(payload)
    .setProtectedHeader({ alg: SIGNING_ALGORITHM, kid, typ: 'JWT' })
    .setIssuer(TOKEN_ISSUER)
    .setAudience(TOKEN_AUDIENCE)
    .setSubject(subject.partnerId)
    .setJti(jti)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttlSeconds)
    .sign(key);
  return {
    accessToken,
    expiresIn: ttlSeconds,
    claims: { partnerId: subject.partnerId, keyPairId: subject.keyPairId, test, jti, exp: iat + ttlSeconds, issuedAtMs },
  };
}

function refused(message: string, reason: 'token_invalid' | 'token_expired' = 'token_invalid'): AppError {
  return new AppError('unauthorized', message, { reason });
}

/**
 * A genuine token past its expiry (its signature verified before its lifetime was read): refused, but whose
 * it was is known, so that the refusal is recorded against its partner, key pair and token.
 */
export class ExpiredToken extends AppError {
  constructor(readonly claims: TokenClaims | null) {
    super('unauthorized', 'the token has expired', { reason: 'token_expired' });
  }
}

/** Who an expired token's payload names, when it is shaped as ours; null otherwise. */
function claimsOfExpired(payload: Record<string, unknown>): TokenClaims | null {
  const { sub, jti, iat, exp, kp, test } = payload;
  if (typeof sub !== 'string' || typeof jti !== 'string' || typeof iat !== 'number' || typeof exp !== 'number') return null;
  const isTest = test === true && kp === undefined;
  if (!isTest && typeof kp !== 'string') return null;
  const keyPairId = isTest ? null : (kp as string);
  return { partnerId: sub, keyPairId, test: isTest, jti, exp, issuedAtMs: issuedAtMsOf(jti, sub, keyPairId, iat) };
}

/**
 * Verifies signature, algorithm, issuer, audience and lifetime. Verified tokens are remembered until they
 * expire, so a client's repeated requests pay for the signature check once.
 */
export class TokenVerifier {
  private readonly verified = new Map<string, TokenClaims>();
  /** Tokens whose verdict was remembered, and tokens whose signature was checked: for the metrics. */
  cacheHits = 0;
  cacheMisses = 0;

  constructor(
    private readonly keys: SigningKeys,
    private readonly maxCached = TOKEN_VERIFIER_CACHE_SIZE,
    /** The server's clock: expiry is read from it. */
    private readonly clock: Clock = systemClock,
  ) {}

  /** Call when the key file may have changed: cached verdicts are dropped. */
  keysChanged(): void {
    this.verified.clear();
  }

  /** The claims of a token verified before and not yet expired, without waiting; undefined otherwise (call verify). */
  verifiedNow(token: string): TokenClaims | undefined {
    const cached = this.verified.get(token);
    if (cached === undefined || cached.exp <= this.clock.now() / 1000) return undefined;
    this.cacheHits++;
    return cached;
  }

  async verify(token: string): Promise<TokenClaims> {
    const known = this.verifiedNow(token);
    if (known !== undefined) return known;
    const nowSeconds = this.clock.now() / 1000;
    this.verified.delete(token);
    this.cacheMisses++;
    const claims = await this.verifyUncached(token, nowSeconds);
    if (this.verified.size >= this.maxCached) this.evictExpired(nowSeconds);
    if (this.verified.size < this.maxCached) this.verified.set(token, claims);
    return claims;
  }

  private async verifyUncached(token: string, nowSeconds: number): Promise<TokenClaims> {
    let payload;
    let kid: string | undefined;
    try {
      ({ payload, protectedHeader: { kid } } = await jwtVerify(
        token,
        (header) => {
          const key = this.keys.verificationKey(header.kid);
          if (!key) throw refused('the token was signed by an unknown or retired key');
          return key;
        },
        {
          algorithms: [SIGNING_ALGORITHM],
          issuer: TOKEN_ISSUER,
          audience: TOKEN_AUDIENCE,
          requiredClaims: ['sub', 'jti', 'iat', 'exp'],
          typ: 'JWT',
          currentDate: new Date(nowSeconds * 1000),
        },
      ));
    } catch (error) {
      if (error instanceof AppError) throw error;
      if (error instanceof errors.JWTExpired) throw new ExpiredToken(claimsOfExpired(error.payload as Record<string, unknown>));
      throw refused('the token is not valid');
    }
    const { sub, jti, iat, exp, kp, test } = payload as Record<string, unknown>;
    if (typeof sub !== 'string' || typeof jti !== 'string' || typeof iat !== 'number' || typeof exp !== 'number') {
      throw refused('the token is not valid');
    }
    if (iat > nowSeconds + CLOCK_SKEW_SECONDS || exp - iat > TOKEN_TTL_SECONDS) {
      throw refused('the token is not valid');
    }
    // A retired key verifies only what it signed while it was current: a leaked retired key mints nothing.
    const retiredAt = this.keys.retiredAt(kid);
    if (retiredAt !== null && iat > retiredAt / 1000 + CLOCK_SKEW_SECONDS) throw refused('the token is not valid');
    const isTest = test === true && kp === undefined;
    if (!isTest && typeof kp !== 'string') throw refused('the token is not valid');
    const keyPairId = isTest ? null : (kp as string);
    return { partnerId: sub, keyPairId, test: isTest, jti, exp, issuedAtMs: issuedAtMsOf(jti, sub, keyPairId, iat) };
  }

  private evictExpired(nowSeconds: number): void {
    for (const [token, claims] of this.verified) if (claims.exp <= nowSeconds) this.verified.delete(token);
  }
}

/** The issue time in ms: the jti's when it is a traceable id consistent with the claims, else iat x 1000. */
export function issuedAtMsOf(jti: string, partnerId: string, keyPairId: string | null, iat: number): number {
  const parsed = parseTokenId(jti);
  if (parsed && parsed.partnerId === partnerId && parsed.keyPairId === keyPairId && Math.floor(parsed.issuedAtMs / 1000) === iat) {
    return parsed.issuedAtMs;
  }
  return iat * 1000;
}
