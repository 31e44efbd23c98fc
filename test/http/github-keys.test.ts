import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAppError } from '../../src/errors.js';
import { GitHubKeys, REFETCH_MS, RETRY_FAILED_MS } from '../../src/http/routes/github-keys.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';

const github = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const KEY_ID = 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c';

/** GitHub's key list on loopback, which the test takes down (503) and brings back; its fetches counted. */
async function startKeyServer(keys: Record<string, KeyObject>) {
  let fetches = 0;
  let up = true;
  const server: Server = createServer((_request, response) => {
    fetches++;
    if (!up) {
      response.writeHead(503).end('down');
      return;
    }
    const body = JSON.stringify({
      public_keys: Object.entries(keys).map(([id, key]) => ({ key_identifier: id, key: key.export({ type: 'spki', format: 'pem' }).toString(), is_current: true })),
    });
    response.writeHead(200, { 'content-type': 'application/json' }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/meta/public_keys/secret_scanning`,
    fetches: () => fetches,
    setUp: (value: boolean) => {
      up = value;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'none';
  } catch (error) {
    return isAppError(error) ? error.code : String(error);
  }
}

describe('GitHubKeys: the key list and its outages, on a test clock', () => {
  let keyServer: Awaited<ReturnType<typeof startKeyServer>>;
  beforeAll(async () => {
    keyServer = await startKeyServer({ [KEY_ID]: github.publicKey });
  });
  afterAll(async () => {
    await keyServer?.close();
  });

  it('down on first use: key_list_unavailable, retried after a short backoff, not a minute; back up: the key at once', async () => {
    let now = 1_000_000;
    const keys = new GitHubKeys(new URL(keyServer.url), { now: () => now });
    keyServer.setUp(false);
    const before = keyServer.fetches();
    expect(await codeOf(keys.key(KEY_ID))).toBe('key_list_unavailable');
    expect(keyServer.fetches()).toBe(before + 1);
    // Within the backoff: the same 503, no fetch.
    now += RETRY_FAILED_MS - 1;
    expect(await codeOf(keys.key(KEY_ID))).toBe('key_list_unavailable');
    expect(keyServer.fetches()).toBe(before + 1);
    // Still down after it: fetched again, and still retryable, never a refusal.
    now += 1;
    expect(await codeOf(keys.key(KEY_ID))).toBe('key_list_unavailable');
    expect(keyServer.fetches()).toBe(before + 2);
    keyServer.setUp(true);
    now += RETRY_FAILED_MS;
    expect((await keys.key(KEY_ID))?.asymmetricKeyType).toBe('ec');
    expect(keyServer.fetches()).toBe(before + 3);
  });

  it('a list that was fetched: an unknown id is null (a refusal), fetched again at most once a minute', async () => {
    let now = 5_000_000;
    keyServer.setUp(true);
    const keys = new GitHubKeys(new URL(keyServer.url), { now: () => now });
    const before = keyServer.fetches();
    expect(await keys.key('not-ours')).toBeNull();
    expect(await keys.key('not-ours-either')).toBeNull();
    expect(keyServer.fetches()).toBe(before + 1);
    // A known key needs no fetch even while the list is down.
    keyServer.setUp(false);
    now += REFETCH_MS;
    expect(await keys.key(KEY_ID)).not.toBeNull();
    expect(keyServer.fetches()).toBe(before + 1);
    // An unknown id once the minute is over, with the list down: unavailable (it may be a new key of GitHub's).
    expect(await codeOf(keys.key('rotated-in'))).toBe('key_list_unavailable');
    expect(keyServer.fetches()).toBe(before + 2);
    keyServer.setUp(true);
  });

  it('concurrent alerts share one fetch', async () => {
    const keys = new GitHubKeys(new URL(keyServer.url), { now: () => 0 });
    const before = keyServer.fetches();
    const found = await Promise.all([keys.key(KEY_ID), keys.key(KEY_ID), keys.key('other')]);
    expect(found.map((key) => key !== null)).toEqual([true, true, false]);
    expect(keyServer.fetches()).toBe(before + 1);
  });
});

describe('a real serve with the key list down on first use', () => {
  let backend: TestBackend;
  let keyServer: Awaited<ReturnType<typeof startKeyServer>>;
  let server: Served | undefined;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    keyServer = await startKeyServer({ [KEY_ID]: github.publicKey });
  });
  afterAll(async () => {
    await server?.stop();
    await keyServer?.close();
    await backend?.dispose();
  });

  it('answers 503 key_list_unavailable with its own message, then accepts the next signed alert once the list is back', async () => {
    keyServer.setUp(false);
    server = await serveInProcess({ ...backend.env, PUBLIC_API_SECRET_SCANNING: 'github', PUBLIC_API_SECRET_SCANNING_KEYS_URL: keyServer.url });
    const body = JSON.stringify([{ token: 'pctl_sk_nothing', type: 'partnerctl_secret_key', url: 'https://github.com/o/r', source: 'content' }]);
    const post = () =>
      fetch(`${server!.url}/secret-scanning/github`, {
        method: 'POST',
        body,
        headers: {
          'content-type': 'application/json',
          'github-public-key-identifier': KEY_ID,
          'github-public-key-signature': sign('sha256', Buffer.from(body), { key: github.privateKey, dsaEncoding: 'der' }).toString('base64'),
        },
      });
    const down = await post();
    expect(down.status).toBe(503);
    const { error } = (await down.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('key_list_unavailable');
    expect(error.message).toMatch(/GitHub's secret-scanning key list/);
    expect(error.message).not.toMatch(/recommendation engine/);

    keyServer.setUp(true);
    // Every answer until the list is used again is a retryable 503, and the first one after is accepted:
    // never a 401, which GitHub would not retry.
    const statuses: number[] = [];
    const started = Date.now();
    let status = 0;
    while (status !== 200 && Date.now() - started < RETRY_FAILED_MS + 3_000) {
      status = (await post()).status;
      statuses.push(status);
      if (status !== 200) await sleep(100);
    }
    expect(new Set(statuses.slice(0, -1))).toEqual(new Set(statuses.length > 1 ? [503] : []));
    expect(status).toBe(200);
    expect(Date.now() - started).toBeLessThan(RETRY_FAILED_MS + 1_500);
  });
});
