import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { claimDelivery, dueDeliveries } from '../../src/db/repositories/webhooks.js';
import { writeOutbox } from '../../src/domain/operations/outbox.js';
import { issueKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { WEBHOOK_TIMEOUT_MS, WebhookDeliverer, type DeliveryLog } from '../../src/domain/runtime/webhook-delivery.js';
import { addWebhook } from '../../src/domain/operations/webhooks.js';
import { BACKENDS, backendAvailable } from '../support/backends.js';
import { ALICE, uniqueName, useMigratedDatabase } from './fixtures.js';

const MINUTE = 60_000;
/** A claim keeps a delivery from other senders for the send's timeout and 5 s more. */
const LEASE_MS = WEBHOOK_TIMEOUT_MS + 5_000;

/** A receiver on loopback: every path answers with its own status (default 204) and records what came. */
async function startReceiver() {
  const statuses = new Map<string, number>();
  const received: { path: string; headers: IncomingHttpHeaders; body: string }[] = [];
  const server: Server = createServer((request, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      received.push({ path, headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(statuses.get(path) ?? 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    statuses,
    to: (path: string) => received.filter((delivery) => delivery.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A clock the test moves by hand. */
function testClock(start: number) {
  let now = start;
  return {
    now: () => now,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

interface Logged {
  level: 'info' | 'warn' | 'error';
  details: Record<string, unknown>;
}

function recordingLog(): DeliveryLog & { lines: Logged[] } {
  const lines: Logged[] = [];
  return {
    lines,
    info: (details) => lines.push({ level: 'info', details }),
    warn: (details) => lines.push({ level: 'warn', details }),
    error: (details) => lines.push({ level: 'error', details }),
  };
}

describe.each(BACKENDS)('webhook delivery on %s: the rules of a delivery, on a test clock', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    const ctx = useMigratedDatabase(provider);
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    // Ahead of the real time: whatever a unit stamps with the real time is due on this clock.
    const clock = testClock(Date.now() + 86_400_000);
    let db: Database;
    beforeAll(async () => {
      receiver = await startReceiver();
      db = await openDatabase(resolveDatabase(ctx.backend.url, {}), { clock });
    });
    afterAll(async () => {
      await db?.close();
      await receiver?.close();
    });

    /** A partner, an endpoint at `path` for its events only, and one event of it in the outbox. */
    async function oneEvent(path: string): Promise<{ endpointId: string }> {
      const { partner } = await createPartner(db, ALICE, { name: uniqueName() });
      const { endpoint } = await addWebhook(db, ALICE, { url: receiver.url(path), insecure: true, partner: partner.id, events: ['partner.disabled'] });
      await db.sql.transaction(
        (tx) => writeOutbox(tx, [{ type: 'partner.disabled', partnerId: partner.id, data: {} }], new Date(clock.now())),
        { timeoutMs: 5_000 },
      );
      return { endpointId: endpoint.id };
    }

    async function delivery(endpointId: string) {
      const [row] = await db.sql.query<{ status: string; attempts: number | string; next_attempt_at: unknown; last_status: number | null }>(
        'SELECT status, attempts, next_attempt_at, last_status FROM webhook_deliveries WHERE endpoint_id = $1',
        [endpointId],
      );
      return {
        status: row!.status,
        attempts: Number(row!.attempts),
        nextAttemptAt: row!.next_attempt_at === null ? null : new Date(row!.next_attempt_at as string | Date).getTime(),
        lastStatus: row!.last_status === null ? null : Number(row!.last_status),
      };
    }

    it('signs with the clock’s time and delivers a 2xx answer once', async () => {
      const { endpointId } = await oneEvent('/ok');
      const deliverer = new WebhookDeliverer(db, { retryDelaysMs: [MINUTE] });
      await deliverer.runOnce();
      expect(receiver.to('/ok')).toHaveLength(1);
      expect(receiver.to('/ok')[0]!.headers['webhook-timestamp']).toBe(String(Math.floor(clock.now() / 1000)));
      expect(await delivery(endpointId)).toEqual({ status: 'delivered', attempts: 1, nextAttemptAt: null, lastStatus: 204 });
      clock.advance(7 * 86_400_000);
      await new WebhookDeliverer(db, { retryDelaysMs: [MINUTE] }).runOnce();
      expect(receiver.to('/ok')).toHaveLength(1);
    });

    it('retries a failed attempt after each configured delay, is not due before it, and gives up after the last', async () => {
      receiver.statuses.set('/down', 500);
      const log = recordingLog();
      const { endpointId } = await oneEvent('/down');
      const deliverer = () => new WebhookDeliverer(db, { retryDelaysMs: [MINUTE, 10 * MINUTE], log });

      const first = clock.now();
      expect((await deliverer().runOnce()).retrying).toBe(1);
      expect(await delivery(endpointId)).toEqual({ status: 'pending', attempts: 1, nextAttemptAt: first + MINUTE, lastStatus: 500 });

      // Not due until the first delay has passed.
      clock.advance(MINUTE - 1);
      await deliverer().runOnce();
      expect(receiver.to('/down')).toHaveLength(1);
      clock.advance(1);
      await deliverer().runOnce();
      expect(receiver.to('/down')).toHaveLength(2);
      expect(await delivery(endpointId)).toEqual({ status: 'pending', attempts: 2, nextAttemptAt: clock.now() + 10 * MINUTE, lastStatus: 500 });

      clock.advance(10 * MINUTE - 1);
      await deliverer().runOnce();
      expect(receiver.to('/down')).toHaveLength(2);
      clock.advance(1);
      const last = await deliverer().runOnce();
      expect(last.failed).toBe(1);
      expect(receiver.to('/down')).toHaveLength(3);
      expect(await delivery(endpointId)).toEqual({ status: 'failed', attempts: 3, nextAttemptAt: null, lastStatus: 500 });
      expect(log.lines.filter((line) => line.level === 'error').map((line) => line.details)).toEqual([
        expect.objectContaining({ webhook_id: endpointId, attempts: 3, last_status: 500 }),
      ]);

      // Given up: never sent again, whatever the time.
      clock.advance(30 * 86_400_000);
      await deliverer().runOnce();
      expect(receiver.to('/down')).toHaveLength(3);
    });

    it('no expiry reminder for a pair whose overlap has ended, though nothing has settled it yet', async () => {
      const deliverer = new WebhookDeliverer(db, { retryDelaysMs: [MINUTE] });
      const remindersOf = async (keyPairId: string) =>
        (await db.sql.query<{ key: string }>('SELECT key FROM webhook_reminders')).filter((row) => row.key.startsWith(`keys.expiring:${keyPairId}:`)).length;
      const overlapping = async () => {
        const { partner } = await createPartner(db, ALICE, { name: uniqueName() });
        const old = await issueKeyPair(db, ALICE, partner.id, { expiresInMs: 10 * 86_400_000 });
        await rotateKeyPair(db, ALICE, partner.id, { overlapMs: 3_600_000 });
        return old.keyPairId;
      };
      // Retiring and within its overlap: live, so its expiry 10 days out is reminded of.
      const live = await overlapping();
      await deliverer.findReminders(new Date(clock.now()));
      expect(await remindersOf(live)).toBe(1);
      // Its overlap over (2 h later), stored 'retiring' still: superseded, no reminder.
      const ended = await overlapping();
      clock.advance(2 * 3_600_000);
      await deliverer.findReminders(new Date(clock.now()));
      expect(await remindersOf(ended)).toBe(0);
    });

    it('a claimed delivery (its sender died mid-send) is due again only when the claim’s lease ends', async () => {
      const { endpointId } = await oneEvent('/claimed');
      const due = (await dueDeliveries(db.sql, new Date(clock.now()), 1_000)).find((row) => row.endpointId === endpointId)!;
      expect(due.attempts).toBe(0);
      await db.sql.transaction(async (tx) => expect(await claimDelivery(tx, due, new Date(clock.now() + LEASE_MS))).toBe(true), { timeoutMs: 5_000 });

      clock.advance(LEASE_MS - 1);
      await new WebhookDeliverer(db, { retryDelaysMs: [MINUTE] }).runOnce();
      expect(receiver.to('/claimed')).toHaveLength(0);
      clock.advance(1);
      await new WebhookDeliverer(db, { retryDelaysMs: [MINUTE] }).runOnce();
      expect(receiver.to('/claimed')).toHaveLength(1);
      expect((await delivery(endpointId)).status).toBe('delivered');
    });
  });
});

describe('webhook delivery on postgresql: one instance delivers, under the delivery lease', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    const ctx = useMigratedDatabase('postgresql');
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let other: Database;
    beforeAll(async () => {
      receiver = await startReceiver();
      other = await openDatabase(resolveDatabase(ctx.backend.url, {}));
    });
    afterAll(async () => {
      await other?.close();
      await receiver?.close();
    });

    it('of two running deliverers only the lease holder sends; the other stays idle', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      await addWebhook(ctx.db, ALICE, { url: receiver.url('/one'), insecure: true, partner: partner.id, events: ['partner.disabled'] });
      const log = recordingLog();
      const deliverers = [ctx.db, other].map((db) => new WebhookDeliverer(db, { retryDelaysMs: [MINUTE], pollMs: 20, log }));
      for (const deliverer of deliverers) deliverer.start();
      try {
        for (let waited = 0; !deliverers.some((deliverer) => deliverer.delivering); waited += 20) {
          if (waited > 5_000) throw new Error('no deliverer took the lease');
          await sleep(20);
        }
        expect(deliverers.filter((deliverer) => deliverer.delivering)).toHaveLength(1);
        expect(log.lines.filter((line) => line.level === 'info')).toHaveLength(1);

        await ctx.db.sql.transaction((tx) => writeOutbox(tx, [{ type: 'partner.disabled', partnerId: partner.id, data: {} }], new Date()), { timeoutMs: 5_000 });
        for (let waited = 0; receiver.to('/one').length === 0; waited += 20) {
          if (waited > 5_000) throw new Error('the event was not delivered');
          await sleep(20);
        }
        await sleep(200);
        expect(receiver.to('/one')).toHaveLength(1);
        const [holder] = deliverers.filter((deliverer) => deliverer.delivering);
        expect(holder!.summary.delivered).toBe(1);
        expect(deliverers.filter((deliverer) => !deliverer.delivering)[0]!.summary.delivered).toBe(0);
      } finally {
        await Promise.all(deliverers.map((deliverer) => deliverer.stop()));
      }
      expect(deliverers.some((deliverer) => deliverer.delivering)).toBe(false);
    });

    it('a leader whose lease another instance took (it was paused) claims nothing, even while it still counts itself the leader', async () => {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      await addWebhook(ctx.db, ALICE, { url: receiver.url('/fenced'), insecure: true, partner: partner.id, events: ['partner.disabled'] });
      const log = recordingLog();
      const deliverer = new WebhookDeliverer(ctx.db, { retryDelaysMs: [MINUTE], pollMs: 20, log });
      const successor = new pg.Client({ connectionString: ctx.backend.url });
      await successor.connect();
      deliverer.start();
      try {
        for (let waited = 0; !deliverer.delivering; waited += 20) {
          if (waited > 5_000) throw new Error('the deliverer did not take the lease');
          await sleep(20);
        }
        // What a successor does once the paused leader's lease has expired; then the row is held locked, so
        // that the ex-leader's renewal waits and it goes on counting itself the leader for a while.
        await successor.query("UPDATE leases SET holder = 'successor', expires_at = (clock_timestamp() AT TIME ZONE 'UTC') + interval '1 hour'");
        await successor.query('BEGIN');
        await successor.query('SELECT * FROM leases FOR UPDATE');
        await ctx.db.sql.transaction((tx) => writeOutbox(tx, [{ type: 'partner.disabled', partnerId: partner.id, data: {} }], new Date()), { timeoutMs: 5_000 });
        await sleep(1_000);
        expect(deliverer.delivering).toBe(true);
        // Its claims are refused by the row itself.
        expect(receiver.to('/fenced')).toHaveLength(0);
        await successor.query('ROLLBACK');
        // Its renewal then finds the lease gone: it says so and stops counting itself the leader.
        for (let waited = 0; deliverer.delivering; waited += 20) {
          if (waited > 3_000) throw new Error('the deliverer did not notice it lost the lease');
          await sleep(20);
        }
        expect(log.lines.filter((line) => line.level === 'warn')).toHaveLength(1);
        expect(receiver.to('/fenced')).toHaveLength(0);
      } finally {
        await successor.end();
        await deliverer.stop();
        await ctx.db.sql.query('DELETE FROM leases');
      }
    });
  });
});
