// Issue 39: key pairs whose private half never leaves the partner (private_key_jwt at the token endpoint).
// Assertions are signed by hand with node:crypto (test/support/assertions.ts), not with jose, the library the
// server verifies with.
import { sign } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
// The worktree's client, not the installed package (which may be another checkout's build).
import { PartnerClient } from '../../packages/client/src/index.js';
import type { Database } from '../../src/db/client.js';
import { keyPairById } from '../../src/db/repositories/key-pairs.js';
import { mapCompany } from '../support/domain.js';
import { issueKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { explainRequest } from '../../src/domain/operations/refusals.js';
import { parsePublicKey } from '../../src/domain/rules/public-keys.js';
import {
  generatePartnerKey,
  hmacWithPublicKey,
  JWT_BEARER,
  signAssertion,
  unsignedAssertion,
  type AssertionOptions,
  type KeyType,
  type PartnerKey,
} from '../support/assertions.js';
import { againOn503 } from '../support/again.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { bearer, buildTestApp, seedPartner, startUpstream, UUID, who, type TestApp, type TestUpstream } from './support.js';

const TOKEN_URL = 'https://api.example.test/public/v1/auth/token';
const ISSUER_URL = 'https://api.example.test';
const TOKEN = '/public/v1/auth/token';

interface KeyedPartner {
  partnerId: string;
  name: string;
  keyPairId: string;
  accessKey: string;
  kid: string;
  key: PartnerKey;
}

let counter = 0;

async function keyedPartner(db: Database, type: KeyType = 'ed25519'): Promise<KeyedPartner> {
  const name = `pkjwt-${process.pid}-${++counter}`;
  const { partner } = await createPartner(db, who, { name });
  const key = generatePartnerKey(type);
  const issued = await issueKeyPair(db, who, partner.id, { publicKey: await parsePublicKey(key.publicPem) });
  await mapCompany(db, who, partner.id, 'acme');
  return { partnerId: partner.id, name, keyPairId: issued.keyPairId, accessKey: issued.accessKey, kid: issued.kid!, key };
}

type Injected = { statusCode: number; body: string; json(): Record<string, unknown> & { error: { code: string; message: string; request_id: string } } };

describe.each(BACKENDS)('39: private_key_jwt at the token endpoint (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;
    let upstream: TestUpstream;
    let t: TestApp;
    const now = () => Math.floor(db.clock.now() / 1000);
    const options = (p: KeyedPartner, change: Partial<AssertionOptions> = {}): AssertionOptions => ({ accessKey: p.accessKey, aud: TOKEN_URL, now: now(), ...change });

    // What an assertion decides is the subject here, not availability: a 503 is taken again (againOn503).
    const viaJson = (assertion: string, app: TestApp = t) =>
      againOn503(() => app.inject({ method: 'POST', url: TOKEN, payload: { client_assertion_type: JWT_BEARER, client_assertion: assertion } }), (answer) => answer.statusCode, 'the exchange');
    const viaForm = (assertion: string, app: TestApp = t) =>
      againOn503(
        () =>
          app.inject({
            method: 'POST',
            url: TOKEN,
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            payload: new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: JWT_BEARER, client_assertion: assertion }).toString(),
          }),
        (answer) => answer.statusCode,
        'the exchange',
      );
    const tokenOf = (response: Injected): string => {
      expect(response.statusCode, response.body).toBe(200);
      return response.json().access_token as string;
    };
    const data = (token: string) => t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(token) });

    /** A refusal: the same answer as a wrong secret, whichever check failed; its reason only on record. */
    async function refusedWith(response: Injected, reason: string, app: TestApp = t): Promise<string> {
      expect(response.statusCode, response.body).toBe(401);
      const { error } = response.json();
      expect(error.code).toBe('invalid_credentials');
      expect(error.message).toBe('the access key and secret key are not valid');
      expect(response.body).not.toContain(reason);
      expect(error.request_id).toMatch(UUID);
      expect(await app.services.decisions.flush()).toBe(true);
      const explained = await explainRequest(db, error.request_id);
      expect(explained.decision).toMatchObject({ reason, route: 'exchange', status: 401 });
      expect(explained.explanation.length).toBeGreaterThan(20);
      return error.request_id;
    }

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
      upstream = await startUpstream();
      t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url, PUBLIC_API_TOKEN_URL: TOKEN_URL });
    });
    afterAll(async () => {
      await t?.close();
      await upstream?.close();
      await db?.close();
      await backend?.dispose();
    });

    it.each(['ed25519', 'p256', 'rsa2048'] as const)(
      '39: a partner registers a %s key; an assertion signed by node:crypto gets a token that works on a data request',
      async (type) => {
        const p = await keyedPartner(db, type);
        const pair = await keyPairById(db.sql, p.keyPairId);
        expect(pair).toMatchObject({ kind: 'public_key', publicKeyAlg: p.key.alg, kid: p.kid });
        // Only the public members are stored.
        expect(Object.keys(JSON.parse(pair!.publicKey!)).sort()).toEqual(type === 'rsa2048' ? ['e', 'kty', 'n'] : type === 'p256' ? ['crv', 'kty', 'x', 'y'] : ['crv', 'kty', 'x']);
        const token = tokenOf(await viaJson(signAssertion(p.key, { ...options(p), header: { kid: p.kid } })));
        expect(await t.verifier.verify(token)).toMatchObject({ partnerId: p.partnerId, keyPairId: p.keyPairId });
        const answer = await data(token);
        expect(answer.statusCode, answer.body).toBe(200);
        // The form OAuth clients send, and the issuer URL as the audience.
        tokenOf(await viaForm(signAssertion(p.key, options(p, { aud: [ISSUER_URL] }))));
      },
    );

    it('39: wrong aud, expired, future iat, alg mismatch, alg none, HS256 with the public key, unknown kid: each refused with its reason on record', async () => {
      const p = await keyedPartner(db, 'p256');
      const other = generatePartnerKey('ed25519');
      await refusedWith(await viaJson(signAssertion(p.key, options(p, { aud: 'https://elsewhere.example/token' }))), 'assertion_audience');
      await refusedWith(await viaJson(signAssertion(p.key, options(p, { iatOffset: -120, lifetime: 60 }))), 'assertion_expired');
      // 30 s of skew are allowed; 60 s ahead is not.
      tokenOf(await viaJson(signAssertion(p.key, options(p, { iatOffset: 20 }))));
      await refusedWith(await viaJson(signAssertion(p.key, options(p, { iatOffset: 60 }))), 'assertion_invalid');
      await refusedWith(await viaJson(signAssertion(p.key, options(p, { lifetime: 301 }))), 'assertion_invalid');
      // Signed by an Ed25519 key, for a pair registered as ES256; and by another P-256 key (the signature fails).
      await refusedWith(await viaJson(signAssertion(other, options(p))), 'assertion_invalid');
      await refusedWith(await viaJson(signAssertion(generatePartnerKey('p256'), options(p))), 'assertion_invalid');
      await refusedWith(await viaJson(unsignedAssertion(options(p))), 'assertion_invalid');
      await refusedWith(await viaJson(hmacWithPublicKey(p.key, options(p))), 'assertion_invalid');
      await refusedWith(await viaJson(signAssertion(p.key, { ...options(p), header: { kid: 'not-the-thumbprint' } })), 'assertion_invalid');
      await refusedWith(await viaJson(signAssertion(p.key, { ...options(p), claims: { sub: 'someone-else' } })), 'assertion_invalid');
      // Still the partner's own key: none of the refusals above broke anything.
      tokenOf(await viaJson(signAssertion(p.key, options(p))));
    });

    it('39: a replayed jti is refused until the assertion expires; a secret for a public_key pair is a wrong secret', async () => {
      const p = await keyedPartner(db);
      const assertion = signAssertion(p.key, options(p));
      tokenOf(await viaJson(assertion));
      await refusedWith(await viaForm(assertion), 'assertion_replayed');
      const wrong = await t.inject({ method: 'POST', url: TOKEN, payload: { access_key: p.accessKey, secret_key: `pctl_sk_${'A'.repeat(75)}` } });
      await refusedWith(wrong, 'secret_mismatch');
    });

    it('39: a disabled partner is refused; enabled again, its key works', async () => {
      const p = await keyedPartner(db);
      await setPartnerStatus(db, who, p.partnerId, 'disabled');
      await refusedWith(await viaJson(signAssertion(p.key, options(p))), 'partner_disabled');
      await setPartnerStatus(db, who, p.partnerId, 'active');
      tokenOf(await viaJson(signAssertion(p.key, options(p))));
    });

    it('39: rotation with overlap: the old key works until the new key first exchanges (the switch), then is superseded', async () => {
      const p = await keyedPartner(db);
      const next = generatePartnerKey('rsa2048');
      const rotated = await rotateKeyPair(db, who, p.partnerId, { publicKey: await parsePublicKey(next.publicPem), overlapMs: 86_400_000, afterSwitchMs: 0 });
      expect(rotated.secretKey).toBeNull();
      // Retiring: the old key still exchanges.
      tokenOf(await viaJson(signAssertion(p.key, options(p))));
      const fresh = { ...p, keyPairId: rotated.keyPairId, accessKey: rotated.accessKey, key: next };
      tokenOf(await viaJson(signAssertion(next, options(fresh))));
      // The switch is written off the answer's path: flushed explicitly (a flush finds the lock busy, or joins one
      // begun before the switch was queued, under load: it is flushed again until the row has it).
      await vi.waitFor(
        async () => {
          await t.services.bookkeeping.flush();
          expect((await keyPairById(db.sql, p.keyPairId))?.switchedAt).toBeInstanceOf(Date);
        },
        { timeout: 10_000, interval: 20 },
      );
      await refusedWith(await viaJson(signAssertion(p.key, options(p))), 'pair_superseded');
      tokenOf(await viaJson(signAssertion(next, options(fresh))));
    });

    it('39: set-credentials --allow public-key refuses a secret exchange; list-partners shows who still holds an active shared secret', async () => {
      const p = await keyedPartner(db);
      const legacy = await seedPartner(db, [], `pkjwt-secret-${process.pid}-${++counter}`);
      const cli = async (...args: string[]) => {
        const result = await runCli(['--json', '--yes', ...args], backend.env);
        expect(result.code, result.stderr).toBe(0);
        return result.json();
      };
      const holding = async () => {
        const { partners } = (await cli('list-partners', '--limit', '1000')) as { partners: { name: string; active_shared_secret: boolean; credentials: string }[] };
        return Object.fromEntries(partners.filter((each) => [p.name, legacy.name].includes(each.name)).map((each) => [each.name, [each.active_shared_secret, each.credentials]]));
      };
      expect(await holding()).toEqual({ [p.name]: [false, 'both'], [legacy.name]: [true, 'both'] });
      const secret = () => t.inject({ method: 'POST', url: TOKEN, payload: { access_key: legacy.accessKey, secret_key: legacy.secretKey } });
      tokenOf(await secret());
      expect(await cli('set-credentials', legacy.name, '--allow', 'public-key')).toMatchObject({ credentials: 'public-key', changed: true });
      expect(await cli('set-credentials', legacy.name, '--allow', 'public-key')).toMatchObject({ changed: false });
      await refusedWith(await secret(), 'credential_kind_not_allowed');
      expect(await holding()).toEqual({ [p.name]: [false, 'both'], [legacy.name]: [true, 'public-key'] });
      // A secret-only partner's public key is refused the same way.
      await cli('set-credentials', p.name, '--allow', 'secret');
      await refusedWith(await viaJson(signAssertion(p.key, options(p))), 'credential_kind_not_allowed');
      await cli('set-credentials', p.name, '--allow', 'both');
      tokenOf(await viaJson(signAssertion(p.key, options(p))));
      const bad = await runCli(['set-credentials', legacy.name, '--allow', 'certificates'], backend.env);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--allow');
      const shown = await cli('show-partner', p.name);
      expect(shown).toMatchObject({ credentials: 'both', key_pairs: [{ key_pair_id: p.keyPairId, kind: 'public_key', kid: p.kid, alg: 'EdDSA' }] });
    });

    it('39: lookup - of the private key PEM finds the pair, never shows the key, and its containment (revoke-keys, with a receipt) refuses it', async () => {
      const p = await keyedPartner(db, 'p256');
      tokenOf(await viaJson(signAssertion(p.key, options(p))));
      const looked = await runCli(['--json', 'lookup', '-'], backend.env, { input: p.key.privatePem });
      expect(looked.code, looked.stderr).toBe(0);
      const body = p.key.privatePem.split('\n')[1]!;
      expect(looked.stdout + looked.stderr).not.toContain(body);
      const result = looked.json();
      expect(result).toMatchObject({ kind: 'private_key', key_pair_id: p.keyPairId, key_kind: 'public_key', kid: p.kid, genuine: true, accepted: true });
      expect(result.contain).toBe(`partnerctl revoke-keys ${p.partnerId} --key-pair ${p.keyPairId} --yes`);
      // Never from the command line, where the shell's history would keep it.
      const onLine = await runCli(['lookup', p.key.privatePem], backend.env);
      expect(onLine.code).toBe(2);
      expect(onLine.stdout + onLine.stderr).not.toContain(body);
      // The kid and the public key name the same pair, and contain nothing (they are public).
      // After '--': a kid is base64url, and one in 64 starts with '-' (test/cli/hint-format.test.ts).
      expect((await runCli(['--json', 'lookup', '--', p.kid], backend.env)).json()).toMatchObject({ kind: 'kid', key_pair_id: p.keyPairId, contain: null });
      expect((await runCli(['--json', 'lookup', '-'], backend.env, { input: p.key.publicPem })).json()).toMatchObject({ kind: 'public_key', key_pair_id: p.keyPairId, contain: null });
      const contained = await runCli(['--json', ...result.contain.split(' ').slice(1)], backend.env);
      expect(contained.code, contained.stderr).toBe(0);
      expect(contained.json()).toMatchObject({ revoked_key_pair_ids: [p.keyPairId], changed: true, receipt: expect.any(Object) });
      // The exchange reads the pair's row every time: refused at once.
      await refusedWith(await viaJson(signAssertion(p.key, options(p))), 'pair_revoked');
    });

    it('39: apply declares a partner\'s public key and credentials policy; export writes them back; a re-apply changes nothing; another key is refused', async () => {
      const key = generatePartnerKey('ed25519');
      const jwk = (await parsePublicKey(key.publicPem)).jwk;
      const name = `pkjwt-apply-${process.pid}-${++counter}`;
      const document = JSON.stringify({ partners: [{ name, companies: ['acme'], credentials: 'public-key', public_key: jwk }] });
      const applied = await runCli(['--json', 'apply', '-f', '-'], backend.env, { input: document });
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.json().plan).toMatchObject({ keys_issued: 1, credentials_set: 1 });
      const exported = await runCli(['--json', 'export', '--partner', name], backend.env);
      expect(exported.code, exported.stderr).toBe(0);
      const [partner] = exported.json().partners;
      expect(partner).toMatchObject({ name, credentials: 'public-key', public_key: { ...jwk, alg: 'EdDSA' } });
      const again = await runCli(['--json', 'apply', '-f', '-'], backend.env, { input: JSON.stringify(exported.json()) });
      expect(again.code, again.stderr).toBe(0);
      expect(again.json().plan).toMatchObject({ changes: 0 });
      // The registered pair exchanges like any other.
      const shown = (await runCli(['--json', 'show-partner', name], backend.env)).json();
      const p = { partnerId: shown.partner_id, name, keyPairId: shown.key_pairs[0].key_pair_id, accessKey: shown.key_pairs[0].access_key, kid: shown.key_pairs[0].kid, key };
      tokenOf(await viaJson(signAssertion(key, options(p))));
      const other = (await parsePublicKey(generatePartnerKey('p256').publicPem)).jwk;
      const refused = await runCli(['apply', '-f', '-'], backend.env, { input: JSON.stringify({ partners: [{ name, public_key: other }] }) });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/hint: rotate to the declared key first \('partnerctl rotate-keys <partner> --public-key FILE'\)/);
      const privateJwk = await runCli(['apply', '-f', '-'], backend.env, { input: JSON.stringify({ partners: [{ name: `${name}-x`, public_key: { ...jwk, d: 'AAAA' } }] }) });
      expect(privateJwk.code).toBe(2);
    });

    it('39: @partnerctl/client signs assertions from a PEM and through a signing function (a KMS), and its token works', async () => {
      // The server in-process: the client's fetch goes through the same listener as a socket would.
      const viaApp: typeof fetch = async (input, init) => {
        const url = new URL(String(input));
        const answer = await t.inject({
          method: (init?.method ?? 'GET') as 'GET',
          url: `${url.pathname}${url.search}`,
          headers: Object.fromEntries(new Headers(init?.headers).entries()),
          ...(init?.body ? { payload: String(init.body) } : {}),
        });
        return new Response(answer.body, { status: answer.statusCode, headers: answer.headers as Record<string, string> });
      };
      const baseUrl = 'https://api.example.test/public/v1';
      const ed = await keyedPartner(db, 'ed25519');
      const fromPem = new PartnerClient({ baseUrl, accessKey: ed.accessKey, privateKey: ed.key.privatePem, kid: ed.kid, fetch: viaApp, now: () => db.clock.now() });
      const answer = await fromPem.get('/prices', 'acme');
      expect(answer.status).toBe(200);
      expect(fromPem.exchanges).toBe(1);
      fromPem.close();
      const ec = await keyedPartner(db, 'p256');
      let signed = 0;
      const kms = new PartnerClient({
        baseUrl,
        accessKey: ec.accessKey,
        signer: {
          alg: 'ES256',
          sign: (input) => {
            signed++;
            return sign('sha256', input, { key: ec.key.privateKey, dsaEncoding: 'ieee-p1363' });
          },
        },
        fetch: viaApp,
        now: () => db.clock.now(),
      });
      expect((await kms.get('/prices', 'acme')).status).toBe(200);
      expect(signed).toBe(1);
      kms.close();
      // Two credentials: the types refuse it, and so does the constructor for a JavaScript caller.
      const both = { baseUrl, accessKey: ec.accessKey, secretKey: 'x', privateKey: ec.key.privatePem } as unknown as ConstructorParameters<typeof PartnerClient>[0];
      expect(() => new PartnerClient(both)).toThrow(TypeError);
    });

    it('39: explain names the assertion check for the operator (CLI)', async () => {
      const p = await keyedPartner(db);
      const id = await refusedWith(await viaJson(signAssertion(p.key, options(p, { aud: 'https://elsewhere.example/token' }))), 'assertion_audience');
      const result = await runCli(['--json', 'explain', id], backend.env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.json()).toMatchObject({ request_id: id, reason: 'assertion_audience', key_pair_id: p.keyPairId, partner_id: p.partnerId });
    });
  });
});

