// Which data requests may skip Fastify's intake. The usual data request (GET, a plain path under the base
// path, `company_id` alone in the query, no body, no CORS origin) needs nothing Fastify does before the data
// path (routing, body parsing, CORS): it goes from Node's listener straight to the same pipeline the Fastify
// data route calls. This file decides *whether*; what is done is the pipeline's, the same either way.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { requestHeadProblem } from '../protocol/edges.js';
import type { ClientAddresses } from '../protocol/client-address.js';
import type { FinishedRequest } from '../protocol/finished-request.js';
import { BASE_PATH } from '../protocol/paths.js';
import { DataRequest, type DataPath } from './pipeline.js';

type Listener = (request: IncomingMessage, response: ServerResponse) => void;

const BASE_PREFIX = `${BASE_PATH}/`;
// Letters, digits, `_` and `-` in non-empty segments: a path the router and the pipeline read the same way
// (no `%`, `.`, `\`, no `//`, no trailing `/`).
const PLAIN_PATH = /^\/public\/v1(?:\/[A-Za-z0-9_-]+)+$/;
// company_id alone, in characters no query parser decodes.
const PLAIN_QUERY = /^company_id=[A-Za-z0-9_.:~!$'()*,@-]{1,128}$/;

/**
 * Every route under the base path other than the data routes (the token endpoint, the OpenAPI document, and
 * whatever is added later), collected as Fastify registers them: a path one of them could match is always
 * Fastify's. Install before any route is registered.
 */
export function watchOtherRoutes(app: FastifyInstance): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  app.addHook('onRoute', (route) => {
    const url = route.url;
    if (!url.startsWith(BASE_PATH) || url === BASE_PATH || url === `${BASE_PATH}/*`) return;
    const dynamic = url.search(/[:*(]/);
    if (dynamic < 0) exact.add(url);
    else prefixes.push(url.slice(0, dynamic));
  });
  return (path) => exact.has(path) || (prefixes.length > 0 && prefixes.some((prefix) => path.startsWith(prefix)));
}

export interface BareEntryOptions {
  corsOn: boolean;
  /** True for a path another route under the base path may serve (watchOtherRoutes). */
  otherRoute: (path: string) => boolean;
  /** True once the server is closing: Fastify then answers (with `Connection: close`). */
  closing: () => boolean;
  finish: (finished: FinishedRequest) => void;
  /** The client's address, computed here once for the whole data path. */
  addresses: ClientAddresses;
}

/** True when the request needs nothing of Fastify's intake before the data path. */
function plain(request: IncomingMessage, options: BareEntryOptions): boolean {
  if (request.method !== 'GET') return false;
  const url = request.url!;
  if (!url.startsWith(BASE_PREFIX)) return false;
  const queryStart = url.indexOf('?');
  if (queryStart < 0) return false;
  const path = url.slice(0, queryStart);
  if (!PLAIN_QUERY.test(url.slice(queryStart + 1)) || !PLAIN_PATH.test(path) || options.otherRoute(path)) return false;
  const headers = request.headers;
  if (
    headers['content-length'] !== undefined ||
    headers['transfer-encoding'] !== undefined ||
    headers.expect !== undefined ||
    (options.corsOn && headers.origin !== undefined)
  ) {
    return false;
  }
  return requestHeadProblem(request) === null;
}

/** Node's request listener in front of Fastify's own (`fastify`): the plain data requests go straight to the pipeline. */
export function bareEntry(pipeline: DataPath, options: BareEntryOptions, fastify: Listener): Listener {
  return (request, response) => {
    // A pipelined request behind one still being answered (its response not yet given the socket) goes
    // through Fastify like its predecessor.
    if (response.socket === null || options.closing() || !plain(request, options)) {
      fastify(request, response);
      return;
    }
    pipeline.serve(request, response, new DataRequest(randomUUID(), performance.now(), options.addresses.of(request)), options.finish);
  };
}
