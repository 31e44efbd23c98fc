// A partner's public key (private_key_jwt, issue 39): what is accepted, in which form it is stored, and its
// key id. Parsed with jose (importSPKI, importJWK, calculateJwkThumbprint); inspected (type, curve, modulus
// length) with node:crypto. Only the public members are ever kept.
import { createPrivateKey, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, importJWK, importSPKI, type JWK } from 'jose';
import { AppError } from '../../errors.js';

/** The JWS algorithms a registered key may sign with: one per key, fixed by its type. */
export const PUBLIC_KEY_ALGORITHMS = ['EdDSA', 'ES256', 'RS256'] as const;
export type PublicKeyAlgorithm = (typeof PUBLIC_KEY_ALGORITHMS)[number];

/** RS256 keys shorter than this are refused (NIST SP 800-131A). */
export const MIN_RSA_BITS = 2048;
/** A key's text is at most this long (an RSA-8192 JWK is about 2.8 kB). */
const MAX_KEY_TEXT = 16_384;

/** A public key as registered: its JWK (public members only), its one algorithm, its RFC 7638 thumbprint. */
export interface RegisteredPublicKey {
  jwk: JWK;
  alg: PublicKeyAlgorithm;
  kid: string;
}

function refused(message: string): AppError {
  return new AppError('invalid_argument', message, { field: 'public_key' });
}

/** The one algorithm a key of this type signs with, or the reason it is refused. */
function algorithmOf(key: KeyObject): PublicKeyAlgorithm {
  const type = key.asymmetricKeyType;
  if (type === 'ed25519') return 'EdDSA';
  if (type === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'prime256v1') return 'ES256';
    throw refused(`an EC public key must be on P-256 (ES256), got ${curve ?? 'an unknown curve'}`);
  }
  if (type === 'rsa') {
    const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) throw refused(`an RSA public key must have at least ${MIN_RSA_BITS} bits (RS256), got ${bits}`);
    return 'RS256';
  }
  throw refused(`the public key must be Ed25519 (EdDSA), EC P-256 (ES256) or RSA of at least ${MIN_RSA_BITS} bits (RS256), got ${type ?? 'an unknown type'}`);
}

/** The public members of a key, as RFC 7638 lists them per type (nothing else is stored). */
function publicMembers(key: KeyObject): JWK {
  const jwk = key.export({ format: 'jwk' }) as JsonWebKey;
  if (jwk.kty === 'RSA') return { kty: 'RSA', n: jwk.n, e: jwk.e };
  if (jwk.kty === 'EC') return { kty: 'EC', crv: jwk.crv, x: jwk.x, y: jwk.y };
  return { kty: 'OKP', crv: jwk.crv, x: jwk.x };
}

async function registered(key: KeyObject): Promise<RegisteredPublicKey> {
  const alg = algorithmOf(key);
  const jwk = publicMembers(key);
  return { jwk, alg, kid: await calculateJwkThumbprint(jwk, 'sha256') };
}

const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/**
 * A public key given as PEM (SPKI, `-----BEGIN PUBLIC KEY-----`) or as a JWK (JSON). Refused, with one line
 * saying why: a private key (never wanted: the partner keeps it), a certificate or PKCS#1 PEM, another key
 * type or curve, an RSA key under 2048 bits, a JWK whose `alg` is not its type's.
 */
export async function parsePublicKey(text: string): Promise<RegisteredPublicKey> {
  const trimmed = text.trim();
  if (trimmed === '') throw refused('the public key is empty');
  if (trimmed.length > MAX_KEY_TEXT) throw refused(`the public key is longer than ${MAX_KEY_TEXT} characters`);
  if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(trimmed)) {
    throw refused('this is a private key: register the public half only (openssl pkey -in key.pem -pubout)');
  }
  if (trimmed.startsWith('{')) return parseJwk(trimmed);
  if (!trimmed.startsWith('-----BEGIN PUBLIC KEY-----')) {
    throw refused('the public key must be a PEM SPKI block (-----BEGIN PUBLIC KEY-----) or a JWK (JSON)');
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: trimmed, format: 'pem' });
  } catch {
    throw refused('the PEM block is not a readable public key');
  }
  const alg = algorithmOf(key);
  try {
    await importSPKI(trimmed, alg);
  } catch {
    throw refused(`the PEM block is not a ${alg} public key`);
  }
  return registered(key);
}

async function parseJwk(text: string): Promise<RegisteredPublicKey> {
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw refused('the JWK is not valid JSON');
  }
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw refused('the JWK must be a JSON object');
  const members = jwk as Record<string, unknown>;
  if (PRIVATE_JWK_MEMBERS.some((member) => member in members)) {
    throw refused('this JWK holds private or symmetric key material: register the public half only');
  }
  let key: KeyObject;
  try {
    key = createPublicKey({ key: members as JsonWebKey, format: 'jwk' });
  } catch {
    throw refused('the JWK is not a readable public key');
  }
  const alg = algorithmOf(key);
  if (members.alg !== undefined && members.alg !== alg) {
    throw refused(`the JWK says alg ${String(members.alg).slice(0, 20)}, but a key of its type signs with ${alg}`);
  }
  try {
    await importJWK({ ...publicMembers(key), alg }, alg);
  } catch {
    throw refused(`the JWK is not a ${alg} public key`);
  }
  return registered(key);
}

/**
 * The public key of a private key in PEM (`lookup -`): derived in memory, the private key neither kept nor
 * returned. Null when the text is no private key this tool accepts.
 */
export async function publicKeyOfPrivatePem(text: string): Promise<RegisteredPublicKey | null> {
  try {
    const publicKey = createPublicKey(createPrivateKey({ key: text.trim(), format: 'pem' }));
    return await registered(publicKey);
  } catch {
    return null;
  }
}

/** Whether a text looks like a PEM private key (so that it is never echoed). */
export function isPrivateKeyPem(text: string): boolean {
  return /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text);
}
