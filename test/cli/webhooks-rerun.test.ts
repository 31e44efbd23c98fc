// Webhook provisioning that a runbook can run twice: one endpoint per URL, and a removal that asks (or needs
// --yes), states what it drops, and succeeds again once done.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe.each(BACKENDS)('webhooks add and remove, re-run (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const url = 'https://ops.example.com/hooks/partnerctl';
    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
    });
    afterAll(() => backend?.dispose());
    const endpoints = async () => (await runCli(['webhooks', 'list', '--json'], backend.env)).json().webhooks as { id: string; url: string }[];

    it('creates one endpoint for a URL: a second add exits 4 webhook_exists naming it, or 0 changed: false with --if-not-exists', async () => {
      const first = await runCli(['webhooks', 'add', '--url', url, '--json'], backend.env);
      expect(first.code, first.stderr).toBe(0);
      const { id, secret } = first.json();
      expect(first.json().changed).toBe(true);

      const again = await runCli(['webhooks', 'add', '--url', url], backend.env);
      expect(again.code).toBe(4);
      expect(again.stderr).toMatch(new RegExp(`^partnerctl: webhook_exists: webhook ${id} already receives events at this URL; hint: add --if-not-exists`));
      const reused = await runCli(['webhooks', 'add', '--url', url, '--if-not-exists', '--json'], backend.env);
      expect(reused.code, reused.stderr).toBe(0);
      expect(reused.json()).toMatchObject({ id, url, changed: false });
      expect(reused.stdout).not.toContain(secret.slice(6));
      const text = await runCli(['webhooks', 'add', '--url', url, '--if-not-exists'], backend.env);
      expect([text.code, text.stdout]).toEqual([0, expect.stringMatching(new RegExp(`^Webhook ${id} already receives events at this URL; nothing changed`))]);
      expect((await endpoints()).filter((endpoint) => endpoint.url === url)).toHaveLength(1);
      const added = (await runCli(['audit', '--action', 'webhook.added', '--json'], backend.env)).json().events;
      expect(added).toHaveLength(1);
    });

    it('removes only with --yes when no one can answer, stating the pending deliveries it drops; again exits 0, changed: false', async () => {
      const id = (await endpoints())[0]!.id;
      // An event while the endpoint is there: one delivery pending (no server delivers here).
      expect((await runCli(['create-partner', '--name', 'Hooked'], backend.env)).code).toBe(0);
      expect((await runCli(['issue-keys', 'Hooked', '--json'], backend.env)).code).toBe(0);

      const unconfirmed = await runCli(['webhooks', 'remove', id], backend.env);
      expect(unconfirmed.code).toBe(2);
      expect(unconfirmed.stderr).toMatch(/^partnerctl: confirmation_required: Remove webhook wh_[0-9a-f]+ \(.*\), dropping 1 pending delivery: needs confirmation/);
      expect((await endpoints()).map((endpoint) => endpoint.id)).toContain(id);

      const removed = await runCli(['webhooks', 'remove', id, '--yes', '--json'], backend.env);
      expect(removed.code, removed.stderr).toBe(0);
      expect(removed.json()).toEqual({ id, removed: true, changed: true, dropped_deliveries: 1 });
      const again = await runCli(['webhooks', 'remove', id, '--json'], backend.env);
      expect(again.code, again.stderr).toBe(0);
      expect(again.json()).toEqual({ id, removed: false, changed: false, dropped_deliveries: 0 });
      expect((await runCli(['webhooks', 'remove', id], backend.env)).stdout).toBe(`Webhook ${id} was already removed; nothing changed.\n`);
      // An id never added is still not found.
      expect((await runCli(['webhooks', 'remove', 'wh_0123456789abcdef', '--yes'], backend.env)).code).toBe(3);
      const events = (await runCli(['audit', '--action', 'webhook.removed', '--json'], backend.env)).json().events;
      expect(events).toHaveLength(1);
      expect(events[0].details).toMatchObject({ webhook_id: id, dropped_deliveries: 1 });
    });
  });
});
