// 40: property tests (fast-check) over the verdict and a pair's lifecycle, against a clock that steps
// forward and back (test/support/README.md, "Property tests"). The rules are pure: every instant they see
// is an argument, so a clock stepped back an hour or forward a day is only another argument. A model
// partner is driven through random operations (issue, rotations with and without an overlap, the switch,
// the settling of an overlap, revoke-keys, revoke-tokens, exchanges), each at the stepping clock's reading,
// its rows changed only by what the lifecycle returns; after every operation the verdict is asked at
// instants on both sides of the clock.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KeyPairRow } from '../../src/db/repositories/key-pairs.js';
import { exchanged, issued, revocable, revoked, rotation, settled, type Transition } from '../../src/domain/rules/key-pair-lifecycle.js';
import { keyPairState, TOKEN_TTL_SECONDS } from '../../src/domain/rules/key-pair-state.js';
import { exchangeRefusal, type PartnerSnapshot, tokenRefusal } from '../../src/domain/rules/verdict.js';

const T0 = Date.UTC(2026, 10, 26, 9, 0, 0);
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** How the clock moves between two operations: small drifts, NTP-sized corrections, whole hours and days, both ways. */
const step = fc.oneof(
  fc.integer({ min: -2_000, max: 2_000 }),
  fc.integer({ min: -HOUR, max: HOUR }),
  fc.constantFrom(-DAY, -HOUR, -15 * MINUTE, -1, 0, 1, 15 * MINUTE, HOUR, DAY, 31 * DAY),
);

type Op =
  | { kind: 'rotate'; overlapMs?: number; afterSwitchMs?: number; revoke: boolean; expiresInMs?: number }
  | { kind: 'revokeKeys' }
  | { kind: 'revokeTokens' }
  | { kind: 'exchange'; which: number }
  | { kind: 'settle' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record(
    {
      kind: fc.constant('rotate' as const),
      overlapMs: fc.integer({ min: 0, max: 2 * DAY }),
      afterSwitchMs: fc.integer({ min: 0, max: HOUR }),
      revoke: fc.boolean(),
      expiresInMs: fc.integer({ min: 1, max: 3 * DAY }),
    },
    { requiredKeys: ['kind', 'revoke'] },
  ),
  fc.constant({ kind: 'revokeKeys' as const }),
  fc.constant({ kind: 'revokeTokens' as const }),
  fc.record({ kind: fc.constant('exchange' as const), which: fc.nat(5) }),
  fc.constant({ kind: 'settle' as const }),
);

interface Token {
  keyPairId: string;
  issuedAtMs: number;
  exp: number;
}

/** One partner's rows as the database would hold them after the lifecycle's transitions. */
class Model {
  readonly partnerId = 'ptn_model';
  readonly pairs: KeyPairRow[] = [];
  readonly tokens: Token[] = [];
  brake: number | null = null;
  /** Pairs once stored revoked, and their revokedAt then. */
  readonly revokedAt = new Map<string, number>();
  private next = 0;

  constructor(now: number) {
    this.insert(issued(this.fresh(), this.partnerId, new Date(now), {}).row);
  }

  partner(): PartnerSnapshot & { credentialsPolicy: string } {
    return { status: 'active', tokensRevokedBefore: this.brake, allows: null, credentialsPolicy: 'both' };
  }

  private fresh() {
    const n = ++this.next;
    return { id: `kp_${n}`, accessKey: `ak_${n}`, credential: { kind: 'secret' as const, secretHash: 'hash' } };
  }

