import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

export type LimitsRow = Columns<'PartnerLimit'>;

type Raw = {
  partner_id: string;
  rate_count: number | string | null;
  rate_period_seconds: number | string | null;
  burst: number | string | null;
  daily_quota: number | string | null;
  updated_at: unknown;
};

const num = (value: number | string | null): number | null => (value === null ? null : Number(value));

export async function limitsOf(q: Queryable, partnerId: string): Promise<LimitsRow | null> {
  const [row] = await q.query<Raw>(
    'SELECT partner_id, rate_count, rate_period_seconds, burst, daily_quota, updated_at FROM partner_limits WHERE partner_id = $1',
    [partnerId],
  );
  if (!row) return null;
  return {
    partnerId: row.partner_id,
    rateCount: num(row.rate_count),
    ratePeriodSeconds: num(row.rate_period_seconds),
    burst: num(row.burst),
    dailyQuota: num(row.daily_quota),
    updatedAt: toDate(row.updated_at)!,
  };
}

export async function upsertLimits(tx: SqlTx, row: LimitsRow): Promise<void> {
  await tx.run(
    `INSERT INTO partner_limits (partner_id, rate_count, rate_period_seconds, burst, daily_quota, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (partner_id) DO UPDATE SET rate_count = excluded.rate_count, rate_period_seconds = excluded.rate_period_seconds,
       burst = excluded.burst, daily_quota = excluded.daily_quota, updated_at = excluded.updated_at`,
    [row.partnerId, row.rateCount, row.ratePeriodSeconds, row.burst, row.dailyQuota, row.updatedAt],
  );
}

export async function deleteLimits(tx: SqlTx, partnerId: string): Promise<number> {
  return tx.run('DELETE FROM partner_limits WHERE partner_id = $1', [partnerId]);
}
