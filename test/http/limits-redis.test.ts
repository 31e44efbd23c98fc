import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseRate, effectiveLimits } from '../../src/domain/operations/limits.js';
import { policyOf, RedisLimiter } from '../../src/http/counters/limits.js';
import { SharedRedis } from '../../src/http/counters/redis.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { bearer, startUpstream, type TestUpstream } from './support.js';

const redisUrl = inject('redisUrl');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    const value = await probe();
    if (value !== undefined) return value;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A redis-server of this test's own on a loopback port (never the shared one on 6379). */
async function startOwnRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await until('redis-server to answer', async () => {
    const client = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.ping()) === 'PONG' ? true : undefined;
    } catch {
      return undefined;
    } finally {
      client.disconnect();
    }
  });
  return child;
}

async function stopOwnRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

function tokenFrom(server: Served, keys: { access_key: string; secret_key: string }): Promise<string> {
  return fetch(`${server.url}/public/v1/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
  }).then(async (response) => {
    expect(response.status).toBe(200);
    return ((await response.json()) as { access_token: string }).access_token;
  });
}

describe.skipIf(!redisUrl)('the limiter in Redis', () => {
  it('two clients share one bucket: the burst once, then refusals with the wait', async () => {
    const clock = { now: () => Date.now() };
    const a = new SharedRedis(redisUrl!, undefined, clock);
    const b = new SharedRedis(redisUrl!, undefined, clock);
    try {
      // Commands fail at once while not connected (no offline queue): wait for both connections.
      await until('both connections', async () => (a.available && b.available ? true : undefined));
      const key = `test:${process.pid}:${Math.random().toString(36).slice(2)}`;
      const policy = policyOf(effectiveLimits({ rate: parseRate('10/m'), burst: 3, dailyQuota: null }, { rate: null, burst: null })!);
      const [la, lb] = [new RedisLimiter(a, 'partnerctl:test:'), new RedisLimiter(b, 'partnerctl:test:')];
      const verdicts = [await la.take(key, policy), await lb.take(key, policy), await la.take(key, policy), await lb.take(key, policy)];
      expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, false]);
      expect(verdicts.map((v) => v.remaining)).toEqual([2, 1, 0, 0]);
      expect(verdicts[3]).toMatchObject({ reason: 'rate', limit: 3 });
      expect(verdicts[3]!.retryAfterSeconds).toBeGreaterThanOrEqual(5);
      expect(verdicts[3]!.retryAfterSeconds).toBeLessThanOrEqual(6);
      await a.client.del(`partnerctl:test:${key}`);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe.skipIf(!redisUrl)('a new limit in Redis', () => {
  it('takes effect at once in both directions: the bucket kept for the old limit does not outlive it', async () => {
    const shared = new SharedRedis(redisUrl!, undefined, { now: () => Date.now() });
    try {
      await until('the connection', async () => (shared.available ? true : undefined));
      const key = `test:${process.pid}:${Math.random().toString(36).slice(2)}`;
      const of = (rate: string, burst: number) => policyOf(effectiveLimits({ rate: parseRate(rate), burst, dailyQuota: null }, { rate: null, burst: null })!);
      const [slow, fast] = [of('1/h', 1), of('100/s', 100)];
      const limiter = new RedisLimiter(shared, 'partnerctl:test:');
      expect((await limiter.take(key, slow)).allowed).toBe(true);
      expect(await limiter.take(key, slow)).toMatchObject({ allowed: false, retryAfterSeconds: 3600 });
      await sleep(20);
      expect(await limiter.take(key, fast)).toMatchObject({ limit: 100, retryAfterSeconds: 1 });
      await sleep(1_100);
      // Sent together (Redis runs them back to back): each take is 10 ms of the bucket, and 50 round trips one
      // after the other on a loaded machine could take longer than the bucket refills, leaving nothing for the
      // lowered limit below to meet.
      const raised = await Promise.all(Array.from({ length: 50 }, () => limiter.take(key, fast)));
      expect(raised.filter((d) => !d.allowed)).toEqual([]);
      expect((await limiter.take(key, slow)).allowed).toBe(false);
      await sleep(1_100);
      expect((await limiter.take(key, slow)).allowed).toBe(true);
      expect(await limiter.take(key, slow)).toMatchObject({ allowed: false, limit: 1, retryAfterSeconds: 3600 });
      await shared.client.del(`partnerctl:test:${key}`);
    } finally {
      await shared.close();
    }
  });
});

describe.skipIf(!redisUrl)('Redis down and back (a redis-server of the test\'s own)', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let redisPort: number;
  let redis: ChildProcess | undefined;
  let server: Served | undefined;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    upstream = await startUpstream();
    redisPort = await freePort();
    redis = await startOwnRedis(redisPort);
  });
  afterAll(async () => {
    if (server) {
      await server.stop();
    }
    if (redis) await stopOwnRedis(redis);
    await upstream?.close();
    await backend?.dispose();
  });

  it('keeps serving on per-instance counters, stays ready with "redis":"unavailable", says so in the metrics and the log, and shares counters again once Redis is back', async () => {
    const cli = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json<T>();
    };
    const partner = await cli('create-partner', '--name', 'Steady');
    const keys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Steady');
    await cli('map-company', 'Steady', '--company', 'acme');
    await cli('set-limits', 'Steady', '--rate', '100/m', '--burst', '50');
    const redisAt = `redis://127.0.0.1:${redisPort}`;
    server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, REDIS_URL: redisAt }, ['--metrics-port', '0']);
    const metricsUrl = await until('the metrics line', async () => /metrics on (http:\/\/\S+)\n/.exec(server!.stderr())?.[1]);
    const token = await tokenFrom(server, keys);
    const get = () => fetch(`${server!.url}/public/v1/prices?company_id=acme`, { headers: bearer(token) });
    const ready = async () => {
      const response = await fetch(`${server!.url}/readyz`);
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    const metric = async (name: string) => {
      const text = await (await fetch(metricsUrl)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? undefined : Number(line.slice(name.length + 1));
    };
    const bucketKey = `partnerctl:limit:${partner.partner_id}`;
    const own = new Redis(redisPort, '127.0.0.1', { maxRetriesPerRequest: 0, lazyConnect: true });
    own.on('error', () => {});
    try {
      expect(await ready()).toMatchObject({ status: 200, body: { status: 'ok', database: 'sqlite', redis: 'ok' } });
      expect((await get()).headers.get('ratelimit-remaining')).toBe('49');
      await own.connect();
      // The counter is in Redis.
      expect(await own.exists(bucketKey)).toBe(1);
      expect(await metric('partnerctl_redis_up')).toBe(1);
      own.disconnect();

      await stopOwnRedis(redis!);
      redis = undefined;
      await until('the server to notice', async () => ((await ready()).body.redis === 'unavailable' ? true : undefined));
      // Served on this instance's own counters (fail open), still with its headers; ready all along.
      for (let i = 0; i < 3; i++) {
        const response = await get();
        expect(response.status).toBe(200);
        expect(response.headers.get('ratelimit-limit')).toBe('50');
      }
      expect(await ready()).toMatchObject({ status: 200, body: { status: 'ok', database: 'sqlite', redis: 'unavailable' } });
      expect(await metric('partnerctl_redis_up')).toBe(0);
      expect(await metric('partnerctl_redis_fallbacks_total')).toBeGreaterThan(0);
      expect(await metric('partnerctl_http_requests_total{route_class="data",status_class="2xx"}')).toBe(4);
      // Said once, not once per request.
      await until('the outage in the log', async () => (server!.stdout().includes('redis unavailable') ? true : undefined));
      expect(server.stdout().match(/redis unavailable/g)).toHaveLength(1);

      // Back on the same port: shared counters again, without a restart.
      redis = await startOwnRedis(redisPort);
      await until('the server to reconnect', async () => ((await ready()).body.redis === 'ok' ? true : undefined));
      expect(await metric('partnerctl_redis_up')).toBe(1);
      expect((await get()).status).toBe(200);
      await own.connect();
      expect(await own.exists(bucketKey)).toBe(1);
      await until('the reconnection in the log', async () => (server!.stdout().includes('redis available again') ? true : undefined));
    } finally {
      own.disconnect();
    }
  }, 60_000);
});

