import type { DatabaseConfig } from '../config.js';
import { ACCESS_CHANNEL } from './repositories/revision.js';

export interface ChangeListener {
  /** True while LISTEN is in force on a live connection. */
  readonly listening: boolean;
  close(): Promise<void>;
}

export interface ListenOptions {
  /** The channel (default: the access channel every change is announced on). */
  channel?: string;
  /** Called on every notification, and after each (re)connection, since changes may have been missed. */
  onChange: () => void;
  /** Called when the connection is lost or cannot be made (for the log); the listener keeps retrying. */
  onLost?: (error: unknown) => void;
  /** First retry delay; doubled up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
}

/**
 * LISTEN on the access channel (or `options.channel`) over a dedicated PostgreSQL connection (not one of the pool's: a pooled
 * connection would lose its LISTEN when returned). A lost connection (database restart, terminated backend)
 * is reopened with backoff and LISTENs again by itself.
 */
export async function listenForChanges(config: DatabaseConfig, options: ListenOptions): Promise<ChangeListener> {
  const { default: pg } = await import('pg');
  const retryMs = options.retryMs ?? 50;
  const maxRetryMs = options.maxRetryMs ?? 2_000;
  let closed = false;
  let client: InstanceType<typeof pg.Client> | undefined;
  let listening = false;
  let timer: NodeJS.Timeout | undefined;
  let delay = retryMs;

  const lost = (error: unknown, from: InstanceType<typeof pg.Client>) => {
    if (client !== from) return;
    listening = false;
    client = undefined;
    from.removeAllListeners('notification');
    void from.end().catch(() => {});
    if (closed) return;
    options.onLost?.(error);
    timer = setTimeout(connect, delay);
    timer.unref();
    delay = Math.min(delay * 2, maxRetryMs);
  };

  async function connect(): Promise<void> {
    if (closed) return;
    const next = new pg.Client({ connectionString: config.url, connectionTimeoutMillis: 5_000, keepAlive: true });
    client = next;
    next.on('error', (error) => lost(error, next));
    next.on('end', () => lost(new Error('the listening connection ended'), next));
    next.on('notification', () => options.onChange());
    try {
      await next.connect();
      await next.query(`LISTEN ${options.channel ?? ACCESS_CHANNEL}`);
    } catch (error) {
      lost(error, next);
      return;
    }
    if (client !== next) return;
    listening = true;
    delay = retryMs;
    // Whatever changed while no LISTEN was in force is not announced again.
    options.onChange();
  }

  await connect();
  return {
    get listening() {
      return listening;
    },
    close: async () => {
      closed = true;
      clearTimeout(timer);
      const current = client;
      client = undefined;
      listening = false;
      await current?.end().catch(() => {});
    },
  };
}
