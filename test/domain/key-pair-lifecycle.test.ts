import { describe, expect, it } from 'vitest';
import type { KeyPairRow } from '../../src/db/repositories/key-pairs.js';
import { exchanged, issued, retired, rotation, settled } from '../../src/domain/rules/key-pair-lifecycle.js';

// The transitions are pure: each is checked here from rows and an instant, with no database.
const NOW = Date.parse('2026-03-01T12:00:00Z');
const at = (offsetMs: number) => new Date(NOW + offsetMs);

function row(overrides: Partial<KeyPairRow> = {}): KeyPairRow {
  return {
    id: 'kp_old',
    partnerId: 'ptn_a',
    accessKey: 'pctl_ak_old',
    kind: 'secret',
    publicKey: null,
    publicKeyAlg: null,
    kid: null,
    status: 'active',
    createdAt: at(-86_400_000),
    supersededAt: null,
    revokedAt: null,
    lastUsedAt: null,
    expiresAt: null,
    lastRefusedAt: null,
    retiresAt: null,
    switchedAt: null,
    afterSwitchSeconds: null,
    leakReportedAt: null,
    leakUrl: null,
    unlistedRefusedAt: null,
    unlistedRefusedAddress: null,
    ...overrides,
  };
}

const fresh = { id: 'kp_new', accessKey: 'pctl_ak_new', credential: { kind: 'secret' as const, secretHash: '$argon2id$hash' } };

describe('exchanged: what an accepted exchange records, from the row', () => {
  const retiring = { id: 'kp_old', retiresAt: at(3_600_000), switchedAt: null, afterSwitchSeconds: 60 };

  it('notes last_used_at off the answer at most once a minute, and before the answer for the first token after a brake', () => {
    const pair = { status: 'active', retiring: null, tokensRevokedBefore: null };
    expect(exchanged({ ...pair, lastUsedAt: null }, NOW).lastUsed).toBe('after_answer');
    expect(exchanged({ ...pair, lastUsedAt: at(-59_999) }, NOW).lastUsed).toBeNull();
    expect(exchanged({ ...pair, lastUsedAt: at(-60_000) }, NOW).lastUsed).toBe('after_answer');
    expect(exchanged({ ...pair, lastUsedAt: at(-1_000), tokensRevokedBefore: NOW - 500 }, NOW).lastUsed).toBe('before_answer');
    expect(exchanged({ ...pair, lastUsedAt: null, tokensRevokedBefore: NOW - 500 }, NOW).lastUsed).toBe('before_answer');
    expect(exchanged({ ...pair, lastUsedAt: at(-400), tokensRevokedBefore: NOW - 500 }, NOW).lastUsed).toBeNull();
  });

  it("is the switch for an active pair while its partner's retiring pair has not switched, after a brake too (37.13)", () => {
    const expected = { pairId: 'kp_old', at: at(0), retiresAt: at(60_000) };
    expect(exchanged({ status: 'active', lastUsedAt: null, tokensRevokedBefore: null, retiring }, NOW).switched).toEqual(expected);
    expect(exchanged({ status: 'active', lastUsedAt: null, tokensRevokedBefore: NOW - 1, retiring }, NOW)).toEqual({ lastUsed: 'before_answer', switched: expected });
  });

  it('never moves the end later than retires_at, and is no switch once switched or for a pair that is not active', () => {
    const soon = { ...retiring, retiresAt: at(10_000) };
    expect(exchanged({ status: 'active', lastUsedAt: null, tokensRevokedBefore: null, retiring: soon }, NOW).switched?.retiresAt).toEqual(at(10_000));
    const switched = { ...retiring, switchedAt: at(-5_000) };
    expect(exchanged({ status: 'active', lastUsedAt: null, tokensRevokedBefore: null, retiring: switched }, NOW).switched).toBeNull();
    expect(exchanged({ status: 'retiring', lastUsedAt: null, tokensRevokedBefore: null, retiring }, NOW).switched).toBeNull();
  });
});