describe.skipIf(!redisUrl)('a hung Redis (a redis-server of the test\'s own, frozen with SIGSTOP)', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let redis: ChildProcess | undefined;
  let server: Served | undefined;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    upstream = await startUpstream();
    redis = await startOwnRedis(await freePort());
  });
  afterAll(async () => {
    if (redis && redis.exitCode === null) redis.kill('SIGCONT');
    if (server) {
      await server.stop();
    }
    if (redis) await stopOwnRedis(redis);
    await upstream?.close();
    await backend?.dispose();
  });

  it('is reported as it is used: "redis":"unavailable" and partnerctl_redis_up 0 while frozen, ok and 1 once it answers again', async () => {
    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json<Record<string, string>>();
    };
    await cli('create-partner', '--name', 'Frozen');
    const keys = await cli('issue-keys', 'Frozen');
    await cli('map-company', 'Frozen', '--company', 'acme');
    await cli('set-limits', 'Frozen', '--rate', '100/m', '--burst', '50');
    const port = (redis!.spawnargs[redis!.spawnargs.indexOf('--port') + 1])!;
    server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, REDIS_URL: `redis://127.0.0.1:${port}` }, ['--metrics-port', '0']);
    const metricsUrl = await until('the metrics line', async () => /metrics on (http:\/\/\S+)\n/.exec(server!.stderr())?.[1]);
    const token = await tokenFrom(server, keys as { access_key: string; secret_key: string });
    const get = () => fetch(`${server!.url}/public/v1/prices?company_id=acme`, { headers: bearer(token) });
    const redisState = async () => ((await (await fetch(`${server!.url}/readyz`)).json()) as { redis?: string }).redis;
    const up = async () => {
      const line = (await (await fetch(metricsUrl)).text()).split('\n').find((l) => l.startsWith('partnerctl_redis_up '));
      return line === undefined ? undefined : Number(line.split(' ')[1]);
    };
    await until('redis to be ready', async () => ((await redisState()) === 'ok' ? true : undefined));
    expect((await get()).status).toBe(200);
    expect(await up()).toBe(1);

    redis!.kill('SIGSTOP');
    // Served on local counters (fail open), and said so by readiness and the metric.
    for (let i = 0; i < 3; i++) expect((await get()).status).toBe(200);
    await until('readiness to say unavailable', async () => ((await redisState()) === 'unavailable' ? true : undefined), 5_000);
    expect(await up()).toBe(0);
    // While it stays frozen, requests do not wait on it and the report does not flip back.
    const started = Date.now();
    for (let i = 0; i < 5; i++) expect((await get()).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_000);
    await sleep(1_500);
    expect(await redisState()).toBe('unavailable');
    expect(await up()).toBe(0);

    redis!.kill('SIGCONT');
    await until('readiness to say ok again', async () => ((await redisState()) === 'ok' ? true : undefined), 5_000);
    expect(await up()).toBe(1);
    expect((await get()).status).toBe(200);
  }, 60_000);
});

