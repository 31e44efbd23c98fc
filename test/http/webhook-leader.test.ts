import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LEASE_RENEW_MS, LEASE_TTL_MS } from '../../src/db/leadership.js';
import { backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';

/** Every delivery received: its webhook-id, its event type and the partner it names. */
async function startReceiver() {
  const received: { id: string; type: string; partner: string | undefined; at: number }[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; data: { partner_name?: string } };
      received.push({ id: String(request.headers['webhook-id']), type: event.type, partner: event.data.partner_name, at: Date.now() });
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    of: (partner: string) => received.filter((delivery) => delivery.partner === partner),
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

/** The instance id a server announced on start. */
const instanceOf = (served: Served) => /, instance (srv_\w+)/.exec(served.stderr())?.[1];

const TAKEN = 'webhook delivery: this instance delivers (lease taken)';
const LOST = 'webhook delivery: lease lost';

describe('webhook delivery on postgresql: a frozen leader loses its lease', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    const servers: Served[] = [];

    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };

    beforeAll(async () => {
      backend = await createBackend('postgresql');
      await (await openMigrated(backend)).close();
      receiver = await startReceiver();
      await cli('webhooks', 'add', '--url', receiver.url, '--insecure', '--events', 'partner.disabled');
      for (const name of ['before-pause', 'while-paused', 'after-resume']) await cli('create-partner', '--name', name);
    });
    afterAll(async () => {
      for (const served of servers) {
        if (served.child.exitCode !== null) continue;
        served.child.kill('SIGCONT');
        served.child.kill('SIGTERM');
        await served.exited;
      }
      await receiver?.close();
      await backend?.dispose();
    });

    it('SIGSTOP of the leader: another instance delivers within seconds; after SIGCONT nothing is sent twice', async () => {
      const first = await serve(backend.env);
      servers.push(first);
      await until(() => first.stdout().includes(TAKEN), 10_000, 'the first instance to lead');
      expect((await cli('instances')).webhook_delivery).toMatchObject({ holder: instanceOf(first), instance_id: instanceOf(first) });
      expect((await runCli(['instances'], backend.env)).stdout).toMatch(new RegExp(`^Webhook delivery: ${instanceOf(first)}, lease held until \\S+Z\\.$`, 'm'));
      const second = await serve(backend.env);
      servers.push(second);
      await cli('disable-partner', 'before-pause', '--no-wait');
      await until(() => receiver.of('before-pause').length === 1, 5_000, 'the delivery before the pause');
      expect(second.stdout()).not.toContain(TAKEN);

      first.child.kill('SIGSTOP');
      const pausedAt = Date.now();
      await cli('disable-partner', 'while-paused', '--no-wait');
      const [delivered] = await until(() => receiver.of('while-paused').length > 0 && receiver.of('while-paused'), 30_000, 'the delivery while the leader is paused');
      const takeover = delivered!.at - pausedAt;
      console.log(`frozen leader: event delivered by the other instance ${takeover} ms after SIGSTOP`);
      // The lease expires LEASE_TTL_MS after its last renewal, the other tries every LEASE_RENEW_MS, then
      // polls for due deliveries every 0.5 s.
      expect(takeover).toBeLessThan(LEASE_TTL_MS + LEASE_RENEW_MS + 2_000);
      // Its log line is written in a batch, possibly after the delivery arrived.
      await until(() => second.stdout().includes(TAKEN), 5_000, 'the other instance to say it took the lease');
      expect((await cli('instances')).webhook_delivery).toMatchObject({ instance_id: instanceOf(second) });

      first.child.kill('SIGCONT');
      await until(() => first.stdout().includes(LOST), 5_000, 'the resumed instance to say it lost the lease');
      await cli('disable-partner', 'after-resume', '--no-wait');
      await until(() => receiver.of('after-resume').length >= 1, 5_000, 'the delivery after the resume');
      // Time for a second sender to show itself, were there one.
      await sleep(2_000);
      const ids = receiver.received.map((delivery) => delivery.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(receiver.received.map((delivery) => delivery.partner).sort()).toEqual(['after-resume', 'before-pause', 'while-paused']);
      // The resumed instance does not take the lease back while the other renews it.
      expect(first.stdout().split(TAKEN).length - 1).toBe(1);
    }, 90_000);
  });
});
