import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import type { SqlTx } from '../../db/unit.js';

const WRITE_TIMEOUT_MS = 2_000;
/**
 * How long stopping keeps retrying what is pending while the database is busy (another process's write
 * lock, a row lock, a conflict with another instance stopping): docs/server.md (Shutdown) says so.
 */
export const STOP_WRITE_LIMIT_MS = 10_000;
const STOP_RETRY_MIN_MS = 50;
const STOP_RETRY_MAX_MS = 1_000;

export type OnWriteFailure = (error: unknown, failures: number) => void;

/**
 * What the server writes off the request path (bookkeeping, usage counts): one write at a time, in one short
 * transaction that never waits for a lock another process holds (on SQLite that wait would sleep the event
 * loop and freeze every request). A subclass keeps what is pending, takes it for a batch (`writeOnce`), and
 * puts it back when `write` fails; it says when to write next with `schedule`.
 */
export abstract class DeferredWrites {
  private flushing: Promise<boolean> | undefined;
  private timer: NodeJS.Timeout | undefined;
  protected stopped = false;
  /** Failed writes in a row (for tests and the log). */
  failures = 0;

  constructor(
    protected readonly db: Database,
    protected readonly clock: Clock,
    private readonly onFailure?: OnWriteFailure,
  ) {}

  /** How many rows are waiting to be written. */
  abstract get pending(): number;

  /** Takes what is pending and writes it (through `write`); resolves whether it was written. */
  protected abstract writeOnce(): Promise<boolean>;

  /**
   * A write `delayMs` from now, off the caller's path. A write already scheduled stands (a retry keeps its
   * pause), unless `preempt` asks for one at once (delay 0) in its place.
   */
  protected schedule(delayMs: number, options: { preempt?: boolean } = {}): void {
    if (this.stopped) return;
    if (this.timer) {
      if (!(options.preempt && delayMs === 0)) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  /** No write scheduled any more. */
  protected cancelTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Writes what is pending at the call, one write at a time; resolves whether it was written. Never waits for
   * a lock. A write under way took its batch before this call, so what came since waits for the next one: it
   * does not answer for this call.
   */
  async flush(): Promise<boolean> {
    if (this.flushing !== undefined) await this.flushing;
    this.flushing ??= this.writeOnce().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /**
   * No more timers: waits for a write under way, then writes what is left, retrying (never waiting on a
   * lock, sleeping between attempts) for up to `limitMs`; resolves whether everything was written. What is
   * still pending then stays readable (`pending`, the subclass's totals) for the caller to report.
   */
  async stop(limitMs = STOP_WRITE_LIMIT_MS): Promise<boolean> {
    this.stopped = true;
    this.cancelTimer();
    await this.flushing;
    // A real-time bound on waiting (a test clock may stand still): the instants written still come from the clock.
    const deadline = performance.now() + limitMs;
    let delay = STOP_RETRY_MIN_MS;
    for (;;) {
      if (this.pending === 0) return true;
      if ((await this.flush()) && this.pending === 0) return true;
      if (performance.now() + delay > deadline) return this.pending === 0;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(STOP_RETRY_MAX_MS, delay * 2);
    }
  }

  /** One short transaction that fails at once when another process holds the write lock; counts failures. */
  protected async write(statements: (tx: SqlTx) => Promise<void>): Promise<boolean> {
    try {
      await this.db.sql.transaction(statements, { timeoutMs: WRITE_TIMEOUT_MS, lockWaitMs: 0 });
      this.failures = 0;
      return true;
    } catch (error) {
      this.failures++;
      this.onFailure?.(error, this.failures);
      return false;
    }
  }
}
