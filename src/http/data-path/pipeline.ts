// The one data path: every data request, whichever way it enters (the bare listener or the Fastify route),
// goes through these steps, written once against Node's request and response types:
//   read + gate + limit (`admit`, before any body is read) -> company (`authorize`) -> `forward` -> `answer`,
// and the entry hands the finished request to `finish` (request log, usage, metrics). The entry computes the
// client's address once (protocol/client-address.ts); `admit` reads the trace context first of all.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { AccessState } from '../../domain/access.js';
import type { TokenClaims, TokenVerifier } from '../../domain/tokens.js';
import { AppError } from '../../errors.js';
import type { DataLimits, Policy } from '../counters/limits.js';
import { errorAnswer } from '../protocol/errors.js';
import type { ClientAddress } from '../protocol/client-address.js';
import type { FinishedRequest } from '../protocol/finished-request.js';
import { traceContextOf, traceparentOf, type TraceContext } from '../protocol/trace-context.js';
import type { EngineResponse, Forwarder } from './forwarder.js';
import { engineErrorEnvelope, engineRequestHeaders, engineResponseHeaders, engineTarget } from './forwarding.js';
import type { RequestSpans, SpanExport } from './spans.js';
import { bearerToken, companyOf, queryOf, refuseKeysInUrl, tokenRefused, type Query, type RequestBody } from './gate.js';

/** What the data path knows of one request as it goes through the steps. */
export class DataRequest {
  /** The verified token's claims, once admitted. */
  claims: TokenClaims | null = null;
  /** A verified token's claims that the gate then refused: for the record of the refusal. */
  presented: TokenClaims | null = null;
  /** The company the request is authorised for, once authorised. */
  companyId: string | null = null;
  /** The company the request named, authorised or not (for the record of a refusal). */
  companyNamed: string | null = null;
  /** Headers every answer to this request carries, set by the gate and the limits (WWW-Authenticate, RateLimit-*). */
  readonly headers: Record<string, string> = {};
  /** How long the engine took to answer (0 until it has). */
  engineMs = 0;
  /** performance.now() when the request left for the engine. */
  sentAt = 0;
  /** The query, as parsed once by `admit`. */
  query: Query = {};
  /** The trace this request belongs to (read first by `admit`). */
  trace: TraceContext | null = null;
  /** Its spans, when they are exported; null otherwise (no span objects at all). */
  spans: RequestSpans | null = null;

  constructor(
    readonly id: string,
    /** performance.now() when the request arrived. */
    readonly started: number,
    /** Who the client is, as the entry determined it once. */
    readonly client: ClientAddress,
  ) {}
}

/** The path of a request target, without its query (for span names). */
function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return queryStart < 0 ? url : url.slice(0, queryStart);
}

/** An answer to write: status, headers, body. */
export interface Answer {
  status: number;
  headers: Record<string, string | string[] | number>;
  body: Buffer | string;
}

export interface DataPathDeps {
  verifier: TokenVerifier;
  access: AccessState;
  /** Per-partner limits; null: none. */
  limits: DataLimits | null;
  /** The engine; null: none configured (data requests get 503). */
  forwarder: Forwarder | null;
  /** The engine's path prefix (its URL's path without a trailing slash). */
  prefix: string;
  corsOn: boolean;
  logger: Logger | undefined;
  /** Span export (OTEL_EXPORTER_OTLP_ENDPOINT); null: trace ids only. */
  spans: SpanExport | null;
}

// The engine's own framing and what it says of its body: an error answer is the gateway's envelope instead.
const ENGINE_ERROR_DROPPED = ['content-type', 'content-length', 'content-encoding', 'content-range', 'etag', 'last-modified', 'www-authenticate', 'proxy-authenticate'];

/** What a failed forward answers: the contract's own refusal as it is, the engine's failure as 502 or 504. */
function upstreamFailure(thrown: unknown): AppError {
  if (thrown instanceof AppError) return thrown;
  const error = thrown as Error & { statusCode?: number; code?: string };
  const timedOut = error.statusCode === 504 || /TIMEOUT/i.test(error.code ?? '');
  return timedOut
    ? new AppError('upstream_timeout', 'the recommendation engine did not answer in time', { cause: error })
    : new AppError('bad_gateway', 'the recommendation engine could not be reached', { cause: error });
}

export class DataPath {
  constructor(private readonly deps: DataPathDeps) {}

