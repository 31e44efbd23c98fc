// Issue 38.1: every answer that is not a success is on record with its cause (docs/reasons.md), and
// `partnerctl explain` explains it from the request id of the envelope: the engine's failures (with its
// status, its time and the trace id), the database cut by a relay, the edges (413, 404) and the limits (429).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { openDatabase } from '../../src/db/client.js';
import { resolveDatabase } from '../../src/config.js';
import { setLimits } from '../../src/domain/operations/limits.js';
import { parseRate } from '../../src/rates.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { TestClock } from '../support/clock.js';
import { TcpRelay } from '../support/relay.js';
import { bearer, buildTestApp, explained, seedPartner, startUpstream, tokenFor, UUID, who, type TestApp, type TestUpstream } from './support.js';

type Injected = { statusCode: number; body: string; json(): { error: { request_id: string } } };

// The engine runs in this test's process: on a loaded machine it can take a few hundred ms to answer even at
// once, which a shorter timeout would turn into a 504 where an engine 500 or 422 is the subject.
const ENGINE_TIMEOUT_MS = 1_500;

describe.each(BACKENDS)('38.1: every answer that is not a success, on record with its cause (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    const cli = (...args: string[]) => runCli(['--json', '--yes', ...args], backend.env);

    const idOf = (response: Injected, status: number): string => {
      expect(response.statusCode, response.body).toBe(status);
      const id = response.json().error.request_id;
      expect(id).toMatch(UUID);
      return id;
    };
    const explain = (id: string) => explained(backend.env, id);

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_UPSTREAM_TIMEOUT_MS: String(ENGINE_TIMEOUT_MS), PUBLIC_API_BODY_LIMIT_BYTES: '1024' });
    });

    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('38.1: engine 500, engine timeout, engine down, 413, 404, 429: each explained with its cause, who acts, the engine facts', async () => {
      const p = await seedPartner(db, ['acme']);
      const token = await tokenFor(t, p);
      const data = (extra: Record<string, unknown> = {}) => t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: { ...bearer(token), traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }, ...extra });

      upstream.respond = () => ({ status: 500, body: 'stack trace of the engine' });
      const engine500 = idOf(await data(), 500);
      upstream.respond = () => ({ status: 422, body: 'nope' });
      const engine422 = idOf(await data(), 422);
      upstream.respond = () => ({ delayMs: ENGINE_TIMEOUT_MS * 3 });
      const timeout = idOf(await data(), 504);
      upstream.respond = () => ({});
      const tooLarge = idOf(await t.inject({ method: 'POST', url: '/public/v1/prices', headers: { ...bearer(token), 'content-type': 'application/json' }, payload: JSON.stringify({ company_id: 'acme', pad: 'x'.repeat(2_048) }) }), 413);
      const unknownPath = idOf(await t.inject({ method: 'GET', url: '/elsewhere' }), 404);
      const limited = await seedPartner(db, ['acme']);
      await setLimits(db, who, limited.partnerId, { rate: parseRate('1/h', '--rate'), burst: 1 });
      const limitedToken = await tokenFor(t, limited);
      expect((await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(limitedToken) })).statusCode).toBe(200);
      const rateLimited = idOf(await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(limitedToken) }), 429);
      const ok = await data();
      expect(ok.statusCode).toBe(200);
      const okId = ok.headers['x-request-id'] as string;
      // 38.2: ids carry their time (UUIDv7).
      expect(okId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      await upstream.close();
      const down = idOf(await data(), 502);
      expect(await t.services.decisions.flush()).toBe(true);

      const e500 = await explain(engine500);
      expect(e500).toMatchObject({
        request_id: engine500, status: 500, reason: 'engine_error', route: 'data', method: 'GET', path: '/public/v1/prices',
        partner_id: p.partnerId, key_pair_id: p.keyPairId, company_id: 'acme', engine_status: 500,
        trace_id: '0af7651916cd43dd8448eb211c80319c', actor: 'engine_owners', remedy: null,
      });
      expect(e500.engine_ms).toEqual(expect.any(Number));
      expect(e500.explanation).toContain('status 500');
      expect(JSON.stringify(e500)).not.toContain('stack trace');
      expect(await explain(engine422)).toMatchObject({ status: 422, reason: 'engine_refused', engine_status: 422, actor: 'client' });
      const timedOut = await explain(timeout);
      expect(timedOut).toMatchObject({ status: 504, reason: 'engine_timeout', engine_status: null, actor: 'engine_owners', remedy: null });
      expect(timedOut.engine_ms).toBeGreaterThanOrEqual(ENGINE_TIMEOUT_MS - 1);
      expect(await explain(down)).toMatchObject({ status: 502, reason: 'engine_unreachable', engine_status: null, actor: 'engine_owners' });
      expect(await explain(tooLarge)).toMatchObject({ status: 413, reason: 'body_too_large', method: 'POST', partner_id: p.partnerId, actor: 'client' });
      expect(await explain(unknownPath)).toMatchObject({ status: 404, reason: 'not_found', route: 'other', path: '/elsewhere', partner_id: null, actor: 'client' });
      expect(await explain(rateLimited)).toMatchObject({ status: 429, reason: 'rate_limited', partner_id: limited.partnerId, actor: 'client' });
      // A success is not on record outside a recording window: explain says it was not written yet (within 10 s).
      const success = await cli('explain', okId);
      expect(success.code).toBe(3);
      expect(success.stderr).toMatch(/nothing is on record for request \S+ yet/);

      const text = await runCli(['explain', engine500], backend.env);
      expect(text.stdout).toContain('answered 500 (engine_error)');
      expect(text.stdout).toContain('engine:   500 after');
      expect(text.stdout).toContain('trace:    0af7651916cd43dd8448eb211c80319c');
      expect(text.stdout).toContain("Who can act: the recommendation engine's owners");
      // 38.6: requests, newest first, filtered each way.
      const requests = async (...args: string[]) => (await cli('requests', '--since', '1h', ...args)).json().requests as Array<Record<string, unknown>>;
      const fiveXx = await requests(p.partnerId, '--status', '5xx');
      expect(fiveXx.map((r) => r.request_id)).toEqual([down, timeout, engine500]);
      expect(fiveXx[2]).toMatchObject({ status: 500, cause: 'engine_error', engine_status: 500, trace_id: '0af7651916cd43dd8448eb211c80319c', method: 'GET', path: '/public/v1/prices' });
      expect((await requests('--status', '413')).map((r) => r.request_id)).toEqual([tooLarge]);
      expect((await requests('--cause', 'engine_timeout')).map((r) => r.request_id)).toEqual([timeout]);
      expect((await requests(p.partnerId, '--company', 'acme', '--status', '4xx')).map((r) => r.request_id)).toEqual([engine422]);
      expect((await requests('--address', '127.0.0.1', '--limit', '2')).map((r) => r.request_id)).toEqual([down, rateLimited]);
      expect((await requests(limited.partnerId)).map((r) => r.request_id)).toEqual([rateLimited]);
      expect((await cli('requests', '--since', '1h')).json().unrecorded).toEqual({ instance: 0, partner: 0, key_pair: 0, token: 0, address: 0, overflow: 0 });
      const csv = await runCli(['requests', p.partnerId, '--since', '1h', '--cause', 'engine_error', '--csv'], backend.env);
      expect(csv.stdout.trim().split('\n')).toEqual([
        'at,request_id,status,cause,method,path,partner_id,company_id,client_address,key_pair_id,token_id,engine_status,engine_ms,bytes,trace_id,instance_id',
        expect.stringMatching(new RegExp(`^[^,]+,${engine500},500,engine_error,GET,/public/v1/prices,${p.partnerId},acme,127\\.0\\.0\\.1,${p.keyPairId},[^,]+,500,\\d+,[1-9]\\d*,0af7651916cd43dd8448eb211c80319c,srv_[0-9a-f]+$`)),
      ]);
      for (const bad of [['--status', '6xx'], ['--status', 'abc'], ['--cause', 'nope'], ['--limit', '0'], ['--limit', '10001']]) {
        const refused = await cli('requests', ...bad);
        expect(refused.code, bad.join(' ')).toBe(2);
      }
      // The refusals report takes the server's causes as --reason too.
      const byCause = (await cli('refusals', p.partnerId, '--since', '1h', '--reason', 'engine_error')).json();
      expect(byCause.counts).toEqual([{ reason: 'engine_error', refusals: 1, latest_at: expect.any(String) }]);
    });
  });
});

