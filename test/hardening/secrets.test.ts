import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { startUpstream, type TestUpstream } from '../http/support.js';
import { cliOk, exchange, openProbe, provision, serveInProcess, tokenFor } from './support.js';

/**
 * A full scenario (issue, rotate, exchange through the server, data requests, a test token, a leaked-key
 * rotation, revoke), then every secret key, token and signing key is searched for, in plain text, in the
 * database (SQLite: the file and its -wal/-shm; PostgreSQL: every row of every table) and in the server's
 * stdout and stderr.
 */
describe.each(BACKENDS)('no secret or token at rest or in the logs (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
      upstream = await startUpstream();
    });
    afterAll(async () => {
      await upstream?.close();
      await backend?.dispose();
    });

    /** The database as bytes to search: SQLite's files as they are; PostgreSQL's tables as JSON text. */
    const databaseImages = async (): Promise<[string, Buffer][]> => {
      if (provider === 'sqlite') {
        const file = backend.url.replace(/^file:/, '');
        return [file, `${file}-wal`, `${file}-shm`].filter((path) => existsSync(path)).map((path) => [path, readFileSync(path)]);
      }
      const probe = await openProbe(backend);
      try {
        const tables = await probe.rows<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
        expect(tables.length).toBeGreaterThanOrEqual(5);
        const images: [string, Buffer][] = [];
        for (const { table_name: table } of tables) {
          const rows = await probe.rows(`SELECT * FROM "${table}"`);
          images.push([`table ${table}`, Buffer.from(JSON.stringify(rows))]);
        }
        return images;
      } finally {
        await probe.close();
      }
    };

    it('after the whole story, no secret key, token or signing key is found in plain text', async () => {
      const secrets: string[] = [];
      const tokens: string[] = [];
      const partner = await provision(backend, 'secretive', ['acme']);
      secrets.push(partner.secretKey);
      const rotated = await cliOk<{ access_key: string; secret_key: string }>(backend, 'rotate-keys', partner.partnerId);
      secrets.push(rotated.secret_key);

      const server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url, LOG_LEVEL: 'trace' });
      let stopped = false;
      try {
        for (let i = 0; i < 3; i++) tokens.push(await tokenFor(server.url, rotated.access_key, rotated.secret_key));
        // A wrong secret a client might send: it must not be kept anywhere either.
        const wrong = `pctl_sk_${'W'.repeat(43)}`;
        secrets.push(wrong);
        expect((await exchange(server.url, rotated.access_key, wrong)).status).toBe(401);
        for (const token of tokens) {
          expect((await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
          const posted = await fetch(`${server.url}/public/v1/rules`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: '{"company_id":"acme","rule":1}',
          });
          expect(posted.status).toBe(200);
        }
        // A key sent where it does not belong is refused, and not logged.
        expect((await fetch(`${server.url}/public/v1/prices?company_id=acme&k=${rotated.secret_key}`, { headers: { authorization: `Bearer ${tokens[0]}` } })).status).toBe(400);
        const testToken = await cliOk<{ access_token: string }>(backend, 'mint-test-token', partner.partnerId, '--ttl', '600');
        tokens.push(testToken.access_token);
        expect((await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${testToken.access_token}` } })).status).toBe(200);
        const leaked = await cliOk<{ access_key: string; secret_key: string }>(backend, 'rotate-keys', partner.partnerId, '--revoke-issued-tokens');
        secrets.push(leaked.secret_key);
        tokens.push(await tokenFor(server.url, leaked.access_key, leaked.secret_key));
        expect((await cliOk<{ revoked_key_pair_ids: string[] }>(backend, 'revoke-keys', partner.partnerId)).revoked_key_pair_ids.length).toBeGreaterThan(0);
        const audit = await runCli(['audit', '--limit', '100', '--json'], backend.env);
        expect(audit.code).toBe(0);
        expect(audit.json().events.length).toBeGreaterThanOrEqual(7);

        const signingKeys = (JSON.parse(readFileSync(join(backend.dir, 'signing-keys.json'), 'utf8')) as { keys: { d: string }[] }).keys.map((key) => key.d);
        const needles = [
          ...secrets.flatMap((secret) => [secret, secret.slice('pctl_sk_'.length)]),
          ...tokens.flatMap((token) => [token, token.split('.')[2]!]),
          ...signingKeys,
        ];
        expect(needles.length).toBeGreaterThanOrEqual(4 * 2 + 5 * 2 + 1);

        const search = (images: [string, Buffer][], when: string) => {
          for (const [where, bytes] of images) {
            for (const needle of needles) expect(bytes.includes(needle), `${needle.slice(0, 16)}… found in ${where} (${when})`).toBe(false);
          }
        };
        // While the server runs (SQLite: the WAL still holds the recent pages) and again after it stopped.
        search(await databaseImages(), 'server running');
        expect(await server.stop()).toBe(0);
        stopped = true;
        const atRest = await databaseImages();
        search(atRest, 'server stopped');
        // The search does find what is meant to be stored: the (public) access keys.
        expect(atRest.some(([, bytes]) => bytes.includes(rotated.access_key))).toBe(true);
        const logs: [string, Buffer][] = [
          ['serve stdout', Buffer.from(server.stdout())],
          ['serve stderr', Buffer.from(server.stderr())],
        ];
        expect(server.stdout().split('\n').filter(Boolean).length).toBeGreaterThanOrEqual(12);
        search(logs, 'logs');
        expect(server.stdout()).not.toMatch(/pctl_sk_|eyJ[\w-]+\.[\w-]+\.[\w-]+/);
        console.info(`[hardening] ${provider}: ${needles.length} secrets, tokens and signing keys searched for in ${provider === 'sqlite' ? 'the database file, -wal and -shm' : 'every table'} and the server logs: none found`);
      } finally {
        if (!stopped) await server.stop();
      }
    });
  });
});
