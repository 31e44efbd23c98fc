import type { DatabaseConfig } from '../config.js';

/** One PostgreSQL advisory lock per task that a single instance runs at a time. */
const ADVISORY_LOCKS = {
  webhookDelivery: 0x7063746c_7768, // 'pctl' 'wh'
} as const;

export type AdvisoryLock = keyof typeof ADVISORY_LOCKS;

/** Whether this process holds a lock, until stopped. */
export interface Leadership {
  readonly held: boolean;
  stop(): Promise<void>;
}

export interface LeadershipOptions {
  /** Told when the lock is taken. */
  onTaken?: () => void;
  /** Told when the connection holding the lock is lost (the lock with it). */
  onLost?: () => void;
  /** How long to wait before trying again when another instance holds the lock (default 5 s). */
  retryMs?: number;
}

/**
 * Holds pg_try_advisory_lock on a dedicated connection (not one of the pool's: the lock belongs to the
 * session that took it, and must go away when this process does): while it is held this instance leads; the others try again every
 * `retryMs`, so one takes over within seconds after the holder stops or dies (its connection, and with it
 * the lock, goes away).
 */
export function holdLeadership(config: DatabaseConfig, lock: AdvisoryLock, options: LeadershipOptions = {}): Leadership {
  const leadership = new AdvisoryLeadership(config.url, ADVISORY_LOCKS[lock], options);
  leadership.start();
  return leadership;
}

class AdvisoryLeadership implements Leadership {
  held = false;
  private client: import('pg').Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly url: string,
    private readonly key: number,
    private readonly options: LeadershipOptions,
  ) {}

  start(): void {
    void this.attempt();
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return;
    try {
      if (!this.client) {
        const { default: pg } = await import('pg');
        const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 5_000 });
        client.on('error', () => this.lost(client));
        client.on('end', () => this.lost(client));
        await client.connect();
        if (this.stopped) {
          await client.end().catch(() => {});
          return;
        }
        this.client = client;
      }
      const [row] = (await this.client.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1) AS held', [this.key])).rows;
      if (row?.held && !this.held) this.options.onTaken?.();
      this.held = row?.held === true;
    } catch {
      this.held = false;
    }
    if (!this.held && !this.stopped) {
      this.timer = setTimeout(() => void this.attempt(), this.options.retryMs ?? 5_000);
      this.timer.unref();
    }
  }

  private lost(client: import('pg').Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    const was = this.held;
    this.held = false;
    void client.end().catch(() => {});
    if (was) this.options.onLost?.();
    if (!this.stopped) {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.attempt(), 1_000);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    this.held = false;
    await client?.end().catch(() => {});
  }
}
