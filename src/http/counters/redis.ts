import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';

const OUTAGE_LOG_INTERVAL_MS = 60_000;
/** A command that has not answered by then counts as a failure; the request goes on with local counters. */
const COMMAND_TIMEOUT_MS = 250;
/** After a command timed out on a connection that looks alive: how often a PING checks whether Redis answers again. */
const PROBE_INTERVAL_MS = 1_000;

/**
 * The one Redis connection that shares counters between instances. It never queues commands while
 * disconnected (a command then fails at once and the caller falls back to its own in-memory counters),
 * reconnects by itself, and says so in the log: once when it is lost, at most once a minute while it stays
 * lost, and once when it is back. A Redis that keeps its connection but stops answering (hung, SIGSTOP) is
 * lost too: after a command times out, requests use local counters at once and a PING every second tells
 * when it answers again; `available` (readiness, `partnerctl_redis_up`) says what requests actually use.
 */
export class SharedRedis {
  readonly client: Redis;
  private down = false;
  /** A command timed out on a live-looking connection: not used until a PING answers. */
  private stalled = false;
  private probe: NodeJS.Timeout | undefined;
  private lastOutageLog = -Infinity;
  private closed = false;
  /** Times a command failed and local counters were used instead: for the metrics. */
  fallbacks = 0;

  constructor(
    url: string,
    private readonly logger: Logger | undefined,
    private readonly clock: Clock,
  ) {
    this.client = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: 2_000,
      lazyConnect: false,
      // Keep trying, at most every 2 s: Redis coming back must be noticed without a restart.
      retryStrategy: (times) => Math.min(100 * times, 2_000),
      reconnectOnError: () => true,
    });
    this.client.on('ready', () => {
      if (this.down || this.stalled) this.logger?.info('redis available again: limits are shared between instances');
      this.down = false;
      this.stalled = false;
    });
    this.client.on('error', (error: Error) => this.failed(error));
    this.client.on('close', () => {
      if (!this.closed) this.failed(new Error('connection closed'));
    });
  }

  /** Connected and answering: commands go to Redis. */
  get available(): boolean {
    return this.client.status === 'ready' && !this.down && !this.stalled;
  }

  /** A command or the connection failed: local counters until the connection is ready again. */
  failed(error: unknown): void {
    if (this.closed) return;
    this.fallbacks++;
    // A dropped connection: local counters until it is ready again. A command that timed out on a live
    // connection: local counters until a PING answers.
    if (this.client.status !== 'ready') this.down = true;
    else if (!this.stalled) {
      this.stalled = true;
      this.scheduleProbe();
    }
    const now = this.clock.now();
    if (now - this.lastOutageLog >= OUTAGE_LOG_INTERVAL_MS) {
      this.lastOutageLog = now;
      this.logger?.warn(
        { err: { message: (error as Error)?.message ?? String(error) } },
        'redis unavailable: limits fall back to per-instance counters (fail open) until it is back',
      );
    }
  }

  private scheduleProbe(): void {
    if (this.closed || this.probe) return;
    this.probe = setTimeout(() => {
      this.probe = undefined;
      if (this.closed || !this.stalled) return;
      this.client.ping().then(
        () => {
          if (!this.stalled || this.closed) return;
          this.stalled = false;
          if (!this.down) this.logger?.info('redis available again: limits are shared between instances');
        },
        () => this.scheduleProbe(),
      );
    }, PROBE_INTERVAL_MS);
    this.probe.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.probe);
    this.client.disconnect();
  }
}
