// What the data path asks of span export, when OTEL_EXPORTER_OTLP_ENDPOINT is set (server/tracing.ts, the
// OpenTelemetry SDK behind it). Unset, the data path holds no span objects at all: only the ids of
// protocol/trace-context.ts.
import type { TraceContext } from './trace-context.js';

/** The spans of one data request: the request itself, the gate (token, limit, company), the engine call. */
export interface RequestSpans {
  /** The gate let the request through: the partner and the company it is authorised for. */
  gatePassed(partnerId: string, companyId: string): void;
  /** The engine call begins; returns its span id, the parent named in the engine's traceparent. */
  engineStarted(): string;
  /** The engine answered (its status), or could not be reached (null). */
  engineEnded(status: number | null): void;
  /** The answer is written: ends whatever is still open. */
  ended(status: number, partnerId: string | null, companyId: string | null): void;
}

export interface SpanExport {
  /**
   * Starts a request's spans as children of the client's span (`trace.parentSpanId`, when it sent one), and
   * puts the gateway's own ids in `trace` (the SDK's: a new trace's id is the SDK's too).
   */
  start(trace: TraceContext, method: string, path: string, client: string): RequestSpans;
  shutdown(): Promise<void>;
}
