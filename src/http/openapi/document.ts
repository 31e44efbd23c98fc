import { statusOf, type ErrorCode } from '../../errors.js';
import { TOKEN_TTL_SECONDS } from '../../domain/rules/key-pair-state.js';
import { COMPANY_ID_MAX } from '../../domain/rules/validation.js';
import { JWT_BEARER_ASSERTION_TYPE } from '../../domain/runtime/assertions.js';
import { SERVER_DEFAULTS } from '../../config.js';
import { BASE_PATH, TOKEN_BODY_LIMIT_BYTES } from '../protocol/paths.js';

/**
 * Every error code, and whether the public API can answer with it ('api') or only the CLI uses it ('cli').
 * A Record over ErrorCode: a code added to src/errors.ts does not compile until it is placed here, so the
 * document's ErrorCode enum cannot fall behind the server.
 */
const CODE_USE: Record<ErrorCode, 'api' | 'cli'> = {
  invalid_argument: 'cli',
  missing_argument: 'cli',
  confirmation_required: 'cli',
  invalid_request: 'api',
  invalid_credentials: 'api',
  unauthorized: 'api',
  // Only the secret-scanning receiver (POST /secret-scanning/github, outside the partners' API) answers it.
  invalid_signature: 'api',
  permission_denied: 'cli',
  address_not_allowed: 'api',
  not_found: 'api',
  partner_not_found: 'cli',
  not_confirmed: 'cli',
  method_not_allowed: 'api',
  request_timeout: 'api',
  active_key_pair_exists: 'cli',
  no_active_key_pair: 'cli',
  partner_exists: 'cli',
  public_key_exists: 'cli',
  partner_disabled: 'cli',
  concurrent_update: 'cli',
  payload_too_large: 'api',
  expectation_failed: 'api',
  unsupported_media_type: 'api',
  rate_limited: 'api',
  cancelled: 'cli',
  internal_error: 'api',
  bad_gateway: 'api',
  upstream_unavailable: 'api',
  database_unavailable: 'api',
  // Checked when the server starts (it refuses to start); never the answer to a request.
  schema_out_of_date: 'cli',
  audit_chain_broken: 'cli',
  // Checked when the server starts too: an SQLite path with no file refuses to start.
  database_not_found: 'cli',
  webhook_exists: 'cli',
  signing_key_unavailable: 'api',
  // Only the secret-scanning receiver answers it.
  key_list_unavailable: 'api',
  clock_skewed: 'api',
  upstream_timeout: 'api',
};

/** The codes this API can answer with (their statuses come from the one table in src/errors.ts). */
export const API_ERROR_CODES: readonly ErrorCode[] = (Object.keys(CODE_USE) as ErrorCode[]).filter((code) => CODE_USE[code] === 'api');

/** Visible ASCII, 1 to 128 characters: the same rule as validation.ts's isValidCompanyId. */
export const COMPANY_ID_PATTERN = `^[!-~]{1,${COMPANY_ID_MAX}}$`;

/**
 * One segment of a data path, as the value of the `path` parameter (which clients percent-encode): no control
 * character, slash or backslash (their escapes are refused), and not a dot segment, whose escapes the server
 * refuses too. Plain character classes, so generators can produce and negate it.
 */
export const DATA_PATH_SCHEMA = {
  type: 'string',
  minLength: 1,
  pattern: '^[^\\x00-\\x1F\\x7F/\\\\]+$',
  not: { pattern: '^(?:\\.|%2[eE]){1,2}(?:(?:;|%3[bB]).*)?$' },
} as const;

