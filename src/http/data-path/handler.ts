// The one handler of a data request (every request under the base path that no other route serves; the
// server sends it here, server/data-mount.ts). `handle` sequences the steps, written once against Node's
// request and response types:
//   read (id, client, head, method, CORS, trace) -> gate + limit (before any body is read) -> body ->
//   authorise (the company) -> forward -> answer -> finish,
// with one writer for every answer (errors included) and one finished record. Each step goes on at once
// when it can say without waiting (the usual case: no closure, no promise), else once it has.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { AccessState } from '../../domain/access.js';
import { ExpiredToken, type TokenClaims, type TokenVerifier } from '../../domain/tokens.js';
import { AppError, isAppError } from '../../errors.js';
import type { DataLimits, Policy } from '../counters/limits.js';
import type { ClientAddress, ClientAddresses } from '../protocol/client-address.js';
import type { CorsPolicy } from '../protocol/cors.js';
import { requestHeadProblem } from '../protocol/edges.js';
import { errorAnswer } from '../protocol/errors.js';
import type { FinishedRequest } from '../protocol/finished-request.js';
import { isJsonMediaType, parseJsonBody, type RequestBody } from '../protocol/json-body.js';
import { traceContextOf, traceparentOf, type TraceContext } from '../protocol/trace-context.js';
import type { EngineResponse, Forwarder } from './forwarder.js';
import { engineErrorEnvelope, engineRequestHeaders, engineResponseHeaders, engineTarget } from './forwarding.js';
import { bearerToken, companyOf, queryOf, refuseKeysInUrl, tokenRefused, type Query } from './gate.js';
import type { RequestSpans, SpanExport } from './spans.js';

/** The methods a data path takes. */
const DATA_METHODS = ['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'];
const ALLOW = DATA_METHODS.join(', ');
const DATA_METHOD_SET = new Set(DATA_METHODS);
const BODY_METHODS = new Set(['DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH']);

// The engine's own framing and what it says of its body: an error answer is the gateway's envelope instead.
const ENGINE_ERROR_DROPPED = ['content-type', 'content-length', 'content-encoding', 'content-range', 'etag', 'last-modified', 'www-authenticate', 'proxy-authenticate'];
const EMPTY = Buffer.alloc(0);

/** One data request on its way through the steps. */
class DataRequest {
  /** The verified token's claims, once admitted. */
  claims: TokenClaims | null = null;
  /** A verified token's claims that the gate then refused: for the record of the refusal. */
  presented: TokenClaims | null = null;
  /** The company the request is authorised for, once authorised. */
  companyId: string | null = null;
  /** The company the request named, authorised or not (for the record of a refusal). */
  companyNamed: string | null = null;
  /** Headers every answer to this request carries (CORS, WWW-Authenticate, RateLimit-*, traceresponse, Allow). */
  readonly headers: Record<string, string> = {};
  /** The query, as parsed once by the gate. */
  query: Query = {};
  /** The JSON body, once read (POST, PUT, PATCH, DELETE, OPTIONS with one); null: none. */
  body: RequestBody | null = null;
  /** The trace this request belongs to; null until read (a request refused at the door has none). */
  trace: TraceContext | null = null;
  /** Its spans, when they are exported; null otherwise (no span objects at all). */
  spans: RequestSpans | null = null;
  /** How long the engine took to answer (0 until it has). */
  engineMs = 0;
  /** performance.now() when the request left for the engine. */
  sentAt = 0;

  constructor(
    readonly request: IncomingMessage,
    readonly response: ServerResponse,
    readonly id: string,
    /** performance.now() when the request arrived. */
    readonly started: number,
    /** Who the client is, computed once here (protocol/client-address.ts). */
    readonly client: ClientAddress,
  ) {}
}

/** The path of a request target, without its query (for span names). */
function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart < 0 ? url : url.slice(0, queryStart);
}

/** What a failed forward answers: the contract's own refusal as it is, the engine's failure as 502 or 504. */
function upstreamFailure(thrown: unknown): AppError {
  if (thrown instanceof AppError) return thrown;
  const error = thrown as Error & { statusCode?: number; code?: string };
  const timedOut = error.statusCode === 504 || /TIMEOUT/i.test(error.code ?? '');
  return timedOut
    ? new AppError('upstream_timeout', 'the recommendation engine did not answer in time', { cause: error })
    : new AppError('bad_gateway', 'the recommendation engine could not be reached', { cause: error });
}

