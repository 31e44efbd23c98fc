import { copyFileSync, existsSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { adminQuery, backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serve } from '../support/serve.js';
import { startUpstream, type TestUpstream } from '../http/support.js';
import { cliOk, exchange, openProbe, provision, startServeProcess, tokenFor, type Probe } from './support.js';

/**
 * Faults injected into what the server depends on, against the real `partnerctl serve`: another process
 * holding the write lock, the database going away (PostgreSQL connections killed, the SQLite file corrupted,
 * deleted or replaced), and the signing-key file disappearing.
 */

/** Longer than the server's 1 s staleness bound. */
const PAST_STALENESS_BOUND_MS = 1_300;
/**
 * An answer that takes longer than this while another process holds a lock is a frozen server (the old
 * SQLite busy handler slept up to 15 s on the event loop). Generous, so a loaded machine does not fail it.
 */
const FROZEN_MS = 3_000;

type Server = Awaited<ReturnType<typeof startServeProcess>>;

async function status(url: string, init: RequestInit = {}): Promise<number> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(FROZEN_MS) });
  await response.arrayBuffer();
  return response.status;
}

async function errorCode(response: Response): Promise<string> {
  return ((await response.json()) as { error: { code: string } }).error.code;
}

function dataUrl(server: Server, company = 'acme'): string {
  return `${server.url}/public/v1/prices?company_id=${company}`;
}

const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

