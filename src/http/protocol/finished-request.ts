import type { GateRefusalReason } from '../../reasons.js';
import type { RequestSpans } from '../data-path/spans.js';

/**
 * What a request's steps learn of it on the way, for its finished record: the kernel gives every request
 * one (server/app.ts), each endpoint fills in what it knows, the error writer adds why it failed.
 */
export interface RequestFacts {
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
  /** How long the engine took to answer; 0 when it was not asked or did not answer. */
  engineMs: number;
  /** A token exchange (accepted or refused): the pair its access key named, the partner it minted for. */
  exchange?: { keyPairId: string | null; partnerId: string | null; userAgent: string | undefined };
  /** Why a 5xx was answered (the client sees a fixed message): for the log. */
  failure?: unknown;
  /** Why the gate refused it (AppError.reason, docs/reasons.md): recorded (docs/decisions.md). */
  reason?: GateRefusalReason;
}

/** A request's facts before any step has learnt anything. */
export function noFacts(): RequestFacts {
  return { partnerId: null, companyId: null, companyNamed: null, keyPairId: null, tokenId: null, traceId: null, spans: null, engineMs: 0 };
}

/** One answered request, for whatever counts requests once they are finished: the request log, usage, metrics. */
export interface FinishedRequest extends RequestFacts {
  requestId: string;
  method: string;
  url: string;
  status: number;
  durationMs: number;
  /** The client's address, as the entry determined it (protocol/client-address.ts). */
  client: string;
}
