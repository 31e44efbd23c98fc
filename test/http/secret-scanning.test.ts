import { argon2Verifications } from '../support/argon2-cost.js';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newKeyMaterial } from '../../src/domain/rules/identifiers.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli, type CliResult } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';

interface Keys {
  partner_id: string;
  key_pair_id: string;
  access_key: string;
  secret_key: string;
}

/** GitHub's key list on loopback: {public_keys: [{key_identifier, key (PEM), is_current}]}, its fetches counted. */
async function startKeyServer(keys: Record<string, KeyObject>): Promise<{ url: string; fetches: () => number; close(): Promise<void> }> {
  let fetches = 0;
  const server: Server = createServer((_request, response) => {
    fetches++;
    const body = JSON.stringify({
      public_keys: Object.entries(keys).map(([id, key]) => ({
        key_identifier: id,
        key: key.export({ type: 'spki', format: 'pem' }).toString(),
        is_current: true,
      })),
    });
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/meta/public_keys/secret_scanning`, fetches: () => fetches, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

const github = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const KEY_ID = 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c';

/** What GitHub sends: the body's raw bytes signed with ECDSA P-256 SHA-256, base64 DER. */
function signed(body: string, key: KeyObject = github.privateKey, keyId = KEY_ID): { headers: Record<string, string>; body: string } {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'github-public-key-identifier': keyId,
      'github-public-key-signature': sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64'),
    },
  };
}

const sqlitePath = (backend: TestBackend): string => backend.url.replace(/^file:/, '');

function alert(token: string, url = 'https://github.com/octo/repo/blob/abc/config.env') {
  return { token, type: 'partnerctl_secret_key', url, source: 'content' };
}

describe.each(BACKENDS)('secret scanning on %s: a real serve, a local key server', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let keyServer: Awaited<ReturnType<typeof startKeyServer>>;
    let server: Served;
    let counter = 0;

    const run = (...args: string[]): Promise<CliResult> => runCli(['--json', '--yes', ...args], backend.env);
    const cli = async (...args: string[]) => {
      const result = await run(...args);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };
    const newPartner = async (): Promise<Keys> => {
      const name = `scan-${++counter}`;
      await cli('create-partner', '--name', name);
      return (await cli('issue-keys', name)) as Keys;
    };
    const exchange = (keys: { access_key: string; secret_key: string }) =>
      fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
    const post = (message: { headers: Record<string, string>; body: string }) =>
      fetch(`${server.url}/secret-scanning/github`, { method: 'POST', headers: message.headers, body: message.body });
    const leakEvents = async (): Promise<number> => (await cli('audit', '--action', 'leak.reported', '--limit', '1000')).events.length;

    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') await (await openMigrated(backend)).close();
      keyServer = await startKeyServer({ [KEY_ID]: github.publicKey });
      await cli('create-partner', '--name', 'scan-setup');
      server = await serveInProcess({
        ...backend.env,
        PUBLIC_API_SECRET_SCANNING: 'github',
        PUBLIC_API_SECRET_SCANNING_KEYS_URL: keyServer.url,
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0',
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0',
      });
    });
    afterAll(async () => {
      await server?.stop();
      await keyServer?.close();
      await backend?.dispose();
    });

    it('a signed alert with a live secret contains it at once, records it once, and says true_positive', async () => {
      const keys = await newPartner();
      expect((await exchange(keys)).status).toBe(200);
      const before = await leakEvents();
      const message = signed(JSON.stringify([alert(keys.secret_key)]));
      const response = await post(message);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual([{ token_raw: keys.secret_key, token_type: 'partnerctl_secret_key', label: 'true_positive' }]);
      // Contained: the leaked secret exchanges nothing any more, within a second.
      const start = Date.now();
      let status = (await exchange(keys)).status;
      while (status !== 401 && Date.now() - start < 1_000) {
        await sleep(50);
        status = (await exchange(keys)).status;
      }
      expect(status).toBe(401);
      expect(Date.now() - start).toBeLessThan(1_000);
      // Audited once, by github-secret-scanning, with the URL, the source and the action taken; never the secret.
      const events = (await cli('audit', keys.partner_id, '--action', 'leak.reported')).events;
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        actor: 'github-secret-scanning',
        details: {
          kind: 'secret_key',
          key_pair_id: keys.key_pair_id,
          url: 'https://github.com/octo/repo/blob/abc/config.env',
          source: 'content',
          action: 'revoke_key_pair',
          changed: true,
        },
      });
      expect(JSON.stringify(events)).not.toContain(keys.secret_key);
      expect((await cli('audit', keys.partner_id, '--action', 'keys.revoked')).events[0].actor).toBe('github-secret-scanning');
      // lookup and list-keys show when and where.
      const looked = await cli('lookup', keys.access_key);
      expect(looked).toMatchObject({ status: 'revoked', leak_url: 'https://github.com/octo/repo/blob/abc/config.env' });
      expect(Date.parse(looked.leak_reported_at)).toBeGreaterThan(start - 5_000);
      const listed = await cli('list-keys', '--partner', keys.partner_id);
      expect(listed.keys[0]).toMatchObject({ key_pair_id: keys.key_pair_id, leak_url: 'https://github.com/octo/repo/blob/abc/config.env' });
      expect(listed.keys[0].leak_reported_at).toBe(looked.leak_reported_at);

      // GitHub's duplicate: the same answer, nothing done or recorded again.
      const head = (await cli('audit', 'head')).hash;
      const again = await post(message);
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual([{ token_raw: keys.secret_key, token_type: 'partnerctl_secret_key', label: 'true_positive' }]);
      expect((await cli('audit', 'head')).hash).toBe(head);
      expect(await leakEvents()).toBe(before + 1);
    });

    it('a tampered body, a wrong key id, a stranger key or no signature: 401, nothing looked up or changed', async () => {
      const keys = await newPartner();
      const head = (await cli('audit', 'head')).hash;
      const genuine = signed(JSON.stringify([alert(keys.secret_key)]));
      const tampered = { headers: genuine.headers, body: genuine.body.replace('content', 'commit') };
      const wrongId = signed(genuine.body, github.privateKey, 'no-such-key-id');
      const byStranger = signed(genuine.body, stranger.privateKey);
      const unsigned = { headers: { 'content-type': 'application/json' }, body: genuine.body };
      const garbled = { headers: { ...genuine.headers, 'github-public-key-signature': 'not base64!' }, body: genuine.body };
      for (const message of [tampered, wrongId, byStranger, unsigned, garbled]) {
        const response = await post(message);
        expect(response.status).toBe(401);
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_signature');
      }
      expect((await cli('audit', 'head')).hash).toBe(head);
      expect((await exchange(keys)).status).toBe(200);
      expect((await cli('lookup', keys.access_key)).leak_reported_at).toBeNull();
      // An unknown key id fetched the list again, at most once a minute: the second unknown id did not.
      const fetches = keyServer.fetches();
      expect((await post(signed(genuine.body, github.privateKey, 'another-unknown'))).status).toBe(401);
      expect(keyServer.fetches()).toBe(fetches);
    });

    it('unknown, malformed and wrong values are false_positive; every type echoed; nothing audited', async () => {
      const keys = await newPartner();
      const head = (await cli('audit', 'head')).hash;
      const wrongSecret = newKeyMaterial(keys.key_pair_id).secretKey;
      const badChecksum = `${keys.secret_key.slice(0, -1)}${keys.secret_key.endsWith('A') ? 'B' : 'A'}`;
      const items = [
        { token: 'NMIfyYncKcRALEXAMPLE', type: 'mycompany_api_token', url: 'https://github.com/o/r/blob/1/a', source: 'content' },
        { token: wrongSecret, type: 'partnerctl_secret_key', url: 'https://github.com/o/r/blob/1/b', source: 'commit' },
        { token: badChecksum, type: 'partnerctl_secret_key', url: 'https://github.com/o/r/blob/1/c', source: 'content' },
        { token: newKeyMaterial().secretKey, type: 'partnerctl_secret_key', url: 'https://gist.github.com/x', source: 'gist' },
        { token: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJwdG5fMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAifQ.c2ln', type: 'partnerctl_token', url: '', source: 'content' },
      ];
      const response = await post(signed(JSON.stringify(items)));
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual(items.map((item) => ({ token_raw: item.token, token_type: item.type, label: 'false_positive' })));
      expect((await cli('audit', 'head')).hash).toBe(head);
      expect((await exchange(keys)).status).toBe(200);
    });

    it('a false positive is recorded: the same batch again is answered from its records, with no argon2 check', async () => {
      const keys = await newPartner();
      const head = (await cli('audit', 'head')).hash;
      // Well-formed secrets of an existing pair, valid checksums: each costs an argon2 verification once.
      const secrets = Array.from({ length: 20 }, (_, i) => ({ ...alert(newKeyMaterial(keys.key_pair_id).secretKey), url: `https://github.com/o/r/replay/${i}` }));
      // A token of ours with a broken signature: judged again each time (the key file may lag a rotation).
      const token = ((await (await exchange(keys)).json()) as { access_token: string }).access_token;
      const forged = { ...alert(`${token.slice(0, -4)}${token.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`, 'https://github.com/o/r/replay/token'), type: 'partnerctl_token' };
      const items = [...secrets, forged];
      const message = signed(JSON.stringify(items));
      const count = "SELECT count(*) AS n FROM leak_reports WHERE label = 'false_positive'";
      const recorded = async (): Promise<number> => {
        if (provider === 'sqlite') {
          const file = new BetterSqlite3(sqlitePath(backend), { readonly: true });
          try {
            return Number((file.prepare(count).get() as { n: number }).n);
          } finally {
            file.close();
          }
        }
        const db = await openMigrated(backend);
        try {
          return Number((await db.sql.query<{ n: string }>(count))[0]!.n);
        } finally {
          await db.close();
        }
      };
      const before = await recorded();
      // The server runs in this process: its argon2 verifications are counted here (argon2-cost.cjs).
      let verifications = argon2Verifications();
      const first = await post(message);
      expect(first.status).toBe(200);
      const answer = await first.json();
      expect(answer).toEqual(items.map((item) => ({ token_raw: item.token, token_type: item.type, label: 'false_positive' })));
      expect(argon2Verifications() - verifications, 'one verification per well-formed secret of an existing pair').toBe(secrets.length);
      expect(await recorded()).toBe(before + secrets.length);
      verifications = argon2Verifications();
      const replay = await post(message);
      expect(replay.status).toBe(200);
      expect(await replay.json()).toEqual(answer);
      // Answered from the records: nothing new written, and no secret verified again.
      expect(argon2Verifications() - verifications).toBe(0);
      expect(await recorded()).toBe(before + secrets.length);
      // No audit event for a false positive: nothing was done.
      expect((await cli('audit', 'head')).hash).toBe(head);
    });

    /** Another process's long write: SQLite's write lock, or PostgreSQL's lock on the revision row every unit takes first. */
    const holdWriteLock = async (): Promise<{ held: () => boolean; release: () => Promise<void> }> => {
      if (provider === 'sqlite') {
        const holder = new BetterSqlite3(sqlitePath(backend));
        holder.exec('BEGIN IMMEDIATE');
        return {
          held: () => holder.inTransaction,
          release: async () => {
            if (holder.inTransaction) holder.exec('COMMIT');
            holder.close();
          },
        };
      }
      const holder = new pg.Client({ connectionString: backend.url });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('UPDATE revision SET value = value WHERE id = 1');
      let held = true;
      return {
        held: () => held,
        release: async () => {
          if (!held) return;
          held = false;
          await holder.query('ROLLBACK');
          await holder.end();
        },
      };
    };

    it('another process holding the write lock: the alert is 503 within the bound, liveness stays fast, the re-send contains it', async () => {
      const keys = await newPartner();
      const message = signed(JSON.stringify([alert(keys.secret_key, 'https://github.com/o/r/blob/1/locked')]));
      const holder = await holdWriteLock();
      // Released after 8 s at the latest (as a long CLI write would), or as soon as the checks are done.
      const releaseTimer = setTimeout(() => void holder.release(), 8_000);
      try {
        const probes: number[] = [];
        let answered = false;
        const probing = (async () => {
          while (!answered) {
            const start = performance.now();
            expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
            probes.push(performance.now() - start);
            await sleep(100);
          }
        })();
        const start = performance.now();
        const response = await post(message);
        const elapsed = performance.now() - start;
        answered = true;
        await probing;
        expect(response.status).toBe(503);
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe('database_unavailable');
        // The bound is 3 s of retries (plus the lookup); waiting for the lock would take the whole 8 s.
        expect(elapsed).toBeLessThan(6_000);
        expect(probes.length).toBeGreaterThan(5);
        // A probe stuck behind the lock would take most of its 8 s.
        expect(Math.max(...probes)).toBeLessThan(2_000);
        expect(holder.held()).toBe(true);
      } finally {
        clearTimeout(releaseTimer);
        await holder.release();
      }
      // GitHub's retry, once the lock is free: contained and recorded.
      const again = await post(message);
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual([{ token_raw: keys.secret_key, token_type: 'partnerctl_secret_key', label: 'true_positive' }]);
      expect((await exchange(keys)).status).toBe(401);
    }, 30_000);

    it('an access key alone is true_positive and changes nothing; a live token has its partner\'s tokens revoked', async () => {
      const keys = await newPartner();
      const token = ((await (await exchange(keys)).json()) as { access_token: string }).access_token;
      const response = await post(
        signed(JSON.stringify([alert(keys.access_key, 'https://github.com/o/r/blob/1/ak'), { ...alert(token, 'https://github.com/o/r/blob/1/tok'), type: 'partnerctl_token' }])),
      );
      expect(await response.json()).toEqual([
        { token_raw: keys.access_key, token_type: 'partnerctl_secret_key', label: 'true_positive' },
        { token_raw: token, token_type: 'partnerctl_token', label: 'true_positive' },
      ]);
      const events = (await cli('audit', keys.partner_id, '--action', 'leak.reported')).events;
      expect(events.map((event: { details: { kind: string; action: string } }) => [event.details.kind, event.details.action]).sort()).toEqual([
        ['access_key', 'none'],
        ['token', 'revoke_tokens'],
      ]);
      expect((await cli('lookup', token)).status).toBe('revoked');
      // The keys are untouched: the partner's client exchanges again.
      expect((await exchange(keys)).status).toBe(200);
    });

    it('bodies: not an array or over 1,000 items 400, over 1 MiB 413; answered before anything is looked up', async () => {
      for (const body of ['{"token":"x"}', '[1, 2]', '[{"token": 5, "type": "t"}]', 'not json']) {
        const response = await post(signed(body));
        expect(response.status, body).toBe(400);
        expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
      }
      const many = JSON.stringify(Array.from({ length: 1001 }, (_, i) => alert(`garbage-${i}`)));
      expect((await post(signed(many))).status).toBe(400);
      const huge = JSON.stringify([alert('x'.repeat(1_100_000))]);
      expect((await post(signed(huge))).status).toBe(413);
      expect((await fetch(`${server.url}/secret-scanning/github`)).status).toBe(405);
    });

    it('100 items answered in one batch, one argon2 verification each; garbage never reaches argon2', async () => {
      // What such a batch costs in time at the product's argon2 parameters is measured by
      // `node bench/secret-scanning.mjs`, not here: what is asserted is what reaches argon2.
      const keys = await newPartner();
      // Well-formed secrets of an existing pair with valid checksums: each one costs an argon2 verification.
      const costly = Array.from({ length: 100 }, (_, i) => ({ ...alert(newKeyMaterial(keys.key_pair_id).secretKey), url: `https://github.com/o/r/${i}` }));
      let verifications = argon2Verifications();
      let response = await post(signed(JSON.stringify(costly)));
      expect(response.status).toBe(200);
      expect(((await response.json()) as { label: string }[]).every((item) => item.label === 'false_positive')).toBe(true);
      expect(argon2Verifications() - verifications).toBe(100);
      // Secret-shaped garbage: a wrong checksum or no pair of ours; answered without one verification.
      const garbage = Array.from({ length: 100 }, (_, i) => alert(`pctl_sk_${randomBytes(40).toString('base64url')}${i}`));
      verifications = argon2Verifications();
      response = await post(signed(JSON.stringify(garbage)));
      expect(response.status).toBe(200);
      expect(((await response.json()) as { label: string }[]).every((item) => item.label === 'false_positive')).toBe(true);
      expect(argon2Verifications() - verifications).toBe(0);
    });
  });
});

