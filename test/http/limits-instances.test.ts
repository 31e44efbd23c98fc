import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';
import { tokenFor } from '../hardening/support.js';

const REDIS_URL = inject('redisUrl');

type Keys = { access_key: string; secret_key: string };

/** A command in-process: the two spawned servers and Redis are the subject here, not the CLI's process. */
async function cliIn(env: NodeJS.ProcessEnv, ...args: string[]): Promise<Record<string, unknown>> {
  const result = await runCli(['--json', '--yes', ...args], env);
  expect(result.code, result.stderr).toBe(0);
  return result.json<Record<string, unknown>>();
}

/** A token from one instance (tokenFor: a 503 on a loaded machine is taken again). */
function tokenFrom(server: Served, keys: Keys): Promise<string> {
  return tokenFor(server.url, keys.access_key, keys.secret_key);
}

async function get(server: Served, token: string): Promise<Response> {
  const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
  await response.arrayBuffer();
  return response;
}

/** A partner with keys, mapped to acme, with its own limits when given. */
async function partnerWith(env: NodeJS.ProcessEnv, name: string, limits: string[] = []): Promise<{ id: string; keys: Keys }> {
  const created = await cliIn(env, 'create-partner', '--name', name);
  const keys = (await cliIn(env, 'issue-keys', name)) as Keys;
  await cliIn(env, 'map-company', name, '--company', 'acme');
  const id = (created.partner_id ?? created.id) as string;
  if (limits.length > 0) await cliIn(env, 'set-limits', name, ...limits);
  return { id, keys };
}

