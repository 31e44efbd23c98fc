import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { ACCESS_CHANNEL } from '../../src/db/repositories/revision.js';
import { AccessState } from '../../src/domain/runtime/access.js';
import { mapCompany, unmapCompany } from '../support/domain.js';
import { issueKeyPair, revokeKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import type { TokenClaims } from '../../src/domain/operations/tokens.js';
import { backendAvailable } from '../support/backends.js';
import { ALICE, uniqueName, useMigratedDatabase } from './fixtures.js';

/**
 * PostgreSQL: every committed change is announced with NOTIFY and a server's AccessState LISTENs. Here the
 * revision poll and the staleness bound are both an hour, so only the announcement can make a change seen.
 */
const HOUR = 3_600_000;

describe('access changes announced over LISTEN/NOTIFY (postgresql)', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    const ctx = useMigratedDatabase('postgresql');
    let operator: Database;
    let access: AccessState;
    let lost: unknown[];
    beforeAll(async () => {
      operator = await openDatabase(resolveDatabase(ctx.backend.url, {}));
      lost = [];
      access = new AccessState(ctx.db, { pollIntervalMs: HOUR, stalenessBoundMs: HOUR, onListenerLost: (error) => lost.push(error) });
      await access.refresh();
      access.start();
      expect(await access.listenerReady()).toBe(true);
    });
    afterAll(async () => {
      access?.stop();
      await operator?.close();
    });

    async function provisioned(company: string) {
      const { partner } = await createPartner(operator, ALICE, { name: uniqueName() });
      const issued = await issueKeyPair(operator, ALICE, partner.id);
      await mapCompany(operator, ALICE, partner.id, company);
      const claims: TokenClaims = { partnerId: partner.id, keyPairId: issued.keyPairId, test: false, jti: 'j', exp: Math.floor(Date.now() / 1000) + 900, issuedAtMs: Date.now() };
      return { partner, claims };
    }
    const allowed = async (claims: TokenClaims, company: string) =>
      access.authorize(claims, company).then(
        () => true,
        () => false,
      );

    it('drops the caches when another connection unmaps, revokes or disables', async () => {
      const { partner, claims } = await provisioned('listen-co');
      await expect.poll(() => allowed(claims, 'listen-co'), { timeout: 5_000 }).toBe(true);
      // Cached now: without an announcement, an hour-long bound would keep this answer.
      await unmapCompany(operator, ALICE, partner.id, 'listen-co');
      await expect.poll(() => allowed(claims, 'listen-co'), { timeout: 5_000, interval: 20 }).toBe(false);

      const second = await provisioned('listen-co-2');
      expect(await allowed(second.claims, 'listen-co-2')).toBe(true);
      await revokeKeyPair(operator, ALICE, second.partner.id);
      await expect.poll(() => allowed(second.claims, 'listen-co-2'), { timeout: 5_000, interval: 20 }).toBe(false);

      const third = await provisioned('listen-co-3');
      expect(await allowed(third.claims, 'listen-co-3')).toBe(true);
      await setPartnerStatus(operator, ALICE, third.partner.id, 'disabled');
      await expect.poll(() => allowed(third.claims, 'listen-co-3'), { timeout: 5_000, interval: 20 }).toBe(false);
    });

    it('announces only committed changes: a change that rolls back, or changes nothing, sends no NOTIFY', async () => {
      const client = new pg.Client({ connectionString: ctx.backend.url });
      await client.connect();
      const received: string[] = [];
      client.on('notification', (message) => received.push(message.payload ?? ''));
      try {
        await client.query(`LISTEN ${ACCESS_CHANNEL}`);
        const { partner } = await provisioned('listen-co-4');
        await expect.poll(() => received.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(3);
        const before = received.length;
        // Re-mapping an already mapped company changes nothing (the unit rolls back).
        await mapCompany(operator, ALICE, partner.id, 'listen-co-4');
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(received.length).toBe(before);
        await unmapCompany(operator, ALICE, partner.id, 'listen-co-4');
        await expect.poll(() => received.length, { timeout: 5_000 }).toBe(before + 1);
        // The payload is the new revision.
        const [row] = (await client.query('SELECT value FROM revision WHERE id = 1')).rows as { value: string }[];
        expect(received.at(-1)).toBe(String(row!.value));
      } finally {
        await client.end();
      }
    });

    it('LISTENs again by itself after its backend is terminated', async () => {
      const admin = new pg.Client({ connectionString: ctx.backend.url });
      await admin.connect();
      try {
        const terminated = await admin.query(
          `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE datname = current_database() AND query = $1 AND pid <> pg_backend_pid()`,
          [`LISTEN ${ACCESS_CHANNEL}`],
        );
        expect(terminated.rows.length).toBeGreaterThanOrEqual(1);
        await expect.poll(() => lost.length, { timeout: 5_000 }).toBeGreaterThan(0);
        await expect.poll(() => access.listening, { timeout: 10_000, interval: 20 }).toBe(true);
        const listeners = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = $1`, [
          `LISTEN ${ACCESS_CHANNEL}`,
        ]);
        expect(listeners.rows[0].n).toBe(1);
      } finally {
        await admin.end();
      }
      const { partner, claims } = await provisioned('listen-co-5');
      await expect.poll(() => allowed(claims, 'listen-co-5'), { timeout: 5_000 }).toBe(true);
      await unmapCompany(operator, ALICE, partner.id, 'listen-co-5');
      await expect.poll(() => allowed(claims, 'listen-co-5'), { timeout: 5_000, interval: 20 }).toBe(false);
    });
  });
});
