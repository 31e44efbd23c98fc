// POST /auth/token: a key pair exchanged for a token. One function whose body is its order: throttle by
// address, read the body, throttle by access key, exchange, answer. The kernel (server/app.ts) gives it its
// request id, client and head checks before, and writes its errors and its finished record after.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { countTopLevelKey } from '../data-path/gate.js';
import { readJsonBody } from '../protocol/json-body.js';
import { TOKEN_BODY_LIMIT_BYTES, TOKEN_PATH } from '../protocol/paths.js';
import type { AppDeps } from './deps.js';
import { methodNotAllowed } from './method-not-allowed.js';

const RATE_KEY_MAX_LENGTH = 64;
/** A token request that does not present its credentials as the endpoint reads them: refused and recorded. */
const MALFORMED = { reason: 'credentials_malformed' } as const;

interface RateLimitResult {
  isAllowed: boolean;
  isExceeded?: boolean;
  ttlInSeconds?: number;
}
type Limiter = (request: FastifyRequest) => Promise<RateLimitResult>;

function parseTokenRequest(body: unknown, raw: string | null): { accessKey: string; secretKey: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_request', 'the body must be a JSON object with access_key and secret_key', MALFORMED);
  }
  const fields = Object.keys(body);
  const { access_key: accessKey, secret_key: secretKey } = body as Record<string, unknown>;
  if (typeof accessKey !== 'string' || typeof secretKey !== 'string') {
    throw new AppError('invalid_request', 'access_key and secret_key are required and must be strings', MALFORMED);
  }
  if (fields.length !== 2) {
    throw new AppError('invalid_request', 'the body may hold only access_key and secret_key', MALFORMED);
  }
  // JSON.parse keeps the last of repeated members; a body that repeats a key is ambiguous, so it is refused.
  if (raw !== null && (countTopLevelKey(raw, 'access_key') > 1 || countTopLevelKey(raw, 'secret_key') > 1)) {
    throw new AppError('invalid_request', 'access_key and secret_key may each be given only once', MALFORMED);
  }
  return { accessKey, secretKey };
}

async function enforce(limiter: Limiter, request: FastifyRequest, reply: FastifyReply, what: string): Promise<void> {
  const result = await limiter(request);
  if (result.isAllowed || !result.isExceeded) return;
  const seconds = Math.max(1, result.ttlInSeconds ?? 1);
  reply.header('retry-after', String(seconds));
  throw new AppError('rate_limited', `too many token requests ${what}; retry after ${seconds} s`, { reason: 'exchange_throttled' });
}

/**
 * Two throttles: per client address before the body is read, and per access key once it is read, so
 * spreading guesses over many addresses does not help against one key. The per-key one never counts or
 * refuses the secret this process has already verified for that key, so failed guesses at a partner's
 * public access key do not lock the partner out.
 */
export function registerTokenRoutes(app: FastifyInstance, deps: AppDeps): void {
  const { config, exchange, access } = deps;
  const perAddress =
    config.tokenRateLimitPerIp > 0
      ? (app.createRateLimit({
          max: config.tokenRateLimitPerIp,
          timeWindow: config.rateLimitWindowMs,
          keyGenerator: (request: FastifyRequest) => `ip:${request.client.address}`,
        }) as Limiter)
      : null;
  const perKey =
    config.tokenRateLimitPerKey > 0
      ? (app.createRateLimit({
          max: config.tokenRateLimitPerKey,
          timeWindow: config.rateLimitWindowMs,
          keyGenerator: (request: FastifyRequest) => `key:${String((request.body as Record<string, unknown>).access_key).slice(0, RATE_KEY_MAX_LENGTH)}`,
        }) as Limiter)
      : null;

  async function tokenExchange(request: FastifyRequest, reply: FastifyReply) {
    const userAgent = request.headers['user-agent'];
    const exchanged: NonNullable<typeof request.facts.exchange> = { keyPairId: null, partnerId: null, userAgent: typeof userAgent === 'string' ? userAgent : undefined };
    request.facts.exchange = exchanged;
    if (perAddress !== null) await enforce(perAddress, request, reply, 'from this address');
    const body = await readJsonBody(request.raw, TOKEN_BODY_LIMIT_BYTES);
    request.body = body?.value;
    const fields = body?.value as Record<string, unknown> | null | undefined;
    if (perKey !== null && typeof fields === 'object' && fields !== null && typeof fields.access_key === 'string') {
      // Access keys are public: the secret already verified for the key (an HMAC, no argon2, no database) is
      // neither counted nor refused, so nobody locks a partner out by failing at its key.
      if (!(typeof fields.secret_key === 'string' && exchange.isKnownGood(fields.access_key, fields.secret_key))) {
        await enforce(perKey, request, reply, 'for this access key');
      }
    }
    const { accessKey, secretKey } = parseTokenRequest(body?.value, body?.text ?? null);
    // Never a token from state the database cannot confirm; and no wait on a database known not to answer.
    if (access.held !== null) throw new AppError('database_unavailable', 'the service cannot issue a token right now');
    const minted = await exchange.exchange(accessKey, secretKey, request.client.address, (keyPairId, partnerId) => {
      exchanged.keyPairId = keyPairId;
      exchanged.partnerId = partnerId;
      request.facts.keyPairId = keyPairId;
    });
    exchanged.partnerId = minted.claims.partnerId;
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    return { access_token: minted.accessToken, token_type: 'Bearer', expires_in: minted.expiresIn };
  }

  app.post(TOKEN_PATH, tokenExchange);
  methodNotAllowed(app, TOKEN_PATH, ['POST']);
}
