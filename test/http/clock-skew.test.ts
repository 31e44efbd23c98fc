// Issue 33, item 1: a serve instance whose clock is wrong. On PostgreSQL every instant compared across
// processes (a brake's cut-off and a token's issue time, an overlap's end) is on the database server's
// clock; an instance beyond the tolerance mints nothing and says so. Real servers with a shifted Date.
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTokenId } from '../../src/domain/operations/tokens.js';
import { backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from './support.js';

const SHIFT_CLOCK = fileURLToPath(new URL('../support/shift-clock.mjs', import.meta.url));

interface Keys {
  partner_id: string;
  key_pair_id: string;
  access_key: string;
  secret_key: string;
}

describe('a serve instance with a wrong clock, on PostgreSQL', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let env: NodeJS.ProcessEnv;
    const servers: Served[] = [];
    let counter = 0;

    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', '--yes', ...args], env);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };
    const shifted = async (shiftMs: number): Promise<Served> => {
      const server = await serve({ ...env, SHIFT_CLOCK_MS: String(shiftMs) }, [], { nodeArgs: ['--import', SHIFT_CLOCK] });
      servers.push(server);
      return server;
    };
    const partner = async (): Promise<{ name: string; keys: Keys }> => {
      const name = `skew-${++counter}`;
      await cli('create-partner', '--name', name);
      const keys = (await cli('issue-keys', name)) as Keys;
      await cli('map-company', name, '--company', 'acme');
      return { name, keys };
    };
    const exchange = (server: Served, keys: { access_key: string; secret_key: string }) =>
      fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
    const dataStatus = async (server: Served, bearer: string): Promise<number> => {
      const response = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${bearer}` } });
      await response.arrayBuffer();
      return response.status;
    };
    const instanceIdOf = (server: Served): string => /instance (srv_[0-9a-f]{16})\n/.exec(server.stderr())![1]!;

    beforeAll(async () => {
      backend = await createBackend('postgresql');
      await (await openMigrated(backend)).close();
      upstream = await startUpstream();
      env = { ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url };
    });
    afterAll(async () => {
      for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGTERM');
      await Promise.all(servers.map((server) => server.exited));
      await upstream?.close();
      await backend?.dispose();
    });

    it('1.5 s ahead (within the tolerance): its token carries the database\'s time, and a brake taken just after refuses it', async () => {
      const server = await shifted(1_500);
      const { name, keys } = await partner();
      const response = await exchange(server, keys);
      expect(response.status).toBe(200);
      const minted = Date.now();
      const bearer = ((await response.json()) as { access_token: string }).access_token;
      const claims = JSON.parse(Buffer.from(bearer.split('.')[1]!, 'base64url').toString()) as { jti: string; iat: number };
      // Issued on the database server's clock (this host's), not 1.5 s ahead.
      expect(Math.abs(parseTokenId(claims.jti)!.issuedAtMs - minted)).toBeLessThan(1_000);
      expect(await dataStatus(server, bearer)).toBe(200);
      // The brake, within the 1.5 s the instance's own clock is ahead: its cut-off is after the token's issue.
      const braked = await cli('revoke-tokens', name);
      expect(braked.changed).toBe(true);
      expect(await dataStatus(server, bearer)).toBe(401);
      expect((await cli('lookup', bearer)).accepted).toBe(false);
      // A brake again changes nothing: no token can be live since the cut-off.
      expect((await cli('revoke-tokens', name)).changed).toBe(false);
      const listed = (await cli('instances')).instances.find((row: { instance_id: string }) => row.instance_id === instanceIdOf(server));
      expect(listed).toMatchObject({ clock_skewed: false, stale: false });
      expect(Math.abs(listed.clock_offset_ms - 1_500)).toBeLessThan(500);
    });

    it('60 s ahead: mints nothing (503 clock_skewed), says so in the log, /readyz and instances, and ends no overlap early', async () => {
      const server = await shifted(60_000);
      const { name, keys } = await partner();
      const refused = await exchange(server, keys);
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('clock_skewed');
      // The log is written in batches: the line is there within a moment.
      for (let i = 0; i < 40 && !server.stdout().includes('CLOCK SKEW'); i++) await sleep(50);
      expect(server.stdout()).toContain('CLOCK SKEW');
      const ready = (await (await fetch(`${server.url}/readyz`)).json()) as { status: string; clock: { offset_ms: number; status: string } };
      expect(ready.clock.status).toBe('skewed');
      expect(Math.abs(ready.clock.offset_ms - 60_000)).toBeLessThan(500);
      const instances = await runCli(['instances'], env);
      expect(instances.stdout).toMatch(new RegExp(`${instanceIdOf(server)}\\s.*\\+60\\.0 s SKEWED`));
      const listed = (await cli('instances')).instances.find((row: { instance_id: string }) => row.instance_id === instanceIdOf(server));
      // Its heartbeat is on the database's clock too: live, not dated a minute ahead.
      expect(listed).toMatchObject({ clock_skewed: true, stale: false });
      expect(Date.parse(listed.last_seen_at)).toBeLessThan(Date.now() + 5_000);

      // A 45 s overlap is not ended by the fast instance: the retiring pair is judged on the database's clock.
      await cli('rotate-keys', name, '--overlap', '45s');
      const retiring = await exchange(server, keys);
      expect(retiring.status).toBe(503);
      expect((await cli('audit', keys.partner_id, '--action', 'keys.retired')).events).toEqual([]);
      expect((await cli('lookup', keys.access_key)).status).toBe('retiring');
    });
  });
});
