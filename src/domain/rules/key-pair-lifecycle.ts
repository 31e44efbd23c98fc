// How a key pair's stored row changes: every transition (issued, superseded, retiring, switched, retired,
// revoked) decided here, once, pure, from the rows read and an instant of the injected clock. Callers read
// the rows, persist what is returned (the repositories only write it) and audit the event. Expiry is no
// write: key-pair-state.ts reads it from expires_at, as it reads an overlap that has ended from retires_at.
import type { ExchangeRow, KeyPairChange, KeyPairRow, NewKeyPairRow } from '../../db/repositories/key-pairs.js';
import { LAST_USED_MARGIN_MS, overlapEnded } from './key-pair-state.js';
import type { AuditEntry } from './audit-actions.js';
import type { RegisteredPublicKey } from './public-keys.js';
import { formatDuration } from './validation.js';

/** A row change: written only while the pair is still stored `expected` (null: whatever it is). */
export interface Transition {
  pairId: string;
  expected: string | null;
  change: KeyPairChange;
}

export interface KeyPairOptions {
  /** From `--expires-in`: the pair mints nothing after this long (ms). */
  expiresInMs?: number;
  /** From `--public-key`: a public_key pair with this key (private_key_jwt), no secret. */
  publicKey?: RegisteredPublicKey;
}

export interface RotationOptions extends KeyPairOptions {
  revokeIssuedTokens?: boolean;
  /** `--overlap`: the old pair becomes retiring for this long (ms), at most 30 days. */
  overlapMs?: number;
  /** `--after-switch`: the overlap ends this long (ms) after the new pair's first exchange; 0 allowed, at most the overlap. */
  afterSwitchMs?: number;
}

/** `rotate-keys --overlap` at most this long. */
export const MAX_OVERLAP_MS = 30 * 86_400_000;
/** After the new pair's first exchange the retiring pair retires this much later (or the overlap, if shorter). */
const DEFAULT_AFTER_SWITCH_MS = 15 * 60_000;

/** How an overlap ended: its retires_at passed, the switch (plus --after-switch), --finish, or another rotation. */
export type OverlapEnd = 'time' | 'switch' | 'finish' | 'rotation';

/** A pair hashed (a secret pair) or with its public key (a public_key pair) and named, not stored yet. */
export interface FreshKeyPair {
  id: string;
  accessKey: string;
  credential: FreshCredential;
}

/** What a new pair proves itself with: a shared secret's hash, or a public key (private_key_jwt). */
export type FreshCredential =
  | { kind: 'secret'; secretHash: string }
  | { kind: 'public_key'; publicKey: RegisteredPublicKey };

/** Issued: active from `now`, minting nothing after --expires-in if given. */
export function issued(fresh: FreshKeyPair, partnerId: string, now: Date, options: KeyPairOptions): { row: NewKeyPairRow; event: AuditEntry } {
  const expiresAt = options.expiresInMs === undefined ? null : new Date(now.getTime() + options.expiresInMs);
  // Named one by one: the caller's pair may carry its secret, which is never part of a row.
  const row: NewKeyPairRow = { id: fresh.id, accessKey: fresh.accessKey, ...credentialColumns(fresh.credential), partnerId, status: 'active', createdAt: now, expiresAt };
  const event: AuditEntry = {
    action: 'keys.issued',
    partnerId,
    details: { key_pair_id: fresh.id, access_key: fresh.accessKey, ...credentialDetails(row), expires_at: expiresAt ? expiresAt.toISOString() : null },
  };
  return { row, event };
}

/** The stored columns of a credential: a secret's hash, or a public key's JWK, algorithm and thumbprint. */
function credentialColumns(credential: FreshCredential): Pick<NewKeyPairRow, 'kind' | 'secretHash' | 'publicKey' | 'publicKeyAlg' | 'kid'> {
  if (credential.kind === 'secret') return { kind: 'secret', secretHash: credential.secretHash, publicKey: null, publicKeyAlg: null, kid: null };
  const { jwk, alg, kid } = credential.publicKey;
  return { kind: 'public_key', secretHash: null, publicKey: JSON.stringify(jwk), publicKeyAlg: alg, kid };
}

/** What an audit event says of a public_key pair's credential (its kind and thumbprint); nothing for a secret pair. */
function credentialDetails(row: Pick<NewKeyPairRow, 'kind' | 'kid' | 'publicKeyAlg'>): Record<string, string> {
  return row.kind === 'public_key' && row.kid !== null && row.publicKeyAlg !== null ? { kind: row.kind, kid: row.kid, alg: row.publicKeyAlg } : {};
}

