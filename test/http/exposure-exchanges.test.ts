// Issue 38.4: exposure counts token exchanges. A pair's secret exchanged from two addresses (and tried with
// a wrong secret from one of them) and its tokens used from a third: `exposure` reports all three addresses
// with exact counts, in text, --json and --csv.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { bearer, buildTestApp, seedPartner, startUpstream, type TestApp, type TestUpstream } from './support.js';

describe.each(BACKENDS)('38.4: exposure reports where a secret minted tokens (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('38.4: two exchange addresses and a third use address, with exact counts', async () => {
      const p = await seedPartner(db, ['acme']);
      const [minter1, minter2, user] = ['203.0.113.7', '203.0.113.8', '198.51.100.20'];
      const exchange = (secretKey: string, remoteAddress: string) =>
        t.inject({ method: 'POST', url: '/public/v1/auth/token', remoteAddress, payload: { access_key: p.accessKey, secret_key: secretKey } });
      const tokens: string[] = [];
      for (const address of [minter1, minter1, minter2]) {
        const response = await exchange(p.secretKey, address);
        expect(response.statusCode).toBe(200);
        tokens.push(response.json().access_token);
      }
      const wrong = p.secretKey.endsWith('xx') ? `${p.secretKey.slice(0, -2)}yy` : `${p.secretKey.slice(0, -2)}xx`;
      expect((await exchange(wrong, minter2)).statusCode).toBe(401);
      for (const token of [tokens[0]!, tokens[2]!, tokens[2]!]) {
        expect((await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', remoteAddress: user, headers: bearer(token) })).statusCode).toBe(200);
      }
      expect(await t.services.exposure.flush()).toBe(true);

      const json = await runCli(['--json', 'exposure', p.keyPairId], backend.env);
      expect(json.code, json.stderr).toBe(0);
      const report = json.json();
      expect(report.addresses.map((a: { client_address: string; requests: number }) => [a.client_address, a.requests])).toEqual([[user, 3]]);
      expect(report.companies.map((c: { company_id: string; requests: number }) => [c.company_id, c.requests])).toEqual([['acme', 3]]);
      expect(report.tokens_minted_from).toEqual([
        { client_address: minter1, minted: 2, failed_attempts: 0, first_seen: expect.any(String), last_seen: expect.any(String) },
        { client_address: minter2, minted: 1, failed_attempts: 1, first_seen: expect.any(String), last_seen: expect.any(String) },
      ]);
      // The partner's view holds them too; a token's none (it was minted, it minted nothing).
      expect((await runCli(['--json', 'exposure', p.partnerId], backend.env)).json().tokens_minted_from).toHaveLength(2);

      const text = await runCli(['exposure', p.keyPairId], backend.env);
      expect(text.stdout).toContain('Tokens minted from:');
      expect(text.stdout).toMatch(new RegExp(`${minter2.replace(/\./g, '\\.')}\\s+1\\s+1\\s`));
      const csv = await runCli(['exposure', p.keyPairId, '--csv'], backend.env);
      const rows = csv.stdout.trim().split('\n');
      expect(rows.filter((row) => row.startsWith('minted_from,'))).toEqual([
        expect.stringMatching(new RegExp(`^minted_from,${minter1},2,2,0,0,`)),
        expect.stringMatching(new RegExp(`^minted_from,${minter2},2,1,1,0,`)),
      ]);
      expect(rows.filter((row) => row.startsWith('address,'))).toEqual([expect.stringMatching(new RegExp(`^address,${user},3,3,0,0,`))]);
    });
  });
});
