import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { AppError } from '../../src/errors.js';
import { issueKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

const CONNECTIONS = 10;

describe.each(BACKENDS)('concurrent key changes on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    // One Database per worker: separate connections (pools, on PostgreSQL), as separate processes would have.
    let connections: Database[] = [];
    beforeAll(async () => {
      const config = { ...resolveDatabase(ctx.backend.url, {}), poolSize: 2 };
      connections = await Promise.all(Array.from({ length: CONNECTIONS }, () => openDatabase(config)));
    });
    afterAll(async () => {
      await Promise.all(connections.map((db) => db.close()));
    });

    async function stateOf(partnerId: string) {
      const pairs = await ctx.db.sql.query<{ id: string; status: string }>('SELECT id, status FROM key_pairs WHERE partner_id = $1', [partnerId]);
      const audit = await ctx.db.sql.query<{ action: string }>('SELECT action FROM audit_events WHERE partner_id = $1', [partnerId]);
      return {
        pairs,
        active: pairs.filter((pair) => pair.status === 'active'),
        actions: (action: string) => audit.filter((event) => event.action === action),
      };
    }

    it(`${CONNECTIONS} rotations at once end with exactly one active pair and one audit event per rotation`, async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('rotated') });
      const first = await issueKeyPair(ctx.db, ALICE, partner.id);
      const revision = await revisionOf(ctx.db);

      const outcomes = await Promise.allSettled(
        connections.map((db, i) => rotateKeyPair(db, { actor: `worker-${i}` }, partner.id)),
      );
      const rotations = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
      const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
      // Writers queue on the revision row (and retry on a busy database): every rotation gets its turn.
      expect(failures).toEqual([]);
      expect(rotations).toHaveLength(CONNECTIONS);

      const state = await stateOf(partner.id);
      expect(state.active).toHaveLength(1);
      expect(state.pairs).toHaveLength(1 + rotations.length);
      expect(state.actions('keys.rotated')).toHaveLength(rotations.length);
      expect(await revisionOf(ctx.db)).toBe(revision + rotations.length);

      // They took turns: each rotation superseded a different pair, together the whole chain but the last.
      const superseded = rotations.map((rotation) => rotation.supersededKeyPairId);
      expect(new Set(superseded).size).toBe(rotations.length);
      expect(superseded).toContain(first.keyPairId);
      const created = new Set([first.keyPairId, ...rotations.map((rotation) => rotation.keyPairId)]);
      const last = [...created].filter((id) => !superseded.includes(id));
      expect(last).toEqual([state.active[0]!.id]);
      expect(state.pairs.filter((pair) => pair.status === 'superseded')).toHaveLength(rotations.length);
    });

    it(`${CONNECTIONS} issues at once: exactly one succeeds, the rest say active_key_pair_exists`, async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('issued') });
      const outcomes = await Promise.allSettled(
        connections.map((db, i) => issueKeyPair(db, { actor: `worker-${i}` }, partner.id)),
      );
      const issued = outcomes.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
      const codes = outcomes.flatMap((outcome) =>
        outcome.status === 'rejected' ? [outcome.reason instanceof AppError ? outcome.reason.code : String(outcome.reason)] : [],
      );
      expect(issued).toHaveLength(1);
      expect(codes).toEqual(Array(CONNECTIONS - 1).fill('active_key_pair_exists'));

      const state = await stateOf(partner.id);
      expect(state.pairs.map((pair) => pair.id)).toEqual([issued[0]!.keyPairId]);
      expect(state.active).toHaveLength(1);
      expect(state.actions('keys.issued')).toHaveLength(1);
    });

    it('rotations of several partners at once do not disturb each other', async () => {
      const partners = await Promise.all(
        [1, 2, 3].map(async () => {
          const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName('many') });
          await issueKeyPair(ctx.db, ALICE, partner.id);
          return partner;
        }),
      );
      const outcomes = await Promise.allSettled(
        connections.slice(0, 9).map((db, i) => rotateKeyPair(db, { actor: `worker-${i}` }, partners[i % 3]!.id)),
      );
      expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
      for (const partner of partners) {
        const state = await stateOf(partner.id);
        expect(state.active).toHaveLength(1);
        expect(state.pairs).toHaveLength(4);
        expect(state.actions('keys.rotated')).toHaveLength(3);
      }
    });
  });
});
