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
  /** The PostgreSQL messages the client sent, read as they pass (for a trap at a statement). */
  scanner: StatementScanner;
}

/**
 * What a trap does at its statement: `cut` passes the statement to the database and then ends the
 * connection there (the database runs it: a COMMIT commits) while the client's side is reset, so the client
 * never hears the answer; `blackhole` passes the statement and then nothing more either way, nothing closed.
 */
export type TrapAction = 'cut' | 'blackhole';

export interface StatementTrap {
  /** The statement to act at: the SQL of a simple Query or of a Parse (extended protocol). */
  at: RegExp;
  /** Only on a connection that has sent a statement matching this before (`at` alone: any connection). */
  after?: RegExp;
  action: TrapAction;
}

/**
 * A TCP relay between a process and a database, which a test cuts and restores, while its own connections
 * (the CLI's, the test's) go to the database directly. Bytes held during a black hole are delivered on
 * restore, as TCP would deliver them once a partition heals.
 */
export class TcpRelay {
  private mode: RelayMode = 'forward';
  private readonly pairs = new Set<Pair>();
  private trap: (StatementTrap & { fired: () => void }) | null = null;

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

  /**
   * Arms a trap for the next statement matching `trap.at` (on a connection that sent `trap.after` first):
   * the statement reaches the database, its answer never reaches the client. Once; the promise resolves when
   * it has fired. The way to make a commit's outcome unknown to the client while it did commit.
   */
  trapStatement(trap: StatementTrap): Promise<void> {
    return new Promise((resolve) => {
      this.trap = { ...trap, fired: resolve };
    });
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
    const pair: Pair = { client, upstream: null, scanner: new StatementScanner() };
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
      // Client to database message by message (a paused client sends nothing: see hold).
      pair.client.on('data', (chunk: Buffer) => this.forward(pair, upstream, chunk));
    }
    pair.upstream.pipe(pair.client);
    pair.client.resume();
    pair.upstream.resume();
  }

  private forward(pair: Pair, upstream: Socket, chunk: Buffer): void {
    const trap = this.trap;
    if (trap === null) {
      pair.scanner.feed(chunk, () => false);
      upstream.write(chunk);
      return;
    }
    const at = pair.scanner.feed(chunk, (sql, seen) => trap.at.test(sql) && (trap.after === undefined || seen.some((earlier) => trap.after!.test(earlier))));
    if (at === null) {
      upstream.write(chunk);
      return;
    }
    // Through the trapped statement, and not a byte after it.
    this.trap = null;
    upstream.write(chunk.subarray(0, at));
    pair.upstream!.unpipe(pair.client);
    pair.client.pause();
    if (trap.action === 'cut') {
      // Out of the relay's set first: dropping it would reset the database's side before it read the statement.
      this.pairs.delete(pair);
      pair.client.resetAndDestroy();
      pair.upstream!.resume();
      upstream.end();
    }
    trap.fired();
  }

  /** Nothing passes either way; nothing is closed. */
  private hold(pair: Pair): void {
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

/**
 * Reads the frontend side of the PostgreSQL wire protocol as it passes: the untyped start-up messages (an
 * SSL or GSS request first, perhaps), then typed messages (a byte, a length that counts itself, the body).
 */
class StatementScanner {
  private pending = Buffer.alloc(0);
  private startup = true;
  /** The statements this connection sent, in order. */
  private readonly seen: string[] = [];

  /**
   * Takes the next bytes; returns the offset in `chunk` just past the first statement `matches` accepts
   * (given the statements before it), or null when none does.
   */
  feed(chunk: Buffer, matches: (sql: string, seen: readonly string[]) => boolean): number | null {
    const before = this.pending.length;
    let buffer = Buffer.concat([this.pending, chunk]);
    let consumed = 0;
    for (;;) {
      const length = this.startup ? (buffer.length >= 4 ? buffer.readInt32BE(0) : -1) : buffer.length >= 5 ? buffer.readInt32BE(1) + 1 : -1;
      if (length < 0 || buffer.length < length) break;
      const message = buffer.subarray(0, length);
      buffer = buffer.subarray(length);
      consumed += length;
      if (this.startup) {
        // 80877103: SSLRequest, 80877104: GSSENCRequest; the start-up message itself follows them.
        const code = message.readInt32BE(4);
        if (code !== 80877103 && code !== 80877104) this.startup = false;
        continue;
      }
      const sql = statementOf(message);
      if (sql === null) continue;
      const hit = matches(sql, this.seen);
      this.seen.push(sql);
      if (hit) {
        this.pending = Buffer.alloc(0);
        return consumed - before;
      }
    }
    this.pending = Buffer.from(buffer);
    return null;
  }
}

/** The SQL of a Query ('Q': the string) or a Parse ('P': a name, then the string); null for other messages. */
function statementOf(message: Buffer): string | null {
  const type = String.fromCharCode(message[0]!);
  if (type === 'Q') return message.toString('utf8', 5, message.indexOf(0, 5));
  if (type === 'P') {
    const start = message.indexOf(0, 5) + 1;
    return message.toString('utf8', start, message.indexOf(0, start));
  }
  return null;
}
