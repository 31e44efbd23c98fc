// Client assertions signed by hand with node:crypto, not jose: an implementation independent of the one the
// server verifies with (issue 39), so that the two agreeing means the format is the standard's.
import { createHmac, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto';

export type KeyType = 'ed25519' | 'p256' | 'rsa2048';

export interface PartnerKey {
  type: KeyType;
  alg: 'EdDSA' | 'ES256' | 'RS256';
  privateKey: KeyObject;
  /** PEM SPKI, as the operator registers it. */
  publicPem: string;
  /** PKCS#8 PEM, as the partner keeps it. */
  privatePem: string;
}

export function generatePartnerKey(type: KeyType): PartnerKey {
  const { privateKey, publicKey } =
    type === 'ed25519'
      ? generateKeyPairSync('ed25519')
      : type === 'p256'
        ? generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
        : generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    type,
    alg: type === 'ed25519' ? 'EdDSA' : type === 'p256' ? 'ES256' : 'RS256',
    privateKey,
    publicPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

export interface AssertionOptions {
  accessKey: string;
  aud: string | string[];
  /** Seconds since the epoch. */
  now: number;
  lifetime?: number;
  iatOffset?: number;
  jti?: string;
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
}

function parts(options: AssertionOptions, alg: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const iat = options.now + (options.iatOffset ?? 0);
  return {
    header: { alg, typ: 'JWT', ...options.header },
    payload: {
      iss: options.accessKey,
      sub: options.accessKey,
      aud: options.aud,
      iat,
      exp: iat + (options.lifetime ?? 60),
      jti: options.jti ?? randomUUID(),
      ...options.claims,
    },
  };
}

/** A JWS compact serialisation signed with the partner's key (RFC 7515/7518 by hand: ES256 in IEEE P1363 form). */
export function signAssertion(key: PartnerKey, options: AssertionOptions): string {
  const { header, payload } = parts(options, key.alg);
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  const signature =
    key.type === 'ed25519'
      ? sign(null, Buffer.from(input), key.privateKey)
      : key.type === 'p256'
        ? sign('sha256', Buffer.from(input), { key: key.privateKey, dsaEncoding: 'ieee-p1363' })
        : sign('sha256', Buffer.from(input), key.privateKey);
  return `${input}.${b64url(signature)}`;
}

/** `alg: none`, no signature. */
export function unsignedAssertion(options: AssertionOptions): string {
  const { header, payload } = parts(options, 'none');
  return `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}.`;
}

/** HS256 with the public key's PEM as the HMAC secret: the classic key-confusion attack. */
export function hmacWithPublicKey(key: PartnerKey, options: AssertionOptions): string {
  const { header, payload } = parts(options, 'HS256');
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
  return `${input}.${b64url(createHmac('sha256', key.publicPem).update(input).digest())}`;
}

export const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
