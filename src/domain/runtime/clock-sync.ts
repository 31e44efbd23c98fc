import { OffsetClock } from '../../clock.js';
import { measureClockOffset } from '../../db/clock.js';
import type { Database } from '../../db/client.js';
import type { Logger } from 'pino';

/**
 * How far an instance's clock may be from the database server's and still mint tokens. Within it the
 * offset is corrected (every instant the server writes or compares is on the database's scale); beyond
 * it the host's clock is wrong enough that a step between two measurements could put a token's issue
 * time before a brake's cut-off it should follow, so the instance refuses to mint (docs/server.md).
 */
export const CLOCK_TOLERANCE_MS = 2_000;
/** Whether an offset (ms) is beyond the tolerance: such an instance mints no token. */
export function beyondTolerance(offsetMs: number | null): boolean {
  return offsetMs !== null && Math.abs(offsetMs) > CLOCK_TOLERANCE_MS;
}

/** Measured again this often (as often as the heartbeat). */
const MEASURE_EVERY_MS = 1_000;

export interface ClockSyncEvents {
  /** The offset went beyond the tolerance (skewed) or came back within it. */
  onChange?: (skewed: boolean, offsetMs: number) => void;
}

/**
 * On PostgreSQL, a server's clock is the database server's: the offset of this host's clock is measured
 * every second (a query, the round trip halved) and applied to the database handle's OffsetClock, which
 * every writer and the token minting read. On SQLite (one host, one clock) there is nothing to measure.
 */
export class ClockSync {
  /** This host's clock minus the database server's, in ms; null before the first measurement. */
  offsetMs: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private measuring: Promise<void> | undefined;
  private wasSkewed = false;

  private constructor(
    private readonly db: Database,
    private readonly clock: OffsetClock,
    private readonly events: ClockSyncEvents,
  ) {}

  /** A sync for this database handle, or null when its clock is not the database server's (SQLite, or injected). */
  static of(db: Database, events: ClockSyncEvents = {}): ClockSync | null {
    return db.dialect.hasServerClock && db.clock instanceof OffsetClock ? new ClockSync(db, db.clock, events) : null;
  }

  /** Beyond the tolerance: no token may be minted. */
  get skewed(): boolean {
    return beyondTolerance(this.offsetMs);
  }

  /** Measures (once at a time); a failed measurement keeps the last offset (a clock does not move while a database is away). */
  measure(): Promise<void> {
    this.measuring ??= this.measureOnce().finally(() => {
      this.measuring = undefined;
    });
    return this.measuring;
  }

  private async measureOnce(): Promise<void> {
    let measured: number;
    try {
      measured = (await measureClockOffset(this.db.sql, this.clock.base)).offsetMs;
    } catch {
      return;
    }
    this.clock.offsetMs = measured;
    this.offsetMs = -measured;
    if (this.skewed !== this.wasSkewed) {
      this.wasSkewed = this.skewed;
      this.events.onChange?.(this.skewed, this.offsetMs);
    }
  }

  start(): void {
    this.timer ??= setInterval(() => void this.measure(), MEASURE_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** ClockSync's log lines: the offset going beyond the tolerance, and coming back. */
export function clockSyncLog(logger: Logger | undefined): ClockSyncEvents {
  return {
    onChange: (skewed, offsetMs) => {
      const offset = `${offsetMs > 0 ? '+' : ''}${(offsetMs / 1000).toFixed(1)} s`;
      if (skewed) {
        logger?.error(
          { clock_offset_ms: offsetMs, tolerance_ms: CLOCK_TOLERANCE_MS },
          `CLOCK SKEW: this host's clock is ${offset} off the database server's (tolerance ${CLOCK_TOLERANCE_MS / 1000} s); refusing to mint tokens (503 clock_skewed) until it is back within tolerance: fix the host's time synchronisation`,
        );
      } else {
        logger?.warn({ clock_offset_ms: offsetMs }, `clock back within tolerance (${offset} off the database server's): minting tokens again`);
      }
    },
  };
}
