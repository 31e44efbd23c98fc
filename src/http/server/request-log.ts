// The last step of every request, whichever way it came in and whoever answered it: one line in the request
// log, the metrics, the usage and exposure counts, the answers on record that were not a success. Nothing here writes on the
// request path: counts are kept in memory, refusals take a ring slot, log lines are batched (log-destination.ts).
import { pino, type Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { AccessState } from '../../domain/runtime/access.js';
import type { DecisionRecorder } from '../../domain/runtime/decision-records.js';
import type { ExposureCounter } from '../../domain/runtime/exposure-counts.js';
import type { UsageCounter } from '../../domain/runtime/usage.js';
import type { Metrics } from '../counters/metrics.js';
import { redactKeyMaterial } from '../data-path/gate.js';
import type { FinishedRequest } from '../protocol/finished-request.js';
import { loggableChain } from '../../domain/runtime/logged-errors.js';
import { causeOfStatus, describeError } from '../protocol/errors.js';

const LOGGED_PATH_MAX = 512;
const USER_AGENT_LOGGED_MAX = 120;

/**
 * The path for the log, without the query and with any key material redacted: some lines (a 404 outside the
 * base path, a malformed request) are written before the gate has looked at the URL.
 */
function pathOf(url: string): string {
  const queryStart = url.indexOf('?');
  return redactKeyMaterial(queryStart < 0 ? url : url.slice(0, queryStart)).slice(0, LOGGED_PATH_MAX);
}

/** The log's ISO time from the server's clock, made once per millisecond rather than once per line. */
function stampsOf(clock: Clock): () => string {
  let lastStampMs = 0;
  let lastStamp = '';
  return () => {
    const now = clock.now();
    if (now !== lastStampMs) {
      lastStampMs = now;
      lastStamp = new Date(now).toISOString();
    }
    return lastStamp;
  };
}

/** A token exchange's trace (accepted or refused): the pair its access key named, the user agent; never a key or a token. */
function exchangeFields(exchange: NonNullable<FinishedRequest['exchange']>): string {
  const agent = exchange.userAgent;
  const shown = agent === undefined ? null : redactKeyMaterial(agent).slice(0, USER_AGENT_LOGGED_MAX);
  return `,"key_pair_id":${JSON.stringify(exchange.keyPairId)},"user_agent":${JSON.stringify(shown)}`;
}

/**
 * The one line per request, formatted here rather than by pino (the same JSON keys pino would write, ISO
 * time) and handed to the logger's own destination: a fifth of the request's cost was pino's generic
 * serialisation.
 */
function requestLine(finished: FinishedRequest, stamp: string): string {
  const partnerId = finished.partnerId ?? finished.exchange?.partnerId ?? null;
  const partner = partnerId === null ? '' : `,"partner_id":${JSON.stringify(partnerId)}`;
  const exchange = finished.exchange === undefined ? '' : exchangeFields(finished.exchange);
  // Addresses and trace ids (hex) need no escaping beyond what JSON.stringify does for the odd address.
  const trace = finished.traceId === null ? '' : `,"trace_id":"${finished.traceId}"`;
  return (
    // The request id is a UUID and the method an HTTP token (Node's parser refuses anything else): no escaping.
    `{"level":30,"time":"${stamp}","request_id":"${finished.requestId}"${trace}${partner}${exchange},"client":${JSON.stringify(finished.client)},"method":"${finished.method}",` +
    `"path":${JSON.stringify(pathOf(finished.url))},"status":${finished.status},"duration_ms":${Math.round(finished.durationMs * 100) / 100}}\n`
  );
}

/** Why a 5xx was answered (the client only sees a fixed message): names, codes, first lines. */
function logFailure(logger: Logger, finished: FinishedRequest): void {
  const [err, ...causes] = loggableChain(finished.failure);
  if (describeError(finished.failure).internal) {
    logger.error({ request_id: finished.requestId, err, ...(causes.length > 0 ? { causes } : {}) }, 'request failed');
  } else {
    logger.warn({ request_id: finished.requestId, status: finished.status, err, causes }, 'request failed: a dependency is unavailable');
  }
}

/**
 * The finish step: the failure's log line (5xx), the request line (when info lines are on), the metrics,
 * the usage counts (data requests of a partner whose token was verified, whatever their answer), the
 * exposure counts (data requests that passed the gate: token and company accepted; exchanges naming a pair), every answer that
 * was not a success, with its cause (docs/decisions.md, docs/reasons.md), and inside a partner's recording window its
 * successes too (`recording`: a look at the access snapshot in memory).
 */
export function createFinish(
  clock: Clock,
  logger: Logger | undefined,
  metrics: Metrics | null,
  usage: UsageCounter | null,
  decisions: DecisionRecorder | null,
  exposure: ExposureCounter | null,
  recording: Pick<AccessState, 'recording'> | null = null,
): (finished: FinishedRequest) => void {
  const stream = logger?.isLevelEnabled('info') ? (logger as unknown as Record<symbol, { write(line: string): unknown }>)[pino.symbols.streamSym] : undefined;
  const isoNow = stampsOf(clock);
  return (finished) => {
    finished.spans?.ended(finished.status, finished.partnerId, finished.companyId);
    if (logger !== undefined && finished.failure !== undefined) logFailure(logger, finished);
    stream?.write(requestLine(finished, isoNow()));
    metrics?.response(finished);
    if (usage !== null && finished.partnerId !== null) usage.record(finished.partnerId, finished.companyId ?? '', finished.status, finished.engineMs);
    if (finished.status >= 400 && decisions !== null) {
      finished.reason ??= causeOfStatus(finished.status);
      decisions.refused(finished, pathOf(finished.url));
    } else if (decisions !== null && recording !== null && finished.partnerId !== null && recording.recording(finished.partnerId, finished.companyNamed)) {
      // Inside a recording window (docs/decisions.md): a success is on record too, its cause `recorded`.
      decisions.refused(finished, pathOf(finished.url));
    }
    if (exposure !== null && finished.companyId !== null && finished.partnerId !== null && finished.tokenId !== null) {
      exposure.record(finished.partnerId, finished.keyPairId, finished.tokenId, finished.companyId, finished.client, finished.status);
    } else if (exposure !== null && finished.exchange?.keyPairId != null && finished.exchange.partnerId !== null) {
      exposure.exchanged(finished.exchange.partnerId, finished.exchange.keyPairId, finished.client, finished.status);
    }
  };
}
