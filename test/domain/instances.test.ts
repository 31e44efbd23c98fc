import { describe, expect, it } from 'vitest';
import { beatInstance, removeInstance } from '../../src/db/repositories/instances.js';
import { releaseLease, takeLease } from '../../src/db/repositories/leases.js';
import { auditEventsPage } from '../../src/domain/operations/audit.js';
import { forgetInstance, instanceReport, newInstanceId } from '../../src/domain/runtime/instances.js';
import { ConfirmationWatch } from '../../src/domain/runtime/receipts.js';
import { runCli } from '../support/cli.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, expectAppError, useMigratedDatabase } from './fixtures.js';

describe.each(BACKENDS)('the instance registry and receipts with staleness budgets on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);

    /** A registry row as an instance would have written it, its last heartbeat `agoMs` ago. */
    async function registered(agoMs: number, staleBudgetMs: number): Promise<{ instanceId: string; lastSeenAt: Date }> {
      const instanceId = newInstanceId();
      const lastSeenAt = new Date(Date.now() - agoMs);
      await ctx.db.sql.transaction(
        (tx) =>
          beatInstance(tx, {
            instanceId,
            host: 'api-test',
            pid: 4711,
            version: 'test',
            address: 'http://127.0.0.1:1',
            startedAt: new Date(Date.now() - 600_000),
            lastSeenAt,
            appliedRevision: null,
            staleBudgetMs,
            clockOffsetMs: null,
          }),
        { timeoutMs: 5_000 },
      );
      return { instanceId, lastSeenAt };
    }

    it('names who delivers webhooks: the live lease holder, the registered instance it is (PostgreSQL); null on SQLite', async () => {
      if (provider === 'sqlite') {
        expect((await instanceReport(ctx.db)).webhookDelivery).toBeNull();
        return;
      }
      expect((await instanceReport(ctx.db)).webhookDelivery).toEqual({ holder: null, instanceId: null, heldUntil: null });
      const leader = await registered(0, 0);
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', leader.instanceId, 60_000)).toBe(true);
      const held = (await instanceReport(ctx.db)).webhookDelivery;
      expect(held).toMatchObject({ holder: leader.instanceId, instanceId: leader.instanceId });
      expect(held!.heldUntil!.getTime()).toBeGreaterThan(Date.now() + 30_000);
      await releaseLease(ctx.db.sql, 'webhook_delivery', leader.instanceId);
      // A `webhooks deliver` run holds it under a name of its own: not a registered instance.
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', 'ops-host/4242/abcd', 60_000)).toBe(true);
      expect((await instanceReport(ctx.db)).webhookDelivery).toMatchObject({ holder: 'ops-host/4242/abcd', instanceId: null });
      await releaseLease(ctx.db.sql, 'webhook_delivery', 'ops-host/4242/abcd');
      // An expired lease is nobody's.
      expect(await takeLease(ctx.db.sql, 'webhook_delivery', leader.instanceId, 1)).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect((await instanceReport(ctx.db)).webhookDelivery).toEqual({ holder: null, instanceId: null, heldUntil: null });
      await releaseLease(ctx.db.sql, 'webhook_delivery', leader.instanceId);
      await ctx.db.sql.transaction((tx) => removeInstance(tx, leader.instanceId), { timeoutMs: 5_000 });
    });

    it('a stale instance within its budget is neither confirmed nor done: unconfirmed, with the instant until which it may serve; past it, or with no budget, stale and not awaited', async () => {
      const cut = await registered(11_000, 60_000);
      const noBudget = await registered(11_000, 0);
      const spent = await registered(70_000, 60_000);
      const { instances } = await instanceReport(ctx.db);
      const row = (id: string) => instances.find((candidate) => candidate.instanceId === id)!;
      expect(row(cut.instanceId)).toMatchObject({ stale: true, mayServe: true, staleBudgetMs: 60_000, servingUntil: new Date(cut.lastSeenAt.getTime() + 60_000) });
      expect(row(noBudget.instanceId)).toMatchObject({ stale: true, mayServe: false, servingUntil: null });
      expect(row(spent.instanceId)).toMatchObject({ stale: true, mayServe: false });

      const watch = await ConfirmationWatch.open(ctx.db);
      const started = Date.now();
      const receipt = await watch.wait(started, 300).finally(() => watch.close());
      expect(receipt.confirmed).toEqual([]);
      expect(receipt.unconfirmed).toEqual([
        {
          instanceId: cut.instanceId,
          host: 'api-test',
          pid: 4711,
          lastSeenAt: cut.lastSeenAt,
          servingUntil: new Date(cut.lastSeenAt.getTime() + 60_000),
          stale: true,
        },
      ]);
      expect(receipt.stale.map((s) => s.instanceId).sort()).toEqual([noBudget.instanceId, spent.instanceId].sort());
      expect(receipt.stale.find((s) => s.instanceId === spent.instanceId)!.servingUntil).toEqual(new Date(spent.lastSeenAt.getTime() + 60_000));
      // It waited for the cut instance (the whole --wait), as for a live one.
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    });

    it('forgetInstance removes the row, audited, so no later receipt waits for it; an unknown id is not_found', async () => {
      const gone = await registered(11_000, 60_000);
      const forgotten = await forgetInstance(ctx.db, ALICE, gone.instanceId);
      expect(forgotten.instanceId).toBe(gone.instanceId);
      const { instances } = await instanceReport(ctx.db);
      expect(instances.map((row) => row.instanceId)).not.toContain(gone.instanceId);
      const watch = await ConfirmationWatch.open(ctx.db);
      const receipt = await watch.wait(Date.now(), 100).finally(() => watch.close());
      expect(receipt.unconfirmed.map((row) => row.instanceId)).not.toContain(gone.instanceId);
      const { events } = await auditEventsPage(ctx.db, { action: 'instance.forgotten', limit: 10 });
      expect(events[0]).toMatchObject({ actor: ALICE.actor, details: { instance_id: gone.instanceId, stale_budget_ms: 60_000 } });
      await expectAppError(forgetInstance(ctx.db, ALICE, gone.instanceId), 'not_found');
    });

    it('instances --forget asks for --yes off a terminal, then forgets; instances shows the instant a stale instance may serve until', async () => {
      const env = { ...ctx.backend.env };
      const cut = await registered(11_000, 60_000);
      const listed = await runCli(['--json', 'instances'], env);
      expect(listed.code, listed.stderr).toBe(0);
      const row = listed
        .json<{ instances: { instance_id: string; may_serve: boolean; serving_until: string | null; stale_budget_ms: number }[] }>()
        .instances.find((candidate) => candidate.instance_id === cut.instanceId);
      expect(row).toMatchObject({ may_serve: true, stale_budget_ms: 60_000, serving_until: new Date(cut.lastSeenAt.getTime() + 60_000).toISOString() });
      const text = await runCli(['instances'], env);
      expect(text.stdout).toMatch(new RegExp(`${cut.instanceId}\\s.*\\sstale, may serve\\s`));

      const unconfirmed = await runCli(['instances', '--forget', cut.instanceId], env);
      expect(unconfirmed.code).not.toBe(0);
      expect(unconfirmed.stderr).toContain('confirmation_required');
      expect((await instanceReport(ctx.db)).instances.map((i) => i.instanceId)).toContain(cut.instanceId);
      const done = await runCli(['--json', '--yes', 'instances', '--forget', cut.instanceId], env);
      expect(done.code, done.stderr).toBe(0);
      expect(done.json()).toMatchObject({ instance_id: cut.instanceId, forgotten: true });
      expect((await instanceReport(ctx.db)).instances.map((i) => i.instanceId)).not.toContain(cut.instanceId);
    });
  });
});
