// docs/server.md (Starting and stopping): `serve` exits at most the upstream timeout + 11 s after SIGTERM,
// whatever the database does. A partition that drops packets (a black hole: nothing refused, nothing
// answered) with writes pending is the worst case: every step of the stop waits on a database that never
// says no.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { TcpRelay } from '../support/relay.js';
import { serve } from '../support/serve.js';
import { provision, tokenFor } from '../hardening/support.js';
import { startUpstream, type TestUpstream } from './support.js';

/** Short, so that the bound (this + 11 s) is short too. */
const UPSTREAM_TIMEOUT_MS = 2_000;
const BOUND_MS = UPSTREAM_TIMEOUT_MS + 11_000;

describe.skipIf(!backendAvailable('postgresql'))('postgresql: shutdown with the database black-holed', () => {
  let backend: TestBackend;
  let upstream: TestUpstream;
  let relay: TcpRelay;

  beforeAll(async () => {
    backend = await createBackend('postgresql', { migrated: true });
    upstream = await startUpstream();
    const target = new URL(backend.url);
    relay = await TcpRelay.start(target.hostname, Number(target.port || 5432));
  });

  afterAll(async () => {
    await relay?.close();
    await upstream?.close();
    await backend?.dispose();
  });

  it('37.7: exits 0 within the upstream timeout + 11 s of SIGTERM, saying what it could not write', async () => {
    const server = await serve({
      ...backend.env,
      DATABASE_URL: TcpRelay.through(backend.url, relay),
      PUBLIC_API_UPSTREAM_URL: upstream.url,
      PUBLIC_API_UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
    });
    try {
      const partner = await provision(backend, 'shutdown-blackhole', ['acme']);
      const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
      // Usage counts and bookkeeping pending, then a partition.
      const answer = await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } });
      expect(answer.status).toBe(200);
      relay.set('blackhole');
      await sleep(1_500);
      const signalled = performance.now();
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const took = performance.now() - signalled;
      // What the server said while stopping, with its times: which step took the time if the bound is missed.
      const said = `${server.stderr()}\n${server.stdout().split('\n').slice(-12).join('\n')}`;
      expect(server.stdout(), said).toMatch(/usage counts NOT written at shutdown after retrying for 10 s: 1 requests/);
      expect(took, said).toBeLessThanOrEqual(BOUND_MS);
    } finally {
      relay.set('forward');
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    }
  }, 60_000);
});
