// Issue 32: through a database outage, data requests are decided from the last confirmed state for the
// staleness budget, tokens are not minted, readiness stays useful, receipts name the cut instance, and
// coming back applies what changed within 1 s. Real binary, real PostgreSQL, a TCP relay between the server
// and the database that the test cuts and restores (the test's own CLI reaches the database directly).
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it, type TestContext, vi } from 'vitest';
import { backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { TcpRelay, type RelayMode } from '../support/relay.js';
import { serve, type Served } from '../support/serve.js';
import { cliOk, exchange, provision, tokenFor } from '../hardening/support.js';
import { startUpstream, type TestUpstream } from './support.js';

/** The budget the servers here run with: short, so that a test sees it spent. */
// Long enough that the steps before the receipt (an exchange that may wait out its 2 s query bound, a CLI
// run with --wait 1s, probes) end well inside it on a loaded machine.
const BUDGET_MS = 12_000;
/** What the issue allows a single answer during the cut, in either mode. */
const ANSWER_WITHIN_MS = 2_000;

interface Readiness {
  status: string;
  database: string;
  serving_from_revision?: number;
  state_age_s?: number;
  serving_until?: string;
}

interface ReceiptJson {
  receipt: {
    confirmed: { instance_id: string }[];
    unconfirmed: { instance_id: string; last_seen_at: string; serving_until: string | null }[];
  };
}

function instanceIdOf(server: Served): string {
  return /, instance (srv_[0-9a-f]{16})\n/.exec(server.stderr())![1]!;
}

/** The answer's status and, for an error, its code; with how long it took. */
async function timed(url: string, init: RequestInit = {}): Promise<{ status: number; code: string | null; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  const text = await response.text();
  const ms = performance.now() - started;
  const code = response.status >= 400 ? ((JSON.parse(text) as { error: { code: string } }).error.code ?? null) : null;
  return { status: response.status, code, ms };
}

/** One outage's world: a database of its own, a relay to it, an upstream, and the servers started through it. */
interface Outage {
  backend: TestBackend;
  relay: TcpRelay;
  /** The test's own connection to the database, past the relay. */
  direct: pg.Client;
  /** `partnerctl serve` through the relay, with metrics. */
  start(budget: string): Promise<{ server: Served; metricsUrl: string }>;
}

/**
 * A world for one test, torn down when it finishes: the relay restored (a failed test leaves no cut behind),
 * its servers stopped, its database dropped. Each test has a database of its own because a receipt waits for
 * every instance registered on its database, so no test sees another's servers. The teardown is the test's
 * own (its context's onTestFinished).
 */
async function outage({ onTestFinished }: TestContext): Promise<Outage> {
  const backend = await createBackend('postgresql', { migrated: true });
  const servers: Served[] = [];
  let upstream: TestUpstream | undefined;
  let relay: TcpRelay | undefined;
  let direct: pg.Client | undefined;
  onTestFinished(async () => {
    relay?.set('forward');
    for (const server of servers) {
      if (server.child.exitCode !== null || server.child.signalCode !== null) continue;
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await direct?.end();
    await relay?.close();
    await upstream?.close();
    await backend.dispose();
  });
  upstream = await startUpstream();
  const target = new URL(backend.url);
  relay = await TcpRelay.start(target.hostname, Number(target.port || 5432));
  direct = new pg.Client({ connectionString: backend.url });
  await direct.connect();
  const through = relay;
  const upstreamUrl = upstream.url;
  return {
    backend,
    relay,
    direct,
    async start(budget) {
      const server = await serve(
        { ...backend.env, DATABASE_URL: TcpRelay.through(backend.url, through), PUBLIC_API_UPSTREAM_URL: upstreamUrl, PUBLIC_API_STALE_BUDGET: budget },
        ['--metrics-port', '0'],
      );
      servers.push(server);
      // The metrics line follows the listening line.
      const metricsUrl = await vi.waitFor(() => /partnerctl serve: metrics on (http:\/\/\S+)\n/.exec(server.stderr())![1]!, { timeout: 5_000 });
      return { server, metricsUrl };
    },
  };
}

// One test at a time: side by side (each in its own world) took the file from 67 s to 24 s, but under load a
// server saw a second, spurious outage (a read past its bound) and the logged outage lines doubled.
describe.skipIf(!backendAvailable('postgresql'))('postgresql: through a database outage', () => {
  const data = (server: Served, token: string) =>
    timed(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });

  async function accepted(direct: pg.Client, partnerId: string): Promise<number> {
    const { rows } = await direct.query<{ sum: string | null }>('SELECT SUM(accepted) AS sum FROM usage_hours WHERE partner_id = $1', [partnerId]);
    return Number(rows[0]!.sum ?? 0);
  }

  function metric(text: string, name: string): number {
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)![1]);
  }

  it.for(['blackhole', 'refuse'] as RelayMode[])(
    'relay cut (%s): existing tokens 200 for the budget then 503, exchanges 503, /readyz degraded then 503; a revocation committed meanwhile is named in the receipt and refused within 1 s of restore',
    { timeout: 90_000 },
    async (mode, context) => {
      const { backend, relay, direct, start } = await outage(context);
      const { server, metricsUrl } = await start(`${BUDGET_MS / 1000}s`);
      const id = instanceIdOf(server);
      const partner = await provision(backend, `outage-${mode}`, ['acme']);
      const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
      expect((await data(server, token)).status).toBe(200);
      // The instance has written a heartbeat with its budget, at the current revision.
      await vi.waitFor(
        async () => {
          const { instances } = await cliOk<{ instances: { instance_id: string; stale_budget_ms: number; behind: boolean }[] }>(backend, 'instances');
          expect(instances.find((row) => row.instance_id === id)).toMatchObject({ stale_budget_ms: BUDGET_MS, behind: false });
        },
        { timeout: 5_000 },
      );
      const usageBefore = await accepted(direct, partner.partnerId);

      relay.set(mode);
      const cutAt = performance.now();
      let servedDuringCut = 0;
      /** Answered past the 1 s staleness bound: from unconfirmed state. */
      let servedUnconfirmed = 0;
      // Past the 1 s staleness bound and well inside the budget: answered from the last confirmed state.
      while (performance.now() - cutAt < 2_500) {
        const sentAt = performance.now();
        const answer = await data(server, token);
        expect(answer.status).toBe(200);
        expect(answer.ms).toBeLessThan(ANSWER_WITHIN_MS);
        servedDuringCut++;
        if (sentAt - cutAt > 1_000) servedUnconfirmed++;
        await sleep(100);
      }
      const refused = await exchange(server.url, partner.accessKey, partner.secretKey);
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
      const ready = await timed(`${server.url}/readyz`);
      expect([ready.status, ready.ms < ANSWER_WITHIN_MS]).toEqual([200, true]);
      const readiness = (await (await fetch(`${server.url}/readyz`)).json()) as Readiness;
      expect(readiness).toMatchObject({ status: 'degraded', database: 'unreachable', serving_from_revision: expect.any(Number) });
      expect(readiness.state_age_s).toBeGreaterThan(1);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      const metrics = await (await fetch(metricsUrl)).text();
      expect(metric(metrics, 'partnerctl_serving_stale')).toBe(1);
      expect(metric(metrics, 'partnerctl_state_age_seconds')).toBeGreaterThan(1);
      expect(metric(metrics, 'partnerctl_requests_unconfirmed_total')).toBeGreaterThan(0);

      // The operator's CLI reaches the database: the revocation commits, and the receipt names the cut
      // instance and the instant until which it may still answer from what it last confirmed.
      const revoke = await runCli(['--json', '--yes', 'revoke-keys', partner.partnerId, '--wait', '1s'], backend.env);
      expect(revoke.code, revoke.stderr).toBe(6);
      const { receipt } = revoke.json<ReceiptJson>();
      expect(receipt.unconfirmed.map((row) => row.instance_id)).toEqual([id]);
      const until = receipt.unconfirmed[0]!.serving_until!;
      expect(Date.parse(until) - Date.parse(receipt.unconfirmed[0]!.last_seen_at)).toBe(BUDGET_MS);
      expect(revoke.stderr).toContain(`not_confirmed`);
      expect(revoke.stderr).toContain(`${id} (`);
      expect(revoke.stderr).toContain(`may serve from its last state until ${until}`);
      // As the receipt says: still served from the last confirmed state, until then.
      expect(Date.parse(until)).toBeGreaterThan(Date.now() + 500);
      expect((await data(server, token)).status).toBe(200);
      servedDuringCut++;
      servedUnconfirmed++;

      // The budget spent: 503, within the bound, and not ready.
      await sleep(Math.max(0, Date.parse(until) - Date.now() + 300));
      for (let i = 0; i < 3; i++) {
        const answer = await data(server, token);
        expect([answer.status, answer.code]).toEqual([503, 'database_unavailable']);
        expect(answer.ms).toBeLessThan(ANSWER_WITHIN_MS);
      }
      const notReady = await timed(`${server.url}/readyz`);
      expect([notReady.status, notReady.ms < ANSWER_WITHIN_MS]).toEqual([503, true]);

      // Back: the revision is read again before anything is trusted, and the revocation holds within the 1 s
      // staleness bound, plus the gate's 1 s wait for the read the cut left in flight (docs/server.md: "the
      // gate never waits past 1 s"; that read is answered when the held bytes go through).
      // A request is decided between its sending and its answer, and the answer's time is this busy test
      // process's: so every request sent past the bound must be refused, and one sent before may be anything.
      relay.set('forward');
      const restoredAt = performance.now();
      const RESTORED_WITHIN_MS = 1_000 + 1_000;
      let sentAfter = 0;
      let answer = await data(server, token);
      while (answer.status !== 401) {
        expect(answer.status === 200 || answer.status === 503, `answered ${answer.status} after restore`).toBe(true);
        expect(sentAfter, `answered ${answer.status}, not refused, to a request sent this long after restore`).toBeLessThan(RESTORED_WITHIN_MS);
        await sleep(20);
        sentAfter = performance.now() - restoredAt;
        answer = await data(server, token);
      }
      expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(401);
      await vi.waitFor(async () => expect((await timed(`${server.url}/readyz`)).status).toBe(200), { timeout: 5_000 });

      // The outage's usage counts reach the database (the next flush, every 10 s).
      await vi.waitFor(async () => expect(await accepted(direct, partner.partnerId)).toBeGreaterThanOrEqual(usageBefore + servedDuringCut), {
        timeout: 15_000,
        interval: 250,
      });
      // The outage's start and end, with the requests served from unconfirmed state (lines reach the pipe in
      // batches, up to 250 ms after they are written).
      const outageLines = () =>
        server
          .stdout()
          .split('\n')
          .filter((line) => line.includes('"msg":"DATABASE OUTAGE started') || line.includes('"msg":"database outage ended'));
      const logged = await vi.waitFor(
        () => {
          expect(outageLines()).toHaveLength(2);
          return outageLines();
        },
        { timeout: 2_000 },
      );
      const ended = JSON.parse(logged[1]!) as { since: string; ended_at: string; served_unconfirmed: number };
      expect(ended.served_unconfirmed).toBeGreaterThanOrEqual(servedUnconfirmed);
      expect(servedUnconfirmed).toBeGreaterThan(5);
      expect(Date.parse(ended.ended_at)).toBeGreaterThan(Date.parse(ended.since));
    },
  );

  it('PUBLIC_API_STALE_BUDGET=0 is today: 503 past the 1 s bound in either mode, /readyz 503, /healthz 200; SIGTERM during the outage reports the usage it could not write', async (context) => {
    const { backend, relay, start } = await outage(context);
    const { server } = await start('0');
    const partner = await provision(backend, 'outage-no-budget', ['acme']);
    const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
    expect((await data(server, token)).status).toBe(200);
    for (const mode of ['blackhole', 'refuse'] as RelayMode[]) {
      relay.set(mode);
      await sleep(1_300);
      for (let i = 0; i < 3; i++) {
        const answer = await data(server, token);
        expect([answer.status, answer.code, answer.ms < ANSWER_WITHIN_MS]).toEqual([503, 'database_unavailable', true]);
      }
      expect((await timed(`${server.url}/readyz`)).status).toBe(503);
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(503);
      relay.set('forward');
      await vi.waitFor(async () => expect((await data(server, token)).status).toBe(200), { timeout: 5_000 });
    }
    relay.set('refuse');
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    relay.set('forward');
    expect(server.stdout()).toMatch(/usage counts NOT written at shutdown after retrying for 10 s: \d+ requests/);
  }, 60_000);
});