function malformed(): AppError {
  return new AppError('invalid_request', 'the request is malformed');
}

/** True when the path (before the query) holds a percent-escape that does not decode. */
function badlyEscaped(url: string): boolean {
  if (!url.includes('%')) return false;
  try {
    decodeURIComponent(pathOf(url));
    return false;
  } catch {
    return true;
  }
}

export interface DataHandlerDeps {
  verifier: TokenVerifier;
  access: AccessState;
  /** Per-partner limits; null: none. */
  limits: DataLimits | null;
  /** The engine; null: none configured (data requests get 503). */
  forwarder: Forwarder | null;
  /** The engine's path prefix (its URL's path without a trailing slash). */
  prefix: string;
  /** The largest JSON body taken (PUBLIC_API_BODY_LIMIT_BYTES). */
  bodyLimit: number;
  cors: CorsPolicy;
  addresses: ClientAddresses;
  logger: Logger | undefined;
  /** Span export (OTEL_EXPORTER_OTLP_ENDPOINT); null: trace ids only. */
  spans: SpanExport | null;
  /** The last step: request log, usage, metrics (server/request-log.ts). */
  finish: (finished: FinishedRequest) => void;
}

export class DataHandler {
  /** Set once the server is closing: every answer then closes its connection. */
  closing = false;
  private readonly corsOn: boolean;

  constructor(private readonly deps: DataHandlerDeps) {
    this.corsOn = deps.cors.on;
  }

  /** A whole data request: every step, the answer (or the error's envelope) written, then the finished record. */
  handle(request: IncomingMessage, response: ServerResponse): void {
    const data = new DataRequest(request, response, randomUUID(), performance.now(), this.deps.addresses.of(request));
    let pending: void | Promise<void>;
    try {
      if (this.read(data)) return;
      pending = this.admit(data);
    } catch (error) {
      this.fail(data, error);
      return;
    }
    if (pending === undefined) this.admitted(data);
    else pending.then(() => this.admitted(data), (error: unknown) => this.fail(data, error));
  }

  /**
   * What the request is, before any credential is looked at: a head we can read (Host, framing, codings), a
   * target that decodes, a method the data path takes (else 405 with Allow), CORS (a preflight is
   * answered here: true), the trace context.
   */
  private read(data: DataRequest): boolean {
    const request = data.request;
    const problem = requestHeadProblem(request);
    if (problem !== null) throw problem;
    const method = request.method!;
    if (this.corsOn && this.deps.cors.addHeaders(request, data.headers) === 'preflight') {
      data.headers['content-length'] = '0';
      this.write(data, 204, data.headers, EMPTY, undefined);
      return true;
    }
    if (!DATA_METHOD_SET.has(method)) {
      data.headers.allow = ALLOW;
      throw new AppError('method_not_allowed', `only ${ALLOW} is allowed on this path`);
    }
    const url = request.url!;
    if (badlyEscaped(url)) throw malformed();
    const spanExport = this.deps.spans;
    const trace = traceContextOf(request.rawHeaders, data.id, spanExport !== null);
    data.trace = trace;
    if (spanExport !== null) data.spans = spanExport.start(trace, method, pathOf(url), data.client.address);
    data.headers.traceresponse = traceparentOf(trace.traceId, trace.spanId, trace.flags);
    return false;
  }

  /**
   * Gate and limit, before any body is read: no API key in the URL or the headers, one valid bearer token,
   * the partner and the minting pair still accepted, then one request from the partner's allowance
   * (RateLimit-* headers; 429 when none is left). From the caches without waiting when they can say.
   */
  private admit(data: DataRequest): void | Promise<void> {
    const url = data.request.url!;
    data.query = queryOf(url);
    refuseKeysInUrl(url, data.query);
    const token = bearerToken(data.request.rawHeaders, data.headers);
    const claims = this.deps.verifier.verifiedNow(token);
    if (claims !== undefined && this.deps.access.authenticatesNow(claims, data.client.address)) {
      data.claims = claims;
      return this.limit(data);
    }
    return this.admitWaiting(token, data);
  }

