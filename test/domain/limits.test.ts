import { describe, expect, it } from 'vitest';
import { limitsOf } from '../../src/db/repositories/limits.js';
import { effectiveLimits, limitsJson, setLimits, type PartnerLimits } from '../../src/domain/operations/limits.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { TestClock } from '../support/clock.js';
import { ALICE, auditCount, expectAppError, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

const NONE: PartnerLimits = { rate: null, burst: null, dailyQuota: null };
const perSecond = (count: number) => ({ count, periodSeconds: 1 });

describe('effective limits: a partner own values over the server defaults', () => {
  it('takes each of the partner own values first, field by field', () => {
    const own: PartnerLimits = { rate: perSecond(5), burst: 7, dailyQuota: 1000 };
    expect(effectiveLimits(own, { rate: perSecond(50), burst: 100 })).toEqual({ rate: perSecond(5), burst: 7, dailyQuota: 1000 });
    expect(effectiveLimits({ ...NONE, burst: 7 }, { rate: perSecond(50), burst: 100 })).toEqual({ rate: perSecond(50), burst: 7, dailyQuota: null });
  });

  it('gives a partner own rate without its own burst that rate count as burst, never the default burst', () => {
    expect(effectiveLimits({ ...NONE, rate: perSecond(5) }, { rate: perSecond(50), burst: 100 })).toEqual({ rate: perSecond(5), burst: 5, dailyQuota: null });
  });

  it('uses the default burst with the default rate, and the default rate count without a default burst', () => {
    expect(effectiveLimits(NONE, { rate: perSecond(50), burst: 100 })).toEqual({ rate: perSecond(50), burst: 100, dailyQuota: null });
    expect(effectiveLimits(NONE, { rate: perSecond(50), burst: null })).toEqual({ rate: perSecond(50), burst: 50, dailyQuota: null });
  });

  it('is no limit at all without a rate anywhere and without a quota', () => {
    expect(effectiveLimits(NONE, { rate: null, burst: null })).toBeNull();
    expect(effectiveLimits({ ...NONE, burst: 9 }, { rate: null, burst: 100 })).toBeNull();
  });

  it('keeps a quota alone (no rate), with a bucket of at least one', () => {
    expect(effectiveLimits({ ...NONE, dailyQuota: 10 }, { rate: null, burst: null })).toEqual({ rate: null, burst: 1, dailyQuota: 10 });
  });

  it('prints limits as show-partner and set-limits do', () => {
    expect(limitsJson({ rate: { count: 100, periodSeconds: 60 }, burst: 20, dailyQuota: null })).toEqual({ rate: '100/m', burst: 20, daily_quota: null });
    expect(limitsJson(NONE)).toEqual({ rate: null, burst: null, daily_quota: null });
  });
});

describe.each(BACKENDS)('setting a partner limits on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const newPartner = async () => (await createPartner(ctx.db, ALICE, { name: uniqueName('limited') })).partner;

    it('refuses clear with other values, and nothing to set, before anything changes', async () => {
      const partner = await newPartner();
      const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db)];
      const combined = await expectAppError(setLimits(ctx.db, ALICE, partner.id, { clear: true, burst: 5 }), 'invalid_argument');
      expect(combined.field).toBe('clear');
      const empty = await expectAppError(setLimits(ctx.db, ALICE, partner.id, {}), 'missing_argument');
      expect(empty.field).toBe('rate');
      expect(await revisionOf(ctx.db)).toBe(revision);
      expect(await auditCount(ctx.db)).toBe(events);
    });

    it('sets the given fields and keeps the others; the same values again change nothing', async () => {
      const partner = await newPartner();
      const first = await setLimits(ctx.db, ALICE, partner.id, { rate: perSecond(10), dailyQuota: 500 });
      expect(first).toMatchObject({ changed: true, limits: { rate: perSecond(10), burst: null, dailyQuota: 500 } });
      const second = await setLimits(ctx.db, ALICE, partner.name, { burst: 3 });
      expect(second).toMatchObject({ changed: true, limits: { rate: perSecond(10), burst: 3, dailyQuota: 500 } });
      const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db, partner.id)];
      expect(await setLimits(ctx.db, ALICE, partner.id, { burst: 3, dailyQuota: 500 })).toMatchObject({ changed: false });
      expect(await revisionOf(ctx.db)).toBe(revision);
      expect(await auditCount(ctx.db, partner.id)).toBe(events);
    });

    it('audits each change with the limits before and after, and clear goes back to the defaults', async () => {
      const partner = await newPartner();
      await setLimits(ctx.db, ALICE, partner.id, { rate: { count: 100, periodSeconds: 60 } });
      const cleared = await setLimits(ctx.db, ALICE, partner.id, { clear: true });
      expect(cleared).toMatchObject({ changed: true, limits: NONE });
      expect(await limitsOf(ctx.db.sql, partner.id)).toBeNull();
      const [row] = await ctx.db.sql.query<{ details: string }>(
        "SELECT details FROM audit_events WHERE partner_id = $1 AND action = 'partner.limits_set' ORDER BY id DESC",
        [partner.id],
      );
      expect(JSON.parse(row!.details)).toEqual({
        before: { rate: '100/m', burst: null, daily_quota: null },
        after: { rate: null, burst: null, daily_quota: null },
      });
      expect(await setLimits(ctx.db, ALICE, partner.id, { clear: true })).toMatchObject({ changed: false });
    });

    it('stamps the change with the database clock', async () => {
      const clock = new TestClock(Date.UTC(2031, 0, 2, 3, 4, 5));
      const db = { ...ctx.db, clock };
      const partner = await newPartner();
      await setLimits(db, ALICE, partner.id, { burst: 4 });
      expect((await limitsOf(ctx.db.sql, partner.id))?.updatedAt.toISOString()).toBe('2031-01-02T03:04:05.000Z');
      clock.advance(60_000);
      await setLimits(db, ALICE, partner.id, { burst: 5 });
      expect((await limitsOf(ctx.db.sql, partner.id))?.updatedAt.toISOString()).toBe('2031-01-02T03:05:05.000Z');
    });
  });
});
