// Socket floods (test/support/README.md, "Socket floods"): idle connections, heads sent a byte at a time,
// and many client addresses, against a port on loopback; every flood bounded in count and in time, so a
// test that forgets to close one cannot take the machine's descriptors or outlive its file.
import { connect, type Socket } from 'node:net';

/** At most this many sockets in one flood: under the default descriptor limit (1,024) with room to spare. */
export const MAX_FLOOD = 800;
/** No flood socket lives longer than this, whatever the test does (destroyed by a timer of its own). */
export const MAX_LIFETIME_MS = 60_000;

export interface Target {
  port: number;
  /** Where the server listens; 127.0.0.1 unless given. */
  host?: string;
}

export interface FloodSocket {
  socket: Socket;
  /** The local address the connection came from (a loopback alias: the server's client address). */
  from: string;
  /** Resolves when the socket closes, with the milliseconds since it connected. */
  closed: Promise<number>;
  /** Bytes the server sent on it so far. */
  received(): number;
  /** What the server sent on it so far, as text. */
  text(): string;
}

/**
 * The nth address of a loopback alias block: 127.0.<block>.<n + 1> (Linux routes all of 127/8 to `lo`, so
 * every one is a distinct client address to the server without any setup). 254 per block.
 */
export function loopbackAlias(block: number, n: number): string {
  if (!Number.isInteger(block) || block < 1 || block > 254) throw new Error(`loopback block must be 1..254, not ${block}`);
  if (!Number.isInteger(n) || n < 0 || n > 253) throw new Error(`loopback alias index must be 0..253, not ${n}`);
  return `127.0.${block}.${n + 1}`;
}

/** A connection from `from` (a loopback alias) that sends nothing until the test writes on it. */
export async function idleConnection(target: Target, from = '127.0.0.1', lifetimeMs = MAX_LIFETIME_MS): Promise<FloodSocket> {
  const socket = connect({ port: target.port, host: target.host ?? '127.0.0.1', localAddress: from });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const opened = performance.now();
  const bound = setTimeout(() => socket.destroy(), Math.min(lifetimeMs, MAX_LIFETIME_MS));
  bound.unref();
  const closed = new Promise<number>((resolve) =>
    socket.once('close', () => {
      clearTimeout(bound);
      resolve(performance.now() - opened);
    }),
  );
  return {
    socket,
    from,
    closed,
    received: () => chunks.reduce((sum, chunk) => sum + chunk.length, 0),
    text: () => Buffer.concat(chunks).toString('utf8'),
  };
}

export interface Flood {
  sockets: FloodSocket[];
  /** Destroys every socket of the flood and waits until all are closed. */
  close(): Promise<void>;
}

/**
 * `count` idle connections, the ith from `from(i)` (default: all from 127.0.0.1), opened `concurrency` at a
 * time. Bounded: at most MAX_FLOOD sockets, each destroyed after `lifetimeMs` at the latest.
 */
export async function idleFlood(
  target: Target,
  count: number,
  options: { from?: (i: number) => string; concurrency?: number; lifetimeMs?: number } = {},
): Promise<Flood> {
  if (!Number.isInteger(count) || count < 1 || count > MAX_FLOOD) throw new Error(`a flood is 1..${MAX_FLOOD} sockets, not ${count}`);
  const from = options.from ?? (() => '127.0.0.1');
  const concurrency = options.concurrency ?? 50;
  const sockets: FloodSocket[] = [];
  const flood: Flood = {
    sockets,
    close: async () => {
      for (const each of sockets) each.socket.destroy();
      await Promise.all(sockets.map((each) => each.closed));
    },
  };
  try {
    for (let start = 0; start < count; start += concurrency) {
      const batch = Array.from({ length: Math.min(concurrency, count - start) }, (_, k) => idleConnection(target, from(start + k), options.lifetimeMs));
      sockets.push(...(await Promise.all(batch)));
    }
  } catch (error) {
    await flood.close();
    throw error;
  }
  return flood;
}

/**
 * Sends `head` a byte every `intervalMs` (a slowloris client), from `from`, and stops at the first of: the
 * server closing the connection, the whole head sent, or `limitMs`. Resolves with what the server answered,
 * how many bytes were sent and when the connection closed (ms after it opened; null if the limit came first,
 * the socket then destroyed).
 */
export async function dribble(
  target: Target,
  head: string,
  options: { from?: string; intervalMs?: number; limitMs?: number } = {},
): Promise<{ answer: string; sent: number; closedAfterMs: number | null }> {
  const intervalMs = options.intervalMs ?? 1_000;
  const limitMs = Math.min(options.limitMs ?? 30_000, MAX_LIFETIME_MS);
  const connection = await idleConnection(target, options.from, limitMs);
  const bytes = Buffer.from(head, 'latin1');
  let sent = 0;
  let open = true;
  const closedAfter = connection.closed.then((ms) => {
    open = false;
    return ms;
  });
  const started = performance.now();
  while (open && sent < bytes.length && performance.now() - started < limitMs) {
    connection.socket.write(bytes.subarray(sent, sent + 1));
    sent++;
    await Promise.race([new Promise((resolve) => setTimeout(resolve, intervalMs)), closedAfter]);
  }
  if (open && performance.now() - started >= limitMs) {
    connection.socket.destroy();
    await closedAfter;
    return { answer: connection.text(), sent, closedAfterMs: null };
  }
  return { answer: connection.text(), sent, closedAfterMs: await closedAfter };
}

/** One `GET path` from `from` on a connection of its own, closed after the answer: its HTTP status (0: none). */
export async function statusFrom(target: Target, from: string, path = '/healthz', headers: Record<string, string> = {}): Promise<number> {
  const connection = await idleConnection(target, from, 10_000);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  connection.socket.end(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n${lines.join('')}Connection: close\r\n\r\n`);
  await connection.closed;
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(connection.text())?.[1] ?? 0);
}

/**
 * Headers that make a request come from `address` through a trusted proxy (the server started with
 * PUBLIC_API_TRUSTED_PROXIES naming where the test connects from): many client addresses from one socket
 * address, where loopback aliases cannot (IPv6, public ranges).
 */
export function forwardedFrom(address: string): Record<string, string> {
  return { 'x-forwarded-for': address };
}
