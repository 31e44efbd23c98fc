// POST /secret-scanning/github: GitHub's secret-scanning partner protocol (docs/leaked-credentials.md). Only
// registered with PUBLIC_API_SECRET_SCANNING=github; otherwise the path is unknown (404) like any other.
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SecretScanningConfig } from '../../config.js';
import type { LeakAlert } from '../../domain/leak-reports.js';
import type { SigningKeys } from '../../domain/signing-keys.js';
import { AppError } from '../../errors.js';
import type { AppDeps } from './deps.js';
import { methodNotAllowed } from './method-not-allowed.js';

export const SECRET_SCANNING_PATH = '/secret-scanning/github';
/** Bodies up to this are read; a larger one is 413 (GitHub sends at most 1,000 items). */
export const SECRET_SCANNING_BODY_LIMIT = 1_048_576;
const MAX_ITEMS = 1_000;
const MAX_FIELD = 8_192;
const KEYS_TIMEOUT_MS = 5_000;
/** An unknown key id fetches the list again, at most this often. */
const REFETCH_MS = 60_000;

interface RateLimitResult {
  isAllowed: boolean;
  isExceeded?: boolean;
  ttlInSeconds?: number;
}

/**
 * GitHub's signing keys, from the key list: fetched on first use, kept, and fetched again when a signature
 * names a key id not in it (at most once a minute, one fetch at a time).
 */
export class GitHubKeys {
  private keys = new Map<string, KeyObject>();
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private fetching: Promise<void> | undefined;

  constructor(private readonly url: URL) {}

  /** The key of this id; null when the list (fetched again if allowed) does not hold it. */
  async key(id: string): Promise<KeyObject | null> {
    const known = this.keys.get(id);
    if (known) return known;
    if (Date.now() - this.fetchedAt >= REFETCH_MS) await this.refresh();
    return this.keys.get(id) ?? null;
  }

  private refresh(): Promise<void> {
    this.fetching ??= this.load().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  private async load(): Promise<void> {
    let list: unknown;
    try {
      const response = await fetch(this.url, { headers: { accept: 'application/json', 'user-agent': 'partnerctl' }, signal: AbortSignal.timeout(KEYS_TIMEOUT_MS) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      list = await response.json();
    } catch (error) {
      // Counted as a fetch, so a key list that is down is not hammered; GitHub retries the alert.
      this.fetchedAt = Date.now();
      throw new AppError('upstream_unavailable', "GitHub's secret-scanning key list could not be fetched", { cause: error });
    }
    this.fetchedAt = Date.now();
    const entries = (list as { public_keys?: unknown })?.public_keys;
    if (!Array.isArray(entries)) throw new AppError('upstream_unavailable', "GitHub's secret-scanning key list has no public_keys");
    const keys = new Map<string, KeyObject>();
    for (const entry of entries) {
      const { key_identifier: id, key: pem } = (entry ?? {}) as { key_identifier?: unknown; key?: unknown };
      if (typeof id !== 'string' || typeof pem !== 'string') continue;
      try {
        keys.set(id, createPublicKey(pem));
      } catch {
        // A key that does not parse verifies nothing.
      }
    }
    this.keys = keys;
  }
}

/** Whether `signature` (base64 DER) is the ECDSA P-256 SHA-256 signature of `body` by `key`. */
export function signatureValid(key: KeyObject, body: Buffer, signature: string): boolean {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(signature) || signature.length > 200) return false;
  try {
    return verify('sha256', body, { key, dsaEncoding: 'der' }, Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

function header(request: FastifyRequest, name: string): string | null {
  const value = request.headers[name];
  return typeof value === 'string' && value !== '' ? value.trim() : null;
}

/** The body as GitHub sends it: a JSON array of {token, type, url, source}, at most 1,000 items. */
function parseAlerts(bytes: Buffer): LeakAlert[] {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new AppError('invalid_request', 'the body must be a JSON array of {token, type, url, source}');
  }
  if (!Array.isArray(value)) throw new AppError('invalid_request', 'the body must be a JSON array of {token, type, url, source}');
  if (value.length > MAX_ITEMS) throw new AppError('invalid_request', `at most ${MAX_ITEMS} items per request, got ${value.length}`);
  return value.map((item, index) => {
    const { token, type, url, source } = (item ?? {}) as Record<string, unknown>;
    const field = (name: string, text: unknown, required: boolean): string => {
      if (text === undefined && !required) return '';
      if (typeof text !== 'string' || text.length > MAX_FIELD || (required && text === '')) {
        throw new AppError('invalid_request', `item ${index}: ${name} must be a string of at most ${MAX_FIELD} characters`);
      }
      return text;
    };
    if (typeof item !== 'object' || item === null || Array.isArray(item)) throw new AppError('invalid_request', `item ${index} is not an object`);
    return { token: field('token', token, true), type: field('type', type, true), url: field('url', url, false), source: field('source', source, false) };
  });
}

export function registerSecretScanningRoutes(app: FastifyInstance, deps: AppDeps & { keys: SigningKeys }, config: SecretScanningConfig): void {
  const githubKeys = new GitHubKeys(config.keysUrl);
  const onRequest: Array<(request: FastifyRequest, reply: FastifyReply) => Promise<void>> = [];
  if (config.rateLimitPerIp > 0) {
    const perAddress = app.createRateLimit({
      max: config.rateLimitPerIp,
      timeWindow: deps.config.rateLimitWindowMs,
      keyGenerator: (request: FastifyRequest) => `scan:${request.ip}`,
    }) as (request: FastifyRequest) => Promise<RateLimitResult>;
    onRequest.push(async (request, reply) => {
      const result = await perAddress(request);
      if (result.isAllowed || !result.isExceeded) return;
      const seconds = Math.max(1, result.ttlInSeconds ?? 1);
      reply.header('retry-after', String(seconds));
      throw new AppError('rate_limited', `too many secret-scanning requests from this address; retry after ${seconds} s`);
    });
  }
  // Before the body is read: without both headers nothing can be verified.
  onRequest.push(async (request) => {
    if (header(request, 'github-public-key-identifier') === null || header(request, 'github-public-key-signature') === null) {
      throw new AppError('invalid_signature', 'the Github-Public-Key-Identifier and Github-Public-Key-Signature headers are required');
    }
  });

  app.register((scope, _options, done) => {
    // The signature covers the raw bytes: read them as they are, whatever the content type says.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: SECRET_SCANNING_BODY_LIMIT }, (_request, body, done) => done(null, body));
    scope.post(SECRET_SCANNING_PATH, { bodyLimit: SECRET_SCANNING_BODY_LIMIT, onRequest }, async (request, reply) => {
      const bytes = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const keyId = header(request, 'github-public-key-identifier')!;
      const signature = header(request, 'github-public-key-signature')!;
      const key = keyId.length <= 200 ? await githubKeys.key(keyId) : null;
      if (key === null) throw new AppError('invalid_signature', 'the signing key is not one of GitHub\'s secret-scanning keys');
      if (!signatureValid(key, bytes, signature)) throw new AppError('invalid_signature', 'the signature does not verify');
      const alerts = parseAlerts(bytes);
      const { handleLeakAlerts } = await import('../../domain/leak-reports.js');
      const verdicts = await handleLeakAlerts(deps.db, deps.keys, alerts, config.action);
      reply.header('cache-control', 'no-store');
      return verdicts;
    });
    done();
  });
  methodNotAllowed(app, SECRET_SCANNING_PATH, ['POST']);
}
