// POST /secret-scanning/github: GitHub's secret-scanning partner protocol (docs/leaked-credentials.md). Only
// registered with PUBLIC_API_SECRET_SCANNING=github; otherwise the path is unknown (404) like any other.
import { verify, type KeyObject } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { SecretScanningConfig } from '../../config.js';
import type { LeakAlert } from '../../domain/operations/leak-reports.js';
import type { SigningKeys } from '../../domain/operations/signing-keys.js';
import { AppError } from '../../errors.js';
import { readBody } from '../protocol/json-body.js';
import type { AppDeps } from './deps.js';
import { GitHubKeys } from './github-keys.js';
import { methodNotAllowed } from './method-not-allowed.js';

export const SECRET_SCANNING_PATH = '/secret-scanning/github';
/** Bodies up to this are read; a larger one is 413 (GitHub sends at most 1,000 items). */
export const SECRET_SCANNING_BODY_LIMIT = 1_048_576;
const MAX_ITEMS = 1_000;
const MAX_FIELD = 8_192;

interface RateLimitResult {
  isAllowed: boolean;
  isExceeded?: boolean;
  ttlInSeconds?: number;
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
  const githubKeys = new GitHubKeys(config.keysUrl, deps.db.clock);
  const onRequest: Array<(request: FastifyRequest, reply: FastifyReply) => Promise<void>> = [];
  if (config.rateLimitPerIp > 0) {
    const perAddress = app.createRateLimit({
      max: config.rateLimitPerIp,
      timeWindow: deps.config.rateLimitWindowMs,
      keyGenerator: (request: FastifyRequest) => `scan:${request.client.address}`,
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

  app.post(SECRET_SCANNING_PATH, { onRequest }, async (request, reply) => {
    // The signature covers the raw bytes: read them as they are, whatever the content type says.
    const bytes = await readBody(request.raw, SECRET_SCANNING_BODY_LIMIT);
    const keyId = header(request, 'github-public-key-identifier')!;
    const signature = header(request, 'github-public-key-signature')!;
    const key = keyId.length <= 200 ? await githubKeys.key(keyId) : null;
    if (key === null) throw new AppError('invalid_signature', 'the signing key is not one of GitHub\'s secret-scanning keys');
    if (!signatureValid(key, bytes, signature)) throw new AppError('invalid_signature', 'the signature does not verify');
    const alerts = parseAlerts(bytes);
    const { handleLeakAlerts } = await import('../../domain/operations/leak-reports.js');
    const verdicts = await handleLeakAlerts(deps.db, deps.keys, alerts, config.action);
    reply.header('cache-control', 'no-store');
    return verdicts;
  });
  methodNotAllowed(app, SECRET_SCANNING_PATH, ['POST']);
}
