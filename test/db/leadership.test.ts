import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { holdLeadership, type Leadership, type LeadershipOptions } from '../../src/db/leadership.js';
import { takeLease } from '../../src/db/repositories/leases.js';
import { claimDelivery, dueDeliveries } from '../../src/db/repositories/webhooks.js';
import { backendAvailable } from '../support/backends.js';
import { useMigratedDatabase } from '../domain/fixtures.js';

async function until(check: () => boolean, what: string, limitMs = 5_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

describe('leadership on postgresql: a lease renewed by its holder, by the database clock', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    const ctx = useMigratedDatabase('postgresql');
    const held: Leadership[] = [];
    const hold = (events: string[], options: LeadershipOptions = {}) => {
      const leadership = holdLeadership(ctx.db.sql, 'webhook_delivery', {
        renewMs: 20,
        ttlMs: 400,
        onTaken: () => events.push('taken'),
        onLost: () => events.push('lost'),
        ...options,
      });
      held.push(leadership);
      return leadership;
    };
    afterEach(async () => {
      await Promise.all(held.splice(0).map((leadership) => leadership.stop()));
      await ctx.db.sql.query('DELETE FROM leases');
    });

    it('one holder at a time, renewing past its time-to-live; another takes over when the holder stops', async () => {
      const firstEvents: string[] = [];
      const secondEvents: string[] = [];
      // A time-to-live of 2 s: a loaded machine's stalls stay well inside it (at 400 ms one renewal stuck
      // behind a busy database lost the lease, as it should, and failed the test).
      const first = hold(firstEvents, { ttlMs: 2_000 });
      await until(() => first.held, 'the first holds the lease');
      const second = hold(secondEvents, { ttlMs: 2_000 });
      // Over twice the lease's life: the holder renews it, the other never gets it; never both at once.
      const deadline = Date.now() + 4_500;
      while (Date.now() < deadline) {
        expect(first.held && second.held).toBe(false);
        await sleep(20);
      }
      expect(first.held).toBe(true);
      expect(second.held).toBe(false);
      await first.stop();
      expect(first.held).toBe(false);
      // Given up at stop (its row is gone, not left to expire): the other takes it at its next try, which may
      // come before this query (a loaded machine), so the row looked for is the first holder's.
      expect(await ctx.db.sql.query('SELECT holder FROM leases WHERE holder = $1', [first.fence.holder])).toEqual([]);
      await until(() => second.held, 'the second takes over');
      expect(firstEvents).toEqual(['taken']);
      expect(secondEvents).toEqual(['taken']);
    });

    it('a holder that stops renewing (frozen) loses the lease when it expires, and another takes it', async () => {
      // A frozen holder: it took the lease (1.5 s) and then renewed nothing.
      const started = Date.now();
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', 'frozen', 1_500)).toBe(true);
      const events: string[] = [];
      const other = hold(events);
      await sleep(300);
      expect(other.held).toBe(false);
      await until(() => other.held, 'the other takes the expired lease', 5_000);
      expect(Date.now() - started).toBeGreaterThanOrEqual(1_450);
      // Resumed, the frozen holder gets it back neither by renewing nor by taking it.
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', 'frozen', 1_500)).toBe(false);
      expect(events).toEqual(['taken']);
    });

    it('counts itself the holder only for its time-to-live since its last renewal, even while a renewal hangs', async () => {
      const events: string[] = [];
      const leader = hold(events);
      await until(() => leader.held, 'it holds the lease');
      // The database takes no renewal (the table locked by another session): the lease is left to expire.
      const blocker = new pg.Client({ connectionString: ctx.backend.url });
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE leases IN ACCESS EXCLUSIVE MODE');
        // Its time-to-live (400 ms) after the last renewal it sent, which was before the lock: the bound
        // leaves a loaded machine's timers a second of slack, and the renewal that hangs never answers.
        const blockedAt = Date.now();
        await until(() => !leader.held, 'it no longer counts itself the holder', 2_000);
        expect(Date.now() - blockedAt).toBeLessThan(1_400);
        await blocker.query('ROLLBACK');
        await until(() => leader.held, 'it holds the lease again once the database answers');
      } finally {
        await blocker.end();
      }
      // On a loaded machine a later renewal may itself outlast the 400 ms (lost, then taken again): the
      // order of the first three is what this test is about.
      expect(events.slice(0, 3)).toEqual(['taken', 'lost', 'taken']);
    });

    it('a delivery is claimed under the fence only while its holder still holds the lease', async () => {
      const now = new Date();
      await ctx.db.sql.query(
        "INSERT INTO webhook_endpoints (id, url, secret, created_at) VALUES ('whe_fence', 'http://127.0.0.1:9/', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', $1)",
        [now],
      );
      await ctx.db.sql.query("INSERT INTO webhook_events (id, type, data, created_at) VALUES ('msg_fence', 'keys.issued', '{}', $1)", [now]);
      await ctx.db.sql.query(
        "INSERT INTO webhook_deliveries (event_id, endpoint_id, next_attempt_at, created_at) VALUES ('msg_fence', 'whe_fence', $1, $2)",
        [now, now],
      );
      const [due] = (await dueDeliveries(ctx.db.sql, new Date(now.getTime() + 1_000), 10)).filter((row) => row.eventId === 'msg_fence');
      expect(due).toBeDefined();
      const claim = (holder: string) =>
        ctx.db.sql.transaction((tx) => claimDelivery(tx, due!, new Date(now.getTime() + 15_000), { name: 'webhook_delivery', holder }), { timeoutMs: 5_000 });
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', 'paused', 200)).toBe(true);
      await sleep(300);
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', 'successor', 5_000)).toBe(true);
      // The paused ex-leader resumes: its claim is refused by the row itself, whatever it believes.
      expect(await claim('paused')).toBe(false);
      expect(await claim('successor')).toBe(true);
    });
  });
});