describe.concurrent.each(BACKENDS)('limits shared through Redis by two serve instances on one database (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider) || !REDIS_URL)('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let instances: [Served, Served];
    let env: NodeJS.ProcessEnv;

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      upstream = await startUpstream();
      // Default rate 4/m: what the bucket refills while a loaded machine answers requests one by one stays out of the counts.
      env = { ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, REDIS_URL: REDIS_URL!, PUBLIC_API_DEFAULT_RATE_LIMIT: '4/m', PUBLIC_API_DEFAULT_BURST: '6' };
      instances = (await Promise.all([serve(env, ['--metrics-port', '0']), serve(env, ['--metrics-port', '0'])])) as [Served, Served];
    }, 60_000);

    /** partnerctl_redis_fallbacks_total summed over both instances: Redis commands that failed or timed out. */
    const fallbacks = async (): Promise<number> => {
      let sum = 0;
      for (const instance of instances) {
        await vi.waitFor(() => expect(instance.stderr()).toMatch(/metrics on http:\/\/\S+\n/), { timeout: 10_000 });
        const url = /metrics on (http:\/\/\S+)\n/.exec(instance.stderr())![1]!;
        const line = (await (await fetch(url)).text()).split('\n').find((l) => l.startsWith('partnerctl_redis_fallbacks_total '));
        sum += Number(line?.split(' ')[1] ?? Number.NaN);
      }
      return sum;
    };

    afterAll(async () => {
      for (const instance of instances ?? []) instance.child.kill('SIGTERM');
      await Promise.all((instances ?? []).map((instance) => instance.exited));
      await upstream?.close();
      await backend?.dispose();
    });

    it('both report Redis in their readiness', async () => {
      for (const instance of instances) {
        // Readiness says degraded while a database probe takes over its 1 s bound (a loaded machine): Redis is
        // reported either way, and the instance is ready again once the database answers within the bound.
        await vi.waitFor(
          async () => {
            const response = await fetch(`${instance.url}/readyz`);
            expect(response.status).toBe(200);
            expect(await response.json()).toMatchObject({ status: 'ok', redis: 'ok' });
          },
          { timeout: 15_000, interval: 250 },
        );
      }
    });

    it('keeps the accuracy promise: 3x the rate for 10 s over both instances', async () => {
      const rate = 20;
      const burst = 20;
      const seconds = 10;
      /** One run of 3x the rate for 10 s by a partner of its own; how many Redis commands fell back meanwhile. */
      const runaway = async (attempt: number) => {
        const { keys } = await partnerWith(env, `Runaway-${provider}-${attempt}`, ['--rate', `${rate}/s`, '--burst', String(burst)]);
        const tokens = [await tokenFrom(instances[0], keys), await tokenFrom(instances[1], keys)];
        // The change must have reached both instances before the run starts.
        await sleep(1_300);
        for (const [i, instance] of instances.entries()) expect((await get(instance, tokens[i]!)).headers.get('ratelimit-limit')).toBe(String(burst));
        await sleep(1_100); // the bucket is whole again
        const fallbacksBefore = await fallbacks();
        const total = 3 * rate * seconds;
        const spacingMs = 1000 / (3 * rate);
        const started = performance.now();
        let lastAnswered = started;
        const answers: Promise<number>[] = [];
        for (let i = 0; i < total; i++) {
          const due = started + i * spacingMs;
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          answers.push(
            get(instances[i % 2]!, tokens[i % 2]!).then((response) => {
              lastAnswered = performance.now();
              return response.status;
            }),
          );
        }
        const statuses = await Promise.all(answers);
        const counts = Object.fromEntries([...new Set(statuses)].map((status) => [status, statuses.filter((s) => s === status).length]));
        // 200 or 429. On a starved machine some answers are neither: the gate could not confirm access within
        // its 1 s bound (503), or the engine, in this test's busy process, did not answer in time (504). Both
        // are documented answers and not this test's subject, and such a run proves nothing about sharing.
        const disturbed = { count: total - (counts[200] ?? 0) - (counts[429] ?? 0), counts: JSON.stringify(counts) };
        // The limit is taken when a request reaches Redis, somewhere between its sending and its answer: a
        // loaded machine stretches that span past the 10 s of sending, and the bucket refills for as long.
        const spanSeconds = Math.max(seconds, (lastAnswered - started) / 1000);
        return { accepted: statuses.filter((status) => status === 200).length, spanSeconds, fellBack: (await fallbacks()) - fallbacksBefore, disturbed };
      };
      // The promise is for a Redis that answers: a command slower than its 250 ms timeout sends the instance
      // to its own counters (fail open, documented) until a PING answers, and a loaded machine can stall
      // Redis that long. Such a run proves nothing about sharing; it is run again (at most three times).
      // Likewise a run with answers other than 200 and 429.
      let run = await runaway(1);
      for (let attempt = 2; attempt <= 3 && (run.fellBack > 0 || run.disturbed.count > 0); attempt++) {
        console.log(`[limits] ${provider}: Redis fell back ${run.fellBack} time(s), answers ${run.disturbed.counts}, during run ${attempt - 1}; again`);
        run = await runaway(attempt);
      }
      expect(run.fellBack, 'Redis commands past their 250 ms timeout in each of three runs').toBe(0);
      expect(run.disturbed.count, `answers neither 200 nor 429 in each of three runs: ${run.disturbed.counts}`).toBe(0);
      expect(run.accepted, `${run.accepted} accepted over ${run.spanSeconds.toFixed(2)} s`).toBeLessThanOrEqual((rate * run.spanSeconds + burst) * 1.05);
      expect(run.accepted).toBeGreaterThanOrEqual(0.8 * rate * seconds);
    }, 120_000);

    it('applies the server defaults to a partner without its own limits, once for both instances', async () => {
      const { keys } = await partnerWith(env, `Defaults-${provider}`);
      const tokens = [await tokenFrom(instances[0], keys), await tokenFrom(instances[1], keys)];
      const answers: Response[] = [];
      for (let i = 0; i < 12; i++) answers.push(await get(instances[i % 2]!, tokens[i % 2]!));
      expect(answers[0]!.headers.get('ratelimit-limit')).toBe('6');
      const accepted = answers.filter((a) => a.status === 200).length;
      // Per-instance counters would accept 6 on each; shared ones 6 (plus what the rate refills meanwhile).
      expect(accepted).toBeGreaterThanOrEqual(6);
      expect(accepted).toBeLessThanOrEqual(8);
      const refused = answers.find((a) => a.status === 429)!;
      expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    });

    it("a partner's own limits override the defaults on both instances, and --clear brings the defaults back", async () => {
      // 2/m: nothing refills while a loaded machine answers the four requests one by one.
      const { keys } = await partnerWith(env, `Own-${provider}`, ['--rate', '2/m', '--burst', '2']);
      const tokens = [await tokenFrom(instances[0], keys), await tokenFrom(instances[1], keys)];
      await sleep(1_300);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const response = await get(instances[i % 2]!, tokens[i % 2]!);
        expect(response.headers.get('ratelimit-limit')).toBe('2');
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
      await cliIn(env, 'set-limits', `Own-${provider}`, '--clear');
      await sleep(1_300);
      for (const [i, instance] of instances.entries()) expect((await get(instance, tokens[i]!)).headers.get('ratelimit-limit')).toBe('6');
    });
  });
});
