// POST /auth/token: a key pair exchanged for a token, with its secret or a client assertion (private_key_jwt). One function whose body is its order: throttle by
// address, read the body, throttle by access key, exchange, answer. The kernel (server/app.ts) gives it its
// request id, client and head checks before, and writes its errors and its finished record after.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { countTopLevelKey } from '../data-path/gate.js';
import { isFormMediaType, readFormBody, readJsonBody } from '../protocol/json-body.js';
import { JWT_BEARER_ASSERTION_TYPE } from '../../domain/runtime/assertions.js';
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

/** What a token request presents: a pair's access key and secret, or a client assertion (private_key_jwt). */
type TokenRequest = { kind: 'secret'; accessKey: string; secretKey: string } | { kind: 'assertion'; assertion: string };

const SECRET_FIELDS = ['access_key', 'secret_key'];
/** RFC 7523 §2.2's two fields; grant_type (client_credentials) and client_id as OAuth clients add them. */
const ASSERTION_FIELDS = ['client_assertion_type', 'client_assertion', 'grant_type', 'client_id'];

/**
 * The request's fields, whichever body form: JSON with access_key and secret_key (or the assertion's
 * fields), or form-encoded with grant_type=client_credentials and the assertion's fields.
 */
function parseTokenRequest(fields: Record<string, unknown>, form: boolean): TokenRequest {
  const names = Object.keys(fields);
  if (names.includes('client_assertion') || names.includes('client_assertion_type')) {
    const { client_assertion_type: type, client_assertion: assertion, grant_type: grant, client_id: clientId } = fields;
    if (names.some((name) => !ASSERTION_FIELDS.includes(name))) {
      throw new AppError('invalid_request', 'the body may hold only client_assertion_type, client_assertion, grant_type and client_id', MALFORMED);
    }
    if (type !== JWT_BEARER_ASSERTION_TYPE || typeof assertion !== 'string') {
      throw new AppError('invalid_request', `client_assertion_type must be ${JWT_BEARER_ASSERTION_TYPE} and client_assertion a JWT`, MALFORMED);
    }
    if ((form || grant !== undefined) && grant !== 'client_credentials') {
      throw new AppError('invalid_request', 'grant_type must be client_credentials', MALFORMED);
    }
    // OAuth clients may name themselves; the name must be the assertion's issuer, checked with it.
    if (clientId !== undefined && typeof clientId !== 'string') throw new AppError('invalid_request', 'client_id must be a string', MALFORMED);
    return { kind: 'assertion', assertion };
  }
  if (form) throw new AppError('invalid_request', 'a form-encoded body must hold grant_type, client_assertion_type and client_assertion', MALFORMED);
  const { access_key: accessKey, secret_key: secretKey } = fields;
  if (typeof accessKey !== 'string' || typeof secretKey !== 'string') {
    throw new AppError('invalid_request', 'access_key and secret_key are required and must be strings', MALFORMED);
  }
  if (names.length !== SECRET_FIELDS.length) {
    throw new AppError('invalid_request', 'the body may hold only access_key and secret_key', MALFORMED);
  }
  return { kind: 'secret', accessKey, secretKey };
}

/** The body's fields: a JSON object (a key given twice refused), or a form (a field given twice refused). */
async function readTokenFields(request: FastifyRequest): Promise<{ fields: Record<string, unknown>; form: boolean }> {
  const type = request.headers['content-type'];
  if (type !== undefined && isFormMediaType(type)) {
    const form = await readFormBody(request.raw, TOKEN_BODY_LIMIT_BYTES);
    if (form === null) throw new AppError('invalid_request', 'a form-encoded body must hold grant_type, client_assertion_type and client_assertion', MALFORMED);
    return { fields: form, form: true };
  }
  const body = await readJsonBody(request.raw, TOKEN_BODY_LIMIT_BYTES);
  const value = body?.value;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new AppError('invalid_request', 'the body must be a JSON object with access_key and secret_key, or with a client assertion', MALFORMED);
  }
  // JSON.parse keeps the last of repeated members; a body that repeats a key is ambiguous, so it is refused.
  for (const name of [...SECRET_FIELDS, ...ASSERTION_FIELDS]) {
    if (body !== null && countTopLevelKey(body.text, name) > 1) throw new AppError('invalid_request', `${name} may be given only once`, MALFORMED);
  }
  return { fields: value as Record<string, unknown>, form: false };
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
    const read = await readTokenFields(request);
    request.body = read.fields;
    const { fields } = read;
    if (perKey !== null && typeof fields.access_key === 'string') {
      // Access keys are public: the secret already verified for the key (an HMAC, no argon2, no database) is
      // neither counted nor refused, so nobody locks a partner out by failing at its key.
      if (!(typeof fields.secret_key === 'string' && exchange.isKnownGood(fields.access_key, fields.secret_key))) {
        await enforce(perKey, request, reply, 'for this access key');
      }
    }
    const presented = parseTokenRequest(read.fields, read.form);
    // Never a token from state the database cannot confirm; and no wait on a database known not to answer.
    if (access.held !== null) throw new AppError('database_unavailable', 'the service cannot issue a token right now');
    const onPair = (keyPairId: string, partnerId: string) => {
      exchanged.keyPairId = keyPairId;
      exchanged.partnerId = partnerId;
      request.facts.keyPairId = keyPairId;
    };
    // No per-key throttle for an assertion: there is no secret to guess, and its key is checked by signature.
    const minted =
      presented.kind === 'secret'
        ? await exchange.exchange(presented.accessKey, presented.secretKey, request.client.address, onPair)
        : await exchange.exchangeAssertion(presented.assertion, request.client.address, onPair, typeof fields.client_id === 'string' ? fields.client_id : undefined);
    exchanged.partnerId = minted.claims.partnerId;
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    return { access_token: minted.accessToken, token_type: 'Bearer', expires_in: minted.expiresIn };
  }

  app.post(TOKEN_PATH, tokenExchange);
  methodNotAllowed(app, TOKEN_PATH, ['POST']);
}
