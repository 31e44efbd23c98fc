import { randomBytes } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import { systemClock, type Clock } from '../../clock.js';
import { TUNING } from '../../config.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import { AppError } from '../../errors.js';
import { SIGNING_ALGORITHM, type SigningKeys } from './signing-keys.js';
import { SnapshotCache, type Maybe } from '../rules/snapshot-cache.js';

export const TOKEN_ISSUER = 'partnerctl';
export const TOKEN_AUDIENCE = 'partner-api/v1';
const CLOCK_SKEW_SECONDS = 30;

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

function refused(message: string): AppError {
  return new AppError('unauthorized', message, { reason: 'token_invalid' });
}

/**
 * Verifies signature, algorithm, issuer, audience and the claims' shape; a token's lifetime is the verdict's
 * to judge (verdict.ts `tokenRefusal`), so an expired token's claims are still known and its refusal is
 * recorded against its partner, key pair and token. Verified tokens are remembered (the snapshot cache), so a
 * client's repeated requests pay for the signature check once.
 */
export class TokenVerifier {
  private readonly verified: SnapshotCache<string, TokenClaims>;

  constructor(
    private readonly keys: SigningKeys,
    private readonly maxCached = TUNING.verifierCacheSize,
    /** The server's clock: a sweep of the full cache drops the expired tokens by it. */
    private readonly clock: Clock = systemClock,
  ) {
    this.verified = new SnapshotCache(maxCached);
  }

  /** Tokens whose verdict was remembered, and tokens whose signature was checked: for the metrics. */
  get cacheHits(): number {
    return this.verified.hits;
  }

  get cacheMisses(): number {
    return this.verified.misses;
  }

  /** Call when the key file may have changed: cached verdicts are dropped. */
  keysChanged(): void {
    this.verified.clear();
  }

  /** The token's claims: at once when it was verified before, else once its signature is checked (rejected when not valid). */
  verify(token: string): Maybe<TokenClaims> {
    return this.verified.get(token, () => this.verifyUncached(token));
  }

  private async verifyUncached(token: string): Promise<TokenClaims> {
    const nowSeconds = this.clock.now() / 1000;
    if (this.verified.size >= this.maxCached) this.verified.sweep((claims) => claims.exp <= nowSeconds);
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
          // The lifetime is judged by the verdict, once, against the clock of the request being decided.
          clockTolerance: Number.MAX_SAFE_INTEGER,
        },
      ));
    } catch (error) {
      if (error instanceof AppError) throw error;
      throw refused('the token is not valid');
    }
    const { sub, jti, iat, exp, nbf, kp, test } = payload as Record<string, unknown>;
    if (typeof sub !== 'string' || typeof jti !== 'string' || typeof iat !== 'number' || typeof exp !== 'number') {
      throw refused('the token is not valid');
    }
    // Ours carry no nbf; one that says it is not valid yet is not, whoever signed it.
    if (nbf !== undefined && (typeof nbf !== 'number' || nbf > nowSeconds)) throw refused('the token is not valid');
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
}

/** The issue time in ms: the jti's when it is a traceable id consistent with the claims, else iat x 1000. */
export function issuedAtMsOf(jti: string, partnerId: string, keyPairId: string | null, iat: number): number {
  const parsed = parseTokenId(jti);
  if (parsed && parsed.partnerId === partnerId && parsed.keyPairId === keyPairId && Math.floor(parsed.issuedAtMs / 1000) === iat) {
    return parsed.issuedAtMs;
  }
  return iat * 1000;
}
