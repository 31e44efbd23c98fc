import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { holdLeadership, type Leadership } from '../../src/db/leadership.js';
import { backendAvailable } from '../support/backends.js';
import { useMigratedDatabase } from '../domain/fixtures.js';

async function until(check: () => boolean, what: string, limitMs = 5_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

describe('leadership on postgresql: an advisory lock on a connection of its own', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    const ctx = useMigratedDatabase('postgresql');
    const held: Leadership[] = [];
    const hold = (events: string[]) => {
      const leadership = holdLeadership(resolveDatabase(ctx.backend.url, {}), 'webhookDelivery', {
        retryMs: 20,
        onTaken: () => events.push('taken'),
        onLost: () => events.push('lost'),
      });
      held.push(leadership);
      return leadership;
    };
    afterEach(async () => {
      await Promise.all(held.splice(0).map((leadership) => leadership.stop()));
    });

    it('one holder at a time; another takes over when the holder stops', async () => {
      const firstEvents: string[] = [];
      const secondEvents: string[] = [];
      const first = hold(firstEvents);
      await until(() => first.held, 'the first holds the lock');
      const second = hold(secondEvents);
      await sleep(100);
      expect(second.held).toBe(false);
      await first.stop();
      expect(first.held).toBe(false);
      await until(() => second.held, 'the second takes over');
      expect(firstEvents).toEqual(['taken']);
      expect(secondEvents).toEqual(['taken']);
    });

    it('a holder whose connection is killed says so, and another instance can take the lock', async () => {
      const events: string[] = [];
      const first = hold(events);
      await until(() => first.held, 'the first holds the lock');
      const admin = new pg.Client({ connectionString: ctx.backend.url });
      await admin.connect();
      try {
        await admin.query(
          "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid() AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        );
      } finally {
        await admin.end();
      }
      await until(() => events.includes('lost'), 'the loss is told');
      expect(first.held).toBe(false);
      const second = hold([]);
      await until(() => first.held || second.held, 'one of them holds the lock again');
      expect(first.held && second.held).toBe(false);
    });
  });
});