/** Superseded: a rotation without an overlap; the pair mints nothing from `now` on. */
function superseded(pair: KeyPairRow, now: Date): Transition {
  return { pairId: pair.id, expected: null, change: { status: 'superseded', supersededAt: now } };
}

/** Revoked: it mints nothing more and every token it minted is refused. */
export function revoked(pair: KeyPairRow, now: Date): Transition {
  return { pairId: pair.id, expected: null, change: { status: 'revoked', revokedAt: now } };
}

/** The stored statuses a leak revokes: every pair whose tokens may still be live. */
export function revocable(pair: KeyPairRow): boolean {
  return pair.status === 'active' || pair.status === 'retiring' || pair.status === 'superseded';
}

/** The audit event of `revoke-keys`: the pairs revoked and, for every pair of the partner, the brake set. */
export function revokedEvent(partnerId: string, pairIds: string[], tokensRevokedBefore: number | null): AuditEntry {
  return {
    action: 'keys.revoked',
    partnerId,
    details: { key_pair_ids: pairIds, ...(tokensRevokedBefore === null ? {} : { tokens_revoked_before: tokensRevokedBefore }) },
  };
}

/** Whether a settled overlap ended by the switch (retires_at was moved to switched_at + after_switch) or by time. */
function endedBy(pair: KeyPairRow): 'time' | 'switch' {
  const { switchedAt, retiresAt, afterSwitchSeconds } = pair;
  if (switchedAt && retiresAt && afterSwitchSeconds !== null && retiresAt.getTime() === switchedAt.getTime() + afterSwitchSeconds * 1000) {
    return 'switch';
  }
  return 'time';
}

/** Retired: a retiring pair's overlap ends at `at` (superseded then; retires_at records when), and how. */
export function retired(pair: KeyPairRow, how: OverlapEnd, at: Date): { transition: Transition; event: AuditEntry } {
  return {
    transition: { pairId: pair.id, expected: 'retiring', change: { status: 'superseded', supersededAt: at, retiresAt: at } },
    event: {
      action: 'keys.retired',
      partnerId: pair.partnerId,
      details: {
        key_pair_id: pair.id,
        access_key: pair.accessKey,
        ended_by: how,
        ended_at: at.toISOString(),
        switched_at: pair.switchedAt?.toISOString() ?? null,
      },
    },
  };
}

/**
 * An overlap already over at `now` (nothing had to run at that moment: the pair reads as superseded from
 * its retires_at on), recorded as it ended, by time or by the switch. Null when the pair is no such pair.
 */
export function settled(pair: KeyPairRow | null, now: number): ReturnType<typeof retired> | null {
  if (pair === null || !overlapEnded(pair, now) || !pair.retiresAt) return null;
  return retired(pair, endedBy(pair), pair.retiresAt);
}

/** The switch of a retiring pair: when the new pair first exchanged, and the overlap's end it moves to. */
export interface Switch {
  pairId: string;
  at: Date;
  retiresAt: Date;
}

/**
 * What an accepted exchange records, from the rows read for it: its last_used_at (before the token is
 * handed out when it is the pair's first token after the partner's brake, so that a re-run of
 * revoke-tokens sees it; otherwise off the answer's path, at most once per LAST_USED_MARGIN_MS; or not at
 * all), and whether it is the switch: an active pair's exchange while its partner's retiring pair has not
 * switched moves that pair's end to after_switch from now (never later than its retires_at).
 */
export function exchanged(
  pair: Pick<ExchangeRow, 'status' | 'lastUsedAt' | 'tokensRevokedBefore' | 'retiring'>,
  now: number,
): { lastUsed: 'before_answer' | 'after_answer' | null; switched: Switch | null } {
  const last = pair.lastUsedAt?.getTime() ?? 0;
  const lastUsed =
    pair.tokensRevokedBefore !== null && last < pair.tokensRevokedBefore ? 'before_answer' : now - last >= LAST_USED_MARGIN_MS ? 'after_answer' : null;
  const { retiring } = pair;
  if (pair.status !== 'active' || retiring === null || retiring.switchedAt !== null || retiring.retiresAt === null) return { lastUsed, switched: null };
  const end = Math.min(retiring.retiresAt.getTime(), now + (retiring.afterSwitchSeconds ?? 0) * 1000);
  return { lastUsed, switched: { pairId: retiring.id, at: new Date(now), retiresAt: new Date(end) } };
}

