import Sqlite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';
import { serve, type Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from '../http/support.js';

/**
 * `revoke-tokens` run twice while another process holds SQLite's write lock for 3 s and the partner exchanges
 * its keys meanwhile: a token handed out before the second run has finished never outlives it. (Either the
 * exchange waits until its mint is on record, or it is answered 503; the re-run then sees it and moves the
 * cut-off, which it takes once it holds the lock.)
 */
describe('revoke-tokens re-run while the write lock is held elsewhere (sqlite)', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let server: Served;
  let keys: { access_key: string; secret_key: string };

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    upstream = await startUpstream();
    await runCli(['create-partner', '--name', 'Leaky'], backend.env);
    await runCli(['map-company', 'Leaky', '--company', 'acme', '--yes'], backend.env);
    keys = (await runCli(['issue-keys', 'Leaky', '--json'], backend.env)).json();
    server = await serve({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0', PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0' });
  });
  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    await upstream?.close();
    await backend?.dispose();
  });

  const exchange = async () => {
    const response = await fetch(`${server.url}/public/v1/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
    });
    return { status: response.status, at: Date.now(), token: response.status === 200 ? ((await response.json()) as { access_token: string }).access_token : null };
  };
  const data = async (token: string) =>
    (await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } })).status;

  // Held longer than the exchange waits for its record (it is answered 503), and shorter (it waits, then 200).
  it.each([2_700, 700])('leaves no token alive that was handed out before the re-run finished (lock held %i ms more)', async (holdMs) => {
    const first = await exchange();
    expect(first.status).toBe(200);
    const run1 = await runBinary(['revoke-tokens', 'Leaky', '--yes', '--json'], backend.env);
    expect(run1.code, run1.stderr).toBe(0);
    expect(run1.json()).toMatchObject({ changed: true });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(await data(first.token!)).toBe(401);

    const holder = new Sqlite(backend.url.replace(/^file:/, ''));
    holder.exec('BEGIN IMMEDIATE');
    let run2: Awaited<ReturnType<typeof runBinary>> | undefined;
    let run2At = 0;
    // --debug names the moment the re-run's transaction ended (its decision taken under the write lock).
    const rerun = runBinary(['revoke-tokens', 'Leaky', '--yes', '--json', '--debug', '--no-wait'], backend.env).then((result) => {
      run2 = result;
      run2At = Number(/committed at \S+ \((\d+) ms\)/.exec(result.stderr)?.[1] ?? Date.now());
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    const b = exchange();
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    holder.exec('COMMIT');
    holder.close();
    const [tokenB] = await Promise.all([b, rerun]);
    expect(run2!.code, run2!.stderr).toBe(0);
    expect([200, 503]).toContain(tokenB.status);
    // While the lock is held no token is handed out: its mint is not on record yet.
    expect(tokenB.at - started).toBeGreaterThanOrEqual(Math.min(holdMs, 1_900));
    if (tokenB.status === 200 && tokenB.at < run2At) {
      // Received (so handed out) before the re-run's decision: the re-run must have refused it.
      expect(run2!.json()).toMatchObject({ changed: true });
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await data(tokenB.token!)).toBe(401);
    }
    // Whatever the order, a later exchange works (the keys are untouched).
    const later = await exchange();
    expect(later.status).toBe(200);
    expect(await data(later.token!)).toBe(200);
  }, 40_000);
});
