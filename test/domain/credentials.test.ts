import { keyPairById, touchLastUsed } from '../../src/db/repositories/key-pairs.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Bookkeeping } from '../../src/domain/runtime/bookkeeping.js';
import { CredentialExchange } from '../../src/domain/runtime/credentials.js';
import { issueKeyPair, revokeKeyPair, revokeTokens, rotateKeyPair, type IssuedSecretKeyPair } from '../../src/domain/operations/key-pairs.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { TokenVerifier } from '../../src/domain/operations/tokens.js';
import { atProductCost } from '../support/argon2-cost.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, expectAppError, uniqueName, useMigratedDatabase } from './fixtures.js';
import { systemClock } from '../../src/clock.js';

const folder = mkdtempSync(join(tmpdir(), 'partnerctl-credentials-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

describe.each(BACKENDS)('CredentialExchange on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const keys = SigningKeys.open(join(folder, `${provider}.json`), systemClock);

    async function partnerWithKeys(): Promise<IssuedSecretKeyPair> {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      return issueKeyPair(ctx.db, ALICE, partner.id);
    }

    it('exchanges valid keys for a verifiable token naming the pair, and records the use', async () => {
      const issued = await partnerWithKeys();
      const exchange = new CredentialExchange(ctx.db, keys);
      const minted = await exchange.exchange(issued.accessKey, issued.secretKey);
      expect(minted).toMatchObject({ keyPairId: issued.keyPairId, expiresIn: 900 });
      expect(await new TokenVerifier(keys).verify(minted.accessToken)).toMatchObject({
        partnerId: issued.partner.id,
        keyPairId: issued.keyPairId,
        test: false,
      });
      // Bookkeeping, written after the answer: flushed here.
      expect(await exchange.bookkeeping.flush()).toBe(true);
      const row = (await keyPairById(ctx.db.sql, issued.keyPairId))!;
      expect(row.lastUsedAt).toBeInstanceOf(Date);
    });

    it('notes last_refused_at for a superseded pair or a wrong secret: the first at once, later ones at most once a minute', async () => {
      const issued = await partnerWithKeys();
      const exchange = new CredentialExchange(ctx.db, keys);
      const wrong = `${issued.secretKey.slice(0, -1)}${issued.secretKey.endsWith('x') ? 'y' : 'x'}`;
      await expectAppError(exchange.exchange(issued.accessKey, wrong), 'invalid_credentials');
      expect(exchange.bookkeeping.pending).toBe(1);
      expect(await exchange.bookkeeping.flush()).toBe(true);
      const first = (await keyPairById(ctx.db.sql, issued.keyPairId))!.lastRefusedAt;
      expect(first).toBeInstanceOf(Date);
      // Within the minute: nothing more to write.
      await rotateKeyPair(ctx.db, ALICE, issued.partner.id);
      await expectAppError(exchange.exchange(issued.accessKey, issued.secretKey), 'invalid_credentials');
      expect(exchange.bookkeeping.pending).toBe(0);
      // Another process (no memory of the first write) sees the stored time and writes nothing either.
      const other = new CredentialExchange(ctx.db, keys);
      await expectAppError(other.exchange(issued.accessKey, issued.secretKey), 'invalid_credentials');
      expect(other.bookkeeping.pending).toBe(0);
      expect((await keyPairById(ctx.db.sql, issued.keyPairId))!.lastRefusedAt).toEqual(first);
    });

    it('isKnownGood: only the secret argon2 verified for that access key, in this process', async () => {
      const exchange = new CredentialExchange(ctx.db, keys);
      const issued = await partnerWithKeys();
      const other = await partnerWithKeys();
      const wrong = `${issued.secretKey.slice(0, -1)}${issued.secretKey.endsWith('x') ? 'y' : 'x'}`;
      expect(exchange.isKnownGood(issued.accessKey, issued.secretKey)).toBe(false);
      await expectAppError(exchange.exchange(issued.accessKey, wrong), 'invalid_credentials');
      expect(exchange.isKnownGood(issued.accessKey, wrong)).toBe(false);
      await exchange.exchange(issued.accessKey, issued.secretKey);
      expect(exchange.isKnownGood(issued.accessKey, issued.secretKey)).toBe(true);
      expect(exchange.isKnownGood(issued.accessKey, wrong)).toBe(false);
      expect(exchange.isKnownGood(issued.accessKey, '')).toBe(false);
      expect(exchange.isKnownGood(issued.accessKey, issued.secretKey + 'x'.repeat(1_000))).toBe(false);
      // Another pair's key with this secret, or this key with another pair's secret: no.
      expect(exchange.isKnownGood(other.accessKey, issued.secretKey)).toBe(false);
      await exchange.exchange(other.accessKey, other.secretKey);
      expect(exchange.isKnownGood(issued.accessKey, other.secretKey)).toBe(false);
      expect(exchange.isKnownGood(other.accessKey, other.secretKey)).toBe(true);
      // Another process (a restart) knows nothing yet.
      expect(new CredentialExchange(ctx.db, keys).isKnownGood(issued.accessKey, issued.secretKey)).toBe(false);
    });

    it('refuses every bad credential with the same code and the same message', async () => {
      const exchange = new CredentialExchange(ctx.db, keys);
      const good = await partnerWithKeys();
      const superseded = await partnerWithKeys();
      await rotateKeyPair(ctx.db, ALICE, superseded.partner.id);
      const revoked = await partnerWithKeys();
      await revokeKeyPair(ctx.db, ALICE, revoked.partner.id);
      const disabled = await partnerWithKeys();
      await setPartnerStatus(ctx.db, ALICE, disabled.partner.id, 'disabled');

      const attempts: [string, string, string][] = [
        ['unknown access key', 'pctl_ak_0000000000000000000000', good.secretKey],
        ['malformed access key', 'not-an-access-key', good.secretKey],
        ['empty access key', '', good.secretKey],
        ['wrong secret', good.accessKey, `${good.secretKey.slice(0, -1)}${good.secretKey.endsWith('x') ? 'y' : 'x'}`],
        ['empty secret', good.accessKey, ''],
        ['over-long secret', good.accessKey, good.secretKey + 'x'.repeat(10_000)],
        ["another partner's secret", good.accessKey, superseded.secretKey],
        ['superseded pair', superseded.accessKey, superseded.secretKey],
        ['revoked pair', revoked.accessKey, revoked.secretKey],
        ['disabled partner', disabled.accessKey, disabled.secretKey],
      ];
      const messages = new Set<string>();
      for (const [label, accessKey, secretKey] of attempts) {
        const error = await expectAppError(exchange.exchange(accessKey, secretKey), 'invalid_credentials');
        expect(error.hint, label).toBeUndefined();
        messages.add(error.message);
      }
      expect([...messages]).toHaveLength(1);
      // None of the refused pairs was marked as used.
      for (const pair of [superseded, revoked, disabled]) {
        const row = (await keyPairById(ctx.db.sql, pair.keyPairId))!;
        expect(row.lastUsedAt).toBeNull();
      }
    });

    it('after the first exchange, answers the right secret without argon2 (a fast path), and still refuses a wrong one', async () => {
      const issued = await partnerWithKeys();
      const exchange = new CredentialExchange(ctx.db, keys);
      await exchange.exchange(issued.accessKey, issued.secretKey);
      // Spoil the stored hash: only a remembered digest can still say yes.
      const [stored] = await ctx.db.sql.query<{ secret_hash: string }>('SELECT secret_hash FROM key_pairs WHERE id = $1', [issued.keyPairId]);
      const secretHash = stored!.secret_hash;
      await ctx.db.sql.query('UPDATE key_pairs SET secret_hash = $1 WHERE id = $2', ['$argon2id$spoiled', issued.keyPairId]);
      try {
        expect((await exchange.exchange(issued.accessKey, issued.secretKey)).keyPairId).toBe(issued.keyPairId);
        await expectAppError(exchange.exchange(issued.accessKey, `${issued.secretKey}x`), 'invalid_credentials');
        // Another process (here: another exchange) has no such memory and checks the hash.
        await expectAppError(new CredentialExchange(ctx.db, keys).exchange(issued.accessKey, issued.secretKey), 'invalid_credentials');
      } finally {
        await ctx.db.sql.query('UPDATE key_pairs SET secret_hash = $1 WHERE id = $2', [secretHash, issued.keyPairId]);
      }
    });

    it('sees a rotation, a revocation and a disabled partner at once, even on the fast path', async () => {
      const exchange = new CredentialExchange(ctx.db, keys);
      const first = await partnerWithKeys();
      await exchange.exchange(first.accessKey, first.secretKey);
      await exchange.exchange(first.accessKey, first.secretKey);

      const second = await rotateKeyPair(ctx.db, ALICE, first.partner.id);
      await expectAppError(exchange.exchange(first.accessKey, first.secretKey), 'invalid_credentials');
      expect((await exchange.exchange(second.accessKey, second.secretKey)).keyPairId).toBe(second.keyPairId);

      await setPartnerStatus(ctx.db, ALICE, first.partner.id, 'disabled');
      await expectAppError(exchange.exchange(second.accessKey, second.secretKey), 'invalid_credentials');
      await setPartnerStatus(ctx.db, ALICE, first.partner.id, 'active');
      expect((await exchange.exchange(second.accessKey, second.secretKey)).keyPairId).toBe(second.keyPairId);

      await revokeKeyPair(ctx.db, ALICE, first.partner.id);
      await expectAppError(exchange.exchange(second.accessKey, second.secretKey), 'invalid_credentials');
    });

    it.each([
      ['revoke-tokens', (partnerId: string) => revokeTokens(ctx.db, ALICE, partnerId)],
      ['rotate-keys --revoke-issued-tokens', (partnerId: string) => rotateKeyPair(ctx.db, ALICE, partnerId, { revokeIssuedTokens: true })],
    ])("37.13: a new pair's first exchange after a brake (%s) sets switched_at", async (_brake, brake) => {
      const issued = await partnerWithKeys();
      await brake(issued.partner.id);
      const rotated = await rotateKeyPair(ctx.db, ALICE, issued.partner.id, { overlapMs: 3_600_000, afterSwitchMs: 60_000 });
      const exchange = new CredentialExchange(ctx.db, keys);
      await exchange.exchange(rotated.accessKey, rotated.secretKey);
      expect(await exchange.bookkeeping.flush()).toBe(true);
      const fresh = (await keyPairById(ctx.db.sql, rotated.keyPairId))!;
      const retiring = (await keyPairById(ctx.db.sql, rotated.retiringKeyPairId!))!;
      expect(fresh.lastUsedAt).toBeInstanceOf(Date);
      expect(retiring.switchedAt).toEqual(expect.any(Date));
      // The overlap ends after_switch after the switch, not at the retires_at the rotation set.
      expect(retiring.retiresAt!.getTime() - retiring.switchedAt!.getTime()).toBe(60_000);
    });

    it('decides from the row alone: the instance that saw the switch and another answer alike, before it is written and after', async () => {
      const issued = await partnerWithKeys();
      const rotated = await rotateKeyPair(ctx.db, ALICE, issued.partner.id, { overlapMs: 3_600_000, afterSwitchMs: 0 });
      // Its writes wait for flush(): the switch is noted, not on record yet.
      const held = new Bookkeeping(ctx.db);
      await held.stop();
      const one = new CredentialExchange(ctx.db, keys, undefined, held);
      const two = new CredentialExchange(ctx.db, keys);
      await one.exchange(rotated.accessKey, rotated.secretKey);
      expect(held.pending).toBeGreaterThan(0);
      for (const exchange of [one, two]) expect((await exchange.exchange(issued.accessKey, issued.secretKey)).keyPairId).toBe(issued.keyPairId);
      // One write at a time: a write never waits on a row lock another holds.
      expect(await two.bookkeeping.flush()).toBe(true);
      // Nor on any other lock: the switch's write ends the overlap and announces it (NOTIFY), and PostgreSQL
      // serialises every NOTIFY's commit on the whole cluster (another test's database too), so one attempt may
      // find that lock taken. Busy is retried (docs/server.md): stop() retries for up to its 10 s.
      expect(await held.stop()).toBe(true);
      for (const exchange of [one, two]) await expectAppError(exchange.exchange(issued.accessKey, issued.secretKey), 'invalid_credentials');
      expect((await keyPairById(ctx.db.sql, issued.keyPairId))!.status).toBe('superseded');
    });

    it('last_used_at never moves back: a use written late does not hide the first token after a brake', async () => {
      const issued = await partnerWithKeys();
      const later = new Date(ctx.db.clock.now());
      await touchLastUsed(ctx.db.sql, issued.keyPairId, later);
      await touchLastUsed(ctx.db.sql, issued.keyPairId, new Date(later.getTime() - 30_000));
      expect((await keyPairById(ctx.db.sql, issued.keyPairId))!.lastUsedAt).toEqual(later);
    });

    it('makes an unknown key and a wrong secret pay for an argon2 verification', async () => {
      // At the product's argon2 cost (test/support/argon2-cost.cjs): the stand-in hash of an unknown key too.
      await atProductCost(async () => {
        const exchange = new CredentialExchange(ctx.db, keys);
        await exchange.warmUp();
        const good = await partnerWithKeys();
        for (const [accessKey, secretKey] of [
          ['pctl_ak_0000000000000000000000', good.secretKey],
          [good.accessKey, `${good.secretKey}x`],
        ] as const) {
          const started = performance.now();
          await expectAppError(exchange.exchange(accessKey, secretKey), 'invalid_credentials');
          // 19 MiB, two passes: never under a few milliseconds, whatever the machine.
          expect(performance.now() - started).toBeGreaterThan(3);
        }
      });
    });
  });
});