  /**
   * Read, gate and limit, before any body is read: no API key in the URL or the headers, one valid bearer
   * token, the partner and the minting pair still accepted, then one request from the partner's allowance
   * (RateLimit-* headers; 429 when none is left). From the caches without waiting when they can say.
   */
  admit(request: IncomingMessage, data: DataRequest): void | Promise<void> {
    const url = request.url ?? '';
    const spanExport = this.deps.spans;
    const trace = traceContextOf(request.rawHeaders, data.id, spanExport !== null);
    data.trace = trace;
    if (spanExport !== null) data.spans = spanExport.start(trace, request.method!, pathOf(url), data.client.address);
    data.headers.traceresponse = traceparentOf(trace.traceId, trace.spanId, trace.flags);
    data.query = queryOf(url);
    refuseKeysInUrl(url, data.query);
    const token = bearerToken(request.rawHeaders, data.headers);
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

  /** The company (query, or JSON body for POST, PUT and PATCH), mapped to the token's partner. */
  authorize(request: IncomingMessage, data: DataRequest, body: RequestBody | null): void | Promise<void> {
    const company = companyOf(request, data.query, body);
    data.companyNamed = company;
    const claims = data.claims!;
    if (this.deps.access.authorizesCompanyNow(claims, company)) {
      data.companyId = company;
      data.spans?.gatePassed(claims.partnerId, company);
      return;
    }
    return this.deps.access.authorizeCompany(claims, company).then(() => {
      data.companyId = company;
      data.spans?.gatePassed(claims.partnerId, company);
    });
  }

  /**
   * The request, rewritten by the forwarding contract, to the engine: its answer. A target the contract
   * refuses throws at once; a failure of the engine rejects (`upstreamFailure` says which 502/504 it is).
   */
  forward(request: IncomingMessage, data: DataRequest, body: Buffer | null): Promise<EngineResponse> {
    const { forwarder, prefix } = this.deps;
    if (forwarder === null) throw new AppError('upstream_unavailable', 'no recommendation engine is configured');
    const path = engineTarget(request.url ?? '', prefix);
    const trace = data.trace!;
    const parent = data.spans === null ? trace.spanId : data.spans.engineStarted();
    const headers = engineRequestHeaders(request.rawHeaders, request.headers.connection, {
      partnerId: data.claims!.partnerId,
      companyId: data.companyId!,
      requestId: data.id,
      contentLength: body === null ? null : body.length,
      client: data.client,
      traceparent: traceparentOf(trace.traceId, parent, trace.flags),
      tracestate: trace.state,
    });
    data.sentAt = performance.now();
    return forwarder.forward({ method: request.method!, path, headers, body });
  }

  /**
   * The engine's answer as the client gets it: a success with the engine's headers (the gateway's RateLimit-*
   * unless the engine sent its own); an error as the gateway's envelope (the engine's body to the log).
   */
  answer(engine: EngineResponse, data: DataRequest): Answer {
    data.engineMs = performance.now() - data.sentAt;
    data.spans?.engineEnded(engine.status);
    const headers: Record<string, string | string[] | number> = engineResponseHeaders(engine.headers, this.deps.corsOn);
    for (const name in data.headers) headers[name] ??= data.headers[name]!;
    headers['x-request-id'] = data.id;
    // The client's trace header names the gateway's span, whatever the engine says of its own.
    headers.traceresponse = data.headers.traceresponse!;
    if (engine.status < 400) {
      headers['content-length'] = engine.body.length;
      return { status: engine.status, headers, body: engine.body };
    }
    const translated = engineErrorEnvelope(engine.status, engine.headers, engine.body, data.id);
    if (translated.logBody !== undefined) {
      this.deps.logger?.warn({ request_id: data.id, engine_status: engine.status, engine_body: translated.logBody }, 'the engine answered an error');
    }
    for (const name of ENGINE_ERROR_DROPPED) delete headers[name];
    headers['content-type'] = 'application/json; charset=utf-8';
    return { status: translated.status, headers, body: translated.body };
  }

  /** A forward that failed: the engine's span closed, and the answer it gets (`upstreamFailure`). */
  engineFailed(data: DataRequest, error: unknown): AppError {
    data.spans?.engineEnded(null);
    return upstreamFailure(error);
  }

  /**
   * A whole data request without a body, straight from Node's listener: every step above, the answer (or
   * the error's envelope) written on the response, then `finish`. Each step goes on at once when it could
   * say without waiting (the usual case: no closure, no promise), else once it has.
   */
  serve(request: IncomingMessage, response: ServerResponse, data: DataRequest, finish: (finished: FinishedRequest) => void): void {
    const bare: Bare = { request, response, data, finish };
    let pending: void | Promise<void>;
    try {
      pending = this.admit(request, data);
    } catch (error) {
      this.refuse(bare, error);
      return;
    }
    if (pending === undefined) this.admitted(bare);
    else pending.then(() => this.admitted(bare), (error: unknown) => this.refuse(bare, error));
  }

  private admitted(bare: Bare): void {
    let pending: void | Promise<void>;
    try {
      pending = this.authorize(bare.request, bare.data, null);
    } catch (error) {
      this.refuse(bare, error);
      return;
    }
    if (pending === undefined) this.authorized(bare);
    else pending.then(() => this.authorized(bare), (error: unknown) => this.refuse(bare, error));
  }

  private authorized(bare: Bare): void {
    let sent: Promise<EngineResponse>;
    try {
      sent = this.forward(bare.request, bare.data, null);
    } catch (error) {
      this.refuse(bare, error);
      return;
    }
    sent.then(
      (engine) => this.write(bare, this.answer(engine, bare.data), undefined, null),
      (error: unknown) => this.refuse(bare, this.engineFailed(bare.data, error)),
    );
  }

  private refuse(bare: Bare, error: unknown): void {
    if (bare.response.headersSent) {
      bare.response.destroy();
      return;
    }
    const answer = errorAnswer(error, bare.data.id);
    // The gate's own headers win over the defaults (its WWW-Authenticate names the problem).
    this.write(bare, { status: answer.status, headers: { ...answer.headers, ...bare.data.headers }, body: answer.body }, answer.failure, answer.reason);
  }

  private write({ request, response, data, finish }: Bare, answer: Answer, failure: unknown, reason: string | null): void {
    try {
      response.writeHead(answer.status, answer.headers);
      response.end(answer.body);
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
      reason,
      method: request.method!,
      url: request.url!,
      status: answer.status,
      durationMs: performance.now() - data.started,
      engineMs: data.engineMs,
      client: data.client.address,
      traceId: data.trace === null ? null : data.trace.traceId,
      spans: data.spans,
    };
    if (failure !== undefined) finished.failure = failure;
    finish(finished);
  }
}

/** A request of the bare entry on its way through the steps. */
interface Bare {
  request: IncomingMessage;
  response: ServerResponse;
  data: DataRequest;
  finish: (finished: FinishedRequest) => void;
}
