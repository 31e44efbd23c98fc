import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';
import { exchange, tokenFor } from '../hardening/support.js';

/** Longer than the servers' 1 s staleness bound, so a change must have been seen by then. */
const PAST_STALENESS_BOUND_MS = 1_300;

describe('two serve instances on one PostgreSQL database', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let instances: Served[];

    const cli = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json<T>();
    };
    const tokenFrom = (server: Served, keys: { access_key: string; secret_key: string }) => tokenFor(server.url, keys.access_key, keys.secret_key);
    const dataStatus = async (server: Served, token: string, company: string) =>
      (await fetch(`${server.url}/public/v1/prices?company_id=${company}`, { headers: { authorization: `Bearer ${token}` } })).status;

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

    it('both answer readiness on the shared database', async () => {
      for (const instance of instances) {
        const response = await fetch(`${instance.url}/readyz`);
        expect(response.status).toBe(200);
        expect(await response.json()).toMatchObject({ database: 'postgresql' });
      }
    });

    it('a token minted by one instance is accepted by the other (shared signing-key file)', async () => {
      await cli('create-partner', '--name', 'Shared');
      const keys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Shared');
      await cli('map-company', 'Shared', '--company', 'acme');
      const [a, b] = instances as [Served, Served];
      const token = await tokenFrom(a, keys);
      expect(await dataStatus(b, token, 'acme')).toBe(200);
      expect(await dataStatus(a, token, 'acme')).toBe(200);
    });

    it('honours a rotation, an unmapping and a disabled partner on both instances', async () => {
      await cli('create-partner', '--name', 'Rotating');
      const oldKeys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Rotating');
      await cli('map-company', 'Rotating', '--company', 'acme');
      await cli('map-company', 'Rotating', '--company', 'globex');
      const [a, b] = instances as [Served, Served];
      const oldToken = await tokenFrom(a, oldKeys);
      for (const instance of instances) expect(await dataStatus(instance, oldToken, 'globex')).toBe(200);

      const newKeys = await cli<{ access_key: string; secret_key: string }>('rotate-keys', 'Rotating');
      for (const instance of instances) {
        expect((await exchange(instance.url, oldKeys.access_key, oldKeys.secret_key)).status).toBe(401);
        expect(await dataStatus(instance, oldToken, 'acme')).toBe(200); // lives out its 15 minutes
      }
      const newToken = await tokenFrom(b, newKeys);

      await cli('unmap-company', 'Rotating', '--company', 'globex');
      await sleep(PAST_STALENESS_BOUND_MS);
      for (const instance of instances) {
        expect(await dataStatus(instance, newToken, 'globex')).toBe(404);
        expect(await dataStatus(instance, newToken, 'acme')).toBe(200);
      }

      await cli('rotate-keys', 'Rotating', '--revoke-issued-tokens');
      await sleep(PAST_STALENESS_BOUND_MS);
      for (const instance of instances) expect(await dataStatus(instance, newToken, 'acme')).toBe(401);

      const latestKeys = (await cli('rotate-keys', 'Rotating')) as { access_key: string; secret_key: string };
      const latestToken = await tokenFrom(a, latestKeys);
      await cli('disable-partner', 'Rotating');
      await sleep(PAST_STALENESS_BOUND_MS);
      for (const instance of instances) {
        expect(await dataStatus(instance, latestToken, 'acme')).toBe(401);
        expect((await exchange(instance.url, latestKeys.access_key, latestKeys.secret_key)).status).toBe(401);
      }
    });
  });
});