describe('39: two instances on one PostgreSQL database', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    let first: Database;
    let second: Database;
    let one: TestApp;
    let two: TestApp;

    beforeAll(async () => {
      backend = await createBackend('postgresql');
      first = await openMigrated(backend);
      second = await openMigrated(backend);
      one = await buildTestApp(backend, first, { PUBLIC_API_TOKEN_URL: TOKEN_URL });
      two = await buildTestApp(backend, second, { PUBLIC_API_TOKEN_URL: TOKEN_URL });
    });
    afterAll(async () => {
      await one?.close();
      await two?.close();
      await first?.close();
      await second?.close();
      await backend?.dispose();
    });

    it('39: a jti accepted by one instance is refused by the other (assertion_replayed)', async () => {
      expect(one.services.registry.instanceId).not.toBe(two.services.registry.instanceId);
      const p = await keyedPartner(first);
      const assertion = signAssertion(p.key, { accessKey: p.accessKey, aud: TOKEN_URL, now: Math.floor(first.clock.now() / 1000) });
      const body = { client_assertion_type: JWT_BEARER, client_assertion: assertion };
      const accepted = await one.inject({ method: 'POST', url: TOKEN, payload: body });
      expect(accepted.statusCode, accepted.body).toBe(200);
      const replayed = await two.inject({ method: 'POST', url: TOKEN, payload: body });
      expect(replayed.statusCode).toBe(401);
      expect(await two.services.decisions.flush()).toBe(true);
      const explained = await explainRequest(first, replayed.json().error.request_id);
      expect(explained.decision).toMatchObject({ reason: 'assertion_replayed', instanceId: two.services.registry.instanceId, keyPairId: p.keyPairId });
    });
  });
});
