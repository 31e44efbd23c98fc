import { createServer, connect, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * How the relay treats the connections through it: `forward` passes bytes both ways; `refuse` resets every
 * connection, open or new (a restarted database, a closed port); `blackhole` accepts new connections and
 * passes nothing on any (a partition that drops packets: nothing is refused, nothing answers).
 */
export type RelayMode = 'forward' | 'refuse' | 'blackhole';

interface Pair {
  client: Socket;
  upstream: Socket | null;
}

/**
 * A TCP relay between a process and a database, which a test cuts and restores, while its own connections
 * (the CLI's, the test's) go to the database directly. Bytes held during a black hole are delivered on
 * restore, as TCP would deliver them once a partition heals.
 */
export class TcpRelay {
  private mode: RelayMode = 'forward';
  private readonly pairs = new Set<Pair>();

  private constructor(
    private readonly server: Server,
    private readonly target: { host: string; port: number },
  ) {}

  /** A relay on a free loopback port to `host:port`. */
  static async start(host: string, port: number): Promise<TcpRelay> {
    let relay: TcpRelay | undefined;
    const server = createServer((socket) => relay!.accept(socket));
    relay = new TcpRelay(server, { host, port });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return relay;
  }

  /** `url` (a PostgreSQL URL) pointed at the relay instead of the database. */
  static through(url: string, relay: TcpRelay): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(relay.port);
    return parsed.toString();
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** Connections currently open through the relay. */
  get open(): number {
    return this.pairs.size;
  }

  set(mode: RelayMode): void {
    const before = this.mode;
    this.mode = mode;
    for (const pair of [...this.pairs]) {
      if (mode === 'refuse') this.drop(pair);
      else if (mode === 'blackhole') this.hold(pair);
      else if (before === 'blackhole') this.join(pair);
    }
  }

  async close(): Promise<void> {
    for (const pair of [...this.pairs]) this.drop(pair);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    if (this.mode === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: null };
    this.pairs.add(pair);
    client.on('error', () => this.drop(pair));
    client.on('close', () => this.drop(pair));
    // A black hole accepts and says nothing: the upstream connection is opened on restore.
    client.pause();
    if (this.mode === 'forward') this.join(pair);
  }

  /** Bytes flow both ways (opening the upstream connection when there is none yet). */
  private join(pair: Pair): void {
    if (pair.upstream === null) {
      const upstream = connect(this.target.port, this.target.host);
      pair.upstream = upstream;
      upstream.on('error', () => this.drop(pair));
      upstream.on('close', () => this.drop(pair));
    }
    pair.client.pipe(pair.upstream);
    pair.upstream.pipe(pair.client);
    pair.client.resume();
    pair.upstream.resume();
  }

  /** Nothing passes either way; nothing is closed. */
  private hold(pair: Pair): void {
    pair.client.unpipe();
    pair.upstream?.unpipe();
    pair.client.pause();
    pair.upstream?.pause();
  }

  private drop(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    if (pair.upstream && !pair.upstream.destroyed) pair.upstream.resetAndDestroy();
  }
}