  private async admitWaiting(token: string, data: DataRequest): Promise<void> {
    try {
      const claims = await this.deps.verifier.verify(token);
      data.presented = claims;
      await this.deps.access.authenticate(claims, data.client.address);
      data.claims = claims;
    } catch (error) {
      if (error instanceof ExpiredToken) data.presented = error.claims;
      throw tokenRefused(data.headers, error);
    }
    await this.limit(data);
  }

  private limit(data: DataRequest): void | Promise<void> {
    const limits = this.deps.limits;
    if (limits === null) return;
    const partnerId = data.claims!.partnerId;
    const known = limits.knownPolicy(partnerId);
    if (known === null) return;
    if (known === undefined) return limits.policy(partnerId).then((policy) => (policy === null ? undefined : this.take(limits, data, policy)));
    return this.take(limits, data, known);
  }

  private take(limits: DataLimits, data: DataRequest, policy: Policy): void | Promise<void> {
    const decided = limits.take(data.claims!.partnerId, policy);
    if (decided instanceof Promise) return decided.then((decision) => limits.settle({ decision, policy }, data.headers));
    limits.settle({ decision: decided, policy }, data.headers);
  }

  private admitted(data: DataRequest): void {
    const request = data.request;
    if (!BODY_METHODS.has(request.method!)) {
      this.withBody(data);
      return;
    }
    const headers = request.headers;
    const type = headers['content-type'];
    const length = headers['content-length'];
    if (type === undefined && headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) {
      this.withBody(data);
      return;
    }
    if (type === undefined || !isJsonMediaType(type)) {
      this.fail(data, new AppError('unsupported_media_type', 'the request body must be application/json'));
      return;
    }
    if (length !== undefined && Number(length) > this.deps.bodyLimit) {
      this.fail(data, new AppError('payload_too_large', 'the request body is too large'));
      return;
    }
    this.readBody(data).then(
      (bytes) => this.bodyRead(data, bytes),
      (error: unknown) => this.fail(data, error),
    );
  }

  private bodyRead(data: DataRequest, bytes: Buffer): void {
    try {
      data.body = parseJsonBody(bytes);
    } catch (error) {
      this.fail(data, error);
      return;
    }
    this.withBody(data);
  }

