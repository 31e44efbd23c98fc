import { systemClock } from '../../src/clock.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { auditPage } from '../../src/db/repositories/audit.js';
import { keyPairById } from '../../src/db/repositories/key-pairs.js';
import { partnerGateRow } from '../../src/db/repositories/partners.js';
import { issueKeyPair } from '../../src/domain/operations/key-pairs.js';
import { handleLeakAlerts, leakAction, SECRET_SCANNING_ACTOR, type LeakAlert } from '../../src/domain/operations/leak-reports.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { SigningKeys } from '../../src/domain/operations/signing-keys.js';
import { mintToken } from '../../src/domain/operations/tokens.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { ALICE, uniqueName, useMigratedDatabase } from './fixtures.js';

const folder = mkdtempSync(join(tmpdir(), 'partnerctl-leak-reports-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

const PARTNER_ID = 'ptn_01JD0000000000000000000001';
const PAIR_ID = 'kp_01JD0000000000000000000001';

describe('leakAction: what the receiver does, from the typed containment', () => {
  it('a secret: the pair is braked, whether lookup would rotate it or revoke it', () => {
    expect(leakAction('secret_key', { action: 'rotate_keys', partnerId: PARTNER_ID, keyPairId: PAIR_ID, revokeIssuedTokens: true })).toEqual({
      kind: 'revoke_key_pair',
      partnerId: PARTNER_ID,
      keyPairId: PAIR_ID,
    });
    expect(leakAction('secret_key', { action: 'revoke_keys', partnerId: PARTNER_ID, keyPairId: PAIR_ID })).toEqual({
      kind: 'revoke_key_pair',
      partnerId: PARTNER_ID,
      keyPairId: PAIR_ID,
    });
  });

  it('a token: its partner\u2019s tokens; an access key, a pair id or nothing to contain: nothing', () => {
    expect(leakAction('token', { action: 'revoke_tokens', partnerId: PARTNER_ID, issuedBefore: new Date(0) })).toEqual({ kind: 'revoke_tokens', partnerId: PARTNER_ID });
    expect(leakAction('secret_key', null)).toBeNull();
    expect(leakAction('token', null)).toBeNull();
    expect(leakAction('key_pair_id', { action: 'revoke_keys', partnerId: PARTNER_ID, keyPairId: PAIR_ID })).toBeNull();
    expect(leakAction('access_key', { action: 'rotate_keys', partnerId: PARTNER_ID, keyPairId: PAIR_ID, revokeIssuedTokens: true })).toBeNull();
  });
});

describe.each(BACKENDS)('handleLeakAlerts on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const keys = SigningKeys.open(join(folder, `${provider}.json`), systemClock);
    const alert = (token: string, url = `https://github.com/octo/repo/blob/${uniqueName('c')}`): LeakAlert => ({
      token,
      type: 'partnerctl_secret_key',
      url,
      source: 'content',
    });

    async function issued() {
      const { partner } = await createPartner(ctx.db, ALICE, { name: uniqueName() });
      return issueKeyPair(ctx.db, ALICE, partner.id);
    }

    async function leakEvents(partnerId: string) {
      return (await auditPage(ctx.db.sql, { partnerId, action: 'leak.reported', limit: 10 })).map((event) => ({
        ...event,
        details: JSON.parse(event.details) as Record<string, unknown>,
      }));
    }

    it('contain: a live secret brakes its pair, a live token its partner\u2019s tokens; each alert recorded once', async () => {
      const pair = await issued();
      const other = await issued();
      const token = await mintToken(keys, { partnerId: other.partner.id, keyPairId: other.keyPairId });
      const alerts = [alert(pair.secretKey), alert(token.accessToken), alert('pctl_sk_garbage')];
      const verdicts = await handleLeakAlerts(ctx.db, keys, alerts, 'contain');
      expect(verdicts.map((verdict) => verdict.label)).toEqual(['true_positive', 'true_positive', 'false_positive']);
      expect((await keyPairById(ctx.db.sql, pair.keyPairId))?.status).toBe('revoked');
      expect((await partnerGateRow(ctx.db.sql, other.partner.id))?.tokensRevokedBefore).not.toBeNull();
      expect((await keyPairById(ctx.db.sql, other.keyPairId))?.status).toBe('active');
      const [event] = await leakEvents(pair.partner.id);
      expect(event).toMatchObject({ actor: SECRET_SCANNING_ACTOR, details: { kind: 'secret_key', action: 'revoke_key_pair', changed: true, policy: 'contain' } });
      expect(JSON.stringify(event)).not.toContain('partnerctl ');
      expect((await leakEvents(other.partner.id))[0]?.details).toMatchObject({ kind: 'token', action: 'revoke_tokens', changed: true });
      // The same alerts again: answered from their records, nothing done or recorded again.
      expect(await handleLeakAlerts(ctx.db, keys, alerts, 'contain')).toEqual(verdicts);
      expect(await leakEvents(pair.partner.id)).toHaveLength(1);
    });

    it('report: recorded with lookup\u2019s containment as data, nothing changed', async () => {
      const pair = await issued();
      const [verdict] = await handleLeakAlerts(ctx.db, keys, [alert(pair.secretKey)], 'report');
      expect(verdict?.label).toBe('true_positive');
      expect((await keyPairById(ctx.db.sql, pair.keyPairId))?.status).toBe('active');
      expect((await leakEvents(pair.partner.id))[0]?.details).toMatchObject({
        action: 'none',
        policy: 'report',
        advice: { action: 'rotate_keys', partner_id: pair.partner.id, key_pair_id: pair.keyPairId, revoke_issued_tokens: true },
      });
    });

    it('an access key alone is ours but contains nothing', async () => {
      const pair = await issued();
      const [verdict] = await handleLeakAlerts(ctx.db, keys, [alert(pair.accessKey)], 'contain');
      expect(verdict?.label).toBe('true_positive');
      expect((await keyPairById(ctx.db.sql, pair.keyPairId))?.status).toBe('active');
      expect((await leakEvents(pair.partner.id))[0]?.details).toMatchObject({ kind: 'access_key', action: 'none', advice: null });
    });
  });
});
