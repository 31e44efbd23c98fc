// W3C Trace Context (https://www.w3.org/TR/trace-context/) on the data path, without any OpenTelemetry code:
// read a client's `traceparent` / `tracestate` from the raw headers, or start a trace; write the
// `traceparent` the engine gets and the `traceresponse` the client gets. Plain string work, so that tracing
// with no exporter configured costs next to nothing. Spans, when exported, are tracing.ts's.
import { randomUUID } from 'node:crypto';

/** The trace a data request belongs to, and the gateway's place in it. */
export interface TraceContext {
  /** 32 lower-case hex digits. */
  traceId: string;
  /** The client's span (the parent of the gateway's), when the client sent a valid traceparent; else null. */
  parentSpanId: string | null;
  /** The gateway's own span id (16 hex digits): the engine's parent, named in `traceresponse`. */
  spanId: string;
  /** Two hex digits: the client's sampled flag when continuing, else sampled when spans are exported. */
  flags: string;
  /** The client's tracestate, passed through unchanged (only with a valid traceparent). */
  state: string | undefined;
}

// version 00: exactly four fields; a later version may add fields after a dash (and is read as 00).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '00000000000000000000000000000000';
const ZERO_SPAN = '0000000000000000';
// What a tracestate of 32 list members can need (the specification's limit), and no control characters.
const TRACESTATE_MAX = 8_192;

/**
 * The gateway's ids come from the request id (a random UUID made anyway): no randomness of their own on
 * the data path. A new trace's id is the request id's 32 hex digits; the gateway's span id its last 16
 * (unique per request, which is what a span id must be; never all zeros: a UUID's variant digit is 8-b).
 */
export function traceIdOf(requestId: string): string {
  return requestId.length === 36
    ? requestId.slice(0, 8) + requestId.slice(9, 13) + requestId.slice(14, 18) + requestId.slice(19, 23) + requestId.slice(24)
    : randomUUID().replaceAll('-', '');
}

export function spanIdOf(requestId: string): string {
  return requestId.length === 36 ? requestId.slice(19, 23) + requestId.slice(24) : randomUUID().slice(24) + '0001';
}

/** The client's traceparent when valid: [trace id, parent span id, flags]; else null. */
export function parseTraceparent(value: string): [string, string, string] | null {
  if (value.length < 55 || value.length > 512) return null;
  const match = TRACEPARENT.exec(value);
  if (match === null) return null;
  const [, version, traceId, parentId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return null;
  if (traceId === ZERO_TRACE || parentId === ZERO_SPAN) return null;
  // Only the sampled flag is carried over (later versions' other bits mean nothing to version 00).
  return [traceId, parentId, (Number.parseInt(flags, 16) & 1) === 1 ? '01' : '00'];
}

/**
 * The trace context of a data request, from its raw headers: the client's trace continued when it sent
 * exactly one valid `traceparent` (and its `tracestate`, joined when repeated), else a new trace. `sampled`
 * is the flag a new trace gets (spans are exported). No header object is built: the raw list is scanned.
 */
export function traceContextOf(rawHeaders: readonly string[], requestId: string, sampled: boolean): TraceContext {
  let parent: string | undefined;
  let repeated = false;
  let state: string | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 11 && name.toLowerCase() === 'traceparent') {
      if (parent !== undefined) repeated = true;
      parent = rawHeaders[i + 1]!;
    } else if (name.length === 10 && name.toLowerCase() === 'tracestate') {
      state = state === undefined ? rawHeaders[i + 1]! : `${state},${rawHeaders[i + 1]!}`;
    }
  }
  const continued = parent === undefined || repeated ? null : parseTraceparent(parent.trim());
  if (continued === null) return { traceId: traceIdOf(requestId), parentSpanId: null, spanId: spanIdOf(requestId), flags: sampled ? '01' : '00', state: undefined };
  const usableState = state !== undefined && state.length <= TRACESTATE_MAX && state.trim() !== '' ? state : undefined;
  return { traceId: continued[0], parentSpanId: continued[1], spanId: spanIdOf(requestId), flags: continued[2], state: usableState };
}

/** `00-<trace id>-<span id>-<flags>`: the engine's traceparent (its parent is `spanId`), or the client's traceresponse. */
export function traceparentOf(traceId: string, spanId: string, flags: string): string {
  return `00-${traceId}-${spanId}-${flags}`;
}
