import { describe, expect, it } from 'vitest';
import { mapCompany, unmapCompany } from '../support/domain.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { hintFor } from '../../src/cli/hints.js';
import { ALICE, auditCount, expectAppError, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

describe.each(BACKENDS)('company mappings on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const newPartner = async () => (await createPartner(ctx.db, ALICE, { name: uniqueName() })).partner;
    const mappedCompanies = async (partnerId: string) =>
      (await ctx.db.sql.query<{ company_id: string }>('SELECT company_id FROM company_mappings WHERE partner_id = $1 ORDER BY company_id', [partnerId])).map(
        (row) => row.company_id,
      );

    it('maps a company once; a re-run changes nothing and writes no audit event', async () => {
      const partner = await newPartner();
      expect(await mapCompany(ctx.db, ALICE, partner.name, 'company-1')).toMatchObject({ companyId: 'company-1', changed: true });
      const events = await auditCount(ctx.db, partner.id);
      const again = await mapCompany(ctx.db, ALICE, partner.id, 'company-1');
      expect(again).toMatchObject({ companyId: 'company-1', changed: false, partner: { id: partner.id } });
      expect(await auditCount(ctx.db, partner.id)).toBe(events);
      expect(await mappedCompanies(partner.id)).toEqual(['company-1']);
    });

    it('unmaps a company once; a re-run, or unmapping one never mapped, changes nothing', async () => {
      const partner = await newPartner();
      await mapCompany(ctx.db, ALICE, partner.id, 'company-1');
      await mapCompany(ctx.db, ALICE, partner.id, 'company-2');
      expect((await unmapCompany(ctx.db, ALICE, partner.id, 'company-1')).changed).toBe(true);
      const events = await auditCount(ctx.db, partner.id);
      expect((await unmapCompany(ctx.db, ALICE, partner.id, 'company-1')).changed).toBe(false);
      expect((await unmapCompany(ctx.db, ALICE, partner.id, 'never-mapped')).changed).toBe(false);
      expect(await auditCount(ctx.db, partner.id)).toBe(events);
      expect(await mappedCompanies(partner.id)).toEqual(['company-2']);
    });

    it('maps one company to several partners, and unmapping it from one leaves the other', async () => {
      const [first, second] = [await newPartner(), await newPartner()];
      await mapCompany(ctx.db, ALICE, first.id, 'shared-co');
      await mapCompany(ctx.db, ALICE, second.id, 'shared-co');
      await unmapCompany(ctx.db, ALICE, first.id, 'shared-co');
      expect(await mappedCompanies(first.id)).toEqual([]);
      expect(await mappedCompanies(second.id)).toEqual(['shared-co']);
    });

    it('keeps company ids exactly as given: case and punctuation matter', async () => {
      const partner = await newPartner();
      for (const id of ['ABC', 'abc', 'a/b:c#1', '~!@$%^&*()_+{}|<>?', 'x'.repeat(128)]) {
        expect((await mapCompany(ctx.db, ALICE, partner.id, id)).changed).toBe(true);
      }
      expect(await mappedCompanies(partner.id)).toHaveLength(5);
    });

    it.each([
      ['empty', ''],
      ['129 characters', 'x'.repeat(129)],
      ['a space', 'acme co'],
      ['a leading space', ' acme'],
      ['a tab', 'acme\t1'],
      ['a newline', 'acme\n'],
      ['a NUL', 'acme\u0000'],
      ['an escape sequence', '\u001b[2Jacme'],
      ['DEL', 'acme\u007f'],
      ['a non-ASCII letter', 'café'],
      ['a bidi override', 'acme\u202e'],
    ])('refuses a company id with %s, on map and unmap, and changes nothing', async (_, companyId) => {
      const partner = await newPartner();
      const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db)];
      const error = await expectAppError(mapCompany(ctx.db, ALICE, partner.id, companyId), 'invalid_argument');
      expect(hintFor(error)).toMatch(/--company/);
      await expectAppError(unmapCompany(ctx.db, ALICE, partner.id, companyId), 'invalid_argument');
      expect(await revisionOf(ctx.db)).toBe(revision);
      expect(await auditCount(ctx.db)).toBe(events);
      expect(await mappedCompanies(partner.id)).toEqual([]);
    });

    it('says partner_not_found for an unknown partner', async () => {
      await expectAppError(mapCompany(ctx.db, ALICE, 'nobody-here', 'company-1'), 'partner_not_found');
      await expectAppError(unmapCompany(ctx.db, ALICE, 'nobody-here', 'company-1'), 'partner_not_found');
    });
  });
});