describe.concurrent.each(BACKENDS)('%s: faults', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let server: Server;
    let probe: Probe;
    let env: NodeJS.ProcessEnv;

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      upstream = await startUpstream();
      env = {
        ...backend.env,
        PUBLIC_API_UPSTREAM_URL: upstream.url,
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '10000',
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '10000',
        // Today's behaviour past the 1 s bound (503); serving through an outage: test/http/outage.test.ts.
        PUBLIC_API_STALE_BUDGET: '0',
      };
      server = await startServeProcess(env);
      probe = await openProbe(backend);
    });

    afterAll(async () => {
      await server?.stop();
      await probe?.close();
      await upstream?.close();
      await backend?.dispose();
    });

    it('answers while another process holds the write lock; last_used_at is written once it is free', async () => {
      const cached = await provision(backend, `Cached-${provider}`, ['acme']);
      const cachedToken = await tokenFor(server.url, cached.accessKey, cached.secretKey);
      expect(await status(dataUrl(server), bearer(cachedToken))).toBe(200);
      // A pair that never minted a token: its first exchange has last_used_at to write.
      const fresh = await provision(backend, `Fresh-${provider}`, ['acme']);

      const release = await holdWriteLock(backend);
      let released = false;
      try {
        // The exchange first (it queues the write), then everything else while the write is pending.
        const exchanged = fetch(`${server.url}/public/v1/auth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ access_key: fresh.accessKey, secret_key: fresh.secretKey }),
          signal: AbortSignal.timeout(FROZEN_MS),
        });
        const others = Promise.all([
          status(`${server.url}/healthz`),
          status(`${server.url}/readyz`),
          status(dataUrl(server), bearer(cachedToken)),
        ]);
        const response = await exchanged;
        expect(response.status).toBe(200);
        const freshToken = ((await response.json()) as { access_token: string }).access_token;
        expect(await others).toEqual([200, 200, 200]);
        // Still answering a while later (the write is retried, never waited for on the event loop).
        for (let i = 0; i < 5; i++) {
          expect(await status(`${server.url}/healthz`)).toBe(200);
          expect(await status(dataUrl(server), bearer(freshToken))).toBe(200);
          await sleep(200);
        }
        // The lock is still held here, so nothing could have been written yet.
        const [row] = await probe.rows<{ last_used_at: unknown }>('SELECT last_used_at FROM key_pairs WHERE id = $1', [fresh.keyPairId]);
        expect(row?.last_used_at ?? null).toBeNull();
      } finally {
        await release();
        released = true;
      }
      expect(released).toBe(true);
      await vi.waitFor(
        async () => {
          const [row] = await probe.rows<{ last_used_at: unknown }>('SELECT last_used_at FROM key_pairs WHERE id = $1', [fresh.keyPairId]);
          expect(row?.last_used_at).not.toBeNull();
        },
        { timeout: 15_000, interval: 200 },
      );
    });

    it('records the signing keys in the database; the CLI never replaces a missing key file, the server logs it and keeps serving', async () => {
      const keyFile = backend.env.PARTNERCTL_SIGNING_KEY_FILE!;
      const partner = await provision(backend, `Keys-${provider}`, ['acme']);
      const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
      const kids = (JSON.parse(readFileSync(keyFile, 'utf8')) as { keys: { kid: string }[] }).keys.map((key) => key.kid);
      await vi.waitFor(async () => {
        const rows = await probe.rows<{ kid: string }>('SELECT kid FROM signing_keys');
        expect(rows.map((row) => row.kid)).toEqual(expect.arrayContaining(kids));
      });

      const saved = readFileSync(keyFile);
      unlinkSync(keyFile);
      try {
        await vi.waitFor(
          () => expect(server.stdout(), `server exit ${server.child.exitCode ?? server.child.signalCode}; stderr: ${server.stderr()}`).toContain('SIGNING-KEY FILE MISSING'),
          { timeout: 5_000 },
        );
        const logged = server.stdout().split('\n').find((line) => line.includes('SIGNING-KEY FILE MISSING'))!;
        expect(JSON.parse(logged)).toMatchObject({ level: 50, path: keyFile });
        // The server keeps the keys it holds: tokens in flight and new ones keep working.
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(200);

        for (const args of [['mint-test-token', partner.partnerId], ['signing-key', 'rotate']]) {
          const refused = await runCli(args, backend.env);
          expect(refused.code, args.join(' ')).toBe(5);
          expect(refused.stderr).toMatch(/^partnerctl: signing_key_unavailable: signing-key file .* is missing, but the database records \d+ signing key\(s\) that have signed tokens/);
          expect(refused.stderr).toContain('restore the file from a backup');
          expect(refused.stdout).toBe('');
          expect(existsSync(keyFile), `${args.join(' ')} must not create a key file`).toBe(false);
        }
        // Nor does a second server start by creating one.
        await expect(serve(env)).rejects.toThrow(/signing_key_unavailable/);
        expect(existsSync(keyFile)).toBe(false);
      } finally {
        writeFileSync(keyFile, saved, { mode: 0o600 });
      }
      await vi.waitFor(() => expect(server.stdout()).toContain('signing-key file is back'), { timeout: 5_000 });
      expect(logLine(server, 'signing-key file is back')).toMatchObject({ level: 40, path: keyFile });
      // A file put in place is a change of the shared key file: said at warn too, with the key ids it holds.
      await vi.waitFor(() => expect(server.stdout()).toContain('signing-key file changed on disk'), { timeout: 5_000 });
      expect(logLine(server, 'signing-key file changed on disk')).toMatchObject({ level: 40, path: keyFile, kids: expect.arrayContaining(kids) });
      await sleep(PAST_STALENESS_BOUND_MS);
      expect(await status(dataUrl(server), bearer(token))).toBe(200);
      const minted = await cliOk<{ access_token: string }>(backend, 'mint-test-token', partner.partnerId);
      expect(await status(dataUrl(server), bearer(minted.access_token))).toBe(200);
    });

    it('an operator who has truly lost the key file starts a new one explicitly with signing-key rotate --new-file', async () => {
      const keyFile = backend.env.PARTNERCTL_SIGNING_KEY_FILE!;
      const partner = await provision(backend, `Lost-${provider}`, ['acme']);
      const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
      const saved = readFileSync(keyFile);
      unlinkSync(keyFile);
      try {
        const rotated = await cliOk(backend, 'signing-key', 'rotate', '--new-file');
        expect(existsSync(keyFile)).toBe(true);
        await vi.waitFor(() => expect(server.stdout()).toContain('SIGNING KEYS DROPPED'), { timeout: 5_000 });
        expect(logLine(server, 'SIGNING KEYS DROPPED')).toMatchObject({ level: 50, path: keyFile });
        const rows = await probe.rows<{ kid: string }>('SELECT kid FROM signing_keys WHERE kid = $1', [rotated.kid]);
        expect(rows).toHaveLength(1);
        // What the operator chose: the lost keys' tokens are refused.
        expect(await status(dataUrl(server), bearer(token))).toBe(401);
      } finally {
        writeFileSync(keyFile, saved, { mode: 0o600 });
      }
      await sleep(PAST_STALENESS_BOUND_MS);
      expect(await status(dataUrl(server), bearer(token))).toBe(200);
    });

    if (provider === 'postgresql') {
      it('answers 503 database_unavailable on the token endpoint and data requests while PostgreSQL refuses connections, then recovers', async () => {
        const partner = await provision(backend, 'Restart', ['acme']);
        const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        const adminUrl = inject('postgresAdminUrl')!;
        const name = new URL(backend.url).pathname.slice(1);
        await probe.close();
        // A restart, as the server sees it: every connection killed, new ones refused for a while.
        await adminQuery(adminUrl, `ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
        try {
          await adminQuery(adminUrl, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`);
          const refused = await exchange(server.url, partner.accessKey, partner.secretKey);
          expect(refused.status).toBe(503);
          expect(await errorCode(refused)).toBe('database_unavailable');
          // An access key the server has never seen is the same 503, not a 401 nor a 500.
          const otherKey = `${partner.accessKey.slice(0, -1)}${partner.accessKey.endsWith('A') ? 'B' : 'A'}`;
          const unknown = await exchange(server.url, otherKey, partner.secretKey);
          expect([unknown.status, await errorCode(unknown)]).toEqual([503, 'database_unavailable']);
          expect(await status(`${server.url}/readyz`)).toBe(503);
          await sleep(PAST_STALENESS_BOUND_MS);
          expect(await status(dataUrl(server), bearer(token))).toBe(503);
          expect(await status(`${server.url}/healthz`)).toBe(200);
        } finally {
          await adminQuery(adminUrl, `ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
          probe = await openProbe(backend);
        }
        await vi.waitFor(async () => expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(200), { timeout: 10_000 });
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        expect(await status(`${server.url}/readyz`)).toBe(200);
      });
    }

    if (provider === 'sqlite') {
      const dbPath = () => backend.url.replace(/^file:/, '');

      it('a SQLite file overwritten with garbage: readiness fails, the token endpoint and data requests answer 503', async () => {
        const partner = await provision(backend, 'Garbage', ['acme']);
        const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        await checkpoint(dbPath());
        const saved = readFileSync(dbPath());
        writeFileSync(dbPath(), randomBytes(saved.length));
        try {
          await vi.waitFor(async () => expect(await status(`${server.url}/readyz`)).toBe(503), { timeout: 3_000 });
          // Said loudly, once: the log names the path and why.
          await vi.waitFor(() => expect(server.stdout()).toContain('DATABASE FILE UNAVAILABLE'), { timeout: 3_000 });
          expect(logLine(server, 'DATABASE FILE UNAVAILABLE')).toMatchObject({ level: 50, path: dbPath(), reason: expect.stringContaining('not a SQLite database') });
          const refused = await exchange(server.url, partner.accessKey, partner.secretKey);
          expect([refused.status, await errorCode(refused)]).toEqual([503, 'database_unavailable']);
          await sleep(PAST_STALENESS_BOUND_MS);
          expect(await status(dataUrl(server), bearer(token))).toBe(503);
          expect(await status(`${server.url}/healthz`)).toBe(200);
        } finally {
          writeFileSync(dbPath(), saved);
        }
        await vi.waitFor(async () => expect(await status(`${server.url}/readyz`)).toBe(200), { timeout: 3_000 });
        await vi.waitFor(() => expect(server.stdout()).toContain('database file replaced'), { timeout: 3_000 });
        expect(logLine(server, 'database file replaced')).toMatchObject({ level: 40, path: dbPath() });
        expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(200);
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
      });

      it('a deleted SQLite file is never recreated; a copy put back is reopened and the 1 s bound holds for a revocation', async () => {
        const partner = await provision(backend, 'Replaced', ['acme']);
        const token = await tokenFor(server.url, partner.accessKey, partner.secretKey);
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        await checkpoint(dbPath());
        await probe.close();
        const backup = join(backend.dir, 'backup.db');
        copyFileSync(dbPath(), backup);
        unlinkSync(dbPath());
        try {
          await vi.waitFor(async () => expect(await status(`${server.url}/readyz`)).toBe(503), { timeout: 3_000 });
          const refused = await exchange(server.url, partner.accessKey, partner.secretKey);
          expect([refused.status, await errorCode(refused)]).toEqual([503, 'database_unavailable']);
          await vi.waitFor(() => expect(logLines(server, 'DATABASE FILE UNAVAILABLE').some((line) => /missing/.test(String(line.reason)))).toBe(true), {
            timeout: 3_000,
          });
          await sleep(PAST_STALENESS_BOUND_MS);
          // The server says it cannot vouch for a verdict instead of serving the deleted file's.
          expect(await status(dataUrl(server), bearer(token))).toBe(503);
          expect(existsSync(dbPath()), 'the server must not create an empty database in its place').toBe(false);
        } finally {
          copyFileSync(backup, dbPath());
          probe = await openProbe(backend);
        }
        await vi.waitFor(async () => expect(await status(`${server.url}/readyz`)).toBe(200), { timeout: 3_000 });
        await vi.waitFor(() => expect(logLines(server, 'database file replaced').length).toBeGreaterThanOrEqual(2), { timeout: 3_000 });
        expect(await status(dataUrl(server), bearer(token))).toBe(200);
        await cliOk(backend, 'revoke-keys', partner.partnerId);
        await sleep(PAST_STALENESS_BOUND_MS);
        expect(await status(dataUrl(server), bearer(token))).toBe(401);
        expect((await exchange(server.url, partner.accessKey, partner.secretKey)).status).toBe(401);
        rmSync(backup, { force: true });
      });
    }
  });
});