  /** The body's bytes, up to the limit (413 past it), exactly as many as Content-Length says when it says. */
  private readBody(data: DataRequest): Promise<Buffer> {
    const request = data.request;
    const limit = this.deps.bodyLimit;
    const declared = request.headers['content-length'] === undefined ? Number.NaN : Number(request.headers['content-length']);
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let received = 0;
      const stop = () => {
        request.off('data', onData);
        request.off('end', onEnd);
        request.off('error', onError);
      };
      const onData = (chunk: Buffer) => {
        received += chunk.length;
        if (received > limit) {
          stop();
          reject(new AppError('payload_too_large', 'the request body is too large'));
          return;
        }
        chunks.push(chunk);
      };
      const onEnd = () => {
        stop();
        if (!Number.isNaN(declared) && received !== declared) reject(malformed());
        else resolve(Buffer.concat(chunks, received));
      };
      const onError = (error: Error) => {
        stop();
        reject(new AppError('invalid_request', 'the request body could not be read', { cause: error }));
      };
      request.on('data', onData);
      request.on('end', onEnd);
      request.on('error', onError);
    });
  }

  /** The company (query, or JSON body for POST, PUT and PATCH), mapped to the token's partner. */
  private withBody(data: DataRequest): void {
    let company: string;
    try {
      company = companyOf(data.request, data.query, data.body);
    } catch (error) {
      this.fail(data, error);
      return;
    }
    data.companyNamed = company;
    const claims = data.claims!;
    if (this.deps.access.authorizesCompanyNow(claims, company)) {
      this.authorized(data, company);
      return;
    }
    this.deps.access.authorizeCompany(claims, company).then(
      () => this.authorized(data, company),
      (error: unknown) => this.fail(data, error),
    );
  }

  /**
   * The request, rewritten by the forwarding contract, to the engine. A target the contract refuses is
   * answered at once; a failure of the engine is answered 502 or 504 (`upstreamFailure`).
   */
  private authorized(data: DataRequest, company: string): void {
    data.companyId = company;
    data.spans?.gatePassed(data.claims!.partnerId, company);
    const { forwarder, prefix } = this.deps;
    const request = data.request;
    let sent: Promise<EngineResponse>;
    try {
      if (forwarder === null) throw new AppError('upstream_unavailable', 'no recommendation engine is configured');
      const path = engineTarget(request.url!, prefix);
      const trace = data.trace!;
      const parent = data.spans === null ? trace.spanId : data.spans.engineStarted();
      const body = data.body === null ? null : data.body.bytes;
      const headers = engineRequestHeaders(request.rawHeaders, request.headers.connection, {
        partnerId: data.claims!.partnerId,
        companyId: company,
        requestId: data.id,
        contentLength: body === null ? null : body.length,
        client: data.client,
        traceparent: traceparentOf(trace.traceId, parent, trace.flags),
        tracestate: trace.state,
      });
      data.sentAt = performance.now();
      sent = forwarder.forward({ method: request.method!, path, headers, body });
    } catch (error) {
      this.fail(data, error);
      return;
    }
    sent.then(
      (engine) => this.answer(data, engine),
      (error: unknown) => {
        data.spans?.engineEnded(null);
        this.fail(data, upstreamFailure(error));
      },
    );
  }

  /**
   * The engine's answer as the client gets it: a success with the engine's headers (the gateway's RateLimit-*
   * and CORS headers unless the engine sent its own); an error as the gateway's envelope (the engine's body
   * to the log).
   */
  private answer(data: DataRequest, engine: EngineResponse): void {
    data.engineMs = performance.now() - data.sentAt;
    data.spans?.engineEnded(engine.status);
    const headers: Record<string, string | string[]> = engineResponseHeaders(engine.headers, this.corsOn);
    for (const name in data.headers) headers[name] ??= data.headers[name]!;
    // The client's trace header names the gateway's span, whatever the engine says of its own.
    headers.traceresponse = data.headers.traceresponse!;
    if (engine.status < 400) {
      headers['content-length'] = String(engine.body.length);
      this.write(data, engine.status, headers, engine.body, undefined);
      return;
    }
    const translated = engineErrorEnvelope(engine.status, engine.headers, engine.body, data.id);
    if (translated.logBody !== undefined) {
      this.deps.logger?.warn({ request_id: data.id, engine_status: engine.status, engine_body: translated.logBody }, 'the engine answered an error');
    }
    for (const name of ENGINE_ERROR_DROPPED) delete headers[name];
    headers['content-type'] = 'application/json; charset=utf-8';
    headers['content-length'] = String(Buffer.byteLength(translated.body));
    this.write(data, translated.status, headers, translated.body, undefined);
  }

  /** Any error of any step, as the envelope (protocol/errors.ts); the request's own headers win over the defaults. */
  private fail(data: DataRequest, error: unknown): void {
    if (data.response.headersSent) {
      data.response.destroy();
      return;
    }
    const answer = errorAnswer(error, data.id);
    this.write(data, answer.status, { ...answer.headers, ...data.headers }, answer.body, error);
  }

  /** The one writer of a data request's answers, and its one finished record. */
  private write(data: DataRequest, status: number, headers: Record<string, string | string[]>, body: Buffer | string, error: unknown): void {
    const { request, response } = data;
    headers['x-request-id'] = data.id;
    if (this.closing) headers.connection = 'close';
    try {
      response.writeHead(status, headers);
      response.end(body);
    } catch {
      response.destroy();
    }
    const token = data.claims ?? data.presented;
    const finished: FinishedRequest = {
      requestId: data.id,
      partnerId: data.claims === null ? null : data.claims.partnerId,
      companyId: data.companyId,
      companyNamed: data.companyNamed,
      keyPairId: token === null ? null : token.keyPairId,
      tokenId: token === null ? null : token.jti,
      method: request.method!,
      url: request.url!,
      status,
      durationMs: performance.now() - data.started,
      engineMs: data.engineMs,
      client: data.client.address,
      traceId: data.trace === null ? null : data.trace.traceId,
      spans: data.spans,
    };
    if (error !== undefined) {
      if (status >= 500) finished.failure = error;
      if (isAppError(error) && error.reason !== undefined) finished.reason = error.reason;
    }
    this.deps.finish(finished);
  }
}
