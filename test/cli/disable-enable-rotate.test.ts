// disable-partner then enable-partner restores the keys, not the tokens issued before (disable may have
// been the containment of a leak), against a real server; a routine rotate-keys asks on a terminal first.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { onTerminal, runCli } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from '../http/support.js';

describe('disable-partner then enable-partner, against a running server', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let server: Served;
  const cli = async (...args: string[]) => {
    const result = await runCli(['--json', '--yes', ...args], backend.env);
    expect(result.code, result.stderr).toBe(0);
    return result.json();
  };
  const exchange = (keys: { access_key: string; secret_key: string }) =>
    fetch(`${server.url}/public/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
    });
  const data = async (token: string) =>
    (await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } })).status;
  /** The status `probe` answers once it is `wanted` (the servers apply a change within a second), or its last. */
  const soon = async (probe: () => Promise<number>, wanted: number): Promise<number> => {
    const deadline = Date.now() + 10_000;
    let status = await probe();
    while (status !== wanted && Date.now() < deadline) {
      await sleep(50);
      status = await probe();
    }
    return status;
  };

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    upstream = await startUpstream();
    await cli('create-partner', '--name', 'Paused');
    server = await serveInProcess({
      ...backend.env,
      PUBLIC_API_UPSTREAM_URL: upstream.url,
      PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0',
      PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0',
    });
  });
  afterAll(async () => {
    await server?.stop();
    await upstream?.close();
    await backend?.dispose();
  });

  it('enable-partner restores the keys, not the tokens issued before the disable: the client re-exchanges once', async () => {
    await cli('map-company', 'Paused', '--company', 'acme');
    const keys = (await cli('issue-keys', 'Paused')) as { access_key: string; secret_key: string };
    const minted = await exchange(keys);
    expect(minted.status).toBe(200);
    const old = ((await minted.json()) as { access_token: string }).access_token;
    expect(await data(old)).toBe(200);

    await cli('disable-partner', 'Paused');
    expect(await soon(() => data(old), 401)).toBe(401);
    const enabled = await runCli(['enable-partner', 'Paused'], backend.env);
    expect(enabled.code, enabled.stderr).toBe(0);
    expect(enabled.stdout).toMatch(/tokens issued before now stay refused/);

    // Once the server has the partner enabled (its keys exchange again), the old token is still refused.
    expect(await soon(async () => (await exchange(keys)).status, 200)).toBe(200);
    for (let i = 0; i < 5; i++) {
      expect(await data(old)).toBe(401);
      await sleep(100);
    }
    const fresh = ((await (await exchange(keys)).json()) as { access_token: string }).access_token;
    expect(await data(fresh)).toBe(200);
  });
});

describe.skipIf(process.platform !== 'linux')('rotate-keys on a terminal', () => {
  let backend: TestBackend;
  const pairs = async () => (await runCli(['show-partner', 'Rotated', '--json'], backend.env)).json().key_pairs as { id: string; status: string }[];
  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Rotated'], backend.env)).code).toBe(0);
    expect((await runCli(['issue-keys', 'Rotated'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('a routine rotation asks first, saying the old pair stops minting now and what --overlap does', async () => {
    const before = await pairs();
    const { code, screen } = await onTerminal(['rotate-keys', 'Rotated'], backend.env, [[/y\/N\)/, 'n\r']]);
    expect(code, screen).toBe(130);
    const flat = screen.replace(/\r?\n/g, '');
    expect(flat).toMatch(/its current pair stops minting tokens now \(--overlap 7d keeps it working until the partner switches\)/);
    expect(await pairs()).toEqual(before);
    const confirmed = await onTerminal(['rotate-keys', 'Rotated'], backend.env, [[/y\/N\)/, 'y\r']]);
    expect(confirmed.code, confirmed.screen).toBe(0);
    expect(await pairs()).toHaveLength(2);
  });

  it('does not ask with --overlap, nor without a terminal (scripts rotate as before)', async () => {
    const overlapped = await onTerminal(['rotate-keys', 'Rotated', '--overlap', '7d'], backend.env, []);
    expect(overlapped.code, overlapped.screen).toBe(0);
    expect(overlapped.screen).not.toMatch(/y\/N/);
    expect((await runCli(['rotate-keys', 'Rotated', '--finish'], backend.env)).code).toBe(0);
    const scripted = await runCli(['rotate-keys', 'Rotated', '--json'], backend.env);
    expect(scripted.code, scripted.stderr).toBe(0);
    expect(scripted.json()).toMatchObject({ changed: true });
  });
});
