import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { keyPairStanding, keyPairState, tokensLiveUntil } from '../../src/domain/rules/key-pair-state.js';
import { TOKEN_TTL_SECONDS } from '../../src/domain/rules/key-pair-state.js';
import {
  companyRefusal,
  exchangeRefusal,
  refusalError,
  tokenRefusal,
  type PairSnapshot,
  type PartnerSnapshot,
} from '../../src/domain/rules/verdict.js';
import { REFUSAL_REASONS, type RefusalReason } from '../../src/reasons.js';

/** last_used_at is noted at most once a minute: the one margin. */
const LAST_USED_MARGIN_MS = 60_000;
const NOW = Date.parse('2026-01-01T12:00:00.000Z');
const at = (offsetMs: number) => new Date(NOW + offsetMs);
const PARTNER_ID = 'ptn_01JD0000000000000000000001';
const PAIR_ID = 'kp_01JD0000000000000000000001';

const partner = (change: Partial<PartnerSnapshot> = {}): PartnerSnapshot => ({ status: 'active', tokensRevokedBefore: null, allows: null, ...change });
/** A partner as the exchange reads it: its credentials policy too (set-credentials). */
const exchanging = (change: Partial<PartnerSnapshot & { credentialsPolicy: string }> = {}) => ({ ...partner(), credentialsPolicy: 'both', ...change });
const pair = (change: Partial<PairSnapshot & { kind: string }> = {}): PairSnapshot & { kind: string } => ({
  kind: 'secret',
  partnerId: PARTNER_ID,
  status: 'active',
  expiresAt: null,
  retiresAt: null,
  supersededAt: null,
  revokedAt: null,
  ...change,
});
const token = (change: Partial<{ keyPairId: string | null; exp: number; issuedAtMs: number }> = {}) => ({
  partnerId: PARTNER_ID,
  keyPairId: PAIR_ID,
  exp: (NOW + 600_000) / 1000,
  issuedAtMs: NOW - 300_000,
  ...change,
});
const onlyTen = (address: string) => address.startsWith('10.');

describe('key pair state', () => {
  it('is the stored status, expired past its expiry (revoked stays revoked), superseded once an overlap ends', () => {
    expect(keyPairState(pair(), NOW)).toBe('active');
    // The boundary: expired at its expiry instant, not a millisecond before.
    expect(keyPairState(pair({ expiresAt: at(1) }), NOW)).toBe('active');
    expect(keyPairState(pair({ expiresAt: at(0) }), NOW)).toBe('expired');
    expect(keyPairState(pair({ status: 'superseded', supersededAt: at(-5), expiresAt: at(-1) }), NOW)).toBe('expired');
    expect(keyPairState(pair({ status: 'revoked', revokedAt: at(-5), expiresAt: at(-1) }), NOW)).toBe('revoked');
    expect(keyPairState(pair({ status: 'retiring', retiresAt: at(1) }), NOW)).toBe('retiring');
    expect(keyPairStanding(pair({ status: 'retiring', retiresAt: at(0) }), NOW)).toEqual({ state: 'superseded', why: 'overlap_ended', stoppedAt: at(0) });
    expect(keyPairStanding(pair({ expiresAt: at(-10) }), NOW)).toEqual({ state: 'expired', why: 'expired', stoppedAt: at(-10) });
    expect(keyPairStanding(pair({ status: 'superseded', supersededAt: at(-20), expiresAt: at(-10) }), NOW).stoppedAt).toEqual(at(-20));
  });

  it('one liveness rule with one margin: last_used_at + a minute, bounded by when it stopped minting, cut by the brake', () => {
    const ttl = TOKEN_TTL_SECONDS * 1000;
    const used = (lastUsedAt: Date | null, change: Partial<PairSnapshot> = {}) => {
      const stored = pair({ ...change });
      return { lastUsedAt, ...keyPairStanding(stored, NOW) };
    };
    expect(tokensLiveUntil(used(null), null, NOW)).toBeNull();
    expect(tokensLiveUntil(used(at(-1000)), null, NOW)).toBe(NOW - 1000 + LAST_USED_MARGIN_MS + ttl);
    // Live while lastUsed + margin + ttl is ahead of now; at that instant, not.
    expect(tokensLiveUntil(used(at(-(LAST_USED_MARGIN_MS + ttl) + 1)), null, NOW)).toBe(NOW + 1);
    expect(tokensLiveUntil(used(at(-(LAST_USED_MARGIN_MS + ttl))), null, NOW)).toBeNull();
    // A pair that stopped minting before last_used_at + the margin: its last token is no later than that.
    expect(tokensLiveUntil(used(at(-1000), { status: 'superseded', supersededAt: at(-500) }), null, NOW)).toBe(NOW - 500 + ttl);
    expect(tokensLiveUntil(used(at(-1000), { status: 'revoked', revokedAt: at(-500) }), null, NOW)).toBeNull();
    // Noted before the brake: nothing minted since (the first token after a brake is noted before it is handed out).
    expect(tokensLiveUntil(used(at(-1000)), NOW - 999, NOW)).toBeNull();
    expect(tokensLiveUntil(used(at(-1000)), NOW - 1000, NOW)).toBe(NOW - 1000 + LAST_USED_MARGIN_MS + ttl);
  });
});

