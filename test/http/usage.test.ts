import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { clearOfHourBoundary } from '../support/hours.js';
import { serveInProcess } from '../support/serve.js';
import { tokenFor } from '../hardening/support.js';
import { bearer, buildTestApp, seedPartner, startUpstream, type TestUpstream } from './support.js';

const HOUR_MS = 3_600_000;

describe.each(BACKENDS)('usage per partner, company and hour (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let upstream: TestUpstream;

    const cli = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
      const result = await runCli(['--json', '--yes', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json<T>();
    };

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      upstream = await startUpstream();
      // The engine fails for one path: a 5xx of the engine's.
      upstream.respond = (request) => (request.url.startsWith('/failing') ? { status: 500, body: '{"error":"boom"}' } : {});
    });
    afterAll(async () => {
      await upstream?.close();
      await backend?.dispose();
    });

    it('a real serve counts accepted, 4xx, 5xx and 429 per company and writes them on close; usage sums them', async () => {
      const partner = await cli<{ partner_id: string }>('create-partner', '--name', 'Usage A');
      const keys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Usage A');
      await cli('map-company', 'Usage A', '--company', 'acme');
      await cli('map-company', 'Usage A', '--company', 'globex');
      // Four requests at once, then 429 (one a minute after that).
      await cli('set-limits', 'Usage A', '--rate', '1/m', '--burst', '4');
      const other = await cli('create-partner', '--name', 'Usage B');
      const otherKeys = await cli<{ access_key: string; secret_key: string }>('issue-keys', 'Usage B');
      await cli('map-company', 'Usage B', '--company', 'acme');

      // The requests, and the hour computed below, in one hour.
      await clearOfHourBoundary();
      const server = await serveInProcess({ ...backend.env, PUBLIC_API_UPSTREAM_URL: upstream.url });
      try {
        const tokenOf = (k: { access_key: string; secret_key: string }) => tokenFor(server.url, k.access_key, k.secret_key);
        const token = await tokenOf(keys);
        const get = async (path: string, company: string, t = token) =>
          (await fetch(`${server.url}/public/v1/${path}?company_id=${company}`, { headers: bearer(t) })).status;
        const statuses = [
          await get('prices', 'acme'),
          await get('prices', 'globex'),
          await get('failing', 'acme'),
          await get('prices', 'not-mapped'),
          await get('prices', 'acme'),
          await get('prices', 'acme'),
        ];
        expect(statuses.slice(0, 2)).toEqual([200, 200]);
        expect(statuses[2]).toBeGreaterThanOrEqual(500);
        expect(statuses.slice(3)).toEqual([404, 429, 429]);
        const otherToken = await tokenOf(otherKeys);
        for (let i = 0; i < 7; i++) expect(await get('prices', 'acme', otherToken)).toBe(200);
        // Unauthenticated requests name no partner: not counted.
        expect((await fetch(`${server.url}/public/v1/prices?company_id=acme`)).status).toBe(401);
      } finally {
        expect(await server.stop()).toBe(0);
      }

      const hour = new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS).toISOString();
      const totals = await cli('usage');
      expect(totals.rows).toEqual([
        { partner_id: other.partner_id, period_start: hour, requests: 7, accepted: 7, client_errors: 0, server_errors: 0, rate_limited: 0 },
        { partner_id: partner.partner_id, period_start: hour, requests: 6, accepted: 2, client_errors: 3, server_errors: 1, rate_limited: 2 },
      ]);

      const byCompany = await cli('usage', 'Usage A', '--by', 'company', '--since', '7d');
      expect(byCompany.rows).toEqual([
        // Answered before the company was known (refused company, over the limit): no company.
        { partner_id: partner.partner_id, company_id: null, period_start: hour, requests: 3, accepted: 0, client_errors: 3, server_errors: 0, rate_limited: 2 },
        { partner_id: partner.partner_id, company_id: 'acme', period_start: hour, requests: 2, accepted: 1, client_errors: 0, server_errors: 1, rate_limited: 0 },
        { partner_id: partner.partner_id, company_id: 'globex', period_start: hour, requests: 1, accepted: 1, client_errors: 0, server_errors: 0, rate_limited: 0 },
      ]);

      const byHour = await cli<{ rows: Record<string, unknown>[] }>('usage', '--by', 'hour', '--limit', '1');
      expect(byHour.rows).toHaveLength(1);
      expect(byHour.rows[0]).toMatchObject({ period_start: hour, requests: 7 });
      const byDay = await cli('usage', partner.partner_id, '--by', 'day');
      expect(byDay.rows).toEqual([
        { partner_id: partner.partner_id, period_start: `${hour.slice(0, 10)}T00:00:00.000Z`, requests: 6, accepted: 2, client_errors: 3, server_errors: 1, rate_limited: 2 },
      ]);
      // A window that starts after the counts: nothing.
      expect((await cli('usage', '--since', new Date(Date.now() + 2 * HOUR_MS).toISOString())).rows).toEqual([]);

      const table = await runCli(['usage', '--by', 'company'], backend.env);
      expect(table.code, table.stderr).toBe(0);
      // Through a pipe: tab-separated records, no header.
      expect(table.stdout).toMatch(/^Usage A \(ptn_\w+\)\t\(none\)\t/m);
      expect(table.stdout).not.toMatch(/REQUESTS/);

      const bad = await runCli(['usage', '--by', 'week'], backend.env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--by must be company, hour or day, got 'week'/);
      const missing = await runCli(['usage', 'nobody-here'], backend.env);
      expect(missing.code).toBe(3);
    });

    it('a running server writes its counts every interval, adding to the rows (no close needed)', async () => {
      const db = await openMigrated({ ...backend });
      // A clock a minute into this hour, running: every count falls in that one hour, whenever the test runs.
      const offset = Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 60_000 - Date.now();
      const clock = { now: () => Date.now() + offset };
      const t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url }, { usageFlushMs: 100, clock });
      try {
        const seeded = await seedPartner(db);
        const token = (await mintToken(t.keys, { partnerId: seeded.partnerId, keyPairId: seeded.keyPairId }, undefined, clock)).accessToken;
        const get = () => t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(token) });
        const rowsOf = async () => (await cli<{ rows: Record<string, unknown>[] }>('usage', seeded.partnerId, '--by', 'company')).rows;
        const waitFor = async (requests: number) => {
          const started = Date.now();
          while (Date.now() - started < 5_000) {
            const rows = await rowsOf();
            if (rows[0]?.requests === requests) return rows;
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          return rowsOf();
        };
        for (let i = 0; i < 3; i++) expect((await get()).statusCode).toBe(200);
        expect(await waitFor(3)).toMatchObject([{ company_id: 'acme', accepted: 3 }]);
        for (let i = 0; i < 2; i++) await get();
        expect(await waitFor(5)).toMatchObject([{ company_id: 'acme', accepted: 5, requests: 5 }]);
        expect(t.services.usage!.pending).toBe(0);
      } finally {
        await t.close();
        await db.close();
      }
    });
  });
});
