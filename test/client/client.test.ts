import { rmSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PartnerApiError, PartnerClient } from '@partnerctl/client';
import type { Database } from '../../src/db/client.js';
import { setPartnerStatus } from '../../src/domain/partners.js';
import { SigningKeys } from '../../src/domain/signing-keys.js';
import { startServer, type RunningServer } from '../../src/http/server.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { seedPartner, startUpstream, UUID, who, type SeededPartner, type TestUpstream } from '../http/support.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(BACKENDS)('partner client against the real server (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let server: RunningServer;
    let partner: SeededPartner;
    const clients: PartnerClient[] = [];

    const clientFor = (who: SeededPartner, options: { renewBeforeSeconds?: number } = {}) => {
      const client = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: who.accessKey, secretKey: who.secretKey, ...options });
      clients.push(client);
      return client;
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      server = await startServer({ port: 0, upstream: upstream.url, logger: false, env: backend.env });
      partner = await seedPartner(db, ['acme']);
    });
    beforeEach(() => {
      upstream.received.length = 0;
    });
    afterAll(async () => {
      for (const client of clients) client.close();
      await server?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('exchanges once, caches the token, and puts company_id where the method wants it', async () => {
      const client = clientFor(partner);
      const got = await client.get<{ engine: string }>('/prices', 'acme', { query: { sku: ['a', 'b'] } });
      expect(got.status).toBe(200);
      expect(got.data.engine).toBe('ok');
      expect(got.requestId).toMatch(UUID);
      await client.post('/prices', 'acme', { items: [1] });
      await client.delete('/prices/1', 'acme');
      expect(client.exchanges).toBe(1);
      const [get, post, del] = upstream.received;
      expect(get!.url).toBe('/prices?sku=a&sku=b&company_id=acme');
      expect(post!.url).toBe('/prices');
      expect(JSON.parse(post!.body)).toEqual({ items: [1], company_id: 'acme' });
      expect(del!.url).toBe('/prices/1?company_id=acme');
      expect(new Set(upstream.received.map((seen) => seen.headers['x-partner-id']))).toEqual(new Set([partner.partnerId]));
    });

    it('re-exchanges in the background before expiry', async () => {
      // expires_in is 900 s; renewing 899 s before expiry puts the renewal 1 s after the first exchange.
      const client = clientFor(partner, { renewBeforeSeconds: 899 });
      const first = await client.token();
      expect(client.exchanges).toBe(1);
      await sleep(1_600);
      expect(client.exchanges).toBe(2);
      const second = await client.token();
      expect(second).not.toBe(first);
      expect((await client.get('/prices', 'acme')).status).toBe(200);
      expect(client.exchanges).toBe(2);
    });

    it('on a 401 exchanges once more and retries the request once', async () => {
      const client = clientFor(partner);
      await client.get('/prices', 'acme');
      // A new signing-key file: the server reloads it within a second and the cached token stops verifying.
      rmSync(backend.env.PARTNERCTL_SIGNING_KEY_FILE!);
      SigningKeys.open(backend.env.PARTNERCTL_SIGNING_KEY_FILE!);
      await sleep(1_500);
      upstream.received.length = 0;
      const response = await client.get('/prices', 'acme');
      expect(response.status).toBe(200);
      expect(client.exchanges).toBe(2);
      expect(upstream.received).toHaveLength(1);
    });

    it('retries only once: a refused re-exchange surfaces as invalid_credentials', async () => {
      const disabled = await seedPartner(db, ['acme']);
      const client = clientFor(disabled);
      await client.get('/prices', 'acme');
      await setPartnerStatus(db, who, disabled.partnerId, 'disabled');
      await sleep(1_100);
      const failure = await client.get('/prices', 'acme').catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(PartnerApiError);
      expect((failure as PartnerApiError).status).toBe(401);
      expect((failure as PartnerApiError).code).toBe('invalid_credentials');
      expect(client.exchanges).toBe(2);
    });

    it('reports API errors with their code and request id', async () => {
      const client = clientFor(partner);
      const failure = (await client.get('/prices', 'not-mine').catch((error: unknown) => error)) as PartnerApiError;
      expect(failure).toBeInstanceOf(PartnerApiError);
      expect(failure.status).toBe(404);
      expect(failure.code).toBe('not_found');
      expect(failure.requestId).toMatch(UUID);
      const wrongKeys = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: partner.accessKey, secretKey: 'pctl_sk_wrong' });
      await expect(wrongKeys.token()).rejects.toMatchObject({ status: 401, code: 'invalid_credentials' });
      await expect(client.get('/x', '')).rejects.toThrow(TypeError);
    });
  });
});