describe.skipIf(!redisUrl)("the token endpoint's throttles shared by two instances (a redis-server of the test's own)", () => {
  let backend: TestBackend;
  let redis: ChildProcess | undefined;
  let instances: Served[] = [];

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    const port = await freePort();
    redis = await startOwnRedis(port);
    const created = await runCli(['--json', 'create-partner', '--name', 'Throttled'], backend.env);
    expect(created.code, created.stderr).toBe(0);
    const env = { ...backend.env, REDIS_URL: `redis://127.0.0.1:${port}`, PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '3', PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0' };
    instances = await Promise.all([serveInProcess(env), serveInProcess(env)]);
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.stop()));
    if (redis) await stopOwnRedis(redis);
    await backend?.dispose();
  });

  it('counts one address once for the cluster: the fourth exchange is refused, whichever instance gets it', async () => {
    for (const instance of instances) {
      await until('redis on both', async () => (((await (await fetch(`${instance.url}/readyz`)).json()) as { redis?: string }).redis === 'ok' ? true : undefined));
    }
    const attempt = (instance: Served) =>
      fetch(`${instance.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: 'pk_unknown', secret_key: 'nope' }),
      });
    const [a, b] = instances as [Served, Served];
    const statuses = [(await attempt(a)).status, (await attempt(b)).status, (await attempt(a)).status];
    expect(statuses.every((status) => status !== 429)).toBe(true);
    const refused = await attempt(b);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/);
    expect((await attempt(a)).status).toBe(429);
  });
});
