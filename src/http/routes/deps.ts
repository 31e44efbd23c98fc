import type { Logger } from 'pino';
import type { Database } from '../../db/client.js';
import type { AccessState } from '../../domain/runtime/access.js';
import type { ClockSync } from '../../domain/runtime/clock-sync.js';
import type { CredentialExchange } from '../../domain/runtime/credentials.js';
import type { DecisionRecorder } from '../../domain/runtime/decision-records.js';
import type { ExposureCounter } from '../../domain/runtime/exposure-counts.js';
import type { SigningKeys } from '../../domain/operations/signing-keys.js';
import type { TokenVerifier } from '../../domain/operations/tokens.js';
import type { UsageCounter } from '../../domain/runtime/usage.js';
import type { ServerConfig } from '../../config.js';
import type { DataLimits } from '../counters/limits.js';
import type { Metrics } from '../counters/metrics.js';
import type { SharedRedis } from '../counters/redis.js';
import type { Forwarder } from '../data-path/forwarder.js';
import type { SpanExport } from '../protocol/spans.js';
import type { ClientAddress } from '../protocol/client-address.js';
import type { FinishedRequest } from '../protocol/finished-request.js';

export interface AppDeps {
  db: Database;
  access: AccessState;
  exchange: CredentialExchange;
  verifier: TokenVerifier;
  config: ServerConfig;
  /** Per-partner limits of data requests; none: no limits. */
  limits?: DataLimits;
  /** Shared counters (REDIS_URL), for the token endpoint's throttles and readiness; none: in memory. */
  redis?: SharedRedis | null;
  /** Where the one line per request goes; none, no request log. */
  logger?: Logger;
  /** How data requests reach the engine; default an undici pool to the configured upstream. */
  forwarder?: Forwarder;
  /** Data requests counted per partner × company × hour; none: not counted. */
  usage?: UsageCounter | null;
  /** The gate's refusals on record (docs/decisions.md); none: not recorded. */
  decisions?: DecisionRecorder | null;
  /** Accepted data requests per key pair, token, company and address (exposure_hours); none: not counted. */
  exposure?: ExposureCounter | null;
  /** Prometheus metrics (served by their own listener); none: not kept. */
  metrics?: Metrics | null;
  /** Spans exported over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT); none: trace ids only. */
  spans?: SpanExport | null;
  /** This host's clock against the database server's (PostgreSQL), for readiness; none: one clock. */
  clockSync?: ClockSync | null;
  /** The signing keys: the secret-scanning receiver checks a reported token's signature with them. */
  keys?: SigningKeys;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The client, determined once by the first hook (protocol/client-address.ts): every later step reads it here. */
    client: ClientAddress;
    /** The request's one record, filled in by its steps (protocol/finished-request.ts). */
    facts: FinishedRequest;
  }
}
