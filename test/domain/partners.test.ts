import { describe, expect, it } from 'vitest';
import {
  createPartner,
  findPartner,
  listPartners,
  setPartnerStatus,
  type PartnerRecord,
} from '../../src/domain/operations/partners.js';
import { showPartner } from '../../src/domain/operations/partner-details.js';
import { issueKeyPair } from '../../src/domain/operations/key-pairs.js';
import { mapCompany } from '../support/domain.js';
import { PARTNER_ID_PATTERN } from '../../src/domain/rules/identifiers.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { hintFor } from '../../src/cli/hints.js';
import { ALICE, auditCount, expectAppError, partnerCount, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

describe.each(BACKENDS)('partners on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);

    describe('createPartner', () => {
      it('creates an active partner with a ptn_ id', async () => {
        const name = uniqueName('acme');
        const { partner, created } = await createPartner(ctx.db, ALICE, { name });
        expect(created).toBe(true);
        expect(partner).toMatchObject({ name, status: 'active' });
        expect(partner.id).toMatch(PARTNER_ID_PATTERN);
        expect(partner.createdAt).toBeInstanceOf(Date);
      });

      it.each([
        ['empty', ''],
        ['only white space', '   '],
        ['leading white space', ' acme'],
        ['trailing white space', 'acme '],
        ['a trailing newline', 'acme\n'],
        ['101 characters', 'x'.repeat(101)],
        ['a control character', 'ac\u0007me'],
        ['a NUL', 'ac\u0000me'],
        ['DEL', 'acme\u007f'],
        ['a bidi override', 'acme\u202egpj.exe'],
        ['a line separator', 'ac\u2028me'],
        ["the 'ptn_' prefix", 'ptn_acme'],
        ["the 'PTN_' prefix in capitals", 'PTN_acme'],
      ])('refuses a name with %s and changes nothing', async (_, name) => {
        const [revision, events, partners] = [await revisionOf(ctx.db), await auditCount(ctx.db), await partnerCount(ctx.db)];
        await expectAppError(createPartner(ctx.db, ALICE, { name }), 'invalid_argument');
        expect(await revisionOf(ctx.db)).toBe(revision);
        expect(await auditCount(ctx.db)).toBe(events);
        expect(await partnerCount(ctx.db)).toBe(partners);
      });

      it('accepts exactly 100 characters, counted as characters rather than UTF-16 units', async () => {
        const suffix = uniqueName('');
        const ascii = 'a'.repeat(100 - suffix.length) + suffix;
        expect((await createPartner(ctx.db, ALICE, { name: ascii })).partner.name).toBe(ascii);
        const astral = '\u{1F680}'.repeat(100 - suffix.length) + suffix;
        expect((await createPartner(ctx.db, ALICE, { name: astral })).created).toBe(true);
      });

      it('stores names in NFC, so both spellings of a name are one partner', async () => {
        const base = uniqueName('caf');
        const decomposed = `${base}e\u0301`;
        const { partner } = await createPartner(ctx.db, ALICE, { name: decomposed });
        expect(partner.name).toBe(`${base}\u00e9`);
        await expectAppError(createPartner(ctx.db, ALICE, { name: `${base}\u00e9` }), 'partner_exists');
        expect((await findPartner(ctx.db.sql, decomposed)).id).toBe(partner.id);
      });

      it('refuses a duplicate name with partner_exists and writes nothing', async () => {
        const name = uniqueName();
        await createPartner(ctx.db, ALICE, { name });
        const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db)];
        const error = await expectAppError(createPartner(ctx.db, ALICE, { name }), 'partner_exists');
        expect(hintFor(error)).toMatch(/if-not-exists/);
        expect(await revisionOf(ctx.db)).toBe(revision);
        expect(await auditCount(ctx.db)).toBe(events);
      });

      it('returns the existing partner with ifNotExists, created:false and no audit event', async () => {
        const name = uniqueName();
        const first = await createPartner(ctx.db, ALICE, { name, ifNotExists: true });
        expect(first.created).toBe(true);
        const events = await auditCount(ctx.db, first.partner.id);
        const again = await createPartner(ctx.db, ALICE, { name, ifNotExists: true });
        expect(again).toEqual({ partner: first.partner, created: false });
        expect(await auditCount(ctx.db, first.partner.id)).toBe(events);
      });
    });

    describe('findPartner', () => {
      it('finds a partner by id and by name', async () => {
        const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
        expect(await findPartner(ctx.db.sql, partner.id)).toEqual(partner);
        expect(await findPartner(ctx.db.sql, partner.name)).toEqual(partner);
      });

      it.each([['an unknown name', 'nobody-here'], ['an unknown id', 'ptn_00000000000000000000000000'], ['empty', '']])(
        'says partner_not_found for %s, with a hint',
        async (_, reference) => {
          const error = await expectAppError(findPartner(ctx.db.sql, reference), 'partner_not_found');
          expect(hintFor(error)).toMatch(/list-partners/);
        },
      );

      it('shows control characters of an unknown reference escaped in the message', async () => {
        const error = await expectAppError(findPartner(ctx.db.sql, 'evil\u001b[31m'), 'partner_not_found');
        expect(error.message).not.toContain('\u001b');
      });
    });

    describe('listPartners', () => {
      async function everyPartner(status?: 'active' | 'disabled'): Promise<PartnerRecord[]> {
        return (await listPartners(ctx.db, { limit: 1000, ...(status ? { status } : {}) })).partners;
      }

      it('pages through every partner once, in id order, with limit and cursor', async () => {
        for (let i = 0; i < 5; i++) await createPartner(ctx.db, ALICE, { name: uniqueName('paged') });
        const all = await everyPartner();
        expect(all.length).toBeGreaterThanOrEqual(5);
        expect(all.map((partner) => partner.id)).toEqual(all.map((partner) => partner.id).sort());

        const seen: string[] = [];
        let cursor: string | undefined;
        let pages = 0;
        do {
          const page = await listPartners(ctx.db, { limit: 2, ...(cursor ? { cursor } : {}) });
          expect(page.partners.length).toBeLessThanOrEqual(2);
          seen.push(...page.partners.map((partner) => partner.id));
          cursor = page.nextCursor ?? undefined;
          if (cursor) expect(cursor).toBe(page.partners.at(-1)?.id);
          pages++;
        } while (cursor && pages < 1_000);
        expect(seen).toEqual(all.map((partner) => partner.id));
        expect(pages).toBe(Math.ceil(all.length / 2));
      });

      it('gives no next cursor when the page ends exactly at the last partner', async () => {
        const all = await everyPartner();
        const page = await listPartners(ctx.db, { limit: all.length });
        expect(page.partners).toHaveLength(all.length);
        expect(page.nextCursor).toBeNull();
        const short = await listPartners(ctx.db, { limit: all.length - 1 });
        expect(short.nextCursor).toBe(all.at(-2)?.id);
      });

      it('filters by status', async () => {
        const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('off') });
        await setPartnerStatus(ctx.db, ALICE, partner.id, 'disabled');
        const disabled = await everyPartner('disabled');
        const active = await everyPartner('active');
        expect(disabled.every((row) => row.status === 'disabled')).toBe(true);
        expect(active.every((row) => row.status === 'active')).toBe(true);
        expect(disabled.map((row) => row.id)).toContain(partner.id);
        expect(active.map((row) => row.id)).not.toContain(partner.id);
        expect(disabled.length + active.length).toBe((await everyPartner()).length);
      });

      it('counts companies and names the active access key', async () => {
        const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('listed') });
        await mapCompany(ctx.db, ALICE, partner.id, 'company-a');
        await mapCompany(ctx.db, ALICE, partner.id, 'company-b');
        const issued = await issueKeyPair(ctx.db, ALICE, partner.id);
        const row = (await everyPartner()).find((candidate) => candidate.id === partner.id);
        expect(row).toMatchObject({ companyCount: 2, activeAccessKey: issued.accessKey });
        expect(JSON.stringify(row)).not.toContain(issued.secretKey);
      });

      it.each([0, -1, 1001, 2.5])('refuses the limit %j with invalid_argument', async (limit) => {
        await expectAppError(listPartners(ctx.db, { limit }), 'invalid_argument');
      });

      it.each(['not-a-cursor', 'ptn_x', "ptn_' OR 1=1 --"])('refuses the cursor %j with invalid_argument', async (cursor) => {
        await expectAppError(listPartners(ctx.db, { limit: 10, cursor }), 'invalid_argument');
      });
    });

    describe('setPartnerStatus', () => {
      it('disables and enables, saying whether anything changed', async () => {
        const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
        const disabled = await setPartnerStatus(ctx.db, ALICE, partner.name, 'disabled');
        expect(disabled.changed).toBe(true);
        expect(disabled.partner.status).toBe('disabled');
        expect(disabled.partner.updatedAt.getTime()).toBeGreaterThanOrEqual(partner.updatedAt.getTime());

        const events = await auditCount(ctx.db, partner.id);
        const again = await setPartnerStatus(ctx.db, ALICE, partner.id, 'disabled');
        expect(again.changed).toBe(false);
        expect(await auditCount(ctx.db, partner.id)).toBe(events);

        const enabled = await setPartnerStatus(ctx.db, ALICE, partner.id, 'active');
        expect(enabled).toMatchObject({ changed: true, partner: { status: 'active' } });
        expect((await findPartner(ctx.db.sql, partner.id)).status).toBe('active');
      });

      it('says partner_not_found for an unknown partner', async () => {
        await expectAppError(setPartnerStatus(ctx.db, ALICE, 'nobody-here', 'disabled'), 'partner_not_found');
      });
    });

    describe('showPartner', () => {
      it('shows key pairs (never a secret or its hash) and companies', async () => {
        const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
        const issued = await issueKeyPair(ctx.db, ALICE, partner.id);
        await mapCompany(ctx.db, ALICE, partner.id, 'zeta');
        await mapCompany(ctx.db, ALICE, partner.id, 'alpha');
        const details = await showPartner(ctx.db, partner.name);
        expect(details.partner.id).toBe(partner.id);
        expect(details.keyPairs).toEqual([expect.objectContaining({ id: issued.keyPairId, accessKey: issued.accessKey, status: 'active', state: 'active' })]);
        expect(details.network).toEqual([]);
        expect(details.limits).toEqual({ rate: null, burst: null, dailyQuota: null });
        expect(details.companies.map((company) => company.companyId)).toEqual(['alpha', 'zeta']);
        const text = JSON.stringify(details);
        expect(text).not.toContain(issued.secretKey);
        expect(text).not.toContain('argon2');
      });
    });
  });
});
