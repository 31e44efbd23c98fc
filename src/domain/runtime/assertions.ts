// Client assertions (RFC 7523 §2.2, OAuth's private_key_jwt): a JWT the partner signs with the private key
// whose public half is registered as a key pair. This file reads one and says what it proves of its pair;
// the exchange (credentials.ts) takes the verdict (verdict.ts) and the replay check from there.
import { compactVerify, decodeJwt, decodeProtectedHeader, importJWK, type CryptoKey, type JWK } from 'jose';
import type { AssertionFault } from '../../reasons.js';

/** The assertion type of RFC 7523 §2.2, the one value `client_assertion_type` may have. */
export const JWT_BEARER_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** An assertion's exp is at most this long after its iat. */
export const ASSERTION_MAX_LIFETIME_SECONDS = 300;
/** How far in the future an assertion's iat (or nbf) may be: the partner's clock against ours. */
export const ASSERTION_CLOCK_SKEW_SECONDS = 30;
/** Longer assertions are not read (an RS256 one with long claims is under 2 kB). */
export const MAX_ASSERTION_LENGTH = 8_192;
const MAX_JTI_LENGTH = 256;

/**
 * The audiences a client assertion may name: the token endpoint's public URL as configured, and the issuer
 * URL (its origin); none when it is not configured.
 */
export function assertionAudiences(tokenUrl: URL | null): string[] {
  return tokenUrl === null ? [] : [tokenUrl.href, tokenUrl.origin];
}

/** An assertion decoded but not verified: who it says it is (`iss`), nothing trusted yet. */
export interface DecodedAssertion {
  jwt: string;
  issuer: string;
  header: { alg?: unknown; kid?: unknown };
}

/** Decodes an assertion's header and `iss`; null when it is no JWT or names no issuer. */
export function decodeAssertion(jwt: string): DecodedAssertion | null {
  if (jwt.length === 0 || jwt.length > MAX_ASSERTION_LENGTH) return null;
  try {
    const header = decodeProtectedHeader(jwt);
    const { iss } = decodeJwt(jwt);
    return typeof iss === 'string' ? { jwt, issuer: iss, header } : null;
  } catch {
    return null;
  }
}

/** What the check needs of the pair the assertion names. */
export interface AssertionPair {
  id: string;
  kind: string;
  publicKey: string | null;
  publicKeyAlg: string | null;
  kid: string | null;
}

/** An assertion that proved its pair: its jti, noted until `expiresAtMs` so that a replay is refused. */
export interface ProvenAssertion {
  jti: string;
  expiresAtMs: number;
}

/**
 * Checks an assertion against the pair its `iss` names: the pair is a public_key one; the header's alg is
 * the pair's (so never `none`, never HS*) and its kid, when present, the pair's thumbprint; the signature
 * verifies; iss = sub = the access key; aud names this token endpoint (`audiences`); the lifetime is at most
 * ASSERTION_MAX_LIFETIME_SECONDS and iat not beyond the skew ahead of `now`; and it carries a jti. The
 * signature is checked before any claim, so an unsigned assertion learns nothing from which claim failed.
 */
export class AssertionVerifier {
  private readonly keys = new Map<string, Promise<CryptoKey | Uint8Array>>();

  constructor(
    /** The token endpoint's public URL and the issuer URL (configuration): an assertion's aud names one. */
    readonly audiences: readonly string[],
    private readonly maxCached = 10_000,
  ) {}

  async check(pair: AssertionPair, assertion: DecodedAssertion, accessKey: string, now: number): Promise<AssertionFault | ProvenAssertion> {
    const { header } = assertion;
    if (pair.kind !== 'public_key' || pair.publicKey === null || pair.publicKeyAlg === null) return 'assertion_invalid';
    if (header.alg !== pair.publicKeyAlg) return 'assertion_invalid';
    if (header.kid !== undefined && header.kid !== pair.kid) return 'assertion_invalid';
    let payload: Uint8Array;
    try {
      ({ payload } = await compactVerify(assertion.jwt, await this.keyOf(pair), { algorithms: [pair.publicKeyAlg] }));
    } catch {
      return 'assertion_invalid';
    }
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
    } catch {
      return 'assertion_invalid';
    }
    if (typeof claims !== 'object' || claims === null) return 'assertion_invalid';
    const { iss, sub, aud, exp, iat, nbf, jti } = claims;
    if (iss !== accessKey || sub !== accessKey) return 'assertion_invalid';
    if (!finite(exp) || !finite(iat) || typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) return 'assertion_invalid';
    const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) ? aud : [];
    if (!audiences.some((value) => typeof value === 'string' && this.audiences.includes(value))) return 'assertion_audience';
    if (exp * 1000 <= now) return 'assertion_expired';
    const skewMs = ASSERTION_CLOCK_SKEW_SECONDS * 1000;
    if (iat * 1000 > now + skewMs || exp - iat > ASSERTION_MAX_LIFETIME_SECONDS || exp <= iat) return 'assertion_invalid';
    if (nbf !== undefined && (!finite(nbf) || nbf * 1000 > now + skewMs)) return 'assertion_invalid';
    return { jti, expiresAtMs: exp * 1000 };
  }

  /** The pair's key, imported once (a pair's key never changes: a new key is a new pair). */
  private keyOf(pair: AssertionPair): Promise<CryptoKey | Uint8Array> {
    let key = this.keys.get(pair.id);
    if (!key) {
      if (this.keys.size >= this.maxCached) this.keys.clear();
      key = importJWK(JSON.parse(pair.publicKey as string) as JWK, pair.publicKeyAlg as string);
      // A failed import is not kept: the next assertion tries again.
      key.catch(() => this.keys.delete(pair.id));
      this.keys.set(pair.id, key);
    }
    return key;
  }
}

function finite(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}
