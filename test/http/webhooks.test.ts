import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runBinary, runCli, type CliResult } from '../support/cli.js';
import { clearOfHourBoundary } from '../support/hours.js';
import { serve, serveInProcess, type Served } from '../support/serve.js';
import { startUpstream } from './support.js';
import { tokenFor } from '../hardening/support.js';

interface Delivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
  /** What standardwebhooks' verify made of it: the payload, or the error's message. */
  verified: { type: string; timestamp: string; data: Record<string, unknown> } | null;
  error: string | null;
}

/**
 * A webhook receiver on loopback: every endpoint path has its secret and its answers; every delivery is
 * verified with the standardwebhooks package, as a partner's or on-call's receiver would.
 */
async function startReceiver() {
  const secrets = new Map<string, string>();
  const answers = new Map<string, (delivery: Delivery, response: ServerResponse) => void>();
  const deliveries: Delivery[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const path = request.url ?? '/';
      let verified: Delivery['verified'] = null;
      let error: string | null = null;
      try {
        verified = new Webhook(secrets.get(path) ?? 'whsec_AAAA').verify(body, request.headers as Record<string, string>) as Delivery['verified'];
      } catch (caught) {
        error = (caught as Error).message;
      }
      const delivery = { path, headers: request.headers, body, at: Date.now(), verified, error };
      deliveries.push(delivery);
      const answer = answers.get(path);
      if (answer) answer(delivery, response);
      else response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    secrets,
    answers,
    deliveries,
    to: (path: string) => deliveries.filter((delivery) => delivery.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function until<T>(check: () => T | undefined | false, limitMs: number, what: string): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe.concurrent.each(BACKENDS)('webhooks on %s: a real serve delivers to a local receiver', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let server: Served;
    let counter = 0;
    const env = () => ({ ...backend.env, PARTNERCTL_WEBHOOK_RETRY_DELAYS: '1s,1s,1s,1s' });

    const run = (...args: string[]): Promise<CliResult> => runCli(['--json', '--yes', ...args], env());
    const cli = async (...args: string[]) => {
      const result = await run(...args);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };
    /** An endpoint at a path of its own on the receiver, for some events (default every one). */
    const endpoint = async (path: string, ...flags: string[]) => {
      const added = await cli('webhooks', 'add', '--url', receiver.url(path), '--insecure', ...flags);
      receiver.secrets.set(path, added.secret);
      return added as { id: string; secret: string };
    };
    const stop = async (served: Served, signal: NodeJS.Signals = 'SIGTERM') => {
      if (served.child.exitCode === null) {
        served.child.kill(signal);
        await served.exited;
      }
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') await (await openMigrated(backend)).close();
      receiver = await startReceiver();
      await cli('create-partner', '--name', 'hooks-setup');
      server = await serve(env());
    });
    afterAll(async () => {
      if (server) await stop(server);
      await receiver?.close();
      await backend?.dispose();
    });

    it("never echoes a URL's password, whatever else is wrong with the URL (stderr and --json)", async () => {
      for (const url of [
        'https://u:S3cr3t@ho st.example.com/h',
        'https://u:S3cr3t@example.com:99999/h',
        'ftp://u:S3cr3t@example.com/h',
        'https://u:S3cr/3t@example.com/h',
        'https://S3cr3t@exa mple.com/h',
        'https://u:S3cr3t@example.com/h',
      ]) {
        for (const json of [true, false]) {
          const result = await runCli([...(json ? ['--json'] : []), '--yes', 'webhooks', 'add', '--url', url], env());
          expect(result.code, url).toBe(2);
          expect(result.stdout + result.stderr, url).not.toMatch(/S3cr/);
        }
      }
      const echoed = await run('webhooks', 'add', '--url', 'ftp://u:S3cr3t@example.com/h');
      expect(echoed.stderr + echoed.stdout).toContain("ftp://u:***@example.com/h");
    });

    it('add prints the secret once; list never; http:// only with --insecure; add and remove audited', async () => {
      const bad = await run('webhooks', 'add', '--url', receiver.url('/plain'));
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/invalid_argument: --url must be https:\/\//);
      expect((await run('webhooks', 'add', '--url', 'https://example.com/h', '--events', 'keys.issued,nope')).code).toBe(2);
      const added = await endpoint('/audited', '--events', 'keys.issued', '--description', 'on-call');
      expect(added.id).toMatch(/^wh_[0-9a-f]{16}$/);
      expect(added.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      const listed = await cli('webhooks', 'list');
      const mine = listed.webhooks.find((hook: { id: string }) => hook.id === added.id);
      expect(mine).toMatchObject({ url: receiver.url('/audited'), events: ['keys.issued'], description: 'on-call' });
      expect(JSON.stringify(listed)).not.toContain(added.secret.slice(6));
      expect((await runCli(['webhooks', 'list'], env())).stdout).not.toContain(added.secret.slice(6));
      const text = await runCli(['webhooks', 'add', '--url', receiver.url('/text'), '--insecure'], env());
      expect(text.stdout).toMatch(/Signing secret \(shown once.*\): whsec_/);
      await cli('webhooks', 'remove', added.id);
      expect(await cli('webhooks', 'remove', added.id)).toMatchObject({ changed: false, removed: false });
      expect((await run('webhooks', 'remove', 'wh_0000000000000000')).code).toBe(3);
      expect((await run('webhooks', 'remove', 'nonsense')).code).toBe(2);
      const audit = await cli('audit', '--limit', '10');
      const actions = audit.events.map((event: { action: string }) => event.action);
      expect(actions).toContain('webhook.added');
      expect(actions).toContain('webhook.removed');
      expect(JSON.stringify(audit)).not.toContain(added.secret.slice(6));
      const textId = /Added webhook (wh_[0-9a-f]+)/.exec(text.stdout)![1]!;
      await cli('webhooks', 'remove', textId);
    });

    it('a change made by another process is delivered within 2 s, signed per Standard Webhooks, never a secret', async () => {
      const hook = await endpoint('/fast');
      const name = `hooks-${++counter}`;
      const created = await cli('create-partner', '--name', name);
      const started = Date.now();
      // The real binary: another process writes the change and its event; the running serve delivers it.
      const issued = await runBinary(['--json', 'issue-keys', name], env());
      const exited = Date.now();
      expect(issued.code, issued.stderr).toBe(0);
      const keys = issued.json();
      const delivery = await until(() => receiver.to('/fast').find((item) => item.verified?.type === 'keys.issued' && item.verified.data.partner_id === created.partner_id), 5_000, 'keys.issued');
      console.log(
        `webhooks (${provider}): keys.issued received ${delivery.at - started} ms after issue-keys started, ${delivery.at - exited} ms after it exited`,
      );
      // Within 2 s of the change (committed before the process exits, so at the latest 2 s after its exit).
      expect(delivery.at - exited).toBeLessThan(2_000);
      expect(delivery.error).toBeNull();
      expect(delivery.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
      expect(delivery.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
      expect(delivery.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
      expect(delivery.verified).toMatchObject({
        type: 'keys.issued',
        data: { partner_id: created.partner_id, partner_name: name, key_pair_id: keys.key_pair_id, access_key: keys.access_key, actor: 'test-runner' },
      });
      // A pair without an expiry says so: every field the docs list is there.
      expect(delivery.verified!.data).toHaveProperty('expires_at', null);
      expect(Date.parse(delivery.verified!.timestamp)).toBeGreaterThan(started - 1_000);
      expect(delivery.body).not.toContain(keys.secret_key);
      expect(delivery.body).not.toContain(keys.secret_key.slice(8, 40));
      // The receiver has answered; the outcome is written a moment later.
      let row: { event_id: string; status: string } | undefined;
      for (let i = 0; i < 40 && row?.status !== 'delivered'; i++) {
        if (i > 0) await sleep(50);
        row = (await cli('webhooks', 'deliveries', hook.id)).deliveries.find((item: { event_id: string }) => item.event_id === delivery.headers['webhook-id']);
      }
      expect(row).toMatchObject({
        type: 'keys.issued',
        status: 'delivered',
        attempts: 1,
        last_status: 204,
        next_attempt_at: null,
      });
      await cli('webhooks', 'remove', hook.id);
    });

    it('500 three times then 200: delivered on exactly the 4th attempt, the same webhook-id each time; a dead receiver blocks no one', async () => {
      const name = `hooks-${++counter}`;
      const partner = await cli('create-partner', '--name', name);
      const flaky = await endpoint('/flaky', '--partner', name, '--events', 'partner.disabled');
      const healthy = await endpoint('/healthy', '--partner', name, '--events', 'partner.disabled');
      // A receiver that takes the connection and never answers: each attempt waits out the 10 s timeout.
      const hanging = await endpoint('/hanging', '--partner', name, '--events', 'partner.disabled');
      receiver.answers.set('/hanging', () => {});
      let failures = 0;
      receiver.answers.set('/flaky', (_delivery, response) => {
        if (failures++ < 3) response.writeHead(500).end('not yet');
        else response.writeHead(200).end('ok');
      });
      const started = Date.now();
      await cli('disable-partner', name);
      const fine = await until(() => receiver.to('/healthy')[0], 5_000, 'the healthy endpoint');
      expect(fine.at - started).toBeLessThan(3_000);
      await until(() => receiver.to('/flaky').length >= 4 && receiver.to('/flaky'), 15_000, 'four attempts');
      await sleep(1_500);
      const attempts = receiver.to('/flaky');
      expect(attempts).toHaveLength(4);
      expect(new Set(attempts.map((attempt) => attempt.headers['webhook-id'])).size).toBe(1);
      expect(attempts.every((attempt) => attempt.error === null && attempt.verified?.type === 'partner.disabled')).toBe(true);
      expect(attempts[3]!.verified!.data.partner_id).toBe(partner.partner_id);
      // Growing from the configured delays: about 1 s apart.
      for (let i = 1; i < 4; i++) expect(attempts[i]!.at - attempts[i - 1]!.at).toBeGreaterThanOrEqual(900);
      // The receiver's 200 was seen 1.5 s ago: the outcome is written by now.
      const delivered = (await cli('webhooks', 'deliveries', flaky.id)).deliveries[0];
      expect(delivered).toMatchObject({ status: 'delivered', attempts: 4, last_status: 200 });
      const failing = await cli('webhooks', 'deliveries', '--failed');
      expect(failing.deliveries.some((row: { webhook_id: string }) => row.webhook_id === flaky.id)).toBe(false);
      expect(receiver.to('/healthy')).toHaveLength(1);
      expect(receiver.to('/hanging').length).toBeGreaterThanOrEqual(1);
      for (const id of [flaky.id, healthy.id, hanging.id]) await cli('webhooks', 'remove', id);
      receiver.answers.delete('/hanging');
    });

    it('webhooks test sends webhook.test and prints the answer; exit 1 when it is not 2xx', async () => {
      const hook = await endpoint('/test');
      const ok = await cli('webhooks', 'test', hook.id);
      expect(ok).toMatchObject({ id: hook.id, ok: true, status: 204 });
      const received = receiver.to('/test').at(-1)!;
      expect(received.error).toBeNull();
      expect(received.verified).toMatchObject({ type: 'webhook.test', data: { webhook_id: hook.id } });
      receiver.answers.set('/test', (_delivery, response) => response.writeHead(503).end('down for maintenance'));
      const down = await run('webhooks', 'test', hook.id);
      expect(down.code).toBe(1);
      expect(down.json()).toMatchObject({ ok: false, status: 503, body: 'down for maintenance' });
      expect((await runCli(['webhooks', 'test', hook.id], env())).stdout).toMatch(/answered 503 in \d+ ms: down for maintenance/);
      receiver.answers.delete('/test');
      await cli('webhooks', 'remove', hook.id);
    });

    it('an expiring pair sends its reminder once, the nearest only; webhooks deliver finds it without a server', async () => {
      const hook = await endpoint('/expiring', '--events', 'keys.expiring');
      const name = `hooks-${++counter}`;
      await cli('create-partner', '--name', name);
      // Issued for 20 h: the 30-, 7- and 1-day reminders are all due at once: only the 1-day one is sent.
      const keys = await cli('issue-keys', name, '--expires-in', '20h');
      const first = await cli('webhooks', 'deliver');
      expect(first.reminders).toBeGreaterThanOrEqual(1);
      const reminders = () => receiver.to('/expiring').filter((item) => item.verified?.data.key_pair_id === keys.key_pair_id);
      await until(() => reminders().length > 0, 5_000, 'the reminder');
      // Again, by the CLI and by the running serve (which looks every 30 s and at start): still once.
      await cli('webhooks', 'deliver');
      // A pair due for its 30-day reminder only, found by the server alone (no operator action).
      await cli('create-partner', '--name', `${name}-b`);
      const later = await cli('issue-keys', `${name}-b`, '--expires-in', '10d');
      await stop(server);
      server = await serve(env());
      const found = await until(
        () => receiver.to('/expiring').find((item) => item.verified?.data.key_pair_id === later.key_pair_id),
        5_000,
        "the server's reminder",
      );
      expect(found.verified!.data).toMatchObject({ days_before: 30, expires_at: later.expires_at });
      await sleep(1_000);
      expect(reminders()).toHaveLength(1);
      expect(receiver.to('/expiring').filter((item) => item.verified?.data.key_pair_id === later.key_pair_id)).toHaveLength(1);
      expect(reminders()[0]!.verified).toMatchObject({
        type: 'keys.expiring',
        data: { key_pair_id: keys.key_pair_id, expires_at: keys.expires_at, days_before: 1, partner_name: name },
      });
      await cli('webhooks', 'remove', hook.id);
    });

    it('kill -9 of the delivering server loses no event: delivered after restart (or by another instance)', async () => {
      const hook = await endpoint('/killed', '--events', 'partner.enabled');
      const name = `hooks-${++counter}`;
      await cli('create-partner', '--name', name);
      await cli('disable-partner', name);
      // The first attempt is taken and never answered; the server is killed while it is in flight.
      receiver.answers.set('/killed', () => {});
      // On PostgreSQL a second instance waits for the delivery lease and takes over.
      const standby = provider === 'postgresql' ? await serve(env()) : null;
      await cli('enable-partner', name);
      await until(() => receiver.to('/killed').length >= 1, 5_000, 'the first attempt');
      await stop(server, 'SIGKILL');
      receiver.answers.set('/killed', (_delivery, response) => response.writeHead(200).end());
      if (standby) server = standby;
      else server = await serve(env());
      // The claim's lease (10 s timeout + 5 s) runs out, and the event goes out again.
      await until(() => receiver.to('/killed').length >= 2, 30_000, 'the redelivery');
      const [lost, again] = receiver.to('/killed');
      expect(again!.headers['webhook-id']).toBe(lost!.headers['webhook-id']);
      expect(again!.verified?.type).toBe('partner.enabled');
      let listed = (await cli('webhooks', 'deliveries', hook.id)).deliveries[0];
      for (let i = 0; i < 40 && listed.status !== 'delivered'; i++) {
        await sleep(50);
        listed = (await cli('webhooks', 'deliveries', hook.id)).deliveries[0];
      }
      expect(listed).toMatchObject({ status: 'delivered', last_status: 200 });
      await cli('webhooks', 'remove', hook.id);
    }, 60_000);

    it('quota.threshold: 80 % and 100 % of the daily quota, once each, found from the usage the servers write', async () => {
      const upstream = await startUpstream();
      const hook = await endpoint('/quota', '--events', 'quota.threshold');
      const name = `hooks-${++counter}`;
      const partner = await cli('create-partner', '--name', name);
      await cli('map-company', name, '--company', 'shop');
      await cli('set-limits', name, '--daily-quota', '5');
      const keys = await cli('issue-keys', name);
      const requests = async (count: number) => {
        // A server of its own (in this process) with an engine; stopping it writes its usage counts (they are written every 10 s otherwise).
        const engine = await serveInProcess({ ...env(), PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0' });
        try {
          const token = await tokenFor(engine.url, keys.access_key, keys.secret_key);
          for (let i = 0; i < count; i++) {
            const data = await fetch(`${engine.url}/public/v1/prices?company_id=shop`, { headers: { authorization: `Bearer ${token}` } });
            expect(data.status, await data.text()).toBe(200);
          }
        } finally {
          await engine.stop();
        }
      };
      const quotaEvents = () => receiver.to('/quota').filter((item) => item.verified?.data.partner_id === partner.partner_id);
      // The quota is per UTC day: all the requests on one day.
      await clearOfHourBoundary();
      try {
        await requests(3);
        await cli('webhooks', 'deliver');
        expect(quotaEvents()).toHaveLength(0);
        await requests(1);
        await cli('webhooks', 'deliver');
        await until(() => quotaEvents().length === 1, 3_000, 'the 80 % event');
        expect(quotaEvents()[0]!.verified).toMatchObject({ type: 'quota.threshold', data: { percent: 80, daily_quota: 5, used: 4, partner_name: name } });
        await requests(1);
        await cli('webhooks', 'deliver');
        await cli('webhooks', 'deliver');
        await until(() => quotaEvents().length === 2, 3_000, 'the 100 % event');
        await sleep(1_000);
        expect(quotaEvents().map((item) => item.verified!.data.percent)).toEqual([80, 100]);
      } finally {
        await upstream.close();
        await cli('webhooks', 'remove', hook.id);
      }
    });

    it('every delivery verified with standardwebhooks', () => {
      expect(receiver.deliveries.length).toBeGreaterThan(5);
      expect(receiver.deliveries.filter((delivery) => delivery.error !== null).map((delivery) => [delivery.path, delivery.error])).toEqual([]);
    });
  });
});