describe('secret scanning off (the default) and report-only', () => {
  let backend: TestBackend;
  let keyServer: Awaited<ReturnType<typeof startKeyServer>>;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    keyServer = await startKeyServer({ [KEY_ID]: github.publicKey });
    expect((await runCli(['--json', 'create-partner', '--name', 'report-only'], backend.env)).code).toBe(0);
  });
  afterAll(async () => {
    await keyServer?.close();
    await backend?.dispose();
  });

  it('is 404 like any unknown path without PUBLIC_API_SECRET_SCANNING', async () => {
    const server = await serveInProcess(backend.env);
    try {
      const response = await fetch(`${server.url}/secret-scanning/github`, { method: 'POST', ...signed('[]') });
      expect(response.status).toBe(404);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_found');
    } finally {
      await server.stop();
    }
  });

  it('report: a live secret is recorded (leak.reported, true_positive) and stays live', async () => {
    const keys = (await runCli(['--json', 'issue-keys', 'report-only'], backend.env)).json() as Keys;
    const server = await serveInProcess({
      ...backend.env,
      PUBLIC_API_SECRET_SCANNING: 'github',
      PUBLIC_API_SECRET_SCANNING_ACTION: 'report',
      PUBLIC_API_SECRET_SCANNING_KEYS_URL: keyServer.url,
      PUBLIC_API_SECRET_SCANNING_RATE_LIMIT: '3',
    });
    try {
      const response = await fetch(`${server.url}/secret-scanning/github`, { method: 'POST', ...signed(JSON.stringify([alert(keys.secret_key)])) });
      expect(await response.json()).toEqual([{ token_raw: keys.secret_key, token_type: 'partnerctl_secret_key', label: 'true_positive' }]);
      const events = (await runCli(['--json', 'audit', '--action', 'leak.reported'], backend.env)).json().events;
      expect(events).toHaveLength(1);
      expect(events[0].details).toMatchObject({
        action: 'none',
        policy: 'report',
        advice: { action: 'rotate_keys', partner_id: keys.partner_id, key_pair_id: keys.key_pair_id, revoke_issued_tokens: true },
      });
      const exchanged = await fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
      expect(exchanged.status).toBe(200);
      // Its own limit per client address: the 4th request in the window is refused before anything is read.
      expect((await fetch(`${server.url}/secret-scanning/github`, { method: 'POST', ...signed('[]') })).status).toBe(200);
      expect((await fetch(`${server.url}/secret-scanning/github`, { method: 'POST', ...signed('[]') })).status).toBe(200);
      const limited = await fetch(`${server.url}/secret-scanning/github`, { method: 'POST', ...signed('[]') });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
      // The token endpoint's throttle is separate.
      expect(
        (
          await fetch(`${server.url}/public/v1/auth/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
          })
        ).status,
      ).toBe(200);
    } finally {
      await server.stop();
    }
  });
});
