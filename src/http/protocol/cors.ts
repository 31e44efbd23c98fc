// CORS (PUBLIC_API_CORS_ORIGINS): one policy for the data path (data-path/handler.ts) and for the routes
// Fastify serves (the @fastify/cors plugin's delegator in server/app.ts).
import type { IncomingMessage } from 'node:http';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
const ALLOWED_HEADERS = ['Authorization', 'Content-Type'];
const EXPOSED_HEADERS = ['X-Request-Id', 'Retry-After', 'WWW-Authenticate', 'traceresponse'];
const MAX_AGE_SECONDS = 600;

/** The configured origins: only they get CORS handling (preflights included); any other request is an ordinary one. */
export class CorsPolicy {
  private readonly origins: ReadonlySet<string>;

  constructor(origins: readonly string[]) {
    this.origins = new Set(origins);
  }

  get on(): boolean {
    return this.origins.size > 0;
  }

  /** The request's Origin when it is one of the configured ones; else undefined. */
  allowedOrigin(request: IncomingMessage): string | undefined {
    const origin = request.headers.origin;
    return typeof origin === 'string' && this.origins.has(origin) ? origin : undefined;
  }

  /**
   * The headers of any answer under CORS: `Vary: Origin` always (the answer depends on it), and for an
   * allowed origin that origin and the headers a browser script may read. A preflight (OPTIONS from an
   * allowed origin) also gets what may be sent, and is answered 204 without going further.
   */
  addHeaders(request: IncomingMessage, headers: Record<string, string>): 'preflight' | undefined {
    headers.vary = 'Origin';
    const origin = this.allowedOrigin(request);
    if (origin === undefined) return undefined;
    headers['access-control-allow-origin'] = origin;
    headers['access-control-expose-headers'] = EXPOSED_HEADERS.join(', ');
    if (request.method !== 'OPTIONS') return undefined;
    headers['access-control-allow-methods'] = METHODS.join(', ');
    headers['access-control-allow-headers'] = ALLOWED_HEADERS.join(', ');
    headers['access-control-max-age'] = String(MAX_AGE_SECONDS);
    return 'preflight';
  }

  /** The same policy as @fastify/cors options, for the routes Fastify serves. */
  pluginOptions(origin: string) {
    return { origin, methods: METHODS, allowedHeaders: ALLOWED_HEADERS, exposedHeaders: EXPOSED_HEADERS, maxAge: MAX_AGE_SECONDS, strictPreflight: false };
  }
}
