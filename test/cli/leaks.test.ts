import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { newKeyMaterial } from '../../src/domain/rules/identifiers.js';
import { BASE62, checksumOf } from '../support/key-format.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli, type CliResult } from '../support/cli.js';
import { serveInProcess, type ServedInProcess as Served } from '../support/serve.js';
import { startUpstream, type TestUpstream } from '../http/support.js';
import { PartnerClient } from '@partnerctl/client';
import { systemClock } from '../../src/clock.js';


interface Keys {
  partner_id: string;
  key_pair_id: string;
  access_key: string;
  secret_key: string;
}

function payloadOf(token: string): { jti: string; exp: number; [claim: string]: unknown } {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
}

describe.concurrent.each(BACKENDS)('leaked credentials on %s: lookup and containment against a running server', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', { sequential: true }, () => {
    let backend: TestBackend;
    let upstream: TestUpstream;
    let server: Served;
    let counter = 0;

    const run = (...args: string[]): Promise<CliResult> => runCli(['--json', '--yes', ...args], backend.env);
    const cli = async (...args: string[]) => {
      const result = await run(...args);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };
    const exchange = (accessKey: string, secretKey: string) =>
      fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'leak-test/1.0' },
        body: JSON.stringify({ access_key: accessKey, secret_key: secretKey }),
      });
    const tokenOf = async (keys: { access_key: string; secret_key: string }): Promise<string> => {
      const response = await exchange(keys.access_key, keys.secret_key);
      expect(response.status).toBe(200);
      return ((await response.json()) as { access_token: string }).access_token;
    };
    const data = async (token: string) =>
      (await fetch(`${server.url}/public/v1/prices?company_id=acme`, { headers: { authorization: `Bearer ${token}` } })).status;
    /** Polls until the token is refused (the staleness bound is 1 s; a generous limit against a busy machine). */
    const refusedSoon = async (token: string): Promise<number> => {
      const deadline = Date.now() + 10_000;
      let status = await data(token);
      while (status !== 401 && Date.now() < deadline) {
        await sleep(50);
        status = await data(token);
      }
      return status;
    };
    const newPartner = async (): Promise<Keys> => {
      const name = `leak-${++counter}`;
      await cli('create-partner', '--name', name);
      await cli('map-company', name, '--company', 'acme');
      return (await cli('issue-keys', name)) as Keys;
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') await (await openMigrated(backend)).close();
      upstream = await startUpstream();
      // A first command that writes creates the SQLite file before the server opens it (a read-only one
      // refuses a missing file).
      await cli('create-partner', '--name', 'leak-setup');
      server = await serveInProcess({
        ...backend.env,
        PUBLIC_API_UPSTREAM_URL: upstream.url,
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0',
        PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0',
      });
    });
    afterAll(async () => {
      await server?.stop();
      await upstream?.close();
      await backend?.dispose();
    });

    it('looks up every kind of value: keys, key-pair ids, tokens valid, expired and forged, token ids', async () => {
      const a = await newPartner();
      const base = { partner_id: a.partner_id, key_pair_id: a.key_pair_id, status: 'active' };

      const byAccess = await cli('lookup', a.access_key);
      expect(byAccess).toMatchObject({ ...base, kind: 'access_key', genuine: null, accepted: true, last_used_at: null, last_refused_at: null });
      // An access key is public by design: alone it recommends no brake, and says why.
      expect(byAccess.contain).toBeNull();
      expect(byAccess.note).toMatch(/access key alone is not a secret/);
      const byAccessText = await runCli(['lookup', a.access_key], backend.env);
      expect(byAccessText.stdout).toContain('Nothing to contain.');
      expect(byAccessText.stdout).not.toContain('--revoke-issued-tokens');
      // Its secret does recommend the brake.
      expect((await cli('lookup', a.secret_key)).contain).toBe(
        `partnerctl rotate-keys ${a.partner_id} --key-pair ${a.key_pair_id} --revoke-issued-tokens --secret-to replacement-of-${a.key_pair_id}.json --yes`,
      );

      const bySecret = await cli('lookup', a.secret_key);
      expect(bySecret).toMatchObject({ ...base, kind: 'secret_key', genuine: true, accepted: true, access_key: a.access_key });
      expect(JSON.stringify(bySecret)).not.toContain(a.secret_key.slice(40));
      // '-' reads it from stdin (out of the shell's history): the same answer.
      const fromStdin = await runCli(['--json', 'lookup', '-'], backend.env, { input: `${a.secret_key}\n` });
      expect(fromStdin.code, fromStdin.stderr).toBe(0);
      expect(fromStdin.json()).toMatchObject({ kind: 'secret_key', genuine: true, key_pair_id: a.key_pair_id });

      // A well-formed secret naming the pair, with a valid checksum, that is not its secret.
      const wrongBody = a.secret_key.slice(0, 8 + 26) + Array.from(randomBytes(43), (byte) => BASE62[byte % 62]).join('');
      const wrong = await cli('lookup', wrongBody + checksumOf(wrongBody));
      expect(wrong).toMatchObject({ ...base, kind: 'secret_key', genuine: false, accepted: false, contain: null });

      // One character changed: the checksum says so, offline.
      const position = 8 + 26 + 5;
      const typo = a.secret_key.slice(0, position) + (a.secret_key[position] === 'x' ? 'y' : 'x') + a.secret_key.slice(position + 1);
      const typoResult = await run('lookup', typo);
      expect(typoResult.code).toBe(2);
      expect(typoResult.json().error.code).toBe('invalid_argument');
      expect(typoResult.stderr).toContain('checksum');
      expect(typoResult.stderr).not.toContain(typo);

      // A secret of the old format cannot be traced: the message says so and asks for the access key.
      const old = await run('lookup', `pctl_sk_${'Q'.repeat(43)}`);
      expect(old.code).toBe(3);
      expect(old.json().error.code).toBe('not_found');
      expect(old.stderr).toMatch(/cannot be traced/);
      expect(old.stderr).toMatch(/access key/);

      // Well-formed but unknown: not found.
      const unknown = newKeyMaterial();
      for (const value of [unknown.accessKey, unknown.secretKey, 'kp_01M82TP2CHXFNKPXQQFSHHTFMX']) {
        const result = await run('lookup', value);
        expect(result.code, value).toBe(3);
        expect(result.json().error.code).toBe('not_found');
      }
      for (const garbage of ['hello', 'pctl_ak_123', `ptn_${'A'.repeat(26)}`, 'a.b', '']) {
        const result = await run('lookup', garbage);
        expect(result.code, garbage).toBe(2);
        expect(result.stderr).not.toMatch(/\n\s+at /);
      }

      const byPair = await cli('lookup', a.key_pair_id);
      // A pair id is not a secret: no containment on its word alone.
      expect(byPair).toMatchObject({ ...base, kind: 'key_pair_id', accepted: true, contain: null });

      // A valid token from the running server.
      const token = await tokenOf(a);
      const byToken = await cli('lookup', token);
      expect(byToken).toMatchObject({ ...base, kind: 'token', genuine: true, accepted: true });
      expect(byToken.contain).toMatch(new RegExp(`^partnerctl revoke-tokens ${a.partner_id} --issued-before \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z --yes$`));
      expect(byToken.token).toMatchObject({ test: false, traceable: true, jti: payloadOf(token).jti });
      expect(Date.parse(byToken.accepted_until)).toBe(payloadOf(token).exp * 1000);

      if (provider === 'postgresql') {
        // An on-call laptop without the signing-key file: the token is still traced, its signature not checked.
        const { PARTNERCTL_SIGNING_KEY_FILE: _file, ...noKeys } = backend.env;
        const traced = await runCli(['--json', 'lookup', token], noKeys);
        expect(traced.code, traced.stderr).toBe(0);
        expect(traced.json()).toMatchObject({ kind: 'token', partner_id: a.partner_id, key_pair_id: a.key_pair_id, genuine: null });
      }

      // The token id names partner, pair and issue time.
      const jti = payloadOf(token).jti as string;
      expect(jti.startsWith(`${a.partner_id}.${a.key_pair_id}.`)).toBe(true);
      const byJti = await cli('lookup', jti);
      expect(byJti).toMatchObject({ ...base, kind: 'token_id', genuine: null, accepted: true });
      const oldJti = await run('lookup', randomUUID());
      expect(oldJti.code).toBe(3);
      expect(oldJti.stderr).toMatch(/cannot be traced/);

      // An expired token signed by our key: genuine, not accepted.
      const keys = SigningKeys.open(String(backend.env.PARTNERCTL_SIGNING_KEY_FILE), systemClock);
      const { kid, key } = keys.current();
      const iat = Math.floor(Date.now() / 1000) - 2_000;
      const expired = await new SignJWT({ kp: a.key_pair_id })
        .setProtectedHeader({ alg: 'EdDSA', kid, typ: 'JWT' })
        .setIssuer('partnerctl')
        .setAudience('partner-api/v1')
        .setSubject(a.partner_id)
        .setJti(`${a.partner_id}.${a.key_pair_id}.${iat * 1000}.0123456789abcdef`)
        .setIssuedAt(iat)
        .setExpirationTime(iat + 900)
        .sign(key);
      expect(await cli('lookup', expired)).toMatchObject({ kind: 'token', genuine: true, accepted: false, status: 'expired' });

      // Forged: the payload altered (a longer life), the signature kept.
      const [head, , signature] = token.split('.');
      const altered = Buffer.from(JSON.stringify({ ...payloadOf(token), exp: payloadOf(token).exp + 3_600 })).toString('base64url');
      const forged = `${head}.${altered}.${signature}`;
      expect(await data(forged)).toBe(401);
      expect(await cli('lookup', forged)).toMatchObject({
        kind: 'token',
        partner_id: a.partner_id,
        genuine: false,
        accepted: false,
        status: 'forged',
        contain: null,
      });

      // Partners are found by access key and key-pair id too.
      expect((await cli('show-partner', a.access_key)).partner_id).toBe(a.partner_id);
      expect((await cli('show-partner', a.key_pair_id)).partner_id).toBe(a.partner_id);
      for (const name of ['kp_sneaky', 'pctl_ak_name', 'PCTL_x']) {
        expect((await run('create-partner', '--name', name)).code, name).toBe(2);
      }
    });

    it('revoke-tokens: tokens of superseded A, active B and test tokens are refused; the re-exchange is accepted at once; keys untouched', async () => {
      const a = await newPartner();
      const tokenA = await tokenOf(a);
      const b = (await cli('rotate-keys', a.partner_id)) as Keys;
      const tokenB = await tokenOf(b);
      const test = (await cli('mint-test-token', a.partner_id)).access_token as string;
      for (const token of [tokenA, tokenB, test]) expect(await data(token)).toBe(200);

      const first = await cli('revoke-tokens', a.partner_id);
      expect(first).toMatchObject({ partner_id: a.partner_id, changed: true });
      for (const token of [tokenA, tokenB, test]) expect(await refusedSoon(token)).toBe(401);
      // Nothing new to refuse: a re-run changes nothing.
      expect(await cli('revoke-tokens', a.partner_id)).toMatchObject({ changed: false, tokens_revoked_before: first.tokens_revoked_before });

      // The client's one 401, then it exchanges its (untouched) keys again: accepted on the first request.
      const again = await tokenOf(b);
      expect(await data(again)).toBe(200);
      expect(await data(tokenB)).toBe(401);
      // That new token may be live: a further run refuses it.
      expect((await cli('revoke-tokens', a.partner_id)).changed).toBe(true);
      expect(await refusedSoon(again)).toBe(401);
      expect(await data(await tokenOf(b))).toBe(200);
      expect((await cli('audit', a.partner_id, '--action', 'tokens.revoked')).events).toHaveLength(2);
    });

    it("revoke-tokens: the partner's client (spec rule 6) sees exactly one 401, re-exchanges and goes on", async () => {
      const a = await newPartner();
      const statuses: number[] = [];
      const counting: typeof fetch = async (input, init) => {
        const response = await fetch(input, init);
        statuses.push(response.status);
        return response;
      };
      const client = new PartnerClient({ baseUrl: `${server.url}/public/v1`, accessKey: a.access_key, secretKey: a.secret_key, fetch: counting });
      try {
        expect((await client.request('GET', '/', 'acme')).status).toBe(200);
        expect((await cli('revoke-tokens', a.partner_id)).changed).toBe(true);
        await sleep(1_200); // the staleness bound (1 s) has passed on every backend
        statuses.length = 0;
        for (let i = 0; i < 5; i++) expect((await client.request('GET', '/', 'acme')).status).toBe(200);
        // The one refused request, the exchange, its retry, then four requests on the new token.
        expect(statuses).toEqual([401, 200, 200, 200, 200, 200, 200]);
      } finally {
        client.close();
      }
    });

    it('revoke-keys --key-pair revokes exactly a superseded pair; revoke-keys refuses the rest and test tokens; re-runs change nothing', async () => {
      const a = await newPartner();
      const tokenA = await tokenOf(a);
      const b = (await cli('rotate-keys', a.partner_id)) as Keys;
      const tokenB = await tokenOf(b);
      const test = (await cli('mint-test-token', a.partner_id)).access_token as string;

      expect(await cli('revoke-keys', a.partner_id, '--key-pair', a.key_pair_id)).toMatchObject({
        revoked_key_pair_ids: [a.key_pair_id],
        changed: true,
      });
      expect(await refusedSoon(tokenA)).toBe(401);
      expect(await data(tokenB)).toBe(200);
      expect(await data(test)).toBe(200);
      expect(await cli('revoke-keys', a.partner_id, '--key-pair', a.key_pair_id)).toMatchObject({ revoked_key_pair_ids: [], changed: false });
      const foreign = await run('revoke-keys', a.partner_id, '--key-pair', 'kp_01M82TP2CHXFNKPXQQFSHHTFMX');
      expect(foreign.code).toBe(3);
      expect((await run('revoke-keys', a.partner_id, '--key-pair', 'nope')).code).toBe(2);

      expect(await cli('revoke-keys', a.partner_id)).toMatchObject({ revoked_key_pair_ids: [b.key_pair_id], changed: true });
      expect(await refusedSoon(tokenB)).toBe(401);
      expect(await refusedSoon(test)).toBe(401);
      expect((await exchange(b.access_key, b.secret_key)).status).toBe(401);
      expect(await cli('revoke-keys', a.partner_id)).toMatchObject({ revoked_key_pair_ids: [], changed: false });
    });

    it('rotate-keys --revoke-issued-tokens refuses tokens of superseded A, active B and test tokens; the new pair works at once; refusals are traced', async () => {
      const a = await newPartner();
      const tokenA = await tokenOf(a);
      const b = (await cli('rotate-keys', a.partner_id)) as Keys;
      const tokenB = await tokenOf(b);
      const test = (await cli('mint-test-token', a.partner_id)).access_token as string;

      const c = await cli('rotate-keys', a.partner_id, '--revoke-issued-tokens');
      expect(c).toMatchObject({ superseded_key_pair_id: b.key_pair_id, revoked_issued_tokens: true, changed: true });
      expect([...c.revoked_key_pair_ids].sort()).toEqual([a.key_pair_id, b.key_pair_id].sort());
      expect(await data(await tokenOf(c as Keys))).toBe(200);
      for (const token of [tokenA, tokenB, test]) expect(await refusedSoon(token)).toBe(401);

      // The leaked (now revoked) secret is still being tried: last_refused_at shows it within seconds.
      expect((await exchange(a.access_key, a.secret_key)).status).toBe(401);
      let seen: string | null = null;
      for (let i = 0; i < 100 && !seen; i++) {
        seen = (await cli('lookup', a.access_key)).last_refused_at as string | null;
        if (!seen) await sleep(100);
      }
      expect(seen).not.toBeNull();
      expect((await cli('lookup', a.access_key)).status).toBe('revoked');
      const listed = await cli('list-keys', '--partner', a.partner_id, '--status', 'revoked');
      expect(listed.keys.map((key: { key_pair_id: string }) => key.key_pair_id).sort()).toEqual([a.key_pair_id, b.key_pair_id].sort());
      expect(listed.keys.find((key: { key_pair_id: string }) => key.key_pair_id === a.key_pair_id).last_refused_at).not.toBeNull();

      // The request log carries the key pair, the client and its user agent for exchanges; never a key or a token.
      // It is written in batches, off the answer's path: wait for the line.
      await vi.waitFor(
        () => {
          const lines = server.stdout().split('\n').filter((line) => line.includes(a.key_pair_id));
          expect(lines.some((line) => /"status":401/.test(line) && /"client":"127\.0\.0\.1"/.test(line) && line.includes('leak-test/1.0'))).toBe(true);
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(server.stdout()).not.toContain(a.secret_key.slice(8));
      expect(server.stdout()).not.toContain(tokenA.split('.')[2]);
    });

    it('--expires-in: an expired pair mints nothing; list-keys filters, pages and fails for cron', async () => {
      const name = `expiring-${++counter}`;
      await cli('create-partner', '--name', name);
      const pair = (await cli('issue-keys', name, '--expires-in', '2s')) as Keys & { expires_at: string };
      expect(Date.parse(pair.expires_at) - Date.now()).toBeLessThanOrEqual(2_000);
      expect((await exchange(pair.access_key, pair.secret_key)).status).toBe(200);
      expect((await run('list-keys', '--partner', name, '--expiring-within', '1h', '--fail-if-any')).code).toBe(1);
      // Past the expiry by more than the servers' clock correction (PostgreSQL: the database's clock).
      while (Date.now() < Date.parse(pair.expires_at) + 1_000) await sleep(100);
      const refused = await exchange(pair.access_key, pair.secret_key);
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('invalid_credentials');
      expect((await cli('lookup', pair.access_key)).status).toBe('expired');
      const expired = await cli('list-keys', '--partner', name, '--status', 'expired');
      expect(expired.keys).toHaveLength(1);
      expect(expired.keys[0]).toMatchObject({ key_pair_id: pair.key_pair_id, partner_name: name, status: 'expired' });
      expect(Object.keys(expired.keys[0])).not.toContain('secret_key');
      expect((await run('list-keys', '--partner', name, '--status', 'active', '--fail-if-any')).code).toBe(0);
      expect((await run('list-keys', '--expiring-within', 'soon')).code).toBe(2);
      expect((await run('issue-keys', name, '--expires-in', '0d')).code).toBe(2);

      const page1 = await cli('list-keys', '--limit', '1');
      expect(page1.keys).toHaveLength(1);
      expect(page1.next_cursor).toBe(page1.keys[0].key_pair_id);
      const page2 = await cli('list-keys', '--limit', '1', '--cursor', page1.next_cursor);
      expect(page2.keys[0].key_pair_id > page1.keys[0].key_pair_id).toBe(true);
    });

    it('audit: --since, --action, --company, --cursor paging, partner names', async () => {
      const a = await newPartner();
      await cli('map-company', a.partner_id, '--company', 'audit-co');
      await cli('unmap-company', a.partner_id, '--company', 'audit-co');
      const byCompany = await cli('audit', '--company', 'audit-co');
      expect(byCompany.events.map((event: { action: string }) => event.action)).toEqual(['company.unmapped', 'company.mapped']);
      expect(byCompany.events[0].partner_name).toMatch(/^leak-/);
      const mine = await cli('audit', a.partner_id, '--limit', '2');
      expect(mine.events).toHaveLength(2);
      const rest = await cli('audit', a.partner_id, '--limit', '2', '--cursor', mine.next_cursor);
      expect(rest.events[0].id).toBeLessThan(mine.events[1].id);
      expect((await cli('audit', '--since', '1h', '--action', 'keys.issued')).events.length).toBeGreaterThan(0);
      expect((await cli('audit', '--since', '2999-01-01T00:00:00Z')).events).toEqual([]);
      expect((await run('audit', '--since', 'yesterday')).code).toBe(2);
      expect((await run('audit', '--action', 'DROP TABLE')).code).toBe(2);
    });
  });
});