const ref = (kind: 'schemas' | 'responses' | 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

/** A schema matching an object that has `member` (for `not`). */
const present = (member: string) => ({ required: [member], properties: { [member]: {} } });

type Headers = Record<string, object>;
const REQUEST_ID: Headers = { 'X-Request-Id': ref('headers', 'RequestId') };

/** An error answer: the envelope (no body for HEAD) with the request id, plus any headers given. */
function errorResponse(description: string, options: { head?: boolean; headers?: Headers; schema?: string } = {}) {
  return {
    description,
    headers: { ...REQUEST_ID, ...options.headers },
    ...(options.head ? {} : { content: json(ref('schemas', options.schema ?? 'ErrorEnvelope')) }),
  };
}

const EXPECTATION_FAILED =
  'expectation_failed: an Expect header other than exactly 100-continue; the request is not served and the connection is closed.';

const GATEWAY_OWN =
  'Every 4xx and 5xx is an error envelope whose `request_id` is also sent as `X-Request-Id`; every answer, ' +
  'successful or not, carries `X-Request-Id` (a UUIDv7: it carries its time). The operator can explain every ' +
  "error's `request_id`, whichever server answered: a refusal (401, 403, 404, 429, a 400 about credentials) with " +
  "the rule that refused it, a 5xx with its cause (the engine's failure, the database's) and who can act on it: " +
  'quote it when asking why a request was refused or failed.';

const DATA_RULES =
  'Every data request carries `Authorization: Bearer <token>` and names its target company exactly once: as ' +
  'the `company_id` query parameter for GET, HEAD, DELETE and OPTIONS, and as the `company_id` member of the ' +
  'JSON object body for POST, PUT and PATCH. Missing, empty, not a string, repeated, or given in the wrong ' +
  'place: 400 `invalid_request`. A company not mapped to the partner account, or one that does not exist: 404 ' +
  '`not_found` (the two cases are indistinguishable; so is an id that could never be valid). API keys are never ' +
  'accepted on data requests (400 `invalid_request`). Other query parameters, the path after the base path, the ' +
  'body (byte for byte) and the headers (minus credentials and hop-by-hop headers) are forwarded to the ' +
  'recommendation engine, whose answer comes back with its status. Methods other than GET, HEAD, DELETE, ' +
  'OPTIONS, POST, PUT and PATCH: 405 `method_not_allowed` with `Allow`.';

const ENGINE_ANSWER =
  'The recommendation engine\'s answer, its status kept. A 2xx or 3xx answer is passed back unchanged (minus ' +
  'hop-by-hop headers and the engine\'s identifying headers); an engine 4xx or 5xx comes back as an error ' +
  'envelope that keeps the engine\'s own `code` and `message` when it sent an envelope. The engine\'s payloads ' +
  'are the engine\'s own and are not described here.';

type DataMethod = 'get' | 'head' | 'delete' | 'options' | 'post' | 'put' | 'patch';
const BODY_METHODS: readonly DataMethod[] = ['post', 'put', 'patch'];

function dataOperation(method: DataMethod, atBase: boolean) {
  const upper = method.toUpperCase();
  const head = method === 'head';
  const inBody = BODY_METHODS.includes(method);
  const readsBody = inBody || method === 'delete' || method === 'options';
  const where = atBase ? 'the engine\'s base path' : 'an engine resource';
  const name = `${method}${atBase ? 'EngineRoot' : 'EngineResource'}`;
  const dataError = (description: string, headers?: Headers) => errorResponse(description, { head, headers, schema: 'DataErrorEnvelope' });
  const gatewayError = (description: string, headers?: Headers) => errorResponse(description, { head, headers });
  const rateHeaders: Headers = {
    'Retry-After': ref('headers', 'RetryAfter'),
    'RateLimit-Limit': ref('headers', 'RateLimitLimit'),
    'RateLimit-Remaining': ref('headers', 'RateLimitRemaining'),
    'RateLimit-Reset': ref('headers', 'RateLimitReset'),
  };
  return {
    operationId: name,
    tags: ['data'],
    summary: `${upper} ${where}`,
    description:
      DATA_RULES +
      (head ? ' HEAD is answered as GET would be, without a body.' : '') +
      (method === 'get' || head ? ` A ${upper} request must not carry a body (400 \`invalid_request\`).` : '') +
      (method === 'options'
        ? ' When the operator has configured CORS origins, a preflight from one of them (`Origin` plus ' +
          '`Access-Control-Request-Method`, no token or company needed) is answered 204 by the service itself; ' +
          'otherwise OPTIONS is an ordinary data request.'
        : ''),
    security: [{ bearerAuth: [] }],
    parameters: [...(atBase ? [] : [ref('parameters', 'DataPath')]), ...(inBody ? [] : [ref('parameters', 'CompanyIdQuery')])],
    ...(readsBody
      ? {
          requestBody: inBody
            ? {
                required: true,
                description: 'A JSON object with the target company; every other member is the engine\'s and is forwarded byte for byte.',
                content: json(ref('schemas', 'CompanyBody')),
              }
            : {
                required: false,
                description: 'An optional JSON body for the engine, forwarded byte for byte; the company goes in the query, not here.',
                content: json(ref('schemas', 'ForwardedBody')),
              },
        }
      : {}),
    responses: {
      '2XX': {
        description: ENGINE_ANSWER,
        headers: REQUEST_ID,
        ...(head ? {} : { content: { '*/*': { schema: {} } } }),
      },
      ...(method === 'options'
        ? {
            '204': {
              description: 'A CORS preflight from an allowed origin (only when CORS origins are configured).',
              headers: { ...REQUEST_ID, ...CORS_PREFLIGHT_HEADERS },
            },
          }
        : {}),
      '400': dataError(
        'invalid_request: the request is malformed; company_id missing, empty, repeated or misplaced; API keys ' +
          'on a data request; a path the `path` parameter refuses (dot segments, control characters, backslashes, ' +
          'escaped slashes, broken escapes)' +
          (method === 'get' || head ? '; a body' : '') +
          '. Or the engine\'s own 400.',
      ),
      '401': gatewayError('unauthorized: token missing, malformed, expired or no longer accepted. Exchange the keys again and retry once.', {
        'WWW-Authenticate': ref('headers', 'WwwAuthenticate'),
      }),
      '403': gatewayError(
        'address_not_allowed: the partner has network rules and this client address is outside them (the rules are never named).',
      ),
      '404': dataError('not_found: the company is not mapped to the partner account, or does not exist. Or the engine\'s own 404.'),
      '408': ref('responses', 'RequestTimeout'),
      '417': head ? errorResponse(EXPECTATION_FAILED, { head }) : ref('responses', 'ExpectationFailed'),
      ...(readsBody
        ? {
            '413': gatewayError(`payload_too_large: the body is over the configured limit (${SERVER_DEFAULTS.bodyLimitBytes} bytes by default).`),
            '415': gatewayError('unsupported_media_type: a body that is not application/json.'),
          }
        : {}),
      '429': dataError(
        'rate_limited: too many requests for this partner; Retry-After and the RateLimit-* headers say when to retry. Or the engine\'s own 429.',
        rateHeaders,
      ),
      '500': dataError('internal_error: a bug in the service. Or the engine\'s own 500.'),
      '502': dataError('bad_gateway: the engine could not be reached, or answered 401 or 407 itself. Or the engine\'s own 502.'),
      '503': dataError(
        'upstream_unavailable: no engine is configured; database_unavailable: the service cannot confirm access right now. Or the engine\'s own 503.',
      ),
      '504': dataError(
        `upstream_timeout: the engine did not answer within the upstream timeout (${SERVER_DEFAULTS.upstreamTimeoutMs} ms by default). Or the engine's own 504.`,
      ),
      default: {
        description: `Any other status is the engine's. ${ENGINE_ANSWER}`,
        headers: REQUEST_ID,
        ...(head ? {} : { content: { '*/*': { schema: {} } } }),
      },
    },
  };
}

const CORS_PREFLIGHT_HEADERS: Headers = {
  'Access-Control-Allow-Origin': { schema: { type: 'string' }, description: 'The request\'s Origin, when it is an allowed one.' },
  'Access-Control-Allow-Methods': { schema: { type: 'string' }, description: 'GET, HEAD, POST, PUT, PATCH, DELETE.' },
  'Access-Control-Allow-Headers': { schema: { type: 'string' }, description: 'Authorization, Content-Type.' },
  'Access-Control-Max-Age': { schema: { type: 'integer' }, description: '600.' },
};

/** OPTIONS on a path that serves only `allow`: a CORS preflight when configured, else 405. */
function preflightOperation(operationId: string, tag: string, path: string, allow: string) {
  return {
    operationId,
    tags: [tag],
    summary: `CORS preflight for ${path}`,
    description:
      `${path} serves only ${allow}. When the operator has configured CORS origins, a preflight from one of them ` +
      `is answered 204; any other OPTIONS request is refused with 405 \`method_not_allowed\` and \`Allow: ${allow}\`.`,
    security: [],
    responses: {
      '204': {
        description: 'A CORS preflight from an allowed origin (only when CORS origins are configured).',
        headers: { ...REQUEST_ID, ...CORS_PREFLIGHT_HEADERS },
      },
      '400': ref('responses', 'BadRequest'),
      '405': errorResponse(`method_not_allowed: not a preflight from an allowed origin. \`Allow\` lists ${allow}.`, {
        headers: { Allow: ref('headers', 'Allow') },
      }),
      '408': ref('responses', 'RequestTimeout'),
      '417': ref('responses', 'ExpectationFailed'),
      '500': ref('responses', 'InternalError'),
    },
  };
}

export function openApiDocument(): object {
  const documentOperation = (method: 'get' | 'head') => ({
    operationId: method === 'get' ? 'getOpenApiDocument' : 'headOpenApiDocument',
    tags: ['meta'],
    summary: method === 'get' ? 'This OpenAPI document' : 'This OpenAPI document\'s headers',
    description: 'No token needed. Other methods than GET and HEAD: 405 `method_not_allowed` with `Allow: GET, HEAD`.',
    security: [],
    responses: {
      '200': {
        description: 'The OpenAPI 3.1 document describing this API.',
        headers: REQUEST_ID,
        ...(method === 'get' ? { content: json({
                type: 'object',
                required: ['openapi', 'info', 'paths'],
                properties: { openapi: { type: 'string' }, info: { type: 'object' }, paths: { type: 'object' } },
              }) } : {}),
      },
      '400': method === 'get' ? ref('responses', 'BadRequest') : errorResponse('invalid_request: the request is malformed.', { head: true }),
      '408': ref('responses', 'RequestTimeout'),
      '417': method === 'get' ? ref('responses', 'ExpectationFailed') : errorResponse(EXPECTATION_FAILED, { head: true }),
      '500': method === 'get' ? ref('responses', 'InternalError') : errorResponse('internal_error: a bug in the service.', { head: true }),
    },
  });

  const dataPathItem = (atBase: boolean) => ({
    ...(atBase
      ? { summary: 'The engine\'s base path', description: 'The base path itself (with or without a trailing slash) is a data route too, forwarded to the engine\'s base path.' }
      : {
          summary: 'Any engine resource, at any depth',
          description:
            'Every path under the base path other than /auth/token and /openapi.json, at any depth ' +
            '(`/prices`, `/prices/sku/A1`, `/auth/token/x`), is a data route forwarded to the same path under the engine\'s base path.',
        }),
    get: dataOperation('get', atBase),
    head: dataOperation('head', atBase),
    delete: dataOperation('delete', atBase),
    options: dataOperation('options', atBase),
    post: dataOperation('post', atBase),
    put: dataOperation('put', atBase),
    patch: dataOperation('patch', atBase),
  });

  return {
    openapi: '3.1.0',
    info: {
      title: 'Partner Price-Recommendation API',
      version: '1.0.0',
      description:
        'Partner-facing API of the price-recommendation engines, for server-side clients. Exchange the long-lived ' +
        `key pair for a JWT at POST /auth/token (it expires ${TOKEN_TTL_SECONDS} s after issue; there is no refresh ` +
        'token: exchange again about 60 s before expiry), then send it as `Authorization: Bearer <token>` on every ' +
        'data request, naming the target company with `company_id`. On a 401 from a data request, exchange again ' +
        `and retry once. ${GATEWAY_OWN} Malformed requests get 400 \`invalid_request\` on every path; a client that ` +
        `does not send its whole request within the request timeout (${SERVER_DEFAULTS.requestTimeoutMs} ms by ` +
        'default) gets 408 `request_timeout` and the connection is closed.',
    },
    servers: [{ url: BASE_PATH, description: 'The API\'s base path on the serving host.' }],
    tags: [
      { name: 'auth', description: 'Exchanging the API key pair for a token.' },
      { name: 'data', description: 'Requests to the recommendation engines, gated by token and company.' },
      { name: 'meta', description: 'This document.' },
    ],
    paths: {
      '/auth/token': {
        description: 'Serves POST only; any other method gets 405 `method_not_allowed` with `Allow: POST`.',
        post: {
          operationId: 'exchangeToken',
          tags: ['auth'],
          summary: 'Exchange an API key pair for a token (its secret, or a client assertion signed with its private key)',
          description:
            'The keys go only in the body, never in a header or the URL. Throttled per access key and per client ' +
            'address (429 `rate_limited` with `Retry-After`); an exchange with the secret already verified for ' +
            'that key is never throttled per key, nor is a client assertion (no secret to guess). A public-key pair ' +
            'presents a client assertion (RFC 7523 §2.2, `private_key_jwt`): a JWT signed with its private key, ' +
            '`iss` = `sub` = the access key, `aud` the token endpoint\'s public URL (or its issuer URL), `exp` at ' +
            'most 300 s after `iat`, `iat` at most 30 s ahead, a `jti` used once, `alg` the registered key\'s ' +
            '(EdDSA, ES256 or RS256), `kid` (optional) its RFC 7638 thumbprint.',
          security: [],
          requestBody: {
            required: true,
            description: `At most ${TOKEN_BODY_LIMIT_BYTES} bytes: a JSON object with access_key and secret_key, or with a client assertion; or the client assertion form-encoded as OAuth clients send it. Each member once.`,
            content: {
              ...json(ref('schemas', 'TokenRequest')),
              'application/x-www-form-urlencoded': { schema: ref('schemas', 'ClientAssertionForm') },
            },
          },
          responses: {
            '200': {
              description: 'A token.',
              headers: {
                ...REQUEST_ID,
                'Cache-Control': { schema: { const: 'no-store' }, description: 'no-store' },
                Pragma: { schema: { const: 'no-cache' }, description: 'no-cache' },
              },
              content: json(ref('schemas', 'Token')),
            },
            '400': errorResponse('invalid_request: malformed JSON, missing or non-string fields, other or repeated members, or a malformed request.'),
            '401': errorResponse(
              'invalid_credentials: unknown access key, wrong secret, a client assertion that does not hold (signature, alg, kid, aud, expiry, lifetime, replayed jti), a kind of pair the partner may not use, superseded or revoked pair, or disabled partner: all the same.',
            ),
            '403': errorResponse(
              'address_not_allowed: the key pair\'s partner has network rules and this client address is outside them (the rules are never named).',
            ),
            '408': ref('responses', 'RequestTimeout'),
      '417': ref('responses', 'ExpectationFailed'),
            '413': errorResponse(`payload_too_large: the body is over ${TOKEN_BODY_LIMIT_BYTES} bytes.`),
            '415': errorResponse('unsupported_media_type: the body is not application/json.'),
            '429': errorResponse('rate_limited: too many exchanges for this access key or from this address.', {
              headers: { 'Retry-After': ref('headers', 'RetryAfter') },
            }),
            '500': ref('responses', 'InternalError'),
            '503': errorResponse(
              'database_unavailable: the service cannot reach its database right now; signing_key_unavailable: it cannot issue tokens right now; clock_skewed: this instance\'s clock is off the database\'s beyond the tolerance, so it issues no token (another instance may).',
            ),
          },
        },
        options: preflightOperation('preflightToken', 'auth', '/auth/token', 'POST'),
      },
      '/openapi.json': {
        description: 'Serves GET and HEAD, without a token.',
        get: documentOperation('get'),
        head: documentOperation('head'),
        options: preflightOperation('preflightOpenApiDocument', 'meta', '/openapi.json', 'GET, HEAD'),
      },
      '/': dataPathItem(true),
      '/{path}': dataPathItem(false),
    },
    components: {
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: `A token from POST /auth/token; it expires ${TOKEN_TTL_SECONDS} s after issue. Re-exchange about 60 s before.`,
        },
      },
      parameters: {
        DataPath: {
          name: 'path',
          in: 'path',
          required: true,
          description:
            'The engine resource: the rest of the URL path after the base path, forwarded as sent. As a parameter ' +
            'it is one segment (`prices`); a deeper resource (`prices/sku/A1`) is reached the same way with its ' +
            'slashes written as they are. An escaped slash (`%2F`) is not a separator: 400 `invalid_request`, ' +
            'like a `.` or `..` segment (also percent-encoded, also with `;parameters` such as `..;x`), a control ' +
            'character (U+0000 to U+001F, U+007F) or a backslash, escaped or not, and a broken percent-escape ' +
            '(one that does not decode to UTF-8 included).',
          schema: DATA_PATH_SCHEMA,
        },
        CompanyIdQuery: {
          name: 'company_id',
          in: 'query',
          required: true,
          description: 'The target company, exactly once. For POST, PUT and PATCH it goes in the body instead (400 if in the query).',
          schema: ref('schemas', 'CompanyId'),
        },
      },
      headers: {
        RequestId: { schema: { type: 'string', format: 'uuid' }, description: 'The request identifier (a UUIDv7, carrying its time), also in error envelopes; the operator can explain any error from it. A client-sent one is ignored.' },
        WwwAuthenticate: { schema: { type: 'string' }, description: '`Bearer`, or `Bearer error="invalid_token"` when a token was sent.' },
        RetryAfter: { schema: { type: 'integer', minimum: 1 }, description: 'Seconds to wait before retrying.' },
        RateLimitLimit: { schema: { type: 'integer' }, description: 'Requests allowed in the current window.' },
        RateLimitRemaining: { schema: { type: 'integer' }, description: 'Requests left in the current window.' },
        RateLimitReset: { schema: { type: 'integer' }, description: 'Seconds until the window resets.' },
        Allow: { schema: { type: 'string' }, description: 'The methods the path serves.' },
      },
      responses: {
        BadRequest: errorResponse('invalid_request: the request is malformed (for example an HTTP/1.1 request without Host).'),
        RequestTimeout: errorResponse(
          'request_timeout: the whole request was not received within the request timeout; the connection is then closed.',
        ),
        ExpectationFailed: errorResponse(EXPECTATION_FAILED),
        InternalError: errorResponse('internal_error: a bug in the service; details are only in its log.'),
      },
      schemas: {
        CompanyId: {
          type: 'string',
          minLength: 1,
          maxLength: COMPANY_ID_MAX,
          pattern: COMPANY_ID_PATTERN,
          description:
            `The target company: 1 to ${COMPANY_ID_MAX} visible ASCII characters (no spaces or control characters). ` +
            'On a data request an id outside this rule can never be mapped, so it gets the same 404 `not_found` as any unmapped id.',
          examples: ['company-42'],
        },
        CompanyBody: {
          type: 'object',
          required: ['company_id'],
          properties: { company_id: ref('schemas', 'CompanyId') },
          additionalProperties: true,
          not: { anyOf: [present('access_key'), present('secret_key')] },
          description: 'A JSON object naming the company once; it must not carry API keys. The engine\'s own members are forwarded as they are.',
        },
        ForwardedBody: {
          description: 'Any JSON value for the engine; an object must not carry company_id or API keys.',
          not: {
            type: 'object',
            anyOf: [present('company_id'), present('access_key'), present('secret_key')],
          },
        },
        TokenRequest: {
          oneOf: [ref('schemas', 'SecretTokenRequest'), ref('schemas', 'ClientAssertionRequest')],
        },
        SecretTokenRequest: {
          type: 'object',
          required: ['access_key', 'secret_key'],
          properties: {
            access_key: { type: 'string', description: 'The public half of the key pair.' },
            secret_key: { type: 'string', description: 'The secret half of the key pair.' },
          },
          additionalProperties: false,
        },
        ClientAssertionRequest: {
          type: 'object',
          required: ['client_assertion_type', 'client_assertion'],
          properties: {
            client_assertion_type: { type: 'string', const: JWT_BEARER_ASSERTION_TYPE },
            client_assertion: { type: 'string', description: 'A JWT signed with the private key of a public-key pair (RFC 7523 §2.2).' },
            grant_type: { type: 'string', const: 'client_credentials' },
            client_id: { type: 'string', description: "Optional; when given, the assertion's iss (the access key)." },
          },
          additionalProperties: false,
        },
        ClientAssertionForm: {
          type: 'object',
          required: ['grant_type', 'client_assertion_type', 'client_assertion'],
          properties: {
            grant_type: { type: 'string', const: 'client_credentials' },
            client_assertion_type: { type: 'string', const: JWT_BEARER_ASSERTION_TYPE },
            client_assertion: { type: 'string', description: 'A JWT signed with the private key of a public-key pair (RFC 7523 §2.2).' },
            client_id: { type: 'string', description: "Optional; when given, the assertion's iss (the access key)." },
          },
          additionalProperties: false,
        },
        Token: {
          type: 'object',
          required: ['access_token', 'token_type', 'expires_in'],
          properties: {
            access_token: { type: 'string', description: 'A JWT (EdDSA).' },
            token_type: { type: 'string', const: 'Bearer' },
            expires_in: { type: 'integer', const: TOKEN_TTL_SECONDS, description: 'Seconds until the token expires.' },
          },
        },
        ErrorEnvelope: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'request_id'],
              properties: {
                code: ref('schemas', 'ErrorCode'),
                message: { type: 'string', description: 'Human-readable; 5xx messages are fixed texts.' },
                request_id: { type: 'string', format: 'uuid', description: 'The same value as the X-Request-Id header; support explains a refusal from it.' },
              },
            },
          },
          description: 'Every 4xx and 5xx answer the service itself gives.',
        },
        DataErrorEnvelope: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'request_id'],
              properties: {
                code: {
                  anyOf: [ref('schemas', 'ErrorCode'), { type: 'string', description: 'An engine\'s own code, from an envelope the engine sent.' }],
                },
                message: { type: 'string' },
                request_id: { type: 'string', format: 'uuid', description: 'The same value as the X-Request-Id header; support explains a refusal from it.' },
              },
            },
          },
          description: 'An error on a data route: the service\'s own (code from ErrorCode) or the engine\'s, with the service\'s request_id.',
        },
        ErrorCode: {
          type: 'string',
          enum: API_ERROR_CODES,
          description: 'The service\'s error codes; `x-status` gives the status each is answered with.',
          'x-status': Object.fromEntries(API_ERROR_CODES.map((code) => [code, statusOf(code)])),
        },
      },
    },
    security: [{ bearerAuth: [] }],
  };
}
