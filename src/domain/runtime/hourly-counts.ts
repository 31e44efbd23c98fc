import type { Clock } from '../../clock.js';
import { TUNING } from '../../config.js';
import type { Database } from '../../db/client.js';
import type { SqlTx } from '../../db/unit.js';
import { DeferredWrites, type OnWriteFailure } from './deferred-writes.js';

export const HOUR_MS = 3_600_000;

/** The keys of a cell below its hour: two (usage: partner, company) or three (exposure: token, company, address). */
type Keys = [string, string] | [string, string, string];

/** One level of the nested maps: key -> the next level, or the cell at the last one. */
type Level = Map<string, unknown>;

export interface HourlyCountsOptions {
  /** How often what is counted is written (default 10 s). */
  intervalMs?: number;
  onFailure?: OnWriteFailure;
  /** Told once each time the cap is reached (again only after a write made room). */
  onFull?: (cap: number) => void;
}

/**
 * Counts per hour and a fixed number of keys, kept in memory by one instance in nested maps (hour -> key ->
 * … -> cell: a request allocates nothing once its cell exists) and added to their table in one batched write
 * at least every interval and on close, never on the request path, never waiting for a lock (DeferredWrites).
 * A failed write merges its batch back into what was counted meanwhile, for the next attempt. At most
 * `maxCells` cells are kept: beyond, requests in new cells are not counted (`dropped`, `onFull` told once).
 * A subclass says what a cell holds, how a request adds to it (`cellAt`, `room`, `keep`), how two cells of
 * the same keys merge and what rows a cell becomes.
 */
export abstract class HourlyCounts<Cell, K extends Keys, Delta> extends DeferredWrites {
  private hours = new Map<number, Level>();
  private cells = 0;
  /** The batch of a write under way, until it is written or merged back. */
  private writing: { hours: Map<number, Level>; cells: number } | undefined;
  private interval: NodeJS.Timeout | undefined;
  /** Requests not counted because too many cells were pending (a database down for long). */
  dropped = 0;
  /** `dropped` when the cap was last reported (told again after a write makes room and it fills up again). */
  private droppedReported = 0;

  constructor(
    db: Database,
    clock: Clock,
    private readonly depth: K['length'],
    private readonly maxCells: number,
    private readonly options: HourlyCountsOptions = {},
  ) {
    super(db, clock, options.onFailure);
  }

  /** Adds what `b` counted to `a` (same keys, same hour). */
  protected abstract merge(a: Cell, b: Cell): void;

  /** The row a cell adds to its table. */
  protected abstract delta(cell: Cell, periodStart: Date, ...keys: K): Delta;

  /** Adds the rows to the table, in the write's transaction. */
  protected abstract add(tx: SqlTx, deltas: Delta[]): Promise<void>;

  start(): void {
    if (this.interval || this.stopped) return;
    this.interval = setInterval(() => void this.flush(), this.options.intervalMs ?? TUNING.countsFlushMs);
    this.interval.unref();
  }

  /** Cells not written yet, those of a write under way included (a stop cut short by its deadline loses them too). */
  get pending(): number {
    return this.cells + (this.writing?.cells ?? 0);
  }

  /** The cell under these keys in that hour, undefined when there is none yet. */
  protected cellAt(hour: number, ...keys: K): Cell | undefined;
  protected cellAt(hour: number, a: string, b: string, c?: string): Cell | undefined {
    return this.leaf(hour, a, b, false)?.get(this.depth === 2 ? b : (c as string)) as Cell | undefined;
  }

  /** Whether a new cell may be kept; when not, the request is counted in `dropped` (and the cap reported once). */
  protected room(): boolean {
    if (this.cells < this.maxCells) return true;
    if (this.dropped++ === this.droppedReported) this.options.onFull?.(this.maxCells);
    return false;
  }

  /** Keeps a new cell under these keys in that hour (none there yet); returns it. */
  protected keep(cell: Cell, hour: number, ...keys: K): Cell;
  protected keep(cell: Cell, hour: number, a: string, b: string, c?: string): Cell {
    (this.leaf(hour, a, b, true) as Level).set(this.depth === 2 ? b : (c as string), cell);
    this.cells++;
    return cell;
  }

  /** Every cell pending, with its hour and keys. */
  protected forEachCell(visit: (cell: Cell, hour: number, ...keys: K) => void): void {
    this.walk(this.hours, visit);
    if (this.writing) this.walk(this.writing.hours, visit);
  }

  protected override cancelTimer(): void {
    super.cancelTimer();
    clearInterval(this.interval);
    this.interval = undefined;
  }

  protected async writeOnce(): Promise<boolean> {
    if (this.cells === 0) return true;
    const batch = this.hours;
    this.writing = { hours: batch, cells: this.cells };
    this.hours = new Map();
    this.cells = 0;
    const deltas: Delta[] = [];
    this.walk(batch, (cell, hour, ...keys) => deltas.push(this.delta(cell, new Date(hour * HOUR_MS), ...keys)));
    const written = await this.write((tx) => this.add(tx, deltas));
    this.writing = undefined;
    if (written) {
      this.droppedReported = this.dropped;
      return true;
    }
    // Merge the batch back into what was counted meanwhile; the next flush tries again.
    this.walk(batch, (cell, hour, ...keys) => {
      const known = this.cellAt(hour, ...keys);
      if (known === undefined) this.keep(cell, hour, ...keys);
      else this.merge(known, cell);
    });
    return false;
  }

  /**
   * The map holding the cells under `a` (depth 2) or `a`, `b` (depth 3) in that hour; with `make`, the maps
   * missing on the way are made, else undefined when one is missing.
   */
  private leaf(hour: number, a: string, b: string, make: boolean): Level | undefined {
    let level = this.hours.get(hour);
    if (level === undefined) {
      if (!make) return undefined;
      level = new Map();
      this.hours.set(hour, level);
    }
    const below = this.child(level, a, make);
    return this.depth === 2 || below === undefined ? below : this.child(below, b, make);
  }

  private child(level: Level, key: string, make: boolean): Level | undefined {
    let next = level.get(key) as Level | undefined;
    if (next === undefined && make) {
      next = new Map();
      level.set(key, next);
    }
    return next;
  }

  private walk(hours: Map<number, Level>, visit: (cell: Cell, hour: number, ...keys: K) => void): void {
    const at = visit as (cell: Cell, hour: number, a: string, b: string, c?: string) => void;
    for (const [hour, byA] of hours) {
      for (const [a, byB] of byA as Map<string, Level>) {
        if (this.depth === 2) {
          for (const [b, cell] of byB) at(cell as Cell, hour, a, b);
          continue;
        }
        for (const [b, byC] of byB as Map<string, Level>) {
          for (const [c, cell] of byC) at(cell as Cell, hour, a, b, c);
        }
      }
    }
  }
}
