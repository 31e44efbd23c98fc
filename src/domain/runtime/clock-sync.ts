import { OffsetClock, STEP_DETECT_MS, type ClockReading } from '../../clock.js';
import { measureClock } from '../../db/clock.js';
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
/**
 * A reading whose round trip took longer is not used (the clock keeps counting from the last one): the
 * instance's clock is off the database server's by at most half of this, plus the monotonic clock's drift.
 */
export const MAX_ROUND_TRIP_MS = 1_000;

export interface ClockSyncEvents {
  /** The offset went beyond the tolerance (skewed) or came back within it. */
  onChange?: (skewed: boolean, offsetMs: number) => void;
  /**
   * The host's wall clock moved against the monotonic one by `stepMs` (more than STEP_DETECT_MS) since the
   * reading the instance's clock counts from (`sinceMs` ago): once per step.
   */
  onStep?: (stepMs: number, sinceMs: number) => void;
}

/**
 * On PostgreSQL, a server's clock is the database server's: it is read every second (a query, the round
 * trip halved) into the database handle's OffsetClock, which every writer and the token minting read, and
 * which counts on from the last reading on the monotonic clock (a database that does not answer leaves the
 * last reading in force; a step of the host's wall clock moves nothing). The host's wall clock is compared
 * with it only to report: its offset (beyond the tolerance the instance mints nothing) and its steps. On
 * SQLite (one host, one clock) there is nothing to measure.
 */
export class ClockSync {
  /** This host's clock minus the database server's, in ms; null before the first measurement. */
  offsetMs: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private measuring: Promise<void> | undefined;
  private wasSkewed = false;
  /** The wall clock's drift against the monotonic one already reported, since the current reading. */
  private reportedDrift = 0;

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
    let measured;
    try {
      measured = await measureClock(this.db.sql, this.clock.wall, this.clock.monotonic);
    } catch {
      return;
    }
    if (measured.roundTripMs > MAX_ROUND_TRIP_MS) return;
    const previous = this.clock.lastReading;
    if (previous !== null) this.noticeStep(drift(previous, measured.reading), measured.reading.monotonic - previous.monotonic);
    this.clock.set(measured.reading);
    this.reportedDrift = 0;
    this.offsetMs = -measured.offsetMs;
    if (this.skewed !== this.wasSkewed) {
      this.wasSkewed = this.skewed;
      this.events.onChange?.(this.skewed, this.offsetMs);
    }
  }

  /**
   * Compares the wall clock with the monotonic one since the current reading: a step is reported once, even
   * while the database does not answer (no new reading).
   */
  checkStep(): void {
    const reading = this.clock.lastReading;
    if (reading !== null) this.noticeStep(this.clock.wallDrift(), this.clock.monotonic() - reading.monotonic);
  }

  private noticeStep(driftMs: number, sinceMs: number): void {
    if (Math.abs(driftMs - this.reportedDrift) <= STEP_DETECT_MS) return;
    this.events.onStep?.(driftMs - this.reportedDrift, sinceMs);
    this.reportedDrift = driftMs;
  }

  start(): void {
    this.timer ??= setInterval(() => {
      this.checkStep();
      void this.measure();
    }, MEASURE_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** How far the wall clock moved beyond the monotonic one from one reading to the next. */
function drift(from: ClockReading, to: ClockReading): number {
  return to.wall - from.wall - (to.monotonic - from.monotonic);
}

/** ClockSync's log lines: the offset going beyond the tolerance, and coming back; a step of the wall clock. */
export function clockSyncLog(logger: Logger | undefined): ClockSyncEvents {
  return {
    onStep: (stepMs, sinceMs) => {
      const step = `${stepMs > 0 ? '+' : ''}${(stepMs / 1000).toFixed(1)} s`;
      logger?.error(
        { clock_step_ms: Math.round(stepMs), reading_age_ms: Math.round(sinceMs) },
        `CLOCK STEP: this host's wall clock moved ${step} against its monotonic clock; instants stay on the database server's clock, counted on the monotonic clock from its reading ${(sinceMs / 1000).toFixed(1)} s ago${stepMs > 0 ? ' (a forward step or a suspend: until the next reading, nothing is served from state that cannot be dated)' : ''}: fix the host's time synchronisation`,
      );
    },
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