describe('tokenRefusal', () => {
  const cases: [string, RefusalReason | null, Parameters<typeof tokenRefusal>][] = [
    ['accepted', null, [token(), partner(), pair(), '203.0.113.5', NOW]],
    ['a test token needs no pair', null, [token({ keyPairId: null }), partner(), null, '', NOW]],
    ['superseded and expired pairs\u2019 tokens live out their lifetime', null, [token(), partner(), pair({ status: 'superseded', expiresAt: at(-1) }), '', NOW]],
    ['token_expired at its exp', 'token_expired', [token({ exp: NOW / 1000 }), partner(), pair(), '', NOW]],
    ['partner_unknown', 'partner_unknown', [token(), null, pair(), '', NOW]],
    ['partner_disabled', 'partner_disabled', [token(), partner({ status: 'disabled' }), pair(), '', NOW]],
    ['tokens_revoked: issued before the brake', 'tokens_revoked', [token(), partner({ tokensRevokedBefore: NOW - 300_000 + 1 }), pair(), '', NOW]],
    ['issued at the brake is accepted', null, [token(), partner({ tokensRevokedBefore: NOW - 300_000 }), pair(), '', NOW]],
    ['pair_unknown', 'pair_unknown', [token(), partner(), null, '', NOW]],
    ['pair_unknown: a pair of another partner', 'pair_unknown', [token(), partner(), pair({ partnerId: 'ptn_01JD0000000000000000000002' }), '', NOW]],
    ['pair_revoked', 'pair_revoked', [token(), partner(), pair({ status: 'revoked' }), '', NOW]],
    ['address_not_allowed', 'address_not_allowed', [token(), partner({ allows: onlyTen }), pair(), '203.0.113.5', NOW]],
    ['an empty address matches no rule', 'address_not_allowed', [token(), partner({ allows: onlyTen }), pair(), '', NOW]],
    ['an allowed address', null, [token(), partner({ allows: onlyTen }), pair(), '10.1.2.3', NOW]],
    ['no address (lookup): the rules are not checked', null, [token(), partner({ allows: onlyTen }), pair(), null, NOW]],
    ['expiry before anything else', 'token_expired', [token({ exp: 0 }), null, null, '', NOW]],
    ['the partner before the pair', 'partner_disabled', [token(), partner({ status: 'disabled' }), pair({ status: 'revoked' }), '', NOW]],
  ];
  it.each(cases)('%s', (_name, expected, args) => {
    expect(tokenRefusal(...args)).toBe(expected);
  });
});