  private insert(row: Omit<KeyPairRow, 'supersededAt' | 'revokedAt' | 'lastUsedAt' | 'lastRefusedAt' | 'retiresAt' | 'switchedAt' | 'afterSwitchSeconds' | 'unlistedRefusedAt' | 'unlistedRefusedAddress' | 'leakReportedAt' | 'leakUrl'> & Partial<KeyPairRow>) {
    this.pairs.push({
      supersededAt: null,
      revokedAt: null,
      lastUsedAt: null,
      lastRefusedAt: null,
      retiresAt: null,
      switchedAt: null,
      afterSwitchSeconds: null,
      unlistedRefusedAt: null,
      unlistedRefusedAddress: null,
      leakReportedAt: null,
      leakUrl: null,
      ...row,
    } as KeyPairRow);
  }

  /** A transition written as the repository writes it: only while the row is still stored `expected`. */
  private apply(transition: Transition) {
    const row = this.pairs.find((pair) => pair.id === transition.pairId)!;
    if (transition.expected !== null && row.status !== transition.expected) return;
    Object.assign(row, transition.change);
  }

  private stored(status: string) {
    return this.pairs.find((pair) => pair.status === status) ?? null;
  }

  run(operation: Op, now: number) {
    const at = new Date(now);
    switch (operation.kind) {
      case 'rotate': {
        const active = this.stored('active');
        if (active === null) {
          this.insert(issued(this.fresh(), this.partnerId, at, { expiresInMs: operation.expiresInMs }).row);
          break;
        }
        const result = rotation(
          { partnerId: this.partnerId, active, retiring: this.stored('retiring'), pairs: this.pairs, fresh: this.fresh() },
          at,
          { revokeIssuedTokens: operation.revoke, overlapMs: operation.revoke ? undefined : operation.overlapMs, afterSwitchMs: operation.afterSwitchMs, expiresInMs: operation.expiresInMs },
        );
        for (const transition of result.transitions) this.apply(transition);
        this.insert(result.inserted);
        if (result.tokensRevokedBefore !== null) this.brake = result.tokensRevokedBefore;
        break;
      }
      case 'revokeKeys': {
        const live = this.pairs.filter(revocable);
        for (const pair of live) this.apply(revoked(pair, at));
        this.brake = now;
        break;
      }
      case 'revokeTokens':
        this.brake = now;
        break;
      case 'settle': {
        const ended = settled(this.stored('retiring'), now);
        if (ended) this.apply(ended.transition);
        break;
      }
      case 'exchange': {
        if (this.pairs.length === 0) break;
        const pair = this.pairs[operation.which % this.pairs.length]!;
        if (exchangeRefusal({ ...pair }, this.partner(), true, '203.0.113.7', now) !== null) break;
        const retiring = this.pairs.find((other) => other.status === 'retiring' && other.id !== pair.id) ?? null;
        const recorded = exchanged({ status: pair.status, lastUsedAt: pair.lastUsedAt, tokensRevokedBefore: this.brake, retiring }, now);
        if (recorded.lastUsed !== null) pair.lastUsedAt = at;
        if (recorded.switched) {
          const target = this.pairs.find((other) => other.id === recorded.switched!.pairId)!;
          if (target.status === 'retiring') Object.assign(target, { switchedAt: recorded.switched.at, retiresAt: recorded.switched.retiresAt });
        }
        this.tokens.push({ keyPairId: pair.id, issuedAtMs: now, exp: Math.floor(now / 1000) + TOKEN_TTL_SECONDS });
        break;
      }
    }
    for (const pair of this.pairs) if (pair.status === 'revoked' && !this.revokedAt.has(pair.id)) this.revokedAt.set(pair.id, pair.revokedAt!.getTime());
  }
}

/** Instants to ask the verdict at: the clock's reading, and others on both sides of it, far and near. */
const probes = fc.array(fc.integer({ min: -40 * DAY, max: 40 * DAY }), { minLength: 1, maxLength: 6 });

