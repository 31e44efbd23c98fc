import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli, type CliResult } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';

describe('refusals and exposure recorded by two serve instances on one PostgreSQL database', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let instances: Served[];

    const cli = (...args: string[]) => runCli(['--json', '--yes', ...args], backend.env);
    const ok = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
      const result = await cli(...args);
      expect(result.code, result.stderr).toBe(0);
      return result.json<T>();
    };
    const instanceId = (server: Served) => /instance (srv_[0-9a-f]+)/.exec(server.stderr())![1]!;
    const get = (server: Served, token: string | null, company: string) =>
      fetch(`${server.url}/public/v1/prices?company_id=${company}`, { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
    /** Explained once the instance has written it (within about a second). */
    const explained = async (requestId: string): Promise<Record<string, unknown>> => {
      let result: CliResult | undefined;
      for (let attempt = 0; attempt < 50; attempt++) {
        result = await cli('explain', requestId);
        if (result.code !== 3) break;
        await sleep(200);
      }
      expect(result!.code, result!.stderr).toBe(0);
      return result!.json();
    };

    beforeAll(async () => {
      backend = await createBackend('postgresql', { migrated: true });
      upstream = await startUpstream();
      const env = { ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url };
      instances = await Promise.all([serveInProcess(env), serveInProcess(env)]);
    });

    afterAll(async () => {
      await Promise.all((instances ?? []).map((instance) => instance.stop()));
      await upstream?.close();
      await backend?.dispose();
    });

    it('each instance records its own refusals; explain and refusals read them all; exposure sums both', async () => {
      const [a, b] = instances as [Served, Served];
      await ok('create-partner', '--name', 'Twice');
      const keys = await ok<{ access_key: string; secret_key: string; key_pair_id: string }>('issue-keys', 'Twice');
      await ok('map-company', 'Twice', '--company', 'acme');
      const minted = await fetch(`${a.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
      const token = ((await minted.json()) as { access_token: string }).access_token;
      for (const server of [a, b]) expect((await get(server, token, 'acme')).status).toBe(200);
      expect((await get(b, token, 'acme')).status).toBe(200);

      const refusedOnA = await get(a, token, 'acme-7');
      const refusedOnB = await get(b, null, 'acme');
      expect([refusedOnA.status, refusedOnB.status]).toEqual([404, 401]);
      const idA = ((await refusedOnA.json()) as { error: { request_id: string } }).error.request_id;
      const idB = ((await refusedOnB.json()) as { error: { request_id: string } }).error.request_id;
      expect(refusedOnA.headers.get('x-request-id')).toBe(idA);
      expect(await explained(idA)).toMatchObject({ reason: 'company_not_mapped', instance_id: instanceId(a), company_id: 'acme-7', remedy: 'partnerctl map-company Twice --company acme-7' });
      expect(await explained(idB)).toMatchObject({ reason: 'token_missing', instance_id: instanceId(b), partner_id: null });
      expect(instanceId(a)).not.toBe(instanceId(b));

      const all = await ok<{ latest: { request_id: string }[] }>('refusals', '--since', '1h');
      expect(all.latest.map((d) => d.request_id)).toEqual(expect.arrayContaining([idA, idB]));

      // Stopping writes what each counted: the exposure report sums both instances.
      expect(await Promise.all(instances.map((instance) => instance.stop()))).toEqual([0, 0]);
      const report = await ok<{ companies: unknown[]; addresses: { requests: number }[] }>('exposure', keys.key_pair_id);
      expect(report.companies).toEqual([expect.objectContaining({ company_id: 'acme', requests: 3, accepted: 3 })]);
      expect(report.addresses.map((address) => address.requests)).toEqual([3]);
    });
  });
});
