import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listAuditEvents, mapCompany, unmapCompany } from '../support/domain.js';
import { issueKeyPair, revokeKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { mintTestToken } from '../../src/domain/operations/test-tokens.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { expectAppError, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';
import { systemClock } from '../../src/clock.js';

const keyFolder = mkdtempSync(join(tmpdir(), 'partnerctl-audit-keys-'));
afterAll(() => rmSync(keyFolder, { recursive: true, force: true }));

describe.each(BACKENDS)('audit trail and revision on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);

    it('records every mutation with actor, action and partner, bumping the revision each time', async () => {
      const keys = SigningKeys.open(join(keyFolder, `${provider}.json`), systemClock);
      const name = uniqueName('audited');
      let partnerId = '';
      const steps: [string, string, () => Promise<unknown>][] = [
        ['bob', 'partner.created', async () => (partnerId = (await createPartner(ctx.db, { actor: 'bob' }, { name })).partner.id)],
        ['carol', 'keys.issued', () => issueKeyPair(ctx.db, { actor: 'carol' }, name)],
        ['dave', 'keys.rotated', () => rotateKeyPair(ctx.db, { actor: 'dave' }, name)],
        ['erin', 'company.mapped', () => mapCompany(ctx.db, { actor: 'erin' }, name, 'company-7')],
        ['frank', 'token.test_minted', () => mintTestToken(ctx.db, { actor: 'frank' }, keys, name, 60)],
        ['grace', 'company.unmapped', () => unmapCompany(ctx.db, { actor: 'grace' }, name, 'company-7')],
        ['heidi', 'keys.revoked', () => revokeKeyPair(ctx.db, { actor: 'heidi' }, name)],
        ['ivan', 'partner.disabled', () => setPartnerStatus(ctx.db, { actor: 'ivan' }, name, 'disabled')],
        ['judy', 'partner.enabled', () => setPartnerStatus(ctx.db, { actor: 'judy' }, name, 'active')],
      ];
      for (const [actor, action, step] of steps) {
        const before = await revisionOf(ctx.db);
        await step();
        expect(await revisionOf(ctx.db), `revision after ${action}`).toBe(before + 1);
        const [latest] = await listAuditEvents(ctx.db, { limit: 1 });
        expect(latest, action).toMatchObject({ actor, action, partnerId });
        expect(latest!.at).toBeInstanceOf(Date);
      }
      const trail = await listAuditEvents(ctx.db, { partner: name, limit: 100 });
      expect(trail.map((event) => event.action)).toEqual(steps.map(([, action]) => action).reverse());
    });

    it('leaves the revision alone when a re-run changes nothing, so servers keep their caches', async () => {
      const name = uniqueName();
      await createPartner(ctx.db, { actor: 'bob' }, { name });
      await mapCompany(ctx.db, { actor: 'bob' }, name, 'company-9');
      const before = await revisionOf(ctx.db);
      await createPartner(ctx.db, { actor: 'bob' }, { name, ifNotExists: true });
      await mapCompany(ctx.db, { actor: 'bob' }, name, 'company-9');
      await unmapCompany(ctx.db, { actor: 'bob' }, name, 'company-unmapped');
      await setPartnerStatus(ctx.db, { actor: 'bob' }, name, 'active');
      expect(await revisionOf(ctx.db)).toBe(before);
    });

    it('keeps details that say what changed, and never a secret', async () => {
      const { partner } = await createPartner(ctx.db, { actor: 'bob' }, { name: uniqueName() });
      const issued = await issueKeyPair(ctx.db, { actor: 'bob' }, partner.id);
      const rotated = await rotateKeyPair(ctx.db, { actor: 'bob' }, partner.id, { revokeIssuedTokens: true });
      const [rotation, issue, creation] = await listAuditEvents(ctx.db, { partner: partner.id, limit: 10 });
      expect(creation!.details).toEqual({ name: partner.name });
      expect(issue!.details).toEqual({ key_pair_id: issued.keyPairId, access_key: issued.accessKey, expires_at: null });
      expect(rotation!.details).toEqual({
        key_pair_id: rotated.keyPairId,
        access_key: rotated.accessKey,
        superseded_key_pair_id: issued.keyPairId,
        revoked_issued_tokens: true,
        revoked_key_pair_ids: [issued.keyPairId],
        tokens_revoked_before: expect.any(Number),
      });
      const text = JSON.stringify(await listAuditEvents(ctx.db, { limit: 1_000 }));
      expect(text).not.toContain(issued.secretKey.slice(8));
      expect(text).not.toContain(rotated.secretKey.slice(8));
    });

    it('lists newest first, filters by partner (id or name), and honours the limit', async () => {
      const a = (await createPartner(ctx.db, { actor: 'bob' }, { name: uniqueName('a') })).partner;
      const b = (await createPartner(ctx.db, { actor: 'bob' }, { name: uniqueName('b') })).partner;
      await mapCompany(ctx.db, { actor: 'bob' }, a.id, 'one');
      await mapCompany(ctx.db, { actor: 'bob' }, b.id, 'two');
      await mapCompany(ctx.db, { actor: 'bob' }, a.id, 'three');

      const all = await listAuditEvents(ctx.db, { limit: 1_000 });
      expect(all.map((event) => event.id)).toEqual(all.map((event) => event.id).sort((x, y) => y - x));
      expect(all[0]).toMatchObject({ partnerId: a.id, details: { company_id: 'three' } });

      const ofA = await listAuditEvents(ctx.db, { partner: a.name, limit: 1_000 });
      expect(ofA.map((event) => event.details.company_id ?? event.action)).toEqual(['three', 'one', 'partner.created']);
      expect(await listAuditEvents(ctx.db, { partner: b.id, limit: 1_000 })).toHaveLength(2);
      expect(await listAuditEvents(ctx.db, { partner: a.id, limit: 2 })).toHaveLength(2);
    });

    it('says partner_not_found when filtering by an unknown partner', async () => {
      await expectAppError(listAuditEvents(ctx.db, { partner: 'nobody-here', limit: 10 }), 'partner_not_found');
    });

    it('neither records nor bumps anything for a refused mutation', async () => {
      const { partner } = await createPartner(ctx.db, { actor: 'bob' }, { name: uniqueName() });
      const [revision, events] = [await revisionOf(ctx.db), (await listAuditEvents(ctx.db, { limit: 1 }))[0]?.id];
      await expectAppError(rotateKeyPair(ctx.db, { actor: 'mallory' }, partner.id), 'no_active_key_pair');
      // Nothing to revoke is a re-run, not a refusal: it writes nothing either.
      expect((await revokeKeyPair(ctx.db, { actor: 'mallory' }, partner.id)).changed).toBe(false);
      await expectAppError(createPartner(ctx.db, { actor: 'mallory' }, { name: partner.name }), 'partner_exists');
      await expectAppError(mapCompany(ctx.db, { actor: 'mallory' }, 'nobody-here', 'x'), 'partner_not_found');
      expect(await revisionOf(ctx.db)).toBe(revision);
      expect((await listAuditEvents(ctx.db, { limit: 1 }))[0]?.id).toBe(events);
    });
  });
});
