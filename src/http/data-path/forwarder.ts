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

/** One request to the engine, already rewritten by the forwarding contract (routes/data.ts). */
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

/** The seam between the gate and the transport to the engine: tests and benchmarks may bring their own. */
export interface Forwarder {
  forward(request: EngineRequest): Promise<EngineResponse>;
  close(): Promise<void>;
}

export interface ForwarderOptions {
  /** Time for the engine's headers, then again between body chunks (the old `timeout`). */
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
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: 30_000,
  });
  return {
    forward(request) {
      return new Promise<EngineResponse>((resolve, reject) => {
        let status = 0;
        let headers: Record<string, string | string[] | undefined> = {};
        const chunks: Buffer[] = [];
        let length = 0;
        // undici's own handler interface instead of pool.request(): no stream object per answer, just its chunks.
        pool.dispatch(
          {
            method: request.method as 'GET',
            path: request.path,
            headers: request.headers,
            body: request.body,
            headersTimeout: options.timeoutMs,
            bodyTimeout: options.timeoutMs,
          },
          {
            onConnect() {},
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
              resolve({ status, headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) });
            },
            onError(error: Error) {
              reject(error);
            },
          } as unknown as Dispatcher.DispatchHandler,
        );
      });
    },
    close: () => pool.close(),
  };
}