describe('the stored transitions', () => {
  it('issued: active from now, expiring after --expires-in, with keys.issued; the secret is never part of the row', () => {
    const { row: inserted, event } = issued({ ...fresh, secretKey: 'pctl_sk_secret' } as typeof fresh, 'ptn_a', at(0), { expiresInMs: 3_600_000 });
    expect(inserted).toEqual({
      id: 'kp_new',
      accessKey: 'pctl_ak_new',
      kind: 'secret',
      secretHash: '$argon2id$hash',
      publicKey: null,
      publicKeyAlg: null,
      kid: null,
      partnerId: 'ptn_a',
      status: 'active',
      createdAt: at(0),
      expiresAt: at(3_600_000),
    });
    expect(event).toEqual({
      action: 'keys.issued',
      partnerId: 'ptn_a',
      details: { key_pair_id: 'kp_new', access_key: 'pctl_ak_new', expires_at: at(3_600_000).toISOString() },
    });
  });

  it('settled: an overlap past its end is retired by the switch when retires_at is switched_at + after_switch, else by time', () => {
    const bySwitch = row({ status: 'retiring', switchedAt: at(-120_000), afterSwitchSeconds: 60, retiresAt: at(-60_000) });
    expect(settled(bySwitch, NOW)?.event.details).toMatchObject({ ended_by: 'switch', ended_at: at(-60_000).toISOString() });
    expect(settled(bySwitch, NOW)?.transition).toEqual({
      pairId: 'kp_old',
      expected: 'retiring',
      change: { status: 'superseded', supersededAt: at(-60_000), retiresAt: at(-60_000) },
    });
    expect(settled(row({ status: 'retiring', retiresAt: at(-1) }), NOW)?.event.details).toMatchObject({ ended_by: 'time' });
    expect(settled(row({ status: 'retiring', retiresAt: at(1) }), NOW)).toBeNull();
    expect(settled(row(), NOW)).toBeNull();
  });

  it('retired by --finish or a rotation ends the overlap now', () => {
    const ended = retired(row({ status: 'retiring', retiresAt: at(60_000) }), 'finish', at(0));
    expect(ended.transition.change).toEqual({ status: 'superseded', supersededAt: at(0), retiresAt: at(0) });
    expect(ended.event).toMatchObject({ action: 'keys.retired', details: { ended_by: 'finish', switched_at: null } });
  });
});

describe('rotation', () => {
  const active = row();

  it('supersedes the active pair, or makes it retiring for the overlap (never past its expiry), and ends an earlier overlap', () => {
    const plain = rotation({ partnerId: 'ptn_a', active, retiring: null, pairs: [], fresh }, at(0), {});
    expect(plain.transitions).toEqual([{ pairId: 'kp_old', expected: null, change: { status: 'superseded', supersededAt: at(0) } }]);
    expect(plain.inserted).toMatchObject({ id: 'kp_new', status: 'active', createdAt: at(0) });
    expect(plain.events.map((event) => event.action)).toEqual(['keys.rotated']);

    const earlier = row({ id: 'kp_older', status: 'retiring', retiresAt: at(60_000) });
    const overlap = rotation({ partnerId: 'ptn_a', active: row({ expiresAt: at(1_800_000) }), retiring: earlier, pairs: [], fresh }, at(0), {
      overlapMs: 3_600_000,
    });
    expect(overlap.transitions).toEqual([
      { pairId: 'kp_older', expected: 'retiring', change: { status: 'superseded', supersededAt: at(0), retiresAt: at(0) } },
      { pairId: 'kp_old', expected: 'active', change: { status: 'retiring', retiresAt: at(1_800_000), afterSwitchSeconds: 900 } },
    ]);
    expect(overlap).toMatchObject({ retiringKeyPairId: 'kp_old', supersededKeyPairId: null, afterSwitchMs: 900_000, endedRetiringKeyPairId: 'kp_older' });
    expect(overlap.events.map((event) => event.action)).toEqual(['keys.retired', 'keys.rotated']);
  });

  it('with --revoke-issued-tokens revokes the active pair (superseded now too) and every retiring and superseded one, and sets the brake', () => {
    const pairs = [
      active,
      row({ id: 'kp_retiring', status: 'retiring', retiresAt: at(60_000) }),
      row({ id: 'kp_superseded', status: 'superseded', supersededAt: at(-1_000) }),
      row({ id: 'kp_revoked', status: 'revoked', revokedAt: at(-1_000) }),
    ];
    const leak = rotation({ partnerId: 'ptn_a', active, retiring: null, pairs, fresh }, at(0), { revokeIssuedTokens: true });
    expect(leak.transitions).toEqual([
      { pairId: 'kp_old', expected: null, change: { status: 'revoked', revokedAt: at(0), supersededAt: at(0) } },
      { pairId: 'kp_retiring', expected: null, change: { status: 'revoked', revokedAt: at(0) } },
      { pairId: 'kp_superseded', expected: null, change: { status: 'revoked', revokedAt: at(0) } },
    ]);
    expect(leak).toMatchObject({ tokensRevokedBefore: NOW, revokedKeyPairIds: ['kp_old', 'kp_retiring', 'kp_superseded'] });
    expect(leak.events[0]?.details).toMatchObject({ revoked_issued_tokens: true, tokens_revoked_before: NOW });
  });
});
