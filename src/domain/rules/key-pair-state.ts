// What a key pair is at an instant, derived once from its stored columns: every view (show-partner,
// list-keys, lookup, the token exchange, the gate) reads it from here, never from the stored status alone.
import type { KeyPairRow } from '../../db/repositories/key-pairs.js';

/** How long a token lives. */
export const TOKEN_TTL_SECONDS = 900;

export type KeyPairState = 'active' | 'retiring' | 'superseded' | 'revoked' | 'expired';

/** The stored columns the state depends on. */
export type StoredPairState = Pick<KeyPairRow, 'status' | 'expiresAt' | 'retiresAt' | 'supersededAt' | 'revokedAt'>;

export interface KeyPairStanding {
  state: KeyPairState;
  /**
   * Why a pair that is not the stored status says so: `expired` (past --expires-in), `overlap_ended` (a
   * stored 'retiring' pair past its retires_at, not settled yet); `stored` otherwise.
   */
  why: 'stored' | 'expired' | 'overlap_ended';
  /** When it stopped minting (superseded, overlap ended, revoked, expired: the earliest); null while it mints. */
  stoppedAt: Date | null;
}

/**
 * The pair's state at `now` (ms): a revoked pair stays revoked; any other pair past its expiry is expired;
 * a retiring pair whose overlap has ended is superseded (no timer settles it: it reads so from retires_at).
 */
export function keyPairState(pair: StoredPairState, now: number): KeyPairState {
  return keyPairStanding(pair, now).state;
}

/** A stored 'retiring' pair whose overlap is over at `now` (superseded, though nothing has settled it yet). */
export function overlapEnded(pair: Pick<StoredPairState, 'status' | 'retiresAt'>, now: number): boolean {
  return pair.status === 'retiring' && (pair.retiresAt === null || pair.retiresAt.getTime() <= now);
}

export function keyPairStanding(pair: StoredPairState, now: number): KeyPairStanding {
  if (pair.status === 'revoked') return { state: 'revoked', why: 'stored', stoppedAt: earliest(pair.supersededAt, pair.revokedAt) };
  const ended = overlapEnded(pair, now);
  const supersededAt = ended ? pair.retiresAt : pair.supersededAt;
  if (pair.expiresAt !== null && pair.expiresAt.getTime() <= now) {
    return { state: 'expired', why: 'expired', stoppedAt: earliest(supersededAt, pair.expiresAt) };
  }
  if (ended) return { state: 'superseded', why: 'overlap_ended', stoppedAt: supersededAt };
  const state = pair.status as KeyPairState;
  return { state, why: 'stored', stoppedAt: state === 'superseded' ? supersededAt : null };
}

/**
 * The stored statuses a pair in each state can carry: a narrowing for reading pages of pairs (list-keys
 * --status), never the decision, which keyPairState makes of every row read. A revoked pair is stored
 * revoked; an expired one is any other; a superseded one may still be stored retiring (its overlap ended).
 */
export const STORED_STATUSES_OF: Readonly<Record<KeyPairState, readonly string[]>> = {
  active: ['active'],
  retiring: ['retiring'],
  superseded: ['superseded', 'retiring'],
  revoked: ['revoked'],
  expired: ['active', 'retiring', 'superseded'],
};

function earliest(...dates: (Date | null)[]): Date | null {
  let first: Date | null = null;
  for (const date of dates) if (date !== null && (first === null || date < first)) first = date;
  return first;
}

/**
 * last_used_at is noted at most once a minute per pair (the exchange spares the database: key-pair-lifecycle.ts),
 * so a pair may have minted up to this long after it. The one margin of every token-liveness rule.
 */
export const LAST_USED_MARGIN_MS = 60_000;

/**
 * When a pair last minted a token, as far as last_used_at can tell: at or after it, and at most
 * LAST_USED_MARGIN_MS later (a later exchange within the margin is not noted), never after `now`. A person
 * reads the interval, never the stored instant alone: an exchange 45 s after it is not "no use since".
 */
export function lastUseWindow(lastUsedAt: Date, now: number): { from: Date; to: Date } {
  return { from: lastUsedAt, to: new Date(Math.max(lastUsedAt.getTime(), Math.min(lastUsedAt.getTime() + LAST_USED_MARGIN_MS, now))) };
}

/**
 * Until when (ms) a token the pair minted may still be accepted, or null when none can be: it never minted,
 * it is revoked, or every token it minted predates the partner's brake (`tokensRevokedBefore`: the first
 * token after a brake is on record in last_used_at before it is handed out, so a last_used_at before the
 * brake means nothing since). A pair's last token is at most LAST_USED_MARGIN_MS after last_used_at, and
 * never after it stopped minting.
 */
export function tokensLiveUntil(
  pair: Pick<KeyPairRow, 'lastUsedAt'> & { state: KeyPairState; stoppedAt: Date | null },
  tokensRevokedBefore: number | null,
  now: number,
): number | null {
  if (pair.state === 'revoked' || pair.lastUsedAt === null) return null;
  const noted = pair.lastUsedAt.getTime();
  if (tokensRevokedBefore !== null && noted < tokensRevokedBefore) return null;
  const lastMint = Math.min(noted + LAST_USED_MARGIN_MS, pair.stoppedAt?.getTime() ?? Number.POSITIVE_INFINITY);
  const until = lastMint + TOKEN_TTL_SECONDS * 1000;
  return until > now ? until : null;
}
