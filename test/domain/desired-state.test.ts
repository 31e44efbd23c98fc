import { describe, expect, it } from 'vitest';
import { companyIdsOf } from '../../src/db/repositories/companies.js';
import { applyDesiredState, exportDesiredState, parseDesiredState, planDesiredState, type DesiredState } from '../../src/domain/operations/desired-state.js';
import { issueKeyPair } from '../../src/domain/operations/key-pairs.js';
import { partnerLimits } from '../../src/domain/operations/limits.js';
import { partnerNetwork, setNetwork } from '../../src/domain/operations/networks.js';
import { createPartner, findPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { AppError } from '../../src/errors.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { mapCompany } from '../support/domain.js';
import { ALICE, auditCount, expectAppError, partnerCount, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

function problemsOf(value: unknown): string {
  try {
    parseDesiredState(value, 'doc.json');
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('invalid_argument');
    return (error as AppError).message;
  }
  throw new Error('the document was accepted');
}

describe('reading a desired-state document', () => {
  it('normalises what it accepts: names to NFC, companies once each, network rules canonical', () => {
    const state = parseDesiredState(
      { partners: [{ name: 'Cafe\u0301', companies: ['a', 'b', 'a'], allow_from: ['203.0.113.7', '2001:DB8::/32'] }, { name: 'Plain', status: 'disabled' }] },
      'doc.json',
    );
    expect(state).toEqual({
      partners: [
        { name: 'Caf\u00e9', companies: ['a', 'b'], allow_from: ['203.0.113.7/32', '2001:db8::/32'] },
        { name: 'Plain', status: 'disabled' },
      ],
    });
  });

  it('names every problem with its path in one error, sorted, and says nothing changed', () => {
    const message = problemsOf({
      partners: [
        { name: 'Initech', compnies: ['x'] },
        { name: 'initech', companies: ['ok', 'bad id'] },
        { name: '', status: 'paused' },
        { name: 'Net', allow_from: ['not-an-address'] },
      ],
    });
    expect(message).toMatch(/^doc\.json: 6 problems: /);
    expect(message).toContain("partners[0]: unknown key 'compnies': did you mean 'companies'?");
    expect(message).toContain("partners[1].name: 'initech' is already given at partners[0]");
    expect(message).toContain('partners[1].companies[1]: invalid company id');
    expect(message).toContain('partners[2].name: partner name must not be empty');
    expect(message).toMatch(/partners\[2\]\.status: /);
    expect(message).toContain('partners[3].allow_from[0]: ');
    expect(message).toMatch(/; nothing was changed$/);
    const order = ['partners[0]', 'partners[1].companies', 'partners[1].name', 'partners[2].name', 'partners[2].status', 'partners[3]'].map((path) =>
      message.indexOf(path),
    );
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('refuses a document that is not one: no partners list, unknown top-level keys', () => {
    expect(problemsOf({})).toMatch(/partners: /);
    expect(problemsOf({ partners: [], partnrs: [] })).toContain("unknown key 'partnrs'");
    expect(problemsOf(null)).toMatch(/\(document\): /);
  });

  it('shows at most 20 problems and counts the rest', () => {
    const message = problemsOf({ partners: Array.from({ length: 25 }, () => ({ name: '' })) });
    expect(message).toMatch(/^doc\.json: 25 problems: /);
    expect(message).toContain('; and 5 more; nothing was changed');
  });
});

describe.each(BACKENDS)('planning and applying a desired state on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const plan = (state: DesiredState, options = {}) => planDesiredState(ctx.db, state, options);

    it('plans a new partner as created, with its status, companies and rules, and counts every change', async () => {
      const name = uniqueName('new');
      const planned = await plan({ partners: [{ name, status: 'disabled', companies: ['c1', 'c2'], allow_from: ['198.51.100.0/24'] }] }, { issueKeys: true });
      expect(planned.partners).toEqual([
        { name, partnerId: null, create: true, statusChange: null, createStatus: 'disabled', map: ['c1', 'c2'], unmap: [], issueKeys: true, network: ['198.51.100.0/24'], limits: null, credentials: null, publicKey: null },
      ]);
      expect(planned).toMatchObject({ partnersCreated: 1, partnersDisabled: 0, companiesMapped: 2, keysIssued: 1, networksSet: 1, changes: 5 });
    });

    it('plans only what differs for an existing partner; prune unmaps only where companies are listed', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('existing') });
      await mapCompany(ctx.db, ALICE, partner.id, 'keep');
      await mapCompany(ctx.db, ALICE, partner.id, 'drop');
      await setNetwork(ctx.db, ALICE, partner.id, ['192.0.2.0/24']);
      const same = { partners: [{ name: partner.name, status: 'active' as const, companies: ['keep', 'drop'], allow_from: ['192.0.2.0/24'] }] };
      expect(await plan(same, { prune: true })).toMatchObject({ partners: [], changes: 0 });

      const changed = await plan({ partners: [{ name: partner.name, status: 'disabled', companies: ['keep', 'add'], allow_from: [] }] }, { prune: true });
      expect(changed.partners).toEqual([
        { name: partner.name, partnerId: partner.id, create: false, statusChange: 'disabled', createStatus: null, map: ['add'], unmap: ['drop'], issueKeys: false, network: [], limits: null, credentials: null, publicKey: null },
      ]);
      expect(changed.changes).toBe(4);
      // Without prune a company the document does not list stays mapped.
      expect(await plan({ partners: [{ name: partner.name, companies: ['keep'] }] })).toMatchObject({ partners: [], changes: 0 });
      // Without companies in the document the partner's mappings are not managed, pruned or not.
      expect(await plan({ partners: [{ name: partner.name }] }, { prune: true })).toMatchObject({ partners: [], changes: 0 });
    });

    it('issues keys only to the partners without an active pair', async () => {
      const withPair = (await createPartner(ctx.db, ALICE, { name: uniqueName('with-pair') })).partner;
      await issueKeyPair(ctx.db, ALICE, withPair.id);
      const without = (await createPartner(ctx.db, ALICE, { name: uniqueName('without') })).partner;
      const planned = await plan({ partners: [{ name: withPair.name }, { name: without.name }] }, { issueKeys: true });
      expect(planned.partners.map((step) => [step.name, step.issueKeys])).toEqual([[without.name, true]]);
    });

    it('refuses a name that differs from an existing partner only in case', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('Cased') });
      await expectAppError(plan({ partners: [{ name: partner.name.toUpperCase() }] }), 'partner_exists');
    });

    it('applies the plan as one unit, and a second apply changes nothing', async () => {
      const existing = (await createPartner(ctx.db, ALICE, { name: uniqueName('applied') })).partner;
      await mapCompany(ctx.db, ALICE, existing.id, 'old');
      const fresh = uniqueName('applied-new');
      const state = parseDesiredState(
        {
          partners: [
            { name: existing.name, status: 'disabled', companies: ['new'] },
            { name: fresh, companies: ['f1'], allow_from: ['203.0.113.0/24'] },
          ],
        },
        'doc.json',
      );
      const revision = await revisionOf(ctx.db);
      const { plan: applied, issued } = await applyDesiredState(ctx.db, ALICE, state, { prune: true, issueKeys: true });
      expect(applied).toMatchObject({ partnersCreated: 1, partnersDisabled: 1, companiesMapped: 2, companiesUnmapped: 1, keysIssued: 2, networksSet: 1 });
      expect(issued.map((pair) => pair.partner.name).sort()).toEqual([existing.name, fresh].sort());
      expect(await revisionOf(ctx.db)).toBe(revision + 1);
      const created = await findPartner(ctx.db.sql, fresh);
      expect(await companyIdsOf(ctx.db.sql, existing.id)).toEqual(['new']);
      expect(await companyIdsOf(ctx.db.sql, created.id)).toEqual(['f1']);
      expect(await partnerNetwork(ctx.db, created.id)).toEqual(['203.0.113.0/24']);
      expect((await findPartner(ctx.db.sql, existing.id)).status).toBe('disabled');

      const events = await auditCount(ctx.db);
      const again = await applyDesiredState(ctx.db, ALICE, state, { prune: true, issueKeys: true });
      expect(again).toMatchObject({ plan: { changes: 0 }, issued: [] });
      expect(await revisionOf(ctx.db)).toBe(revision + 1);
      expect(await auditCount(ctx.db)).toBe(events);
    });

    it('applies nothing when one partner of the document cannot be applied', async () => {
      const taken = (await createPartner(ctx.db, ALICE, { name: uniqueName('Taken') })).partner;
      const [revision, partners, events] = [await revisionOf(ctx.db), await partnerCount(ctx.db), await auditCount(ctx.db)];
      const state: DesiredState = { partners: [{ name: uniqueName('first') }, { name: taken.name.toUpperCase() }] };
      await expectAppError(applyDesiredState(ctx.db, ALICE, state), 'partner_exists');
      expect([await revisionOf(ctx.db), await partnerCount(ctx.db), await auditCount(ctx.db)]).toEqual([revision, partners, events]);
    });

    it('exports what it applied: the document of the partners named', async () => {
      const name = uniqueName('exported');
      await applyDesiredState(ctx.db, ALICE, { partners: [{ name, status: 'disabled', companies: ['z', 'a'], allow_from: ['192.0.2.1/32'] }] });
      await setPartnerStatus(ctx.db, ALICE, name, 'active');
      expect(await exportDesiredState(ctx.db, [name, name])).toEqual({ partners: [{ name, status: 'active', companies: ['a', 'z'], allow_from: ['192.0.2.1/32'] }] });
    });

    it("carries a partner's limits: planned only when they differ, applied exactly, exported; {} clears them", async () => {
      const name = uniqueName('limited');
      const state = parseDesiredState({ partners: [{ name, limits: { rate: '3000/m', burst: 20 } }] }, 'doc.json');
      expect((await planDesiredState(ctx.db, state)).limitsSet).toBe(1);
      const { plan } = await applyDesiredState(ctx.db, ALICE, state);
      expect(plan).toMatchObject({ partnersCreated: 1, limitsSet: 1, changes: 2 });
      expect(await partnerLimits(ctx.db, (await findPartner(ctx.db.sql, name)).id)).toEqual({ rate: { count: 3000, periodSeconds: 60 }, burst: 20, dailyQuota: null });
      expect((await exportDesiredState(ctx.db, [name])).partners[0]?.limits).toEqual({ rate: '3000/m', burst: 20 });
      expect((await planDesiredState(ctx.db, state)).changes).toBe(0);
      // The document's limits are the partner's, exactly: a field left out is no longer the partner's own.
      const fewer = parseDesiredState({ partners: [{ name, limits: { daily_quota: 5 } }] }, 'doc.json');
      await applyDesiredState(ctx.db, ALICE, fewer);
      expect((await exportDesiredState(ctx.db, [name])).partners[0]?.limits).toEqual({ daily_quota: 5 });
      await applyDesiredState(ctx.db, ALICE, parseDesiredState({ partners: [{ name, limits: {} }] }, 'doc.json'));
      expect((await exportDesiredState(ctx.db, [name])).partners[0]).not.toHaveProperty('limits');
    });
  });
});
