import type { Clock } from '../clock.js';
import type { Database } from '../db/client.js';
import { addExposure, type ExposureDelta } from '../db/repositories/exposure.js';
import { DeferredWrites, type OnWriteFailure } from './deferred-writes.js';

const HOUR_MS = 3_600_000;
const FLUSH_INTERVAL_MS = 10_000;
/** Cells kept between flushes at most; beyond, new keys are dropped and counted (`dropped`). */
const MAX_CELLS = 200_000;

interface Cell {
  partnerId: string;
  accepted: number;
  clientErrors: number;
  serverErrors: number;
  firstAt: number;
  lastAt: number;
}

/** hour -> token -> company -> address. Nested maps: a request allocates nothing once its cell exists. */
type Hours = Map<number, Map<string, { keyPairId: string; companies: Map<string, Map<string, Cell>> }>>;

/**
 * Accepted data requests per key pair and token, company and client address, per hour: counted in memory
 * by one instance and added to exposure_hours beside the usage counts, the same way (UsageCounter): one
 * batched upsert at least every 10 s and on close, never on the request path, never waiting for a lock.
 */
export class ExposureCounter extends DeferredWrites {
  private hours: Hours = new Map();
  private cells = 0;
  private interval: NodeJS.Timeout | undefined;
  /** Requests not counted because too many cells were pending (a database down for long). */
  dropped = 0;

  constructor(
    db: Database,
    clock: Clock,
    private readonly options: { intervalMs?: number; onFailure?: OnWriteFailure } = {},
  ) {
    super(db, clock, options.onFailure);
  }

  start(): void {
    if (this.interval || this.stopped) return;
    this.interval = setInterval(() => void this.flush(), this.options.intervalMs ?? FLUSH_INTERVAL_MS);
    this.interval.unref();
  }

  /** A data request that passed the gate (its token and company accepted), with the status it was answered. */
  record(partnerId: string, keyPairId: string | null, tokenId: string, companyId: string, address: string, status: number): void {
    const now = this.clock.now();
    const hour = Math.floor(now / HOUR_MS);
    let tokens = this.hours.get(hour);
    if (tokens === undefined) {
      tokens = new Map();
      this.hours.set(hour, tokens);
    }
    let token = tokens.get(tokenId);
    if (token === undefined) {
      token = { keyPairId: keyPairId ?? '', companies: new Map() };
      tokens.set(tokenId, token);
    }
    let addresses = token.companies.get(companyId);
    if (addresses === undefined) {
      addresses = new Map();
      token.companies.set(companyId, addresses);
    }
    let cell = addresses.get(address);
    if (cell === undefined) {
      if (this.cells >= MAX_CELLS) {
        this.dropped++;
        return;
      }
      cell = { partnerId, accepted: 0, clientErrors: 0, serverErrors: 0, firstAt: now, lastAt: now };
      addresses.set(address, cell);
      this.cells++;
    }
    if (status < 400) cell.accepted++;
    else if (status < 500) cell.clientErrors++;
    else cell.serverErrors++;
    cell.lastAt = now;
  }

  get pending(): number {
    return this.cells;
  }

  protected override cancelTimer(): void {
    super.cancelTimer();
    clearInterval(this.interval);
    this.interval = undefined;
  }

  protected async writeOnce(): Promise<boolean> {
    if (this.cells === 0) return true;
    const batch = this.hours;
    this.hours = new Map();
    this.cells = 0;
    const deltas: ExposureDelta[] = [];
    for (const [hour, tokens] of batch) {
      const periodStart = new Date(hour * HOUR_MS);
      for (const [tokenId, { keyPairId, companies }] of tokens) {
        for (const [companyId, addresses] of companies) {
          for (const [clientAddress, cell] of addresses) {
            deltas.push({
              keyPairId,
              tokenId,
              companyId,
              clientAddress,
              periodStart,
              partnerId: cell.partnerId,
              accepted: cell.accepted,
              clientErrors: cell.clientErrors,
              serverErrors: cell.serverErrors,
              firstAt: new Date(cell.firstAt),
              lastAt: new Date(cell.lastAt),
            });
          }
        }
      }
    }
    if (await this.write((tx) => addExposure(tx, deltas))) return true;
    // Merge the batch back into what was counted meanwhile; the next flush tries again.
    for (const [hour, tokens] of batch) {
      for (const [tokenId, { keyPairId, companies }] of tokens) {
        for (const [companyId, addresses] of companies) {
          for (const [address, cell] of addresses) this.mergeBack(hour, tokenId, keyPairId, companyId, address, cell);
        }
      }
    }
    return false;
  }

  private mergeBack(hour: number, tokenId: string, keyPairId: string, companyId: string, address: string, cell: Cell): void {
    let tokens = this.hours.get(hour);
    if (tokens === undefined) {
      tokens = new Map();
      this.hours.set(hour, tokens);
    }
    let token = tokens.get(tokenId);
    if (token === undefined) {
      token = { keyPairId, companies: new Map() };
      tokens.set(tokenId, token);
    }
    let addresses = token.companies.get(companyId);
    if (addresses === undefined) {
      addresses = new Map();
      token.companies.set(companyId, addresses);
    }
    const known = addresses.get(address);
    if (!known) {
      addresses.set(address, cell);
      this.cells++;
      return;
    }
    known.accepted += cell.accepted;
    known.clientErrors += cell.clientErrors;
    known.serverErrors += cell.serverErrors;
    known.firstAt = Math.min(known.firstAt, cell.firstAt);
    known.lastAt = Math.max(known.lastAt, cell.lastAt);
  }
}
