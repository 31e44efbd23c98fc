import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { keyPairById } from '../../src/db/repositories/key-pairs.js';
import { revokeTokens } from '../../src/domain/operations/key-pairs.js';
import { setLimits } from '../../src/domain/operations/limits.js';
import { setNetwork } from '../../src/domain/operations/networks.js';
import { setPartnerStatus } from '../../src/domain/operations/partners.js';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { parseRate } from '../../src/rates.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { bearer, buildTestApp, exchangeSecret, explained, seedPartner, startUpstream, tokenFor, UUID, who, type TestApp, type TestUpstream } from './support.js';

type Injected = { statusCode: number; body: string; json(): { error: { request_id: string } } };

const FLOOD = 5_000;
const CAP = 1_000;

describe.each(BACKENDS)('refusals on record, explained; exposure (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    const cli = (...args: string[]) => runCli(['--json', '--yes', ...args], backend.env);

    const exchange = (keys: { accessKey: string; secretKey: string }, remoteAddress?: string) => exchangeSecret(t, keys, remoteAddress);
    const data = (token: string | null, company: string, remoteAddress = '127.0.0.1', extra = '') =>
      t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${company}${extra}`, remoteAddress, headers: token === null ? {} : bearer(token) });
    /** The request id of an error answer, from its envelope. */
    const refusedId = (response: Injected, status: number): string => {
      expect(response.statusCode, response.body).toBe(status);
      const id = response.json().error.request_id as string;
      expect(id).toMatch(UUID);
      return id;
    };
    const written = async () => {
      expect(await t.services.decisions.flush()).toBe(true);
      expect(await t.services.exposure.flush()).toBe(true);
    };
    const explain = (id: string) => explained(backend.env, id);

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

    it('records each refusal with its reason code, and explains it from the request id of the error envelope', async () => {
      const p = await seedPartner(db, ['acme']);
      const token = await tokenFor(t, p);
      const ids: Record<string, string> = {};
      ids.token_missing = refusedId(await data(null, 'acme'), 401);
      ids.token_invalid = refusedId(await data('eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0.c2ln', 'acme'), 401);
      ids.api_key_in_request = refusedId(await data(token, 'acme', '127.0.0.1', `&access_key=${p.accessKey}`), 400);
      ids.credentials_malformed = refusedId(await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: p.accessKey } }), 400);
      ids.pair_unknown = refusedId(await exchange({ accessKey: 'pctl_ak_nothing', secretKey: p.secretKey }), 401);
      // Another ending than the secret's own (one secret in 3,844 ends in xx: the test then exchanged the real one).
      const wrongEnding = p.secretKey.endsWith('xx') ? 'yy' : 'xx';
      ids.secret_mismatch = refusedId(await exchange({ accessKey: p.accessKey, secretKey: `${p.secretKey.slice(0, -2)}${wrongEnding}` }), 401);
      ids.company_not_mapped = refusedId(await data(token, 'acme-7'), 404);

      const limited = await seedPartner(db, ['acme']);
      await setLimits(db, who, limited.partnerId, { rate: parseRate('1/h', '--rate'), burst: 1 });
      const walled = await seedPartner(db, ['acme']);
      await setNetwork(db, who, walled.partnerId, ['10.9.0.0/16']);
      const disabled = await seedPartner(db, ['acme']);
      const disabledToken = await tokenFor(t, disabled);
      await revokeTokens(db, who, p.partnerId);
      await setPartnerStatus(db, who, disabled.partnerId, 'disabled');
      await t.access.refresh();
      ids.tokens_revoked = refusedId(await data(token, 'acme'), 401);
      ids.partner_disabled = refusedId(await data(disabledToken, 'acme'), 401);
      ids.address_not_allowed = refusedId(await exchange(walled, '192.0.2.7'), 403);
      const limitedToken = await tokenFor(t, limited);
      expect((await data(limitedToken, 'acme')).statusCode).toBe(200);
      ids.rate_limited = refusedId(await data(limitedToken, 'acme'), 429);
      await written();

      for (const [reason, id] of Object.entries(ids)) {
        const explained = await explain(id);
        expect(Object.keys(explained)).toEqual([
          'request_id', 'at', 'status', 'reason', 'route', 'method', 'path', 'partner_id', 'key_pair_id', 'token_id', 'company_id', 'client_address',
          'engine_status', 'engine_ms', 'bytes', 'trace_id', 'instance_id', 'explanation', 'actor', 'remedy',
        ]);
        expect(explained, reason).toMatchObject({ request_id: id, reason, instance_id: t.services.registry.instanceId });
        expect(explained.explanation.length, reason).toBeGreaterThan(20);
      }
      expect(await explain(ids.company_not_mapped!)).toMatchObject({
        status: 404,
        partner_id: p.partnerId,
        key_pair_id: p.keyPairId,
        company_id: 'acme-7',
        client_address: '127.0.0.1',
        remedy: `partnerctl map-company ${p.name} --company acme-7`,
      });
      expect((await explain(ids.company_not_mapped!)).token_id).toMatch(new RegExp(`^${p.partnerId}\\.${p.keyPairId}\\.`));
      const braked = await explain(ids.tokens_revoked!);
      expect(braked.explanation).toMatch(/^token issued \S+ before the brake of \S+: the client must exchange again$/);
      expect(braked.remedy).toBeNull();
      expect(await explain(ids.secret_mismatch!)).toMatchObject({ status: 401, partner_id: p.partnerId, key_pair_id: p.keyPairId, token_id: null });
      expect((await explain(ids.partner_disabled!)).remedy).toBe(`partnerctl enable-partner ${disabled.name}`);
      expect(await explain(ids.address_not_allowed!)).toMatchObject({
        client_address: '192.0.2.7',
        remedy: expect.stringMatching(/^partnerctl lookup kp_\w+$/),
      });
      expect(await explain(ids.rate_limited!)).toMatchObject({ status: 429, partner_id: limited.partnerId });

      const text = await runCli(['explain', ids.company_not_mapped!], backend.env);
      expect(text.stdout).toContain(`To change the answer: partnerctl map-company ${p.name} --company acme-7`);
      const unknown = await runCli(['explain', '00000000-0000-4000-8000-000000000000'], backend.env);
      expect(unknown.code).toBe(3);
      expect(unknown.stderr).toMatch(/not_found: nothing is on record for request \S+, and its id carries no time/);

      // refusals: counts by reason, by company and by address, the latest with their request ids.
      const byReason = (await cli('refusals', p.partnerId, '--since', '1h')).json();
      expect(byReason.counts.map((c: { reason: string; refusals: number }) => [c.reason, c.refusals]).sort()).toEqual(
        [['company_not_mapped', 1], ['secret_mismatch', 1], ['tokens_revoked', 1]].sort(),
      );
      expect(byReason.latest.map((d: { request_id: string }) => d.request_id).sort()).toEqual([ids.company_not_mapped, ids.secret_mismatch, ids.tokens_revoked].sort());
      // Refused before any credential was read: no partner on record.
      expect((await explain(ids.api_key_in_request!)).partner_id).toBeNull();
      expect(byReason.unrecorded).toEqual({ instance: 0, partner: 0, key_pair: 0, token: 0, address: 0, overflow: 0 });
      expect(byReason.total).toBe(byReason.recorded);
      const byCompany = (await cli('refusals', p.partnerId, '--since', '1h', '--by', 'company', '--reason', 'company_not_mapped')).json();
      expect(byCompany.counts).toEqual([{ reason: 'company_not_mapped', company_id: 'acme-7', refusals: 1, latest_at: expect.any(String) }]);
      const byAddress = (await cli('refusals', '--since', '1h', '--by', 'address', '--reason', 'address_not_allowed')).json();
      expect(byAddress.counts).toEqual([{ reason: 'address_not_allowed', client_address: '192.0.2.7', refusals: 1, latest_at: expect.any(String) }]);
      const badReason = await cli('refusals', '--reason', 'nope');
      expect(badReason.code).toBe(2);
    });

    it('records an expired token against its partner, pair and token; a refused exchange as an exchange', async () => {
      const p = await seedPartner(db, ['acme']);
      const { accessToken, claims } = await mintToken(t.keys, { partnerId: p.partnerId, keyPairId: p.keyPairId }, 1);
      await new Promise((resolve) => setTimeout(resolve, claims.exp * 1000 - Date.now() + 50));
      const expired = refusedId(await data(accessToken, 'acme'), 401);
      const malformed = refusedId(await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: p.accessKey } }), 400);
      await written();
      expect(await explain(expired)).toMatchObject({ reason: 'token_expired', partner_id: p.partnerId, key_pair_id: p.keyPairId, token_id: claims.jti });
      const text = await runCli(['explain', malformed], backend.env);
      expect(text.stdout).toContain('token exchange POST /public/v1/auth/token from 127.0.0.1');
    });

    it('holds the cap under a flood from one address, counting what it did not record', async () => {
      const flooder = '198.51.100.9';
      for (let i = 0; i < FLOOD; i++) {
        const response = await data(null, 'acme', flooder);
        if (response.statusCode !== 401) throw new Error(`answered ${response.statusCode}`);
      }
      await written();
      const perMinute = await db.sql.query<{ minute: string; rows: number | string }>(
        provider === 'postgresql'
          ? "SELECT to_char(date_trunc('minute', at), 'HH24:MI') AS minute, COUNT(*) AS rows FROM gate_decisions WHERE client_address = $1 GROUP BY 1"
          : 'SELECT substr(at, 12, 5) AS minute, COUNT(*) AS rows FROM gate_decisions WHERE client_address = $1 GROUP BY 1',
        [flooder],
      );
      const unrecorded = await db.sql.query<{ minute: string; refusals: number | string }>(
        provider === 'postgresql'
          ? "SELECT to_char(minute, 'HH24:MI') AS minute, refusals FROM gate_decisions_unrecorded WHERE key_kind = 'address' AND key_value = $1"
          : "SELECT substr(minute, 12, 5) AS minute, refusals FROM gate_decisions_unrecorded WHERE key_kind = 'address' AND key_value = $1",
        [flooder],
      );
      const recorded = perMinute.reduce((sum, row) => sum + Number(row.rows), 0);
      const notRecorded = unrecorded.reduce((sum, row) => sum + Number(row.refusals), 0);
      // The cap is per minute: a flood that straddles a minute is capped in each minute it fills, and a
      // minute that never reached the cap (the flood's tail on a slow machine) records all of its refusals.
      for (const row of perMinute) {
        const over = unrecorded.filter((u) => u.minute === row.minute).reduce((sum, u) => sum + Number(u.refusals), 0);
        if (over > 0) expect(Number(row.rows)).toBe(CAP);
        else expect(Number(row.rows)).toBeLessThanOrEqual(CAP);
      }
      expect(unrecorded.every((u) => perMinute.some((row) => row.minute === u.minute))).toBe(true);
      expect(notRecorded).toBeGreaterThan(0);
      expect(recorded + notRecorded).toBe(FLOOD);
      const shown = (await cli('refusals', '--since', '1h', '--by', 'address', '--reason', 'token_missing')).json();
      expect(shown.counts).toContainEqual({ reason: 'token_missing', client_address: flooder, refusals: recorded, latest_at: expect.any(String) });
      expect(shown.unrecorded.address).toBe(notRecorded);
    });

    it('counts the refusals a revocation caused though the refusing instance dated them before it (its clock behind the CLI\'s)', async () => {
      const leaked = await seedPartner(db, ['c1']);
      // Another instance whose clock reads an instant taken before the revocation: every instance's reading of
      // the database's clock has its error (docs/server.md), and a refusal the revocation caused may be dated
      // before the CLI's dating of the revocation. Frozen, so that the dating does not depend on the machine's pace.
      const before = db.clock.now();
      const behind = await openDatabase(resolveDatabase(backend.url, {}), { clock: { now: () => before } });
      const late = await buildTestApp(backend, behind, { PUBLIC_API_UPSTREAM_URL: upstream.url });
      try {
        const address = '203.0.113.7';
        // Before the revocation: another reason, dated before it too; not after the containment.
        const wrongEnding = leaked.secretKey.endsWith('xx') ? 'yy' : 'xx';
        refusedId(await exchangeSecret(late, { accessKey: leaked.accessKey, secretKey: `${leaked.secretKey.slice(0, -2)}${wrongEnding}` }, address), 401);
        const revoked = await cli('revoke-keys', leaked.partnerId, '--key-pair', leaked.keyPairId);
        expect(revoked.code, revoked.stderr).toBe(0);
        await late.access.refresh();
        refusedId(await exchangeSecret(late, leaked, address), 401);
        refusedId(await exchangeSecret(late, leaked, address), 401);
        expect(await late.services.decisions.flush()).toBe(true);
        const containedAt = (await keyPairById(db.sql, leaked.keyPairId))!.revokedAt!;
        const dated = await db.sql.query<{ reason: string; at: unknown }>('SELECT reason, at FROM gate_decisions WHERE key_pair_id = $1 ORDER BY reason', [leaked.keyPairId]);
        expect(dated.map((row) => row.reason)).toEqual(['pair_revoked', 'pair_revoked', 'secret_mismatch']);
        for (const row of dated) expect(new Date(row.at as string).getTime(), 'dated before the containment').toBeLessThan(containedAt.getTime());

        const report = (await cli('exposure', leaked.keyPairId)).json();
        expect(report.contained_at).toBe(containedAt.toISOString());
        expect(report.refused_after_containment).toMatchObject({
          refusals: 2,
          by_reason: [{ reason: 'pair_revoked', refusals: 2 }],
          by_address: [{ client_address: address, refusals: 2 }],
        });
      } finally {
        await late.close();
        await behind.close();
      }
    });

    it('reports what a leaked secret reached from two addresses on three companies, its containment, and what it was refused after', async () => {
      const leaked = await seedPartner(db, ['c1', 'c2', 'c3']);
      const [a, b] = ['203.0.113.1', '203.0.113.2'];
      const fromA = await tokenFor(t, leaked, a);
      const fromB = await tokenFor(t, leaked, b);
      for (const [token, address, company, times] of [
        [fromA, a, 'c1', 2],
        [fromA, a, 'c2', 1],
        [fromB, b, 'c3', 3],
        [fromB, b, 'c1', 1],
      ] as const) {
        for (let i = 0; i < times; i++) expect((await data(token, company, address)).statusCode).toBe(200);
      }
      await written();
      const revoked = await cli('revoke-keys', leaked.partnerId, '--key-pair', leaked.keyPairId);
      expect(revoked.code, revoked.stderr).toBe(0);
      await t.access.refresh();
      const containedAt = (await keyPairById(db.sql, leaked.keyPairId))!.revokedAt!;
      refusedId(await data(fromB, 'c3', b), 401);
      refusedId(await exchange(leaked, b), 401);
      refusedId(await exchange(leaked, b), 401);
      await written();

      const result = await cli('exposure', leaked.secretKey);
      expect(result.code, result.stderr).toBe(0);
      const report = result.json();
      expect(report).toMatchObject({ kind: 'key_pair', partner_id: leaked.partnerId, key_pair_id: leaked.keyPairId, contained_at: containedAt.toISOString() });
      const counts = (row: { requests: number; accepted: number; client_errors: number; server_errors: number }) => [row.requests, row.accepted, row.client_errors, row.server_errors];
      expect(report.companies.map((c: { company_id: string } & Parameters<typeof counts>[0]) => [c.company_id, ...counts(c)])).toEqual([
        ['c1', 3, 3, 0, 0],
        ['c3', 3, 3, 0, 0],
        ['c2', 1, 1, 0, 0],
      ]);
      expect(report.addresses.map((r: { client_address: string } & Parameters<typeof counts>[0]) => [r.client_address, ...counts(r)])).toEqual([
        [b, 4, 4, 0, 0],
        [a, 3, 3, 0, 0],
      ]);
      expect(new Date(report.first_use).getTime()).toBeLessThanOrEqual(new Date(report.last_use).getTime());
      expect(new Date(report.last_use).getTime()).toBeLessThanOrEqual(containedAt.getTime());
      expect(report.refused_after_containment).toMatchObject({
        refusals: 3,
        by_reason: [{ reason: 'pair_revoked', refusals: 3 }],
        by_address: [{ client_address: b, refusals: 3 }],
      });
      // The same from its token id, its pair id; as CSV, one row per company and address.
      const byPair = (await cli('exposure', leaked.keyPairId)).json();
      expect(byPair.companies).toEqual(report.companies);
      const csv = await runCli(['exposure', leaked.keyPairId, '--csv'], backend.env);
      expect(csv.stdout.trim().split('\n')).toEqual([
        'kind,value,requests,accepted,client_errors,server_errors,first_seen,last_seen',
        ...report.companies.map((c: { company_id: string; first_seen: string; last_seen: string }) => expect.stringMatching(new RegExp(`^company,${c.company_id},\\d+,\\d+,0,0,${c.first_seen},${c.last_seen}$`))),
        ...report.addresses.map((r: { client_address: string }) => expect.stringMatching(new RegExp(`^address,${r.client_address.replaceAll('.', '\\.')},`))),
        // 38.4: where its secret minted tokens: one from each address, two refused attempts from b (most first).
        expect.stringMatching(new RegExp(`^minted_from,${b.replaceAll('.', '\\.')},3,1,2,0,`)),
        expect.stringMatching(new RegExp(`^minted_from,${a.replaceAll('.', '\\.')},1,1,0,0,`)),
      ]);
      // A partner, by name: every credential of it (here, the one pair), no containment of its own (no brake).
      const byPartner = (await cli('exposure', leaked.name)).json();
      expect(byPartner).toMatchObject({ kind: 'partner', partner_id: leaked.partnerId, key_pair_id: null, contained_at: null, refused_after_containment: null });
      expect(byPartner.companies).toEqual(report.companies);
      expect(byPartner.addresses).toEqual(report.addresses);
      const byToken = (await cli('exposure', fromB)).json();
      expect(byToken).toMatchObject({ kind: 'token', key_pair_id: leaked.keyPairId, contained_at: containedAt.toISOString() });
      expect(byToken.refused_after_containment.refusals).toBe(1);
      expect(byToken.companies.map((c: { company_id: string; requests: number }) => [c.company_id, c.requests])).toEqual([
        ['c3', 3],
        ['c1', 1],
      ]);
    });
  });
});
