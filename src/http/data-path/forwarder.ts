import { Pool, type Dispatcher } from 'undici';

/** Raw header pairs as an object: lower-case names, repeated names as arrays, values byte for byte (latin1). */
function headersOf(raw: Buffer[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toString('latin1').toLowerCase();
    const value = raw[i + 1]!.toString('latin1');
    const known = out[name];
    if (known === undefined) out[name] = value;
    else if (Array.isArray(known)) known.push(value);
    else out[name] = [known, value];
  }
  return out;
}

/** One request to the engine, already rewritten by the forwarding contract (forwarding.ts). */
export interface EngineRequest {
  method: string;
  /** The engine path with its query, starting with `/`. */
  path: string;
  /** Flat list of names and values, in order: [name, value, name, value, …]. */
  headers: string[];
  body: Buffer | null;
}

export interface EngineResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Exactly as the engine sent it (Content-Length bounded or read to its end). */
  body: Buffer;
}

/** The engine's whole answer took longer than the upstream timeout (answered 504 upstream_timeout). */
class EngineTimeout extends Error {
  override readonly name = 'EngineTimeout';
  readonly code = 'UND_ERR_ANSWER_TIMEOUT';
  constructor(timeoutMs: number) {
    super(`the engine's answer took longer than ${timeoutMs} ms`);
  }
}

/** The seam between the gate and the transport to the engine: tests and benchmarks may bring their own. */
export interface Forwarder {
  forward(request: EngineRequest): Promise<EngineResponse>;
  close(): Promise<void>;
}

export interface ForwarderOptions {
  /** Time for the engine's whole answer, headers and body: then the request is aborted (its socket closed). */
  timeoutMs: number;
  /** Sockets kept open to the engine. */
  connections?: number;
}

/**
 * undici's Pool used directly: keep-alive sockets to the engine's origin, no retries (an engine's 503 or reset
 * is its answer), bodies buffered both ways (the engine's answers are small JSON documents; buffering measured
 * cheaper than a streaming pipe, see BENCHMARKS.md).
 */
export function createForwarder(origin: URL, options: ForwarderOptions): Forwarder {
  const pool = new Pool(origin.origin, {
    connections: options.connections ?? 128,
    pipelining: 1,
    // The request's own timer below covers the whole answer; undici's per-phase timers would only add cost.
    headersTimeout: 0,
    bodyTimeout: 0,
    keepAliveTimeout: 30_000,
  });
  return {
    forward(request) {
      return new Promise<EngineResponse>((resolve, reject) => {
        let status = 0;
        let headers: Record<string, string | string[] | undefined> = {};
        const chunks: Buffer[] = [];
        let length = 0;
        let abort: ((reason: Error) => void) | undefined;
        let expired = false;
        // One timer per request for the whole answer: undici's headersTimeout and bodyTimeout restart at every
        // chunk, so an engine trickling its body would never run out. Aborting closes the engine connection.
        const timer = setTimeout(() => {
          expired = true;
          const error = new EngineTimeout(options.timeoutMs);
          if (abort) abort(error);
          else reject(error);
        }, options.timeoutMs);
        // undici's own handler interface instead of pool.request(): no stream object per answer, just its chunks.
        pool.dispatch(
          {
            method: request.method as 'GET',
            path: request.path,
            headers: request.headers,
            body: request.body,
          },
          {
            onConnect(abortRequest: (reason: Error) => void) {
              abort = abortRequest;
              if (expired) abortRequest(new EngineTimeout(options.timeoutMs));
            },
            onHeaders(statusCode: number, rawHeaders: Buffer[]) {
              status = statusCode;
              headers = headersOf(rawHeaders);
              return true;
            },
            onData(chunk: Buffer) {
              chunks.push(chunk);
              length += chunk.length;
              return true;
            },
            onComplete() {
              clearTimeout(timer);
              resolve({ status, headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) });
            },
            onError(error: Error) {
              clearTimeout(timer);
              reject(error);
            },
          } as unknown as Dispatcher.DispatchHandler,
        );
      });
    },
    close: () => pool.close(),
  };
}
