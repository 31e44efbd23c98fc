// Span export over OTLP/HTTP with the OpenTelemetry SDK, loaded (a dynamic import) only when
// OTEL_EXPORTER_OTLP_ENDPOINT is set. Spans per data request: the request (SERVER, a child of the client's
// span), the gate (token, limit, company) and the engine call (CLIENT, the parent the engine is told of),
// with the partner and the company as attributes: never a token, a key or the query.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { VERSION } from '../../config.js';
import type { RequestSpans, SpanExport } from '../protocol/spans.js';
import type { TraceContext } from '../protocol/trace-context.js';

const PARTNER = 'partnerctl.partner_id';
const COMPANY = 'partnerctl.company_id';

/** The exporter to `<endpoint>/v1/traces` (OTLP/HTTP, JSON), batched; the sampler follows the client's flag. */
export function createSpanExport(endpoint: URL): SpanExport {
  const url = `${endpoint.href.replace(/\/+$/, '')}/v1/traces`;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'partnerctl', 'service.version': VERSION }),
    sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url }), scheduledDelayMillis: 1_000 })],
  });
  const tracer = provider.getTracer('partnerctl', VERSION);
  return {
    start(context: TraceContext, method: string, path: string, client: string): RequestSpans {
      const parent =
        context.parentSpanId === null
          ? ROOT_CONTEXT
          : trace.setSpanContext(ROOT_CONTEXT, {
              traceId: context.traceId,
              spanId: context.parentSpanId,
              traceFlags: context.flags === '01' ? TraceFlags.SAMPLED : TraceFlags.NONE,
              isRemote: true,
            });
      const request = tracer.startSpan(
        `${method} ${path}`,
        { kind: SpanKind.SERVER, attributes: { 'http.request.method': method, 'url.path': path, 'client.address': client } },
        parent,
      );
      const own = request.spanContext();
      context.traceId = own.traceId;
      context.spanId = own.spanId;
      context.flags = (own.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? '01' : '00';
      const inRequest = trace.setSpan(ROOT_CONTEXT, request);
      let gate: Span | null = tracer.startSpan('gate', { kind: SpanKind.INTERNAL }, inRequest);
      let engine: Span | null = null;
      const closeGate = (attributes: Attributes, failed: boolean): void => {
        if (gate === null) return;
        gate.setAttributes(attributes);
        if (failed) gate.setStatus({ code: SpanStatusCode.ERROR });
        gate.end();
        gate = null;
      };
      return {
        gatePassed(partnerId, companyId) {
          closeGate({ [PARTNER]: partnerId, [COMPANY]: companyId }, false);
        },
        engineStarted() {
          engine = tracer.startSpan('engine', { kind: SpanKind.CLIENT }, inRequest);
          return engine.spanContext().spanId;
        },
        engineEnded(status) {
          if (engine === null) return;
          if (status === null) engine.setStatus({ code: SpanStatusCode.ERROR });
          else engine.setAttribute('http.response.status_code', status);
          engine.end();
          engine = null;
        },
        ended(status, partnerId, companyId) {
          const attributes: Attributes = {};
          if (partnerId !== null) attributes[PARTNER] = partnerId;
          if (companyId !== null) attributes[COMPANY] = companyId;
          closeGate(attributes, true);
          if (engine !== null) {
            engine.setStatus({ code: SpanStatusCode.ERROR });
            engine.end();
            engine = null;
          }
          request.setAttributes({ ...attributes, 'http.response.status_code': status });
          if (status >= 500) request.setStatus({ code: SpanStatusCode.ERROR });
          request.end();
        },
      };
    },
    shutdown: () => provider.shutdown(),
  };
}
