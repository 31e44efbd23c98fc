// The state of a pair is decided once (domain/key-pair-state.ts); list-keys reads pages narrowed only by the
// stored columns and judges every row by that rule, so its --status filter cannot disagree with the views.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { keyPairState, STORED_STATUSES_OF, type KeyPairState } from '../../src/domain/rules/key-pair-state.js';
import { issueKeyPair, listKeyPairs, revokeKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { newId, newKeyMaterial } from '../../src/domain/rules/identifiers.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { TestClock } from '../support/clock.js';
import { ALICE, uniqueName, useMigratedDatabase } from './fixtures.js';

const STATES: KeyPairState[] = ['active', 'retiring', 'superseded', 'revoked', 'expired'];

describe('STORED_STATUSES_OF', () => {
  it('names every stored status a pair in each state can carry (a narrowing that never drops a pair)', () => {
    const instant = fc.option(fc.integer({ min: 0, max: 10_000 }).map((ms) => new Date(ms)), { nil: null });
    fc.assert(
      fc.property(
        fc.record({
          status: fc.constantFrom('active', 'retiring', 'superseded', 'revoked'),
          expiresAt: instant,
          retiresAt: instant,
          supersededAt: instant,
          revokedAt: instant,
        }),
        fc.integer({ min: 0, max: 10_000 }),
        (pair, now) => {
          expect(STORED_STATUSES_OF[keyPairState(pair, now)]).toContain(pair.status);
        },
      ),
    );
  });
});

describe.each(BACKENDS)('list-keys by state on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);

    it('pages through pairs judged out by the state at the instant, and every pair is found under the state the views give it', async () => {
      const clock = new TestClock(Date.now());
      const db: Database = { ...ctx.db, clock };
      const { partner } = await createPartner(db, ALICE, { name: uniqueName() });
      // Oldest first: five pairs stored 'active' or 'superseded' whose expiry has passed, between the live ones.
      const issued: string[] = [];
      issued.push((await issueKeyPair(db, ALICE, partner.id, { expiresInMs: 1_000 })).keyPairId);
      for (let i = 0; i < 4; i++) {
        clock.advance(1);
        issued.push((await rotateKeyPair(db, ALICE, partner.id, { expiresInMs: 1_000 })).keyPairId);
      }
      await rotateKeyPair(db, ALICE, partner.id, { overlapMs: 60_000 });
      clock.advance(1);
      issued.push((await rotateKeyPair(db, ALICE, partner.id)).keyPairId);
      clock.advance(1_000);
      const last = await rotateKeyPair(db, ALICE, partner.id);
      await revokeKeyPair(db, ALICE, partner.id, { keyPairId: issued[0]! });

      const every = (await listKeyPairs(db, { partner: partner.id, limit: 100 })).keys;
      for (const state of STATES) {
        const expected = every.filter((pair) => pair.state === state).map((pair) => pair.id);
        const seen: string[] = [];
        let cursor: string | undefined;
        for (let pages = 0; pages < 20; pages++) {
          const page = await listKeyPairs(db, { partner: partner.id, status: state, limit: 1, ...(cursor ? { cursor } : {}) });
          expect(page.keys.every((pair) => pair.state === state)).toBe(true);
          seen.push(...page.keys.map((pair) => pair.id));
          if (page.nextCursor === null) break;
          cursor = page.nextCursor;
        }
        expect({ state, ids: seen }).toEqual({ state, ids: expected });
      }
      expect(every.find((pair) => pair.id === last.keyPairId)?.state).toBe('active');
      expect(every.filter((pair) => pair.state === 'expired').length).toBeGreaterThanOrEqual(4);
    });

    it('reads on past a batch of rows judged out (stored superseded, expired) to fill the page', async () => {
      const clock = new TestClock(Date.now());
      const db: Database = { ...ctx.db, clock };
      const { partner } = await createPartner(db, ALICE, { name: uniqueName() });
      // 300 pairs stored 'superseded' whose expiry has passed (expired: judged out of --status superseded),
      // created before the two superseded pairs the page must find.
      await ctx.db.sql.transaction(async (tx) => {
        for (let i = 0; i < 300; i++) {
          const at = new Date(clock.now() - 3_600_000 + i);
          await tx.run(
            "INSERT INTO key_pairs (id, partner_id, access_key, secret_hash, status, created_at, superseded_at, expires_at) VALUES ($1, $2, $3, 'x', 'superseded', $4, $5, $6)",
            [newId('kp', at.getTime()), partner.id, newKeyMaterial().accessKey, at, at, at],
          );
        }
      }, { timeoutMs: 10_000 });
      const superseded = [(await issueKeyPair(db, ALICE, partner.id)).keyPairId];
      clock.advance(1);
      superseded.push((await rotateKeyPair(db, ALICE, partner.id)).keyPairId);
      clock.advance(1);
      await rotateKeyPair(db, ALICE, partner.id);
      const first = await listKeyPairs(db, { partner: partner.id, status: 'superseded', limit: 1 });
      expect(first.keys.map((pair) => pair.id)).toEqual([superseded[0]]);
      const second = await listKeyPairs(db, { partner: partner.id, status: 'superseded', limit: 1, cursor: first.nextCursor! });
      expect(second).toEqual({ keys: [expect.objectContaining({ id: superseded[1], state: 'superseded' })], nextCursor: null });
      expect((await listKeyPairs(db, { partner: partner.id, status: 'expired', limit: 500 })).keys).toHaveLength(300);
    });
  });
});
