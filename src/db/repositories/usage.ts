import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import { valuesBatches, type Queryable, type SqlTx } from '../unit.js';

/** One partner × company × hour's counts, as an instance adds them to the table. */
export type UsageDelta = Columns<'UsageHour'>;

/**
 * Adds the counts to their rows (created when missing): one multi-row INSERT … ON CONFLICT, several only when
 * the batch outgrows the engines' parameter limits. Instances add to the same rows, never overwrite them.
 */
export async function addUsage(tx: SqlTx, deltas: readonly UsageDelta[]): Promise<void> {
  const rows = deltas.map((d) => [d.partnerId, d.companyId, d.periodStart, d.accepted, d.clientErrors, d.serverErrors, d.rateLimited, d.engineMsSum] as const);
  for (const { placeholders, params } of valuesBatches(rows)) {
    await tx.run(
      `INSERT INTO usage_hours (partner_id, company_id, period_start, accepted, client_errors, server_errors, rate_limited, engine_ms_sum)
       VALUES ${placeholders}
       ON CONFLICT (partner_id, company_id, period_start) DO UPDATE SET
         accepted = usage_hours.accepted + excluded.accepted,
         client_errors = usage_hours.client_errors + excluded.client_errors,
         server_errors = usage_hours.server_errors + excluded.server_errors,
         rate_limited = usage_hours.rate_limited + excluded.rate_limited,
         engine_ms_sum = usage_hours.engine_ms_sum + excluded.engine_ms_sum`,
      params,
    );
  }
}

export type UsageGrouping = 'partner' | 'company' | 'hour' | 'day';

export interface UsageQuery {
  partnerId?: string;
  /** Hours starting at or after this (already rounded down to the hour by the caller). */
  since: Date;
  by: UsageGrouping;
  limit: number;
}

export interface UsageRow extends Omit<UsageDelta, 'companyId'> {
  partnerName: string | null;
  /** With `by: 'company'` only. */
  companyId?: UsageDelta['companyId'];
}

type Raw = {
  partner_id: string;
  name: string | null;
  company_id?: string;
  period_start: unknown;
  accepted: number | string;
  client_errors: number | string;
  server_errors: number | string;
  rate_limited: number | string;
  engine_ms_sum: number | string;
};

/**
 * Sums of usage_hours: per partner over the whole window (`partner`), per partner and company (`company`),
 * per partner and hour or UTC day. Totals and companies come heaviest first, hours and days newest first.
 */
export async function usageRows(q: Queryable, query: UsageQuery): Promise<UsageRow[]> {
  const day = q.dialect.startOfDaySql('u.period_start');
  const period = query.by === 'hour' ? 'u.period_start' : query.by === 'day' ? day : 'MIN(u.period_start)';
  const groups = ['u.partner_id', 'p.name', ...(query.by === 'company' ? ['u.company_id'] : []), ...(query.by === 'hour' ? ['u.period_start'] : query.by === 'day' ? [day] : [])];
  const requests = 'SUM(u.accepted) + SUM(u.client_errors) + SUM(u.server_errors)';
  const order =
    query.by === 'hour' || query.by === 'day'
      ? `${period} DESC, ${requests} DESC, u.partner_id`
      : `${requests} DESC, u.partner_id${query.by === 'company' ? ', u.company_id' : ''}`;
  const params: unknown[] = [query.since];
  const partnerFilter = query.partnerId === undefined ? '' : ` AND u.partner_id = $${params.push(query.partnerId)}`;
  params.push(query.limit);
  const rows = await q.query<Raw>(
    `SELECT u.partner_id, p.name, ${query.by === 'company' ? 'u.company_id, ' : ''}${period} AS period_start,
       SUM(u.accepted) AS accepted, SUM(u.client_errors) AS client_errors, SUM(u.server_errors) AS server_errors,
       SUM(u.rate_limited) AS rate_limited, SUM(u.engine_ms_sum) AS engine_ms_sum
     FROM usage_hours u LEFT JOIN partners p ON p.id = u.partner_id
     WHERE u.period_start >= $1${partnerFilter}
     GROUP BY ${groups.join(', ')}
     ORDER BY ${order}
     LIMIT $${params.length}`,
    params,
  );
  return rows.map((row) => ({
    partnerId: row.partner_id,
    partnerName: row.name,
    ...(row.company_id !== undefined ? { companyId: row.company_id } : {}),
    periodStart: toDate(row.period_start)!,
    accepted: Number(row.accepted),
    clientErrors: Number(row.client_errors),
    serverErrors: Number(row.server_errors),
    rateLimited: Number(row.rate_limited),
    engineMsSum: Number(row.engine_ms_sum),
  }));
}
