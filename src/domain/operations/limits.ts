import type { Database } from '../../db/client.js';
import { deleteLimits, limitsOf, upsertLimits, type LimitsRow } from '../../db/repositories/limits.js';
import type { Queryable } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { formatRate, type Rate } from '../../rates.js';
import { runUnit, type Actor, type Unit } from './transactions.js';

export { formatRate, parseCount, parseRate, type Rate } from '../../rates.js';

/** A partner's own limits; null fields fall back to the server's defaults. */
export interface PartnerLimits {
  rate: Rate | null;
  burst: number | null;
  dailyQuota: number | null;
}

export const NO_LIMITS: PartnerLimits = Object.freeze({ rate: null, burst: null, dailyQuota: null });

function fromRow(row: LimitsRow | null): PartnerLimits {
  if (!row) return NO_LIMITS;
  return {
    rate: row.rateCount !== null && row.ratePeriodSeconds !== null ? { count: row.rateCount, periodSeconds: row.ratePeriodSeconds } : null,
    burst: row.burst,
    dailyQuota: row.dailyQuota,
  };
}

export async function partnerLimits(db: Database, partnerId: string): Promise<PartnerLimits> {
  return fromRow(await limitsOf(db.sql, partnerId));
}

/** JSON form, as show-partner and set-limits print it. */
export function limitsJson(limits: PartnerLimits): { rate: string | null; burst: number | null; daily_quota: number | null } {
  return { rate: limits.rate ? formatRate(limits.rate) : null, burst: limits.burst, daily_quota: limits.dailyQuota };
}

export interface LimitsChange {
  rate?: Rate;
  burst?: number;
  dailyQuota?: number;
  /** Drop the partner's own limits (back to the server's defaults); not combined with the others. */
  clear?: boolean;
}

export const sameLimits = (a: PartnerLimits, b: PartnerLimits): boolean => JSON.stringify(limitsJson(a)) === JSON.stringify(limitsJson(b));

/** Sets the given fields of a partner's limits (the others stay), or clears them all; audited as `partner.limits_set`. */
async function setLimitsIn(
  unit: Unit,
  reference: string,
  change: LimitsChange,
): Promise<{ partner: PartnerRecord; limits: PartnerLimits; changed: boolean }> {
  const given = change.rate !== undefined || change.burst !== undefined || change.dailyQuota !== undefined;
  if (change.clear && given) {
    throw new AppError('invalid_argument', 'clear removes every limit of the partner; it is not combined with rate, burst or a daily quota', { field: 'clear' });
  }
  if (!change.clear && !given) {
    throw new AppError('missing_argument', 'give a rate, a burst, a daily quota, or clear', { field: 'rate' });
  }
  const partner = await findPartner(unit.tx, reference);
  const before = fromRow(await limitsOf(unit.tx, partner.id));
  const after: PartnerLimits = change.clear
    ? NO_LIMITS
    : {
        rate: change.rate ?? before.rate,
        burst: change.burst ?? before.burst,
        dailyQuota: change.dailyQuota ?? before.dailyQuota,
      };
  return { partner, ...(await writeLimits(unit, partner.id, before, after)) };
}

/** A partner's own limits made exactly `after` (no limit of its own: the server's defaults), as `apply` does. */
export async function replaceLimitsIn(unit: Unit, partnerId: string, after: PartnerLimits): Promise<{ limits: PartnerLimits; changed: boolean }> {
  return writeLimits(unit, partnerId, fromRow(await limitsOf(unit.tx, partnerId)), after);
}

/** A partner's own limits, read where a plan compares them. */
export async function partnerLimitsOn(q: Queryable, partnerId: string): Promise<PartnerLimits> {
  return fromRow(await limitsOf(q, partnerId));
}

async function writeLimits(unit: Unit, partnerId: string, before: PartnerLimits, after: PartnerLimits): Promise<{ limits: PartnerLimits; changed: boolean }> {
  if (sameLimits(before, after)) return { limits: before, changed: false };
  if (sameLimits(after, NO_LIMITS)) {
    await deleteLimits(unit.tx, partnerId);
  } else {
    await upsertLimits(unit.tx, {
      partnerId,
      rateCount: after.rate?.count ?? null,
      ratePeriodSeconds: after.rate?.periodSeconds ?? null,
      burst: after.burst,
      dailyQuota: after.dailyQuota,
      updatedAt: new Date(unit.clock.now()),
    });
  }
  unit.audit({ action: 'partner.limits_set', partnerId, details: { before: limitsJson(before), after: limitsJson(after) } });
  return { limits: after, changed: true };
}

export function setLimits(
  db: Database,
  who: Actor,
  reference: string,
  change: LimitsChange,
): Promise<{ partner: PartnerRecord; limits: PartnerLimits; changed: boolean }> {
  return runUnit(db, who, (unit) => setLimitsIn(unit, reference, change));
}

/** The server's defaults for partners without their own (PUBLIC_API_DEFAULT_RATE_LIMIT / _BURST). */
export interface LimitDefaults {
  rate: Rate | null;
  burst: number | null;
}

/** What the gate enforces for one partner; null: no limit at all. */
export interface EffectiveLimits {
  rate: Rate | null;
  /** Bucket size: requests that may arrive at once after a quiet spell. */
  burst: number;
  dailyQuota: number | null;
}

/**
 * A partner's own values win field by field. The burst follows the rate it belongs with: a partner's own
 * rate without its own burst gets that rate's count, not the default burst.
 */
export function effectiveLimits(own: PartnerLimits, defaults: LimitDefaults): EffectiveLimits | null {
  const rate = own.rate ?? defaults.rate;
  const burst = own.burst ?? (own.rate ? own.rate.count : (defaults.burst ?? rate?.count ?? 0));
  if (!rate && own.dailyQuota === null) return null;
  return { rate, burst: Math.max(1, burst), dailyQuota: own.dailyQuota };
}
