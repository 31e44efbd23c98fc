import { systemClock } from '../../src/clock.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { AccessState } from '../../src/domain/runtime/access.js';
import { CredentialExchange } from '../../src/domain/runtime/credentials.js';
import { issueKeyPair, listKeyPairs, revokeKeyPair, revokeTokens, rotateKeyPair, type KeyPairOptions } from '../../src/domain/operations/key-pairs.js';
import { lookup } from '../../src/domain/operations/lookup.js';
import { touchUnlistedRefused } from '../../src/db/repositories/key-pairs.js';
import { setNetwork } from '../../src/domain/operations/networks.js';
import { showPartner } from '../../src/domain/operations/partner-details.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { isAppError } from '../../src/errors.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, expectAppError, uniqueName, useMigratedDatabase } from './fixtures.js';

const folder = mkdtempSync(join(tmpdir(), 'partnerctl-lookup-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** A clock the test moves by hand. */
function testClock() {
  return {
    at: Date.now(),
    now(): number {
      return this.at;
    },
    advance(ms: number): void {
      this.at += ms;
    },
  };
}

/** The refusal's reason code, or null when `action` succeeds. */
async function reasonOf(action: unknown): Promise<string | null> {
  try {
    await action;
    return null;
  } catch (error) {
    if (isAppError(error) && error.reason !== undefined) return error.reason;
    throw error;
  }
}

describe.each(BACKENDS)('lookup on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const keys = SigningKeys.open(join(folder, `${provider}.json`), systemClock);
    const openKeys = async () => keys;

    function timed() {
      const clock = testClock();
      const db: Database = { ...ctx.db, clock };
      return { clock, db };
    }

    async function issued(db: Database, options: KeyPairOptions = {}) {
      const { partner } = await createPartner(db, ALICE, { name: uniqueName() });
      return issueKeyPair(db, ALICE, partner.id, options);
    }

    it('an expired pair is expired in every view: lookup, show-partner, list-keys, the exchange; its tokens live out their lifetime', async () => {
      const { clock, db } = timed();
      const pair = await issued(db, { expiresInMs: 1_000 });
      const token = await mintToken(keys, { partnerId: pair.partner.id, keyPairId: pair.keyPairId }, undefined, clock);
      clock.advance(1_000);
      const looked = await lookup(db, pair.accessKey, openKeys);
      expect(looked).toMatchObject({ status: 'expired', pairState: 'expired', accepted: false, reason: 'pair_expired', contain: null });
      expect(looked.pair?.status).toBe('active');
      expect((await showPartner(db, pair.partner.id)).keyPairs).toEqual([expect.objectContaining({ id: pair.keyPairId, state: 'expired' })]);
      expect((await listKeyPairs(db, { partner: pair.partner.id, limit: 10 })).keys).toEqual([expect.objectContaining({ id: pair.keyPairId, state: 'expired' })]);
      expect(await reasonOf(new CredentialExchange(db, keys).exchange(pair.accessKey, pair.secretKey))).toBe('pair_expired');
      expect(await reasonOf(new AccessState(db).authenticate(token.claims))).toBeNull();
      // A millisecond earlier it was active everywhere.
      clock.advance(-1);
      expect((await lookup(db, pair.accessKey, openKeys)).status).toBe('active');
      expect((await showPartner(db, pair.partner.id)).keyPairs[0]?.state).toBe('active');
    });

    it('containment is a typed action on its target', async () => {
      const { db } = timed();
      const pair = await issued(db);
      expect((await lookup(db, pair.secretKey, openKeys)).contain).toEqual({
        action: 'rotate_keys',
        partnerId: pair.partner.id,
        keyPairId: pair.keyPairId,
        revokeIssuedTokens: true,
      });
      expect((await lookup(db, pair.accessKey, openKeys)).contain).toBeNull();
      const token = await mintToken(keys, { partnerId: pair.partner.id, keyPairId: pair.keyPairId }, undefined, db.clock);
      expect((await lookup(db, token.accessToken, openKeys)).contain).toEqual({ action: 'revoke_tokens', partnerId: pair.partner.id, issuedBefore: new Date(db.clock.now()) });
      const rotated = await rotateKeyPair(db, ALICE, pair.partner.id, { overlapMs: 60_000 });
      expect((await lookup(db, pair.secretKey, openKeys)).contain).toEqual({ action: 'revoke_keys', partnerId: pair.partner.id, keyPairId: pair.keyPairId });
      expect(rotated.retiringKeyPairId).toBe(pair.keyPairId);
      await revokeKeyPair(db, ALICE, pair.partner.id, { keyPairId: pair.keyPairId });
      expect(await lookup(db, pair.secretKey, openKeys)).toMatchObject({ contain: null, reason: 'pair_revoked', status: 'revoked' });
      // A secret that is not the pair's: nothing of ours leaked.
      const wrong = `${pair.secretKey.slice(0, -6)}AAAAAA`;
      const wrongResult = await lookup(db, wrong, openKeys).catch((error: unknown) => error);
      if (!isAppError(wrongResult)) expect(wrongResult).toMatchObject({ genuine: false, contain: null });
    });

    it('a pair id or an access key alone contains nothing, unless the genuine secret came from outside the network rules', async () => {
      const { db } = timed();
      const pair = await issued(db);
      for (const value of [pair.keyPairId, pair.accessKey]) {
        const looked = await lookup(db, value, openKeys);
        expect(looked, value).toMatchObject({ status: 'active', accepted: true, contain: null });
        expect(looked.note, value).toMatch(/alone is not a secret/);
      }
      await setNetwork(db, ALICE, pair.partner.id, ['10.0.0.0/8']);
      await touchUnlistedRefused(ctx.db.sql, pair.keyPairId, new Date(db.clock.now()), '203.0.113.9');
      const rotate = { action: 'rotate_keys', partnerId: pair.partner.id, keyPairId: pair.keyPairId, revokeIssuedTokens: true };
      for (const value of [pair.keyPairId, pair.accessKey]) {
        const looked = await lookup(db, value, openKeys);
        expect(looked.contain, value).toEqual(rotate);
        expect(looked.note, value).toMatch(/203\.0\.113\.9.*the secret is out/);
      }
      await revokeKeyPair(db, ALICE, pair.partner.id, { keyPairId: pair.keyPairId });
      expect(await lookup(db, pair.keyPairId, openKeys)).toMatchObject({ status: 'revoked', contain: null });
    });

    it('names the network rules "accepted" depends on: it has no client address', async () => {
      const { db } = timed();
      const pair = await issued(db);
      await setNetwork(db, ALICE, pair.partner.id, ['10.0.0.0/8']);
      const looked = await lookup(db, pair.secretKey, openKeys);
      expect(looked).toMatchObject({ accepted: true, reason: null, network: ['10.0.0.0/8'] });
      expect(looked.note).toContain('10.0.0.0/8');
      const unrestricted = await issued(db);
      expect((await lookup(db, unrestricted.secretKey, openKeys)).network).toBeNull();
    });

    it('errors name the field the front end words its next step from, never a command line', async () => {
      const { db } = timed();
      const pair = await issued(db);
      const partnerId = await expectAppError(lookup(db, pair.partner.id, openKeys), 'invalid_argument');
      expect(partnerId.field).toBe('partner_id');
      expect(partnerId.message).not.toContain('partnerctl');
      const oldTokenId = await expectAppError(lookup(db, '6f1d2c3b-4a59-4e8f-9a0b-1c2d3e4f5a6b', openKeys), 'not_found');
      expect(oldTokenId.field).toBe('token');
      expect(oldTokenId.hint).toBeUndefined();
    });

    describe('"accepted now" and the gate agree for every state (one function decides both)', () => {
      const CLIENT = '10.1.2.3';
      const scenarios: [string, (db: Database, clock: ReturnType<typeof testClock>, pair: Awaited<ReturnType<typeof issued>>) => Promise<unknown>, string | null, string | null][] = [
        // [state, change, the secret's reason, the token's reason]
        ['active', async () => {}, null, null],
        ['retiring', (db, _clock, pair) => rotateKeyPair(db, ALICE, pair.partner.id, { overlapMs: 60_000 }), null, null],
        ['superseded', (db, _clock, pair) => rotateKeyPair(db, ALICE, pair.partner.id), 'pair_superseded', null],
        ['overlap ended', async (db, clock, pair) => {
          await rotateKeyPair(db, ALICE, pair.partner.id, { overlapMs: 60_000 });
          clock.advance(60_000);
        }, 'pair_superseded', null],
        ['revoked', (db, _clock, pair) => revokeKeyPair(db, ALICE, pair.partner.id, { keyPairId: pair.keyPairId }), 'pair_revoked', 'pair_revoked'],
        ['expired', async (_db, clock) => clock.advance(1_000), 'pair_expired', null],
        ['partner disabled', (db, _clock, pair) => setPartnerStatus(db, ALICE, pair.partner.id, 'disabled'), 'partner_disabled', 'partner_disabled'],
        ['tokens revoked', async (db, clock, pair) => {
          clock.advance(1);
          await revokeTokens(db, ALICE, pair.partner.id);
        }, null, 'tokens_revoked'],
        ['token expired', async (_db, clock) => clock.advance(900_000), 'pair_expired', 'token_expired'],
        ['network rules, allowed address', (db, _clock, pair) => setNetwork(db, ALICE, pair.partner.id, ['10.0.0.0/8']), null, null],
      ];
      it.each(scenarios)('%s', async (_state, change, secretReason, tokenReason) => {
        const { clock, db } = timed();
        const pair = await issued(db, _state === 'expired' || _state === 'token expired' ? { expiresInMs: 1_000 } : {});
        const token = await mintToken(keys, { partnerId: pair.partner.id, keyPairId: pair.keyPairId }, undefined, clock);
        await change(db, clock, pair);
        const exchange = new CredentialExchange(db, keys);
        const byLookup = await lookup(db, pair.secretKey, openKeys);
        const byExchange = await reasonOf(exchange.exchange(pair.accessKey, pair.secretKey, CLIENT));
        await exchange.bookkeeping.flush();
        expect({ lookup: byLookup.reason, exchange: byExchange }).toEqual({ lookup: secretReason, exchange: secretReason });
        expect(byLookup.accepted).toBe(secretReason === null);
        const tokenLookup = await lookup(db, token.accessToken, openKeys);
        const byGate = await reasonOf(new AccessState(db).authenticate(token.claims, CLIENT));
        expect({ lookup: tokenLookup.reason, gate: byGate }).toEqual({ lookup: tokenReason, gate: tokenReason });
        expect(tokenLookup.accepted).toBe(tokenReason === null);
        // list-keys' filter (the state of each row read, a page at a time) and the state agree.
        const state = (await showPartner(db, pair.partner.id)).keyPairs.find((each) => each.id === pair.keyPairId)?.state;
        const filtered = await listKeyPairs(db, { partner: pair.partner.id, status: state!, limit: 10 });
        expect(filtered.keys.map((each) => [each.id, each.state])).toContainEqual([pair.keyPairId, state]);
        // From memory it says the same: after a read, it accepts without a promise exactly what the read accepted.
        const access = new AccessState(db, { stalenessBoundMs: 60_000 });
        await reasonOf(access.authenticate(token.claims, CLIENT));
        const again = access.authenticate(token.claims, CLIENT);
        expect(again === undefined).toBe(tokenReason === null);
        expect(await reasonOf(again)).toBe(tokenReason);
      });

      it('an address outside the rules: the gate refuses it, lookup names the rules it depends on', async () => {
        const { clock, db } = timed();
        const pair = await issued(db);
        const token = await mintToken(keys, { partnerId: pair.partner.id, keyPairId: pair.keyPairId }, undefined, clock);
        await setNetwork(db, ALICE, pair.partner.id, ['10.0.0.0/8']);
        expect(await reasonOf(new AccessState(db).authenticate(token.claims, '203.0.113.9'))).toBe('address_not_allowed');
        expect(await reasonOf(new CredentialExchange(db, keys).exchange(pair.accessKey, pair.secretKey, '203.0.113.9'))).toBe('address_not_allowed');
        expect(await lookup(db, token.accessToken, openKeys)).toMatchObject({ accepted: true, network: ['10.0.0.0/8'] });
      });
    });
  });
});