describe.skipIf(!backendAvailable('postgresql'))('38.1: the database cut by a relay (postgresql)', () => {
  let backend: TestBackend;
  let relay: TcpRelay;
  let direct: Database;
  let cut: Database;
  let upstream: TestUpstream;
  const clock = new TestClock(Date.now());
  const apps: TestApp[] = [];

  beforeAll(async () => {
    backend = await createBackend('postgresql');
    direct = await openMigrated(backend);
    const target = new URL(backend.url);
    relay = await TcpRelay.start(target.hostname, Number(target.port || 5432));
    cut = await openDatabase(resolveDatabase(TcpRelay.through(backend.url, relay), {}));
    upstream = await startUpstream();
  });

  afterAll(async () => {
    relay?.set('forward');
    for (const app of apps) await app.close();
    await cut?.close();
    await direct?.close();
    await relay?.close();
    await upstream?.close();
    await backend?.dispose();
  });

  it('38.1: a 503 while the database does not answer is database_unavailable; past the staleness budget, stale_budget_spent', async () => {
    const p = await seedPartner(direct, ['acme']);
    const plain = await buildTestApp(backend, cut, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_STALE_BUDGET: '0' }, { clock });
    apps.push(plain);
    const budgeted = await buildTestApp(backend, cut, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_STALE_BUDGET: '30s' }, { clock });
    apps.push(budgeted);
    const tokenOf = async (t: TestApp) => (await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: p.accessKey, secret_key: p.secretKey } })).json().access_token as string;
    const token = await tokenOf(plain);
    const ask = (t: TestApp) => t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(token) });
    expect((await ask(plain)).statusCode).toBe(200);
    expect((await ask(budgeted)).statusCode).toBe(200);

    relay.set('refuse');
    clock.advance(2_000);
    const unavailable = await ask(plain);
    expect(unavailable.statusCode, unavailable.body).toBe(503);
    expect((await ask(budgeted)).statusCode).toBe(200);
    clock.advance(31_000);
    const spent = await ask(budgeted);
    expect(spent.statusCode, spent.body).toBe(503);
    relay.set('forward');
    expect(await plain.services.decisions.stop()).toBe(true);
    expect(await budgeted.services.decisions.stop()).toBe(true);

    const explain = (id: string) => explained(backend.env, id);
    expect(await explain(unavailable.json().error.request_id)).toMatchObject({ status: 503, reason: 'database_unavailable', actor: 'database_owners', remedy: null });
    expect(await explain(spent.json().error.request_id)).toMatchObject({ status: 503, reason: 'stale_budget_spent', actor: 'database_owners', remedy: null });
  });
});
