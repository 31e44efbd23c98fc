import type { AnswerCause } from '../../reasons.js';
import type { RequestSpans } from './spans.js';

/**
 * A request's one record: made by the kernel's first hook (server/app.ts), filled in by its route as it
 * learns (the partner, the company, the key pair, the engine's time), by the error writer (why it failed),
 * and finished by the last hook (status, duration), then handed to whatever counts finished requests: the
 * request log, usage, metrics, the refusals on record. Every field is always present, so every record has
 * one shape.
 */
export interface FinishedRequest {
  requestId: string;
  method: string;
  url: string;
  /** The client's address, as the kernel determined it (protocol/client-address.ts). */
  client: string;
  /** The partner of a data request whose token was verified; null for any other request. */
  partnerId: string | null;
  /** The company a data request was authorised for. */
  companyId: string | null;
  /** The company a data request named (query or body), authorised or not; null before it was read. */
  companyNamed: string | null;
  /**
   * The key pair behind the request: on a data request, the pair that minted its verified token (accepted or
   * refused); at the token endpoint, the pair its access key named. Null otherwise.
   */
  keyPairId: string | null;
  /** A data request's verified token id (its jti), accepted or refused; null otherwise. */
  tokenId: string | null;
  /** A data request's trace id (protocol/trace-context.ts); null for any other request. */
  traceId: string | null;
  /** A data request's spans, ended by the finish step, when spans are exported; else null. */
  spans: RequestSpans | null;
  /** How long the engine took to answer (or to fail); 0 when it was not asked. */
  engineMs: number;
  /** The engine's status when it answered; null when it was not asked or did not answer. */
  engineStatus: number | null;
  /** The answer's body length in bytes (its Content-Length); null when the answer did not say. */
  bytes: number | null;
  /** A token exchange (accepted or refused): the pair its access key named, that pair's partner. */
  exchange: { keyPairId: string | null; partnerId: string | null; userAgent: string | undefined } | undefined;
  /** Why a 5xx was answered (the client sees a fixed message): for the log. */
  failure: unknown;
  /** Why the answer is not a success (docs/reasons.md): the gate's reason or the server's cause; recorded (docs/decisions.md). */
  reason: AnswerCause | undefined;
  status: number;
  durationMs: number;
}

/** A request's record before any step has learnt anything. */
export function newRecord(requestId: string, method: string, url: string, client: string): FinishedRequest {
  return {
    requestId,
    method,
    url,
    client,
    partnerId: null,
    companyId: null,
    companyNamed: null,
    keyPairId: null,
    tokenId: null,
    traceId: null,
    spans: null,
    engineMs: 0,
    engineStatus: null,
    bytes: null,
    exchange: undefined,
    failure: undefined,
    reason: undefined,
    status: 0,
    durationMs: 0,
  };
}
