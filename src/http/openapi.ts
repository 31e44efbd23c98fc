import { statusOf, type ErrorCode } from '../errors.js';
import { TOKEN_TTL_SECONDS } from '../domain/tokens.js';
import { BASE_PATH, TOKEN_BODY_LIMIT_BYTES } from './config.js';

/** The codes this API can answer with, and their statuses (from the one table in src/errors.ts). */
export const API_ERROR_CODES: readonly ErrorCode[] = [
  'invalid_request',
  'invalid_credentials',
  'unauthorized',
  'not_found',
  'method_not_allowed',
  'payload_too_large',
  'unsupported_media_type',
  'request_timeout',
  'rate_limited',
  'internal_error',
  'bad_gateway',
  'upstream_unavailable',
  'database_unavailable',
  'upstream_timeout',
];

const errorResponse = (description: string) => ({
  description,
  headers: { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } },
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
});

const COMPANY_RULES =
  'Every data request names its target company exactly once: as the `company_id` query parameter for GET, ' +
  'HEAD, DELETE and OPTIONS, and as the `company_id` member of the JSON object body for POST, PUT and PATCH. ' +
  'Missing, empty, not a string, repeated, or given in the wrong place: 400 `invalid_request`. A company not ' +
  'mapped to the partner account, or one that does not exist: 404 `not_found` (the two cases are ' +
  'indistinguishable). API keys are never accepted on data requests (400 `invalid_request`). The request is ' +
  'forwarded to the recommendation engine, whose status, headers and body are passed back unchanged.';

export function openApiDocument(): object {
  const dataOperation = (method: string, inBody: boolean) => ({
    summary: `${method} a data resource of the recommendation engine`,
    description: COMPANY_RULES,
    security: [{ bearerAuth: [] }],
    parameters: [
      { name: 'path', in: 'path', required: true, schema: { type: 'string' }, description: 'The engine resource path.' },
      ...(inBody ? [] : [{ name: 'company_id', in: 'query', required: true, schema: { $ref: '#/components/schemas/CompanyId' } }]),
    ],
    ...(inBody
      ? {
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['company_id'],
                  properties: { company_id: { $ref: '#/components/schemas/CompanyId' } },
                  additionalProperties: true,
                },
              },
            },
          },
        }
      : {}),
    responses: {
      default: { description: 'The engine response, passed back unchanged.' },
      '400': errorResponse('Malformed request, or company_id missing, repeated or misplaced (invalid_request).'),
      '401': {
        ...errorResponse('Token missing, malformed, expired or no longer accepted (unauthorized). Exchange the keys again and retry once.'),
        headers: {
          'X-Request-Id': { $ref: '#/components/headers/RequestId' },
          'WWW-Authenticate': { schema: { type: 'string' }, description: 'Bearer, with error="invalid_token" when a token was sent.' },
        },
      },
      '404': errorResponse('Company not mapped to the partner account, or nonexistent (not_found).'),
      '413': errorResponse('Body too large (payload_too_large).'),
      '415': errorResponse('Body not JSON (unsupported_media_type).'),
      '502': errorResponse('Engine unreachable (bad_gateway).'),
      '503': errorResponse('No engine configured (upstream_unavailable), or the service cannot check access (database_unavailable).'),
      '504': errorResponse('Engine too slow (upstream_timeout).'),
    },
  });

  return {
    openapi: '3.1.0',
    info: {
      title: 'Partner Price-Recommendation API',
      version: '1.0.0',
      description:
        'Partner-facing API. Exchange the long-lived key pair for a short-lived JWT at POST /auth/token, then send ' +
        'it as `Authorization: Bearer <token>` on every data request. Every 4xx and 5xx response is an error ' +
        'envelope whose request_id is also sent as the X-Request-Id header.',
    },
    servers: [{ url: BASE_PATH }],
    paths: {
      '/auth/token': {
        post: {
          summary: 'Exchange an API key pair for a token',
          security: [],
          requestBody: {
            required: true,
            description: `A JSON object of at most ${TOKEN_BODY_LIMIT_BYTES} bytes with exactly these two members.`,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['access_key', 'secret_key'],
                  properties: { access_key: { type: 'string' }, secret_key: { type: 'string' } },
                  additionalProperties: false,
                },
              },
            },
          },
          responses: {
            '200': {
              description: 'A token.',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    required: ['access_token', 'token_type', 'expires_in'],
                    properties: {
                      access_token: { type: 'string', description: 'A JWT (EdDSA).' },
                      token_type: { const: 'Bearer' },
                      expires_in: { const: TOKEN_TTL_SECONDS },
                    },
                  },
                },
              },
            },
            '400': errorResponse('Malformed JSON, missing or non-string fields, or other members (invalid_request).'),
            '401': errorResponse(
              'Unknown access key, wrong secret, superseded or revoked pair, or disabled partner: all the same (invalid_credentials).',
            ),
            '405': errorResponse('Any method other than POST (method_not_allowed); the Allow header says POST.'),
            '413': errorResponse('Body too large (payload_too_large).'),
            '415': errorResponse('Body not application/json (unsupported_media_type).'),
            '429': {
              ...errorResponse('Too many exchanges per access key or per client address (rate_limited).'),
              headers: {
                'X-Request-Id': { $ref: '#/components/headers/RequestId' },
                'Retry-After': { schema: { type: 'integer' }, description: 'Seconds to wait.' },
              },
            },
          },
        },
      },
      '/{path}': {
        get: dataOperation('GET', false),
        delete: dataOperation('DELETE', false),
        post: dataOperation('POST', true),
        put: dataOperation('PUT', true),
        patch: dataOperation('PATCH', true),
      },
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
      headers: {
        RequestId: { schema: { type: 'string', format: 'uuid' }, description: 'The request identifier, also in error envelopes.' },
      },
      schemas: {
        CompanyId: { type: 'string', minLength: 1, maxLength: 128, description: 'The target company.' },
        ErrorEnvelope: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'request_id'],
              properties: {
                code: { $ref: '#/components/schemas/ErrorCode' },
                message: { type: 'string' },
                request_id: { type: 'string', format: 'uuid' },
              },
            },
          },
        },
        ErrorCode: {
          type: 'string',
          enum: API_ERROR_CODES,
          'x-status': Object.fromEntries(API_ERROR_CODES.map((code) => [code, statusOf(code)])),
        },
      },
    },
    security: [{ bearerAuth: [] }],
  };
}
