import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { AccessState, type OutageEvent } from '../../src/domain/runtime/access.js';
import { mapCompany, unmapCompany } from '../support/domain.js';
import { issueKeyPair, revokeKeyPair, revokeTokens, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import type { TokenClaims } from '../../src/domain/operations/tokens.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { roleLessFlooder } from '../support/notify-flood.js';
import { ACCESS_CHANNEL } from '../../src/db/repositories/revision.js';
import { ALICE, expectAppError, uniqueName, useMigratedDatabase } from './fixtures.js';

/** A clock the test moves by hand: the staleness bound is crossed without waiting. */
/** Pending checks started by `fromMemory`, settled by `settled` (a refusal among them is expected). */
const pending: Promise<void>[] = [];

/** True when a check's answer came from memory (undefined: accepted, no promise); a promise is kept for `settled`. */
function fromMemory(answer: Promise<void> | undefined): boolean {
  if (answer === undefined) return true;
  pending.push(answer.catch(() => {}));
  return false;
}

async function settled(): Promise<void> {
  await Promise.all(pending.splice(0));
}

function testClock() {
  return {
    at: Date.now(),
    now(): number {
      return this.at;
    },
  };
}

function claimsFor(partnerId: string, keyPairId: string | null): TokenClaims {
  return { partnerId, keyPairId, test: keyPairId === null, jti: 'test-jti', exp: Math.floor(Date.now() / 1000) + 900, issuedAtMs: Date.now() };
}

describe.each(BACKENDS)('AccessState on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    // Changes come from another connection, as they would from the operator's CLI.
    let operator: Database;
    beforeAll(async () => {
      operator = await openDatabase(resolveDatabase(ctx.backend.url, {}));
    });
    afterAll(async () => operator?.close());

    async function provisioned(companies: string[] = ['co-1']) {
      const { partner } = await createPartner(operator, ALICE, { name: uniqueName() });
      const issued = await issueKeyPair(operator, ALICE, partner.id);
      for (const company of companies) await mapCompany(operator, ALICE, partner.id, company);
      return { partner, issued, claims: claimsFor(partner.id, issued.keyPairId) };
    }

    it('allows a mapped company for an active partner and pair, and a test token', async () => {
      const { partner, claims } = await provisioned(['co-1', 'co-2']);
      const access = new AccessState(ctx.db);
      await access.authorize(claims, 'co-1');
      await access.authorize(claims, 'co-2');
      await access.authorize(claimsFor(partner.id, null), 'co-1');
    });

    it('a check answers from memory (undefined, no promise) only when its snapshots are held and accept; anything it must read or refuse is a promise', async () => {
      const { partner, claims } = await provisioned(['co-1', 'co-2']);
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000 });
      const admitsNow = (c: typeof claims, company: string) => fromMemory(access.authenticate(c)) && fromMemory(access.authorizeCompany(c, company));
      // Nothing cached yet.
      expect(admitsNow(claims, 'co-1')).toBe(false);
      await settled();
      await access.authorize(claims, 'co-1');
      expect(admitsNow(claims, 'co-1')).toBe(true);
      // The partner and pair are cached: only the company part cannot say.
      expect(access.authenticate(claims)).toBeUndefined();
      // co-2 is mapped but not cached (read now, then held); an unmapped or invalid id is never admitted.
      expect(admitsNow(claims, 'co-2')).toBe(false);
      await settled();
      expect(admitsNow(claims, 'co-2')).toBe(true);
      await expectAppError(access.authorize(claims, 'co-elsewhere'), 'not_found');
      expect(admitsNow(claims, 'co-elsewhere')).toBe(false);
      expect(admitsNow(claims, 'co-1\n')).toBe(false);
      // Another pair of the partner: not cached.
      expect(admitsNow({ ...claims, keyPairId: 'kp_other' }, 'co-1')).toBe(false);
      // A change the server has seen: the verdicts are gone, then refused ones stay undefined.
      await unmapCompany(operator, ALICE, partner.id, 'co-1');
      await access.refresh();
      expect(admitsNow(claims, 'co-1')).toBe(false);
      await expectAppError(access.authorize(claims, 'co-1'), 'not_found');
      expect(admitsNow(claims, 'co-1')).toBe(false);
      await setPartnerStatus(operator, ALICE, partner.id, 'disabled');
      await access.refresh();
      await expectAppError(access.authorize(claims, 'co-2'), 'unauthorized');
      expect(admitsNow(claims, 'co-2')).toBe(false);
    });

    it('the cached verdicts say nothing once the last confirmed revision is older than the staleness bound', async () => {
      const { claims } = await provisioned();
      const clock = testClock();
      const access = new AccessState(ctx.db, { stalenessBoundMs: 1_000, clock });
      const admitsNow = (c: typeof claims, company: string) => fromMemory(access.authenticate(c)) && fromMemory(access.authorizeCompany(c, company));
      await access.authorize(claims, 'co-1');
      clock.at += 1_000;
      expect(admitsNow(claims, 'co-1')).toBe(true);
      clock.at += 1;
      expect(admitsNow(claims, 'co-1')).toBe(false);
    });

    it.each([
      ['an unmapped company', 'co-elsewhere'],
      ['a company that does not exist', 'no-such-company-anywhere'],
      ['an empty company id', ''],
      ['a company id with a control character', 'co-1\n'],
      ['a number', 1],
      ['nothing', undefined],
      ['an object', { $ne: null }],
    ])('says not_found for %s, the same for each', async (_, companyId) => {
      const { claims } = await provisioned();
      await mapCompany(operator, ALICE, (await createPartner(operator, ALICE, { name: uniqueName() })).partner.id, 'co-elsewhere');
      const error = await expectAppError(new AccessState(ctx.db).authorize(claims, companyId), 'not_found');
      expect(error.message).toBe('no such company');
      expect(error.reason).toBe('company_not_mapped');
    });

    it('refuses tokens of a revoked pair, and of a pair revoked by an emergency rotation', async () => {
      const revoked = await provisioned();
      await revokeKeyPair(operator, ALICE, revoked.partner.id);
      await expectAppError(new AccessState(ctx.db).authorize(revoked.claims, 'co-1'), 'unauthorized');

      const leaked = await provisioned();
      const rotated = await rotateKeyPair(operator, ALICE, leaked.partner.id, { revokeIssuedTokens: true });
      const access = new AccessState(ctx.db);
      await expectAppError(access.authorize(leaked.claims, 'co-1'), 'unauthorized');
      await access.authorize(claimsFor(leaked.partner.id, rotated.keyPairId), 'co-1');
    });

    it('revoke-tokens: refuses tokens issued before the brake to the millisecond, test tokens included, and sees it on refresh', async () => {
      const { partner, claims } = await provisioned();
      const access = new AccessState(ctx.db);
      const test = claimsFor(partner.id, null);
      await access.authorize({ ...claims, issuedAtMs: Date.now() - 5 }, 'co-1');
      await access.authorize(test, 'co-1');
      const { tokensRevokedBefore: brake } = await revokeTokens(operator, ALICE, partner.id);
      await access.refresh();
      await expectAppError(access.authorize({ ...claims, issuedAtMs: brake - 1 }, 'co-1'), 'unauthorized');
      await expectAppError(access.authorize({ ...test, issuedAtMs: brake - 1 }, 'co-1'), 'unauthorized');
      // The same second, one millisecond later: a token re-exchanged right after the command is accepted.
      await access.authorize({ ...claims, issuedAtMs: brake }, 'co-1');
      await access.authorize({ ...test, issuedAtMs: brake + 1 }, 'co-1');
    });

    it('lets tokens of a superseded pair live out their lifetime', async () => {
      const { partner, claims } = await provisioned();
      const rotated = await rotateKeyPair(operator, ALICE, partner.id);
      const access = new AccessState(ctx.db);
      await access.authorize(claims, 'co-1');
      await access.authorize(claimsFor(partner.id, rotated.keyPairId), 'co-1');
    });

    it('refuses a disabled partner, a partner that does not exist, and a pair of another partner', async () => {
      const { partner, claims } = await provisioned();
      const other = await provisioned();
      const access = new AccessState(ctx.db);
      await expectAppError(access.authorize(claimsFor(partner.id, other.issued.keyPairId), 'co-1'), 'unauthorized');
      await expectAppError(access.authorize(claimsFor('ptn_01JD0000000000000000000000', null), 'co-1'), 'unauthorized');
      await expectAppError(access.authorize(claimsFor(partner.id, 'kp_01JD0000000000000000000000'), 'co-1'), 'unauthorized');

      await setPartnerStatus(operator, ALICE, partner.id, 'disabled');
      await access.refresh();
      await expectAppError(access.authorize(claims, 'co-1'), 'unauthorized');
      await expectAppError(access.authorize(claimsFor(partner.id, null), 'co-1'), 'unauthorized');
    });

    it("refuses another partner's pair even once that pair is cached as accepted for its own partner", async () => {
      const { partner } = await provisioned();
      const other = await provisioned();
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000 });
      await access.refresh();
      await access.authorize(other.claims, 'co-1');
      await expectAppError(access.authenticate(claimsFor(partner.id, other.issued.keyPairId)), 'unauthorized');
      await access.authenticate(other.claims);
    });

    it('authorizeCompany checks only the mapping; authorize is authenticate then authorizeCompany', async () => {
      const { partner, claims } = await provisioned(['co-1']);
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000 });
      await access.refresh();
      await access.authorizeCompany(claims, 'co-1');
      await expectAppError(access.authorizeCompany(claims, 'co-2'), 'not_found');
      await expectAppError(access.authorizeCompany(claims, ''), 'not_found');
      await setPartnerStatus(operator, ALICE, partner.id, 'disabled');
      await access.refresh();
      // The caller has authenticated already: the mapping alone decides.
      await access.authorizeCompany(claims, 'co-1');
      await expectAppError(access.authorize(claims, 'co-1'), 'unauthorized');
    });

    it('sees mapping and key changes made elsewhere once refresh() has read the revision', async () => {
      const { partner, claims } = await provisioned(['co-1']);
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000 });
      await access.refresh();
      await access.authorize(claims, 'co-1');
      await expectAppError(access.authorize(claims, 'co-2'), 'not_found');

      await unmapCompany(operator, ALICE, partner.id, 'co-1');
      await mapCompany(operator, ALICE, partner.id, 'co-2');
      await access.refresh();
      await expectAppError(access.authorize(claims, 'co-1'), 'not_found');
      await access.authorize(claims, 'co-2');

      await revokeKeyPair(operator, ALICE, partner.id);
      await access.refresh();
      await expectAppError(access.authorize(claims, 'co-2'), 'unauthorized');
    });

    it('sees a change within the poll interval when polling', async () => {
      const { partner, claims } = await provisioned(['co-1']);
      let polls = 0;
      const access = new AccessState(ctx.db, { pollIntervalMs: 20, stalenessBoundMs: 60_000, onPoll: () => polls++ });
      await access.refresh();
      access.start();
      try {
        await access.authorize(claims, 'co-1');
        await unmapCompany(operator, ALICE, partner.id, 'co-1');
        const deadline = Date.now() + 5_000;
        const seenBefore = polls;
        while (polls < seenBefore + 2 && Date.now() < deadline) await sleep(10);
        expect(polls).toBeGreaterThanOrEqual(seenBefore + 2);
        await expectAppError(access.authorize(claims, 'co-1'), 'not_found');
      } finally {
        access.stop();
      }
    });

    it('checks the revision itself when its last poll is older than the staleness bound', async () => {
      const { partner, claims } = await provisioned(['co-1']);
      const clock = testClock();
      // The bound is also how long a read may take (on this host's timers): the product's 1 s, which a loaded
      // machine's database keeps, and the test clock steps past it.
      const access = new AccessState(ctx.db, { stalenessBoundMs: 1_000, clock });
      await access.authorize(claims, 'co-1');
      await setPartnerStatus(operator, ALICE, partner.id, 'disabled');
      clock.at += 1_001;
      const refused = await expectAppError(access.authorize(claims, 'co-1'), 'unauthorized');
      expect(refused.reason).toBe('partner_disabled');
    });

    it('with a staleness budget, decides from what it holds while the database does not answer, at once, until the budget is spent', async () => {
      const { claims } = await provisioned(['co-1']);
      const unheld = await provisioned(['co-1']);
      // A connection of its own, closed below: every read of it then fails, as a lost database's would.
      const db = await openDatabase(resolveDatabase(ctx.backend.url, {}));
      const clock = testClock();
      const events: OutageEvent[] = [];
      const access = new AccessState(db, { stalenessBoundMs: 1_000, staleBudgetMs: 10_000, clock, onOutage: (event) => events.push(event) });
      await access.authorize(claims, 'co-1');
      const confirmedAt = access.confirmedAtMs;
      expect(access.held).toBeNull();
      await db.close();
      clock.at += 2_000;
      await expect(access.refresh()).rejects.toThrow();
      expect(events).toMatchObject([{ kind: 'start', lastConfirmedAt: confirmedAt, servingUntil: confirmedAt + 10_000 }]);
      expect(access.held).toMatchObject({ serving: true, servingUntil: confirmedAt + 10_000 });
      expect(access.servingStale).toBe(true);
      // What it holds decides, without a read: the cached check and the waiting one alike.
      expect(access.authenticate(claims)).toBeUndefined();
      expect(access.authorizeCompany(claims, 'co-1')).toBeUndefined();
      await access.authorize(claims, 'co-1');
      expect(access.servedUnconfirmed).toBe(2);
      // What it does not hold is not known: 503, without waiting.
      await expectAppError(access.authorize(unheld.claims, 'co-1'), 'database_unavailable');
      await expectAppError(access.authorizeCompany(claims, 'co-2'), 'database_unavailable');
      await expectAppError(access.read(async () => 1), 'database_unavailable');
      // The budget spent: nothing is decided from the held state any more.
      clock.at = confirmedAt + 10_001;
      await expectAppError(access.authenticate(claims), 'database_unavailable');
      await expectAppError(access.authorizeCompany(claims, 'co-1'), 'database_unavailable');
      await expectAppError(access.authorize(claims, 'co-1'), 'database_unavailable');
      expect(access.held).toMatchObject({ serving: false });
      expect(access.servingStale).toBe(false);
      expect(access.servedUnconfirmed).toBe(2);
    });

    it('the budget counts from the last heartbeat written when it is older than the last confirmed read; without a budget, 503 past the bound', async () => {
      const { claims } = await provisioned(['co-1']);
      for (const budget of [10_000, 0]) {
        const db = await openDatabase(resolveDatabase(ctx.backend.url, {}));
        const clock = testClock();
        const access = new AccessState(db, { stalenessBoundMs: 1_000, staleBudgetMs: budget, clock });
        await access.authorize(claims, 'co-1');
        access.heartbeatWritten(clock.at - 4_000);
        await db.close();
        clock.at += 2_000;
        await expect(access.refresh()).rejects.toThrow();
        if (budget > 0) {
          expect(access.held!.servingUntil).toBe(access.confirmedAtMs - 4_000 + budget);
          clock.at = access.confirmedAtMs + 5_999;
          expect(access.authenticate(claims)).toBeUndefined();
          clock.at = access.confirmedAtMs + 6_001;
        }
        await expectAppError(access.authenticate(claims), 'database_unavailable');
        await expectAppError(access.authorize(claims, 'co-1'), 'database_unavailable');
      }
    });

    it('a read of the gate that never answers is given up after the staleness bound: 503, and the gate goes on', async () => {
      const { claims } = await provisioned(['co-1']);
      const access = new AccessState(ctx.db, { stalenessBoundMs: 200, staleBudgetMs: 0 });
      const started = performance.now();
      await expectAppError(access.read(() => new Promise(() => {})), 'database_unavailable');
      expect(performance.now() - started).toBeGreaterThanOrEqual(190);
      expect(performance.now() - started).toBeLessThan(1_500);
      await access.authorize(claims, 'co-1');
      expect(access.held).toBeNull();
    });

    it('appliedRevision follows the revision once the caches reflect it, and tells onApplied', async () => {
      const { partner } = await provisioned();
      const told: number[] = [];
      const access = new AccessState(ctx.db, { onApplied: (revision) => told.push(revision) });
      expect(access.appliedRevision).toBeNull();
      await access.refresh();
      const first = access.appliedRevision!;
      expect(told).toEqual([first]);
      await setPartnerStatus(operator, ALICE, partner.id, 'disabled');
      await access.refresh();
      expect(access.appliedRevision).toBe(first + 1);
      expect(told).toEqual([first, first + 1]);
      // Nothing moved: nothing told.
      await access.refresh();
      expect(told).toEqual([first, first + 1]);
    });

    it.skipIf(provider !== 'postgresql')('does not apply a revision while a verdict read begun before it is still under way', async () => {
      const { partner } = await provisioned();
      const told: number[] = [];
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000, onApplied: (revision) => told.push(revision) });
      await access.refresh();
      const before = access.appliedRevision!;
      // Another session blocks every read of partners, so the verdict read below stays under way.
      const { default: pg } = await import('pg');
      const locker = new pg.Client({ connectionString: ctx.backend.url });
      await locker.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE partners IN ACCESS EXCLUSIVE MODE');
        const verdict = access.partnerActive(partner.id);
        await sleep(50);
        await operator.sql.query('UPDATE revision SET value = value + 1 WHERE id = 1');
        access.hint();
        await sleep(50);
        await access.refresh();
        expect(access.revisionSeen).toBe(before + 1);
        expect(access.appliedRevision).toBe(before);
        await locker.query('ROLLBACK');
        expect(await verdict).toBe(true);
        expect(access.appliedRevision).toBe(before + 1);
        expect(told).toEqual([before, before + 1]);
      } finally {
        await locker.end();
        access.stop();
      }
    });

    it.skipIf(provider !== 'postgresql')('37.3: a flood of NOTIFYs from a login with no role drops nothing held: the gate keeps answering from memory, revision reads coalesce, a real change still arrives', async () => {
      const { partner, claims } = await provisioned(['co-1']);
      let reads = 0;
      const access = new AccessState(ctx.db, { stalenessBoundMs: 60_000, pollIntervalMs: 60_000, onPoll: () => reads++ });
      access.start();
      const flooder = await roleLessFlooder(inject('postgresAdminUrl')!, ctx.backend.url);
      try {
        expect(await access.listenerReady()).toBe(true);
        await access.authorize(claims, 'co-1');
        const missesBefore = access.cacheMisses;
        reads = 0;
        // What any login may send on the channel, no role needed: 2,000 distinct notifications, hostile
        // payloads among them (not a number, empty, a huge revision).
        const odd = ['', 'x', '-1', '99999999999999999999', '1e9', '\n', 'NaN'];
        await flooder.send(ACCESS_CHANNEL, 2_000, (i) => (i % 100 === 0 ? odd[(i / 100) % odd.length]! : String(i)));
        for (let i = 0; i < 50; i++) {
          expect(access.authenticate(claims)).toBeUndefined();
          expect(access.authorizeCompany(claims, 'co-1')).toBeUndefined();
          await sleep(10);
        }
        expect(access.cacheMisses).toBe(missesBefore);
        // The hints were read as hints: a few revision reads, never one per notification.
        expect(reads).toBeGreaterThan(0);
        expect(reads).toBeLessThan(200);
        // A real change still moves the gate, announced the same way.
        await unmapCompany(operator, ALICE, partner.id, 'co-1');
        await vi.waitFor(() => expectAppError(access.authorizeCompany(claims, 'co-1'), 'not_found'), { timeout: 2_000 });
      } finally {
        await flooder.close();
        access.stop();
      }
    });
  });
});
