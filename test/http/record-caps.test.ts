// Issue 38.3: caps that protect the records, not the attacker. A flood from one expired token (from 100
// addresses, through a trusted proxy), from 100 token-less addresses and from one IPv6 /64 leaves the
// partner's other refusals on record, and every count is exact: recorded + held back = all it had.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { TestClock } from '../support/clock.js';
import { bearer, buildTestApp, seedPartner, type TestApp } from './support.js';

const CAP = 100;
const TOTAL = 400;
const MINUTE_MS = 60_000;

describe.each(BACKENDS)('38.3: floods leave the partner\'s other refusals on record, counts exact (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let t: TestApp;
    const clock = new TestClock(Math.floor(Date.now() / MINUTE_MS) * MINUTE_MS - 30 * MINUTE_MS);
    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      t = await buildTestApp(
        backend,
        db,
        { PUBLIC_API_UPSTREAM_URL: 'http://127.0.0.1:9', PUBLIC_API_TRUSTED_PROXIES: '127.0.0.1', PUBLIC_API_RECORDS_PER_MINUTE: String(TOTAL) },
        { clock, decisionCapPerMinute: CAP },
      );
    });
    afterAll(async () => {
      await t?.close();
      await db?.close();
      await backend?.dispose();
    });

    it('38.3: one expired token from 100 addresses, 100 token-less addresses, one /64', async () => {
      const p = await seedPartner(db, ['acme']);
      const exchange = (secretKey: string, from: string) =>
        t.inject({ method: 'POST', url: '/public/v1/auth/token', headers: { 'x-forwarded-for': from }, payload: { access_key: p.accessKey, secret_key: secretKey } });
      const pair = { partnerId: p.partnerId, keyPairId: p.keyPairId };
      const expired = (await mintToken(t.keys, pair, 900, clock)).accessToken;
      clock.advance(16 * MINUTE_MS);
      const token = (await mintToken(t.keys, pair, 900, clock)).accessToken;
      // Every flood below in this one minute (the test clock stands still).
      const ask = (bearerToken: string | null, from: string, company = 'acme') =>
        t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${company}`, headers: { 'x-forwarded-for': from, ...(bearerToken === null ? {} : bearer(bearerToken)) } });
      const expect401 = async (response: Promise<{ statusCode: number; body: string }>) => {
        const answered = await response;
        if (answered.statusCode !== 401) throw new Error(`answered ${answered.statusCode}: ${answered.body}`);
      };

      for (let i = 0; i < 300; i++) await expect401(ask(expired, `198.51.100.${(i % 100) + 1}`));
      for (let i = 0; i < 300; i++) await expect401(ask(null, `2001:db8:1:2::${(i + 1).toString(16)}`));
      for (let i = 0; i < 600; i++) await expect401(ask(null, `203.0.113.${(i % 100) + 1}`));
      // The partner's real servers, refused for their own reasons meanwhile.
      const others: string[] = [];
      for (let i = 0; i < 5; i++) {
        const response = await ask(token, '192.0.2.50', 'acme-7');
        expect(response.statusCode, response.body).toBe(404);
        others.push(response.json().error.request_id);
      }
      const wrong = p.secretKey.endsWith('xx') ? `${p.secretKey.slice(0, -2)}yy` : `${p.secretKey.slice(0, -2)}xx`;
      for (let i = 0; i < 3; i++) {
        const response = await exchange(wrong, '192.0.2.51');
        expect(response.statusCode).toBe(401);
        others.push(response.json().error.request_id);
      }
      expect(await t.services.decisions.flush()).toBe(true);

      for (const id of others) expect((await cli('explain', id)).partner_id).toBe(p.partnerId);
      const since = new Date(clock.now() - MINUTE_MS).toISOString();
      const until = new Date(clock.now() + MINUTE_MS).toISOString();
      const partnerView = await cli('refusals', p.partnerId, '--since', since, '--until', until);
      expect(partnerView.counts.map((c: { reason: string; refusals: number }) => [c.reason, c.refusals]).sort()).toEqual(
        [['company_not_mapped', 5], ['secret_mismatch', 3], ['token_expired', CAP / 10]].sort(),
      );
      expect(partnerView.recorded).toBe(5 + 3 + CAP / 10);
      expect(partnerView.unrecorded).toEqual({ instance: 0, partner: 0, key_pair: 0, token: 300 - CAP / 10, address: 0, overflow: 0 });
      expect(partnerView.total).toBe(300 + 5 + 3);

      const everyone = await cli('refusals', '--since', since, '--until', until, '--by', 'address', '--reason', 'token_missing');
      const byAddress = new Map<string, number>(everyone.counts.map((c: { client_address: string; refusals: number }) => [c.client_address, c.refusals]));
      const fromSlash64 = [...byAddress].filter(([address]) => address.startsWith('2001:db8:1:2::')).reduce((sum, [, n]) => sum + n, 0);
      const fromMany = [...byAddress].filter(([address]) => address.startsWith('203.0.113.')).reduce((sum, [, n]) => sum + n, 0);
      // The /64 is one client: its cap; the 100 addresses share what is left of half the total.
      expect(fromSlash64).toBe(CAP);
      expect(fromMany).toBe(TOTAL / 2 - CAP);
      expect(everyone.unrecorded).toEqual({ instance: 600 - (TOTAL / 2 - CAP), partner: 0, key_pair: 0, token: 300 - CAP / 10, address: 300 - CAP, overflow: 0 });
      const text = await runCli(['refusals', p.partnerId, '--since', since, '--until', until], backend.env);
      expect(text.stdout).toContain(`Held back by the caps, counted only: ${300 - CAP / 10} (${300 - CAP / 10} over one token's share).`);
      expect(text.stdout).toContain(`In all: ${300 + 5 + 3} (${5 + 3 + CAP / 10} on record + ${300 - CAP / 10} held back).`);
    });
  });
});