describe('exchangeRefusal', () => {
  const cases: [string, RefusalReason | null, Parameters<typeof exchangeRefusal>][] = [
    ['accepted', null, [pair(), exchanging(), true, '', NOW]],
    ['a retiring pair within its overlap', null, [pair({ status: 'retiring', retiresAt: at(1) }), exchanging(), true, '', NOW]],
    ['pair_unknown', 'pair_unknown', [null, null, null, '', NOW]],
    ['address_not_allowed, whatever the secret', 'address_not_allowed', [pair(), exchanging({ allows: onlyTen }), false, '203.0.113.5', NOW]],
    ['secret_mismatch', 'secret_mismatch', [pair({ status: 'revoked' }), exchanging(), false, '', NOW]],
    ['no secret presented (lookup of an access key)', null, [pair(), exchanging(), null, null, NOW]],
    ['pair_revoked', 'pair_revoked', [pair({ status: 'revoked' }), exchanging(), true, '', NOW]],
    ['pair_expired at its expiry', 'pair_expired', [pair({ expiresAt: at(0) }), exchanging(), true, '', NOW]],
    ['a millisecond before its expiry', null, [pair({ expiresAt: at(1) }), exchanging(), true, '', NOW]],
    ['pair_superseded', 'pair_superseded', [pair({ status: 'superseded', supersededAt: at(-1) }), exchanging(), true, '', NOW]],
    ['pair_superseded: an overlap that ended at now', 'pair_superseded', [pair({ status: 'retiring', retiresAt: at(0) }), exchanging(), true, '', NOW]],
    ['partner_disabled', 'partner_disabled', [pair(), exchanging({ status: 'disabled' }), true, '', NOW]],
    ['partner_unknown', 'partner_unknown', [pair(), null, true, '', NOW]],
    ['the brake does not stop an exchange', null, [pair(), exchanging({ tokensRevokedBefore: NOW }), true, '', NOW]],
    ['39: an assertion accepted like a secret', null, [pair({ kind: 'public_key' }), exchanging(), true, '', NOW]],
    ['39: an assertion fault is its reason', 'assertion_audience', [pair({ kind: 'public_key' }), exchanging(), 'assertion_audience', '', NOW]],
    ['39: the address before the assertion', 'address_not_allowed', [pair({ kind: 'public_key' }), exchanging({ allows: onlyTen }), 'assertion_invalid', '203.0.113.5', NOW]],
    ['39: a genuine assertion of a superseded pair', 'pair_superseded', [pair({ kind: 'public_key', status: 'superseded', supersededAt: at(-1) }), exchanging(), true, '', NOW]],
    ['39: a genuine assertion of a disabled partner', 'partner_disabled', [pair({ kind: 'public_key' }), exchanging({ status: 'disabled' }), true, '', NOW]],
    ['39: a secret for a public-key partner', 'credential_kind_not_allowed', [pair(), exchanging({ credentialsPolicy: 'public-key' }), true, '', NOW]],
    ['39: an assertion for a secret-only partner', 'credential_kind_not_allowed', [pair({ kind: 'public_key' }), exchanging({ credentialsPolicy: 'secret' }), true, '', NOW]],
    ['39: a public key for a public-key partner', null, [pair({ kind: 'public_key' }), exchanging({ credentialsPolicy: 'public-key' }), true, '', NOW]],
  ];
  it.each(cases)('%s', (_name, expected, args) => {
    expect(exchangeRefusal(...args)).toBe(expected);
  });
});

describe('companyRefusal and the errors', () => {
  it('company_not_mapped for an unmapped company and for a value that is no company id', () => {
    expect(companyRefusal(true, true)).toBeNull();
    expect(companyRefusal(true, false)).toBe('company_not_mapped');
    expect(companyRefusal(false, false)).toBe('company_not_mapped');
  });

  it('keeps the HTTP codes and carries the reason, for every reason code', () => {
    for (const reason of REFUSAL_REASONS) {
      const gate = refusalError(reason, 'gate');
      const exchange = refusalError(reason, 'exchange');
      expect(gate.reason).toBe(reason);
      expect(exchange.reason).toBe(reason);
      const gateCode = reason === 'address_not_allowed' ? 'address_not_allowed' : reason === 'company_not_mapped' ? 'not_found' : 'unauthorized';
      expect(gate.code).toBe(gateCode);
      expect(exchange.code).toBe(reason === 'address_not_allowed' ? 'address_not_allowed' : 'invalid_credentials');
    }
    expect(refusalError('pair_revoked', 'exchange').message).toBe(refusalError('secret_mismatch', 'exchange').message);
  });
});

describe('docs/reasons.md', () => {
  it('explains every reason code', () => {
    const text = readFileSync(new URL('../../docs/reasons.md', import.meta.url), 'utf8');
    for (const reason of REFUSAL_REASONS) expect(text, reason).toContain(`| \`${reason}\` |`);
  });
});
