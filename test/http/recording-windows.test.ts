// Issue 38, recording windows: `partnerctl record <partner> --for D [--company C]` puts every answer of the
// partner on record, successes included (cause `recorded`), until the window ends or `--stop`; running
// servers learn it through the revision (the access snapshot), and `explain` shows an accepted request inside
// a window with its facts, never one outside.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { bearer, buildTestApp, seedPartner, startUpstream, tokenFor, type TestApp, type TestUpstream } from './support.js';

describe.each(BACKENDS)('38: recording window (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    const cli = (...args: string[]) => runCli(['--json', '--yes', ...args], backend.env);

    /** What each accepted answer's body held, in bytes, by request id. */
    const answeredBytes = new Map<string, number>();
    const accepted = async (token: string, company: string): Promise<string> => {
      const response = await t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${company}`, headers: { ...bearer(token), traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } });
      expect(response.statusCode, response.body).toBe(200);
      answeredBytes.set(response.headers['x-request-id'] as string, response.rawPayload.length);
      return response.headers['x-request-id'] as string;
    };
    /** What the servers learn through the revision (within the staleness bound), learnt now. */
    const learn = () => t.services.access.refresh();

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
    });

    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('38: recording window: an accepted request inside one is explained with its facts, one outside is not; --stop ends it; audited', async () => {
      const p = await seedPartner(db, ['acme', 'beta']);
      const token = await tokenFor(t, p);
      const before = await accepted(token, 'acme');

      const opened = await cli('record', p.partnerId, '--for', '15m');
      expect(opened.code, opened.stderr).toBe(0);
      expect(opened.json()).toMatchObject({ partner_id: p.partnerId, company_id: null, changed: true });
      await learn();
      const inside = await accepted(token, 'acme');
      const listed = (await cli('record', '--list')).json().windows as Array<Record<string, unknown>>;
      expect(listed).toEqual([expect.objectContaining({ partner_id: p.partnerId, company_id: null, opened_by: expect.any(String), from: expect.any(String), until: expect.any(String) })]);

      const stopped = await cli('record', p.partnerId, '--stop');
      expect(stopped.json()).toMatchObject({ stopped: 1, changed: true });
      await learn();
      const after = await accepted(token, 'acme');
      const again = await cli('record', p.partnerId, '--stop');
      expect(again.code, again.stderr).toBe(0);
      expect(again.json()).toMatchObject({ stopped: 0, changed: false });
      expect((await cli('record', '--list')).json().windows).toEqual([]);
      expect(await t.services.decisions.flush()).toBe(true);

      const explained = await cli('explain', inside);
      expect(explained.code, explained.stderr).toBe(0);
      expect(explained.json()).toMatchObject({
        request_id: inside, status: 200, reason: 'recorded', route: 'data', method: 'GET', path: '/public/v1/prices',
        partner_id: p.partnerId, key_pair_id: p.keyPairId, company_id: 'acme', engine_status: 200, trace_id: '0af7651916cd43dd8448eb211c80319c',
      });
      // The answer's size as it was sent (its Content-Length).
      expect(explained.json().bytes).toBe(answeredBytes.get(inside));
      expect(explained.json().bytes).toBeGreaterThan(0);
      expect(explained.json().explanation).toContain('a success (status 200)');
      expect(explained.json()).toMatchObject({ actor: null, remedy: null });
      const text = await runCli(['explain', inside], backend.env);
      expect(text.stdout).toContain('answered 200 (recorded)');
      expect(text.stdout).toContain('engine:   200 after');
      expect(text.stdout).not.toContain('Who can act');
      expect(JSON.stringify(explained.json())).not.toContain(token);
      for (const outside of [before, after]) expect((await cli('explain', outside)).code).toBe(3);
      const requests = (await cli('requests', p.partnerId, '--since', '1h')).json().requests as Array<Record<string, unknown>>;
      expect(requests.map((r) => r.request_id)).toEqual([inside]);
      const refusals = (await cli('refusals', p.partnerId, '--since', '1h')).json();
      expect(JSON.stringify(refusals)).not.toContain(inside);
      expect(refusals.recorded).toBe(0);
      expect((await cli('requests', '--since', '1h', '--cause', 'recorded')).json().requests.map((r: { request_id: string }) => r.request_id)).toEqual([inside]);

      const events = (await cli('audit', p.partnerId)).json().events as Array<{ action: string }>;
      expect(events.filter((e) => e.action.startsWith('recording.')).map((e) => e.action)).toEqual(['recording.stopped', 'recording.started']);
    });

    it('38: recording window: --company narrows it to requests naming that company', async () => {
      const p = await seedPartner(db, ['acme', 'beta']);
      const token = await tokenFor(t, p);
      expect((await cli('record', p.partnerId, '--for', '1h', '--company', 'beta')).json()).toMatchObject({ company_id: 'beta', changed: true });
      await learn();
      const acme = await accepted(token, 'acme');
      const beta = await accepted(token, 'beta');
      expect(await t.services.decisions.flush()).toBe(true);
      expect((await cli('explain', beta)).json()).toMatchObject({ status: 200, reason: 'recorded', company_id: 'beta' });
      expect((await cli('explain', acme)).code).toBe(3);
      await cli('record', p.partnerId, '--stop');
    });

    it('38: recording window: --for over 24 h is refused in one line, exit 2, nothing opened; odd combinations too', async () => {
      const p = await seedPartner(db, ['acme']);
      const long = await runCli(['record', p.partnerId, '--for', '25h'], backend.env);
      expect(long.code).toBe(2);
      expect(long.stderr.trim().split('\n')).toHaveLength(1);
      expect(long.stderr).toContain('--for must be at most 1d');
      expect((await runCli(['record', p.partnerId, '--for', '0m'], backend.env)).code).toBe(2);
      expect((await runCli(['record', p.partnerId, '--stop', '--for', '1h'], backend.env)).code).toBe(2);
      expect((await runCli(['record', p.partnerId, '--stop', '--company', 'acme'], backend.env)).code).toBe(2);
      expect((await runCli(['record', p.partnerId], backend.env)).code).toBe(2);
      const badCompany = await runCli(['record', p.partnerId, '--for', '1h', '--company', 'a b\u0007'], backend.env);
      expect(badCompany.code).toBe(2);
      expect(badCompany.stderr).not.toContain('\u0007');
      expect((await runCli(['record', p.partnerId, '--for', 'soon'], backend.env)).code).toBe(2);
      expect((await runCli(['record', '--list', p.partnerId], backend.env)).code).toBe(2);
      expect((await runCli(['record', 'no-such-partner', '--for', '1h'], backend.env)).code).not.toBe(0);
      expect((await cli('record', '--list')).json().windows.filter((w: { partner_id: string }) => w.partner_id === p.partnerId)).toEqual([]);
      expect((await cli('record', '--for', '24h', p.partnerId)).code).toBe(0);
      await cli('record', p.partnerId, '--stop');
    });
  });
});

describe('38: recording window on two instances of one PostgreSQL database', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let first: Database;
    let second: Database;
    let upstream: TestUpstream;
    let one: TestApp;
    let two: TestApp;

    beforeAll(async () => {
      backend = await createBackend('postgresql');
      first = await openMigrated(backend);
      second = await openMigrated(backend);
      upstream = await startUpstream();
      one = await buildTestApp(backend, first, { PUBLIC_API_UPSTREAM_URL: upstream.url });
      two = await buildTestApp(backend, second, { PUBLIC_API_UPSTREAM_URL: upstream.url });
    });
    afterAll(async () => {
      await one?.close();
      await two?.close();
      await upstream?.close();
      await first?.close();
      await second?.close();
      await backend?.dispose();
    });

    it('38: recording window: both instances record the accepted requests they answer, each explained', async () => {
      expect(one.services.registry.instanceId).not.toBe(two.services.registry.instanceId);
      const p = await seedPartner(first, ['acme']);
      const exchange = await one.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: p.accessKey, secret_key: p.secretKey } });
      const token = exchange.json().access_token as string;
      const ask = async (app: TestApp) => {
        const response = await app.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(token) });
        expect(response.statusCode, response.body).toBe(200);
        return response.headers['x-request-id'] as string;
      };
      // Both have the partner's snapshot before the window opens: the revision, not a miss, must bring it.
      await ask(one);
      await ask(two);
      expect((await runCli(['--json', 'record', p.partnerId, '--for', '10m'], backend.env)).code).toBe(0);
      await Promise.all([one.services.access.refresh(), two.services.access.refresh()]);
      const viaOne = await ask(one);
      const viaTwo = await ask(two);
      expect(await one.services.decisions.flush()).toBe(true);
      expect(await two.services.decisions.flush()).toBe(true);
      const a = (await runCli(['--json', 'explain', viaOne], backend.env)).json();
      const b = (await runCli(['--json', 'explain', viaTwo], backend.env)).json();
      expect(a).toMatchObject({ status: 200, reason: 'recorded', instance_id: one.services.registry.instanceId });
      expect(b).toMatchObject({ status: 200, reason: 'recorded', instance_id: two.services.registry.instanceId });
    });
  });
});