/** The server's JSON log lines whose message contains `text`. */
function logLines(server: Server, text: string): Record<string, unknown>[] {
  return server
    .stdout()
    .split('\n')
    .filter((line) => line.includes(text))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

function logLine(server: Server, text: string): Record<string, unknown> {
  const lines = logLines(server, text);
  expect(lines, `no log line with ${text}`).not.toHaveLength(0);
  return lines[lines.length - 1]!;
}

/** Another process's write lock, held until the returned function is called. */
async function holdWriteLock(backend: TestBackend): Promise<() => Promise<void>> {
  if (backend.provider === 'sqlite') {
    const connection = new BetterSqlite3(backend.url.replace(/^file:/, ''), { timeout: 5_000 });
    connection.exec('BEGIN IMMEDIATE');
    return async () => {
      connection.exec('ROLLBACK');
      connection.close();
    };
  }
  // What a long CLI transaction holds: every key pair row, locked for update.
  const client = new pg.Client({ connectionString: backend.url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT id FROM key_pairs FOR UPDATE');
  return async () => {
    await client.query('ROLLBACK');
    await client.end();
  };
}

/** Moves everything from the WAL into the main file, so a copy of the file alone is the whole database. */
async function checkpoint(path: string): Promise<void> {
  const connection = new BetterSqlite3(path, { timeout: 5_000 });
  try {
    connection.pragma('wal_checkpoint(FULL)');
  } finally {
    connection.close();
  }
}