/** What a rotation reads: the partner's active pair, its retiring one still in its overlap, and (to revoke) all its pairs. */
export interface RotationInput {
  partnerId: string;
  active: KeyPairRow;
  retiring: KeyPairRow | null;
  /** Read only when the issued tokens are revoked. */
  pairs: KeyPairRow[];
  fresh: FreshKeyPair;
}

export interface Rotation {
  transitions: Transition[];
  inserted: NewKeyPairRow;
  /** With --revoke-issued-tokens: the partner's brake, tokens issued before it (ms) refused. */
  tokensRevokedBefore: number | null;
  /** In order: the earlier retiring pair's end (if any), then keys.rotated. */
  events: AuditEntry[];
  supersededKeyPairId: string | null;
  revokedKeyPairIds: string[];
  retiringKeyPairId: string | null;
  retiresAt: Date | null;
  afterSwitchMs: number | null;
  endedRetiringKeyPairId: string | null;
}

/**
 * The active pair stops minting (superseded, revoked when its tokens must die now, or retiring for an
 * overlap) and a new pair becomes active. A pair still retiring from an earlier rotation is superseded now
 * (at most one retiring pair). With --revoke-issued-tokens (a leak) the active pair and every retiring and
 * superseded one are revoked, and every token of the partner issued before now is refused.
 */
export function rotation(input: RotationInput, now: Date, options: RotationOptions): Rotation {
  const { partnerId, active, retiring, fresh } = input;
  const revoke = options.revokeIssuedTokens === true;
  const transitions: Transition[] = [];
  const events: AuditEntry[] = [];
  let revokedKeyPairIds: string[] = [];
  let endedRetiringKeyPairId: string | null = null;
  let retiresAt: Date | null = null;
  let afterSwitchMs: number | null = null;
  if (revoke) {
    const others = input.pairs.filter((other) => other.id !== active.id && revocable(other));
    revokedKeyPairIds = [active.id, ...others.map((other) => other.id)];
    const stopped = revoked(active, now);
    transitions.push({ ...stopped, change: { ...stopped.change, supersededAt: now } }, ...others.map((other) => revoked(other, now)));
  } else {
    if (retiring) {
      const ended = retired(retiring, 'rotation', now);
      transitions.push(ended.transition);
      events.push(ended.event);
      endedRetiringKeyPairId = retiring.id;
    }
    if (options.overlapMs !== undefined) {
      const end = Math.min(now.getTime() + options.overlapMs, active.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY);
      if (end > now.getTime()) {
        retiresAt = new Date(end);
        afterSwitchMs = options.afterSwitchMs ?? Math.min(DEFAULT_AFTER_SWITCH_MS, options.overlapMs);
      }
    }
    transitions.push(
      retiresAt && afterSwitchMs !== null
        ? { pairId: active.id, expected: 'active', change: { status: 'retiring', retiresAt, afterSwitchSeconds: Math.round(afterSwitchMs / 1000) } }
        : superseded(active, now),
    );
  }
  const { row: inserted } = issued(fresh, partnerId, now, options);
  const tokensRevokedBefore = revoke ? now.getTime() : null;
  const retiringKeyPairId = retiresAt ? active.id : null;
  const supersededKeyPairId = retiresAt ? null : active.id;
  events.push({
    action: 'keys.rotated',
    partnerId,
    details: {
      key_pair_id: fresh.id,
      access_key: fresh.accessKey,
      ...credentialDetails(inserted),
      superseded_key_pair_id: supersededKeyPairId,
      revoked_issued_tokens: revoke,
      ...(revoke ? { revoked_key_pair_ids: revokedKeyPairIds, tokens_revoked_before: tokensRevokedBefore } : {}),
      ...(retiresAt ? { retiring_key_pair_id: retiringKeyPairId, retires_at: retiresAt.toISOString(), after_switch: formatDuration(afterSwitchMs ?? 0) } : {}),
      ...(endedRetiringKeyPairId ? { ended_retiring_key_pair_id: endedRetiringKeyPairId } : {}),
      ...(inserted.expiresAt ? { expires_at: inserted.expiresAt.toISOString() } : {}),
    },
  });
  return {
    transitions,
    inserted,
    tokensRevokedBefore,
    events,
    supersededKeyPairId,
    revokedKeyPairIds,
    retiringKeyPairId,
    retiresAt,
    afterSwitchMs: retiresAt ? afterSwitchMs : null,
    endedRetiringKeyPairId,
  };
}