describe('40: property tests of the verdict and the lifecycle against a stepping clock', () => {
  it('a revoked pair is never accepted, whatever the clock says, and stays revoked through every later operation', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 40 }), probes, (ops, offsets) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
          for (const [id, at] of model.revokedAt) {
            const pair = model.pairs.find((row) => row.id === id)!;
            expect(pair.status).toBe('revoked');
            expect(pair.revokedAt!.getTime()).toBe(at);
            for (const offset of [0, ...offsets]) {
              expect(exchangeRefusal(pair, model.partner(), true, null, now + offset)).toBe('pair_revoked');
              for (const token of model.tokens.filter((each) => each.keyPairId === id)) {
                expect(tokenRefusal({ ...token, partnerId: model.partnerId }, model.partner(), { ...pair, partnerId: model.partnerId }, null, now + offset)).not.toBeNull();
              }
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a token issued before the brake is never accepted, at any instant and whatever came after', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 40 }), probes, (ops, offsets) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
          if (model.brake === null) continue;
          for (const token of model.tokens.filter((each) => each.issuedAtMs < model.brake!)) {
            const pair = model.pairs.find((row) => row.id === token.keyPairId)!;
            for (const offset of [0, ...offsets]) {
              expect(tokenRefusal({ ...token, partnerId: model.partnerId }, model.partner(), { ...pair, partnerId: model.partnerId }, null, now + offset)).not.toBeNull();
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('at any instant at most two pairs mint (the active one and one retiring in its overlap), and at most one stored active', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 40 }), probes, (ops, offsets) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
          expect(model.pairs.filter((pair) => pair.status === 'active').length).toBeLessThanOrEqual(1);
          expect(model.pairs.filter((pair) => pair.status === 'retiring').length).toBeLessThanOrEqual(1);
          for (const offset of [0, ...offsets]) {
            const minting = model.pairs.filter((pair) => exchangeRefusal(pair, model.partner(), true, null, now + offset) === null);
            expect(minting.length).toBeLessThanOrEqual(2);
            if (minting.length === 2) expect(minting.map((pair) => keyPairState(pair, now + offset)).sort()).toEqual(['active', 'retiring']);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('for a row as stored, minting is a prefix of time: a pair that mints at an instant minted at every earlier one', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 30 }), fc.integer({ min: -40 * DAY, max: 40 * DAY }), fc.integer({ min: 1, max: 40 * DAY }), (ops, offset, later) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
        }
        const t1 = now + offset;
        for (const pair of model.pairs) {
          if (exchangeRefusal(pair, model.partner(), true, null, t1 + later) === null) expect(exchangeRefusal(pair, model.partner(), true, null, t1)).toBeNull();
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a pair mints nothing at or after its retires_at or its expires_at, whatever the clock says', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 30 }), fc.integer({ min: 0, max: 40 * DAY }), (ops, after) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
          for (const pair of model.pairs) {
            for (const end of [pair.retiresAt, pair.expiresAt]) {
              if (end !== null && pair.status !== 'active') expect(exchangeRefusal(pair, model.partner(), true, null, end.getTime() + after)).not.toBeNull();
            }
            if (pair.expiresAt !== null) expect(exchangeRefusal(pair, model.partner(), true, null, pair.expiresAt.getTime() + after)).not.toBeNull();
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a token is refused from its expiry on, whatever the clock says after it, and a wrong secret never mints', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(step, op), { maxLength: 30 }), fc.integer({ min: 0, max: 40 * DAY }), (ops, after) => {
        let now = T0;
        const model = new Model(now);
        for (const [delta, operation] of ops) {
          now += delta;
          model.run(operation, now);
          for (const pair of model.pairs) expect(exchangeRefusal(pair, model.partner(), false, null, now)).not.toBeNull();
        }
        for (const token of model.tokens) {
          const pair = model.pairs.find((row) => row.id === token.keyPairId)!;
          expect(tokenRefusal({ ...token, partnerId: model.partnerId }, model.partner(), { ...pair, partnerId: model.partnerId }, null, token.exp * 1000 + after)).toBe(
            'token_expired',
          );
        }
      }),
      { numRuns: 300 },
    );
  });
});
