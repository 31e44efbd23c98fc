// How the data path is mounted beside Fastify: Fastify's `serverFactory` option builds the HTTP server, whose
// request listener sends every request under the base path that no other route serves to the data handler
// (data-path/handler.ts), and everything else to Fastify's own handler (routing, hooks, the other routes).
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { DataHandler } from '../data-path/handler.js';
import { BASE_PATH } from '../protocol/paths.js';

type Listener = (request: IncomingMessage, response: ServerResponse) => void;

const BASE_PREFIX = `${BASE_PATH}/`;
// An absolute-form target's scheme and authority, as Fastify's router removes them before routing.
const ABSOLUTE_FORM = /^https?:\/\/.*?\//i;

export class DataMount {
  private readonly exact = new Set<string>();
  private readonly prefixes: string[] = [];

  constructor(private readonly handler: DataHandler) {}

  /**
   * Collects every route under the base path as Fastify registers them (the token endpoint, the OpenAPI
   * document, whatever is added later): a path one of them could match is Fastify's. Install before any
   * route is registered.
   */
  watch(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      const url = route.url;
      if (!url.startsWith(BASE_PATH)) return;
      const dynamic = url.search(/[:*(]/);
      if (dynamic < 0) this.exact.add(url);
      else this.prefixes.push(url.slice(0, dynamic));
    });
  }

  /** True for a request target the data handler serves: the base path or below, not another route's. */
  owns(url: string): boolean {
    let path = url;
    if (path.charCodeAt(0) !== 47 /* / */) {
      const authority = ABSOLUTE_FORM.exec(url);
      if (authority === null) return false;
      path = url.slice(authority[0].length - 1);
    }
    const query = path.indexOf('?');
    if (query >= 0) path = path.slice(0, query);
    const fragment = path.indexOf('#');
    if (fragment >= 0) path = path.slice(0, fragment);
    if (path !== BASE_PATH && !path.startsWith(BASE_PREFIX)) return false;
    // The router matches the decoded path; one that does not decode is the data handler's to refuse.
    if (path.includes('%')) {
      try {
        path = decodeURIComponent(path);
      } catch {
        return true;
      }
    }
    if (this.exact.has(path)) return false;
    for (const prefix of this.prefixes) if (path.startsWith(prefix)) return false;
    return true;
  }

  /** Fastify's `serverFactory`: the HTTP server (with `options`), its listener choosing between the two handlers. */
  serverFactory(options: ServerOptions, keepAliveTimeoutMs: number): (fastify: Listener) => Server {
    return (fastify) => {
      const server = createServer(options, (request, response) => {
        if (this.owns(request.url!)) this.handler.handle(request, response);
        else fastify(request, response);
      });
      server.keepAliveTimeout = keepAliveTimeoutMs;
      return server;
    };
  }
}
