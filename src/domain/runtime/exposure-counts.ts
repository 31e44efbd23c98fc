import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { addExposure, type ExposureDelta } from '../../db/repositories/exposure.js';
import type { SqlTx } from '../../db/unit.js';
import { HOUR_MS, HourlyCounts, type HourlyCountsOptions } from './hourly-counts.js';
import type { Logger } from 'pino';
import { loggableChain } from './logged-errors.js';

/** Cells kept between flushes at most; beyond, requests in new cells are not counted (`dropped`, `onFull` told once). */
const MAX_CELLS = 200_000;

interface Cell {
  partnerId: string;
  /** '' for a token of no key pair. */
  keyPairId: string;
  accepted: number;
  clientErrors: number;
  serverErrors: number;
  firstAt: number;
  lastAt: number;
}

/**
 * Accepted data requests per key pair and token, company and client address, per hour, and token exchanges
 * per key pair and client address (token and company '': minted as accepted, refused attempts naming the
 * pair's access key as errors): counted in memory
 * by one instance and added to exposure_hours beside the usage counts, the same way (HourlyCounts): one
 * batched upsert at least every 10 s and on close, never on the request path, never waiting for a lock.
 */
export class ExposureCounter extends HourlyCounts<Cell, [tokenId: string, companyId: string, address: string], ExposureDelta> {
  constructor(db: Database, clock: Clock, options: HourlyCountsOptions = {}) {
    super(db, clock, 3, MAX_CELLS, options);
  }

  /**
   * A data request that passed the gate (its token and company accepted), with the status it was answered;
   * or a token exchange that named a pair (`exchanged`).
   */
  record(partnerId: string, keyPairId: string | null, tokenId: string, companyId: string, address: string, status: number): void {
    const now = this.clock.now();
    const hour = Math.floor(now / HOUR_MS);
    let cell = this.cellAt(hour, tokenId, companyId, address);
    if (cell === undefined) {
      if (!this.room()) return;
      cell = this.keep(
        { partnerId, keyPairId: keyPairId ?? '', accepted: 0, clientErrors: 0, serverErrors: 0, firstAt: now, lastAt: now },
        hour,
        tokenId,
        companyId,
        address,
      );
    }
    if (status < 400) cell.accepted++;
    else if (status < 500) cell.clientErrors++;
    else cell.serverErrors++;
    cell.lastAt = now;
  }

  /** A token exchange naming a pair's access key, minted (2xx) or refused (an attempt), from this address. */
  exchanged(partnerId: string, keyPairId: string, address: string, status: number): void {
    this.record(partnerId, keyPairId, '', '', address, status);
  }

  protected merge(known: Cell, cell: Cell): void {
    known.accepted += cell.accepted;
    known.clientErrors += cell.clientErrors;
    known.serverErrors += cell.serverErrors;
    known.firstAt = Math.min(known.firstAt, cell.firstAt);
    known.lastAt = Math.max(known.lastAt, cell.lastAt);
  }

  protected delta(cell: Cell, periodStart: Date, tokenId: string, companyId: string, clientAddress: string): ExposureDelta {
    return {
      keyPairId: cell.keyPairId,
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
    };
  }

  protected add(tx: SqlTx, deltas: ExposureDelta[]): Promise<void> {
    return addExposure(tx, deltas);
  }
}

/** The exposure counter's log lines: the cap reached, writes failing. */
export function exposureLog(logger: Logger | undefined): Pick<HourlyCountsOptions, 'onFull' | 'onFailure'> {
  return {
    onFull: (cap) =>
      logger?.error(
        { cap },
        `EXPOSURE CAP REACHED: ${cap} exposure cells (token × company × address × hour) are waiting for the database; requests in new cells are not counted until a write goes through`,
      ),
    onFailure: (error, failures) => {
      if (failures === 1 || failures % 20 === 0) logger?.warn({ err: loggableChain(error), failures }, 'exposure counts not written (database busy or unavailable); kept for the next attempt');
    },
  };
}
