import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

/** One key pair × token × company × client address × hour's counts, as an instance adds them. */
export type ExposureDelta = Columns<'ExposureHour'>;

/**
 * Adds the counts to their rows (created when missing), widening first and last seen: instances add to the
 * same rows, never overwrite them.
 */
export async function addExposure(tx: SqlTx, deltas: readonly ExposureDelta[]): Promise<void> {
  const { least, greatest } = tx.dialect;
  const rows = deltas.map(
    (d) => [d.keyPairId, d.tokenId, d.companyId, d.clientAddress, d.periodStart, d.partnerId, d.accepted, d.clientErrors, d.serverErrors, d.firstAt, d.lastAt] as const,
  );
  for (const { placeholders, params } of valuesBatches(rows)) {
    await tx.run(
      `INSERT INTO exposure_hours (key_pair_id, token_id, company_id, client_address, period_start, partner_id, accepted, client_errors, server_errors, first_at, last_at)
       VALUES ${placeholders}
       ON CONFLICT (key_pair_id, company_id, client_address, token_id, period_start) DO UPDATE SET
         accepted = exposure_hours.accepted + excluded.accepted,
         client_errors = exposure_hours.client_errors + excluded.client_errors,
         server_errors = exposure_hours.server_errors + excluded.server_errors,
         first_at = ${least}(exposure_hours.first_at, excluded.first_at),
         last_at = ${greatest}(exposure_hours.last_at, excluded.last_at)`,
      params,
    );
  }
}

/** Whose requests: exactly one of a key pair, a token, a partner; and hours in a window. */
export interface ExposureFilter {
  keyPairId?: string;
  tokenId?: string;
  partnerId?: string;
  /** Hours starting at or after this (rounded down to the hour by the caller). */
  since: Date;
  until: Date;
  /** The token exchanges' rows (company '' and token ''), instead of the data requests'. */
  exchanges?: boolean;
}

function where(filter: ExposureFilter, params: unknown[]): string {
  const parts = [`period_start >= $${params.push(filter.since)}`, `period_start < $${params.push(filter.until)}`];
  if (filter.keyPairId !== undefined) parts.push(`key_pair_id = $${params.push(filter.keyPairId)}`);
  if (filter.tokenId !== undefined) parts.push(`token_id = $${params.push(filter.tokenId)}`);
  if (filter.partnerId !== undefined) parts.push(`partner_id = $${params.push(filter.partnerId)}`);
  parts.push(filter.exchanges ? "company_id = ''" : "company_id <> ''");
  return parts.join(' AND ');
}

export interface ExposureCounts {
  accepted: number;
  clientErrors: number;
  serverErrors: number;
  firstAt: Date;
  lastAt: Date;
}

type Raw = {
  company_id: string;
  client_address: string;
  accepted: number | string;
  client_errors: number | string;
  server_errors: number | string;
  first_at: unknown;
  last_at: unknown;
};

/**
 * The counts per company and client address, summed over the window: one pass over the rows in the primary
 * key's order (key pair, company, address), for the caller to fold into companies and addresses.
 */
export async function exposureCells(q: Queryable, filter: ExposureFilter): Promise<Array<ExposureCounts & { companyId: string; clientAddress: string }>> {
  const params: unknown[] = [];
  const rows = await q.query<Raw>(
    `SELECT company_id, client_address, SUM(accepted) AS accepted, SUM(client_errors) AS client_errors, SUM(server_errors) AS server_errors,
       MIN(first_at) AS first_at, MAX(last_at) AS last_at
     FROM exposure_hours WHERE ${where(filter, params)}
     GROUP BY company_id, client_address`,
    params,
  );
  return rows.map((row) => ({
    companyId: row.company_id,
    clientAddress: row.client_address,
    accepted: Number(row.accepted),
    clientErrors: Number(row.client_errors),
    serverErrors: Number(row.server_errors),
    firstAt: toDate(row.first_at)!,
    lastAt: toDate(row.last_at)!,
  }));
}
