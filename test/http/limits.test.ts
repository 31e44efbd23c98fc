import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { effectiveLimits, parseRate, setLimits } from '../../src/domain/operations/limits.js';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { MemoryLimiter, policyOf } from '../../src/http/counters/limits.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { bearer, buildTestApp, seedPartner, startUpstream, UUID, who, type TestApp, type TestUpstream } from './support.js';

const DAY_MS = 86_400_000;

describe('the limiter (GCRA with a daily quota)', () => {
  it('allows the burst at once, then one request per interval; a refusal consumes nothing', () => {
    let now = 1_000_000;
    const limiter = new MemoryLimiter({ now: () => now });
    const policy = policyOf(effectiveLimits({ rate: parseRate('10/s'), burst: 3, dailyQuota: null }, { rate: null, burst: null })!);
    expect([1, 2, 3].map(() => limiter.take('p', policy).remaining)).toEqual([2, 1, 0]);
    const refused = limiter.take('p', policy);
    expect(refused).toMatchObject({ allowed: false, reason: 'rate', remaining: 0, limit: 3, retryAfterSeconds: 1 });
    now += 99;
    expect(limiter.take('p', policy).allowed).toBe(false);
    now += 1;
    expect(limiter.take('p', policy).allowed).toBe(true);
    expect(limiter.take('p', policy).allowed).toBe(false);
    // Another key has its own bucket.
    expect(limiter.take('q', policy).allowed).toBe(true);
  });

  it('accepts rate x time + burst over a long run, never more', () => {
    let now = 5_000_000;
    const limiter = new MemoryLimiter({ now: () => now });
    const policy = policyOf(effectiveLimits({ rate: parseRate('50/s'), burst: null, dailyQuota: null }, { rate: null, burst: null })!);
    let accepted = 0;
    // 3x the rate for 10 s, evenly.
    for (let i = 0; i < 1500; i++) {
      if (limiter.take('p', policy).allowed) accepted++;
      now += 1000 / 150;
    }
    expect(accepted).toBeLessThanOrEqual(50 * 10 + 50);
    expect(accepted).toBeGreaterThanOrEqual(50 * 10);
  });

  it('applies a new limit at once, in both directions: the state kept for the old one does not outlive it', () => {
    let now = 7_000_000;
    const limiter = new MemoryLimiter({ now: () => now });
    const of = (rate: string, burst: number) => policyOf(effectiveLimits({ rate: parseRate(rate), burst, dailyQuota: null }, { rate: null, burst: null })!);
    const slow = of('1/h', 1);
    const fast = of('100/s', 100);
    expect(limiter.take('p', slow).allowed).toBe(true);
    expect(limiter.take('p', slow)).toMatchObject({ allowed: false, retryAfterSeconds: 3600 });
    // Raised: at worst the empty bucket of the new limit, refilled at its own rate (not an hour of the old one).
    now += 10;
    expect(limiter.take('p', fast)).toMatchObject({ limit: 100, retryAfterSeconds: 1 });
    now += 2_500;
    const raised = [...Array(100)].map(() => limiter.take('p', fast));
    expect(raised.every((d) => d.allowed)).toBe(true);
    expect(limiter.take('p', fast)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    // Lowered again: the new limit applies to the next request, no more than its burst passes.
    now += 2_000;
    expect(limiter.take('p', slow).allowed).toBe(true);
    expect(limiter.take('p', slow)).toMatchObject({ allowed: false, limit: 1, retryAfterSeconds: 3600 });
  });

  it('counts a daily quota from 00:00 UTC', () => {
    let now = 20 * DAY_MS + DAY_MS - 5_000;
    const limiter = new MemoryLimiter({ now: () => now });
    const policy = policyOf(effectiveLimits({ rate: null, burst: null, dailyQuota: 2 }, { rate: null, burst: null })!);
    expect(limiter.take('p', policy)).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
    expect(limiter.take('p', policy)).toMatchObject({ allowed: true, remaining: 0 });
    expect(limiter.take('p', policy)).toMatchObject({ allowed: false, reason: 'quota', retryAfterSeconds: 5, resetSeconds: 5 });
    now += 5_000;
    expect(limiter.take('p', policy)).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('resolves own values over the defaults, the burst following its rate', () => {
    const defaults = { rate: parseRate('50/s'), burst: 200 };
    expect(effectiveLimits({ rate: null, burst: null, dailyQuota: null }, { rate: null, burst: null })).toBeNull();
    expect(effectiveLimits({ rate: null, burst: null, dailyQuota: null }, defaults)).toEqual({ rate: parseRate('50/s'), burst: 200, dailyQuota: null });
    expect(effectiveLimits({ rate: parseRate('5/m'), burst: null, dailyQuota: null }, defaults)).toEqual({ rate: parseRate('5/m'), burst: 5, dailyQuota: null });
    expect(effectiveLimits({ rate: null, burst: 7, dailyQuota: 100 }, defaults)).toEqual({ rate: parseRate('50/s'), burst: 7, dailyQuota: 100 });
    expect(effectiveLimits({ rate: null, burst: null, dailyQuota: null }, { rate: parseRate('3/s'), burst: null })!.burst).toBe(3);
  });
});

describe.each(BACKENDS)('limits of data requests, one instance (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    let now = 10 * DAY_MS + 3_600_000;
    const clock = { now: () => now };

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(
        backend,
        db,
        { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_DEFAULT_RATE_LIMIT: '5/s', PUBLIC_API_DEFAULT_BURST: '3' },
        { clock },
      );
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    const tokenOf = async (partner: { partnerId: string; keyPairId: string }) =>
      // Minted on the server's (test) clock: the verifier reads that clock too.
      (await mintToken(t.keys, { partnerId: partner.partnerId, keyPairId: partner.keyPairId }, undefined, clock)).accessToken;
    const get = (token: string, company = 'acme') =>
      t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${company}`, headers: bearer(token) });

    it('applies the server default: RateLimit-* headers on each answer, then 429 rate_limited with Retry-After', async () => {
      const partner = await seedPartner(db);
      const token = await tokenOf(partner);
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push(await get(token));
      expect(answers.slice(0, 3).map((a) => a.statusCode)).toEqual([200, 200, 200]);
      expect(answers.slice(0, 3).map((a) => a.headers['ratelimit-remaining'])).toEqual(['2', '1', '0']);
      expect(answers[0]!.headers['ratelimit-limit']).toBe('3');
      expect(answers[0]!.headers['ratelimit-reset']).toBe('1');
      const refused = answers[3]!;
      expect(refused.statusCode).toBe(429);
      const body = refused.json() as { error: { code: string; request_id: string } };
      expect(body.error.code).toBe('rate_limited');
      expect(body.error.request_id).toMatch(UUID);
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.headers['ratelimit-remaining']).toBe('0');
      // The refused request never reached the engine.
      expect(upstream.received.filter((r) => r.headers['x-partner-id'] === partner.partnerId)).toHaveLength(3);
      now += 200;
      expect((await get(token)).statusCode).toBe(200);
    });

    it('counts a request refused for another reason too, but not an unauthenticated one', async () => {
      const partner = await seedPartner(db);
      const token = await tokenOf(partner);
      expect((await get(token, 'not-mapped')).statusCode).toBe(404);
      for (let i = 0; i < 3; i++) await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme' });
      expect((await get(token)).headers['ratelimit-remaining']).toBe('1');
      const anonymous = await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme' });
      expect(anonymous.statusCode).toBe(401);
      expect(anonymous.headers['ratelimit-limit']).toBeUndefined();
    });

    it("applies a partner's own limits within the staleness bound, and the defaults again after --clear", async () => {
      const partner = await seedPartner(db);
      const token = await tokenOf(partner);
      expect((await get(token)).headers['ratelimit-limit']).toBe('3');
      await setLimits(db, who, partner.partnerId, { rate: parseRate('100/m'), burst: 40, dailyQuota: 1000 });
      // No test hook: the server notices the change through its revision poll, within the staleness bound.
      const started = Date.now();
      let seen: unknown;
      while (Date.now() - started < 3_000) {
        seen = (await get(token)).headers['ratelimit-limit'];
        if (seen === '40') break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(seen).toBe('40');
      expect(Date.now() - started).toBeLessThan(t.access.stalenessBoundMs + 500);
      await setLimits(db, who, partner.partnerId, { clear: true });
      await t.access.refresh();
      expect((await get(token)).headers['ratelimit-limit']).toBe('3');
    });

    it('refuses once a daily quota is used up, until 00:00 UTC', async () => {
      const partner = await seedPartner(db);
      const token = await tokenOf(partner);
      await setLimits(db, who, partner.partnerId, { rate: parseRate('1000/s'), dailyQuota: 2 });
      await t.access.refresh();
      expect((await get(token)).headers['ratelimit-limit']).toBe('2');
      expect((await get(token)).statusCode).toBe(200);
      const refused = await get(token);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ error: { code: 'rate_limited' } });
      expect(Number(refused.headers['retry-after'])).toBe(Math.ceil((DAY_MS - (now % DAY_MS)) / 1000));
    });

    it('sends no RateLimit headers when no limit applies', async () => {
      const plain = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
      try {
        const partner = await seedPartner(db);
        const response = await plain.inject({
          method: 'GET',
          url: '/public/v1/prices?company_id=acme',
          headers: bearer((await mintToken(plain.keys, { partnerId: partner.partnerId, keyPairId: partner.keyPairId })).accessToken),
        });
        expect(response.statusCode).toBe(200);
        expect(response.headers['ratelimit-limit']).toBeUndefined();
      } finally {
        await plain.close();
      }
    });

    it('refuses a bad default at startup, with the variable named', async () => {
      await expect(buildTestApp(backend, db, { PUBLIC_API_DEFAULT_RATE_LIMIT: '50/week' })).rejects.toThrow(/PUBLIC_API_DEFAULT_RATE_LIMIT/);
    });
  });
});
