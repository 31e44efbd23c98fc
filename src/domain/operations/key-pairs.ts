import type { Clock } from '../../clock.js';
import type { Database } from '../../db/client.js';
import { lastEventAt } from '../../db/repositories/audit.js';
import {
  activeKeyPair,
  insertKeyPair,
  keyPairById,
  keyPairByKid,
  keyPairPage,
  keyPairsOf,
  retiringKeyPair,
  updateKeyPair,
  type KeyPairListRow,
  type KeyPairRow,
} from '../../db/repositories/key-pairs.js';
import { partnerGateRow, setTokensRevokedBefore } from '../../db/repositories/partners.js';
import type { Queryable, SqlTx } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { KEY_PAIR_ID_PATTERN, newId, newKeyMaterial } from '../rules/identifiers.js';
import {
  issued,
  MAX_OVERLAP_MS,
  retired,
  revocable,
  revoked,
  revokedEvent,
  rotation,
  settled,
  type FreshKeyPair,
  type KeyPairOptions,
  type RotationOptions,
  type Transition,
} from '../rules/key-pair-lifecycle.js';
import type { RegisteredPublicKey } from '../rules/public-keys.js';
import { keyPairStanding, keyPairState, overlapEnded, STORED_STATUSES_OF, tokensLiveUntil, type KeyPairState } from '../rules/key-pair-state.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { hashSecret } from '../rules/secrets.js';
import { TOKEN_TTL_SECONDS } from '../rules/key-pair-state.js';
import type { AuditEntry } from '../rules/audit-actions.js';
import { runUnit, type Actor, type Unit } from './transactions.js';
import { formatDuration } from '../rules/validation.js';

export interface IssuedKeyPair {
  partner: PartnerRecord;
  keyPairId: string;
  accessKey: string;
  expiresAt: Date | null;
  /** Shown once to the operator; only its argon2id hash is stored. Null for a public_key pair (no secret). */
  secretKey: string | null;
  /** A public_key pair's key id (RFC 7638 thumbprint); null for a secret pair. */
  kid: string | null;
}

/** A pair issued with a secret: its secret is there to show. */
export type IssuedSecretKeyPair = IssuedKeyPair & { secretKey: string };

/** A pair issued with a secret (no `publicKey` option): its secret is there to show. */
type Issued<O extends KeyPairOptions, T extends IssuedKeyPair> = O extends { publicKey: RegisteredPublicKey } ? T : T & { secretKey: string };

/** A new pair, hashed before any transaction opens (argon2 takes tens of milliseconds), or with its public key. */
export interface NewKeyPair extends FreshKeyPair {
  /** Null for a public_key pair. */
  secretKey: string | null;
}

/** A new pair: with a fresh secret, or (`publicKey`, from parsePublicKey) with the partner's public key and no secret. */
export async function newKeyPair(clock: Clock, publicKey?: RegisteredPublicKey): Promise<NewKeyPair> {
  const id = newId('kp', clock.now());
  const material = newKeyMaterial(id);
  if (publicKey) return { id, accessKey: material.accessKey, secretKey: null, credential: { kind: 'public_key', publicKey } };
  return { id, accessKey: material.accessKey, secretKey: material.secretKey, credential: { kind: 'secret', secretHash: await hashSecret(material.secretKey) } };
}

function kidOf(pair: NewKeyPair): string | null {
  return pair.credential.kind === 'public_key' ? pair.credential.publicKey.kid : null;
}

export type { KeyPairOptions, RotationOptions } from '../rules/key-pair-lifecycle.js';

/** Writes a transition the lifecycle decided; resolves whether the row was still as it expected. */
async function apply(tx: SqlTx, transition: Transition): Promise<boolean> {
  return (await updateKeyPair(tx, transition.pairId, transition.change, transition.expected)) > 0;
}

/** Issuing asks one question first: the partner, and the pair it has active, if any. */
async function issuingTo(unit: Unit, reference: string): Promise<{ partner: PartnerRecord; active: KeyPairRow | null }> {
  const partner = await findPartner(unit.tx, reference);
  return { partner, active: await activeKeyPair(unit.tx, partner.id) };
}

/** A public key is registered once: a key registered before (to any pair, revoked or not) is refused. */
async function checkPublicKeyUnused(q: Queryable, pair: NewKeyPair): Promise<void> {
  const kid = kidOf(pair);
  const holder = kid === null ? null : await keyPairByKid(q, kid);
  if (holder) throw new AppError('public_key_exists', `this public key (kid ${kid}) is already registered, to key pair ${holder.id}: each key pair needs its own key`, { field: 'public_key' });
}

async function insertIssued(unit: Unit, partner: PartnerRecord, pair: NewKeyPair, options: KeyPairOptions): Promise<IssuedKeyPair> {
  await checkPublicKeyUnused(unit.tx, pair);
  const { row, event } = issued(pair, partner.id, new Date(unit.clock.now()), options);
  await insertKeyPair(unit.tx, row);
  unit.audit(event);
  return { partner, keyPairId: pair.id, accessKey: pair.accessKey, secretKey: pair.secretKey, kid: kidOf(pair), expiresAt: row.expiresAt };
}

/** A new pair for a partner with none active; one active is refused (active_key_pair_exists). */
export async function issueKeyPairIn(unit: Unit, reference: string, pair: NewKeyPair, options: KeyPairOptions = {}): Promise<IssuedKeyPair> {
  const { partner, active } = await issuingTo(unit, reference);
  if (active) {
    throw new AppError('active_key_pair_exists', `partner '${partner.name}' already has an active key pair (${active.accessKey})`);
  }
  return insertIssued(unit, partner, pair, options);
}

/** Issuing where a pair may already be active: a new pair, or the one already active left as it is. */
export type IssueOutcome = { changed: true; issued: IssuedKeyPair } | { changed: false; partner: PartnerRecord; activeKeyPairId: string };

/**
 * Runs one issuing in its own unit of work. `handOver` hands a new pair's secret over (a file, say) inside
 * it, before the commit: when it fails, nothing is issued, and a secret is never committed without having
 * been handed over. A unit retried after a conflict hands it over again.
 */
async function issuing<T extends IssueOutcome>(
  db: Database,
  who: Actor,
  handOver: ((issued: IssuedKeyPair) => Promise<void>) | undefined,
  publicKey: RegisteredPublicKey | undefined,
  issue: (unit: Unit, pair: NewKeyPair) => Promise<T>,
): Promise<T> {
  const pair = await newKeyPair(db.clock, publicKey);
  return runUnit(db, who, async (unit) => {
    const outcome = await issue(unit, pair);
    if (outcome.changed && handOver) await handOver(outcome.issued);
    return outcome;
  });
}

export async function issueKeyPair<O extends KeyPairOptions = Record<never, never>>(
  db: Database,
  who: Actor,
  reference: string,
  options: O = {} as O,
  handOver?: (issued: IssuedKeyPair) => Promise<void>,
): Promise<Issued<O, IssuedKeyPair>> {
  const outcome = await issuing(db, who, handOver, options.publicKey, async (unit, pair) => ({ changed: true as const, issued: await issueKeyPairIn(unit, reference, pair, options) }));
  return outcome.issued as Issued<O, IssuedKeyPair>;
}

/** `issue-keys --if-none-active`: a re-run finds the pair active and changes nothing (no secret to show). */
export function issueKeyPairIfNoneActive(
  db: Database,
  who: Actor,
  reference: string,
  options: KeyPairOptions = {},
  handOver?: (issued: IssuedKeyPair) => Promise<void>,
): Promise<IssueOutcome> {
  return issuing<IssueOutcome>(db, who, handOver, options.publicKey, async (unit, pair) => {
    const { partner, active } = await issuingTo(unit, reference);
    if (active) return { changed: false, partner, activeKeyPairId: active.id };
    return { changed: true, issued: await insertIssued(unit, partner, pair, options) };
  });
}

/**
 * Whether a token the partner holds may still be live and issued at or after `brake` (the previous brake;
 * null: none): one a pair minted (the one liveness rule, key-pair-state.ts) or a test token minted since.
 */
async function tokensMayBeLiveSince(q: Queryable, partnerId: string, pairs: KeyPairRow[], brake: number | null, now: number): Promise<boolean> {
  const minted = pairs.some((pair) => tokensLiveUntil({ ...pair, ...keyPairStanding(pair, now) }, brake, now) !== null);
  if (minted) return true;
  const from = Math.max(brake ?? 0, now - TOKEN_TTL_SECONDS * 1000);
  const testMinted = await lastEventAt(q, partnerId, 'token.test_minted');
  return testMinted !== null && testMinted.getTime() >= from;
}

/**
 * Records the end of an overlap that has already passed (the lifecycle's `settled`): the stored status
 * becomes 'superseded' and the event to audit is returned, naming how it ended. Null when the pair is not
 * such a pair or another writer was first. Used by the commands that change a partner's keys and by the
 * server's bookkeeping.
 */
export async function settleOverlap(tx: SqlTx, pair: KeyPairRow | null, now: number): Promise<AuditEntry | null> {
  const ended = settled(pair, now);
  return ended && (await apply(tx, ended.transition)) ? ended.event : null;
}

/** The partner's retiring pair whose overlap is still on (an ended one is settled first), or null. */
async function liveRetiringIn(unit: Unit, partnerId: string): Promise<KeyPairRow | null> {
  const pair = await retiringKeyPair(unit.tx, partnerId);
  const now = unit.clock.now();
  const event = await settleOverlap(unit.tx, pair, now);
  if (event) unit.audit(event);
  return pair && !event && !overlapEnded(pair, now) ? pair : null;
}

export interface RotatedKeyPair extends IssuedKeyPair {
  /** The old active pair when it stopped minting now (null when it is retiring instead). */
  supersededKeyPairId: string | null;
  revokedIssuedTokens: boolean;
  /** With --revoke-issued-tokens: every pair revoked (the active one, the retiring and superseded ones). */
  revokedKeyPairIds: string[];
  /** With --revoke-issued-tokens: tokens issued before this instant (ms) are refused, test tokens included. */
  tokensRevokedBefore: number | null;
  /** With --overlap: the old pair, which still exchanges until `retiresAt` (or the switch). */
  retiringKeyPairId: string | null;
  retiresAt: Date | null;
  afterSwitchMs: number | null;
  /** A pair that was retiring from an earlier rotation and is superseded now. */
  endedRetiringKeyPairId: string | null;
}

/** Refuses overlap options that make no sense together (before anything is asked or written). */
export function checkRotationOptions(options: RotationOptions): void {
  const { overlapMs, afterSwitchMs } = options;
  if (overlapMs !== undefined && options.revokeIssuedTokens) {
    throw new AppError('invalid_argument', 'overlap cannot be combined with revoking the issued tokens: a leaked key never overlaps', { field: 'overlap' });
  }
  if (overlapMs !== undefined && overlapMs > MAX_OVERLAP_MS) {
    throw new AppError('invalid_argument', `overlap must be at most 30d, got ${formatDuration(overlapMs)}`, { field: 'overlap' });
  }
  if (afterSwitchMs !== undefined && overlapMs === undefined) {
    throw new AppError('invalid_argument', 'after_switch needs an overlap', { field: 'after_switch' });
  }
  if (afterSwitchMs !== undefined && overlapMs !== undefined && afterSwitchMs > overlapMs) {
    throw new AppError('invalid_argument', `after_switch must be at most the overlap (${formatDuration(overlapMs)}), got ${formatDuration(afterSwitchMs)}`, { field: 'after_switch' });
  }
}

/**
 * In one unit the active pair stops minting and a new pair becomes active (the lifecycle's `rotation`), so
 * there is never a moment with none or two.
 */
async function rotateKeyPairIn(unit: Unit, reference: string, pair: NewKeyPair, options: RotationOptions = {}): Promise<RotatedKeyPair> {
  checkRotationOptions(options);
  const partner = await findPartner(unit.tx, reference);
  const active = await activeKeyPair(unit.tx, partner.id);
  if (!active) {
    throw new AppError('no_active_key_pair', `partner '${partner.name}' has no active key pair to rotate`);
  }
  const now = new Date(unit.clock.now());
  const retiring = await liveRetiringIn(unit, partner.id);
  const pairs = options.revokeIssuedTokens ? await keyPairsOf(unit.tx, partner.id) : [];
  await checkPublicKeyUnused(unit.tx, pair);
  const rotated = rotation({ partnerId: partner.id, active, retiring, pairs, fresh: pair }, now, options);
  for (const transition of rotated.transitions) await apply(unit.tx, transition);
  if (rotated.tokensRevokedBefore !== null) await setTokensRevokedBefore(unit.tx, partner.id, rotated.tokensRevokedBefore);
  await insertKeyPair(unit.tx, rotated.inserted);
  for (const event of rotated.events) unit.audit(event);
  return {
    partner,
    keyPairId: pair.id,
    accessKey: pair.accessKey,
    secretKey: pair.secretKey,
    kid: kidOf(pair),
    expiresAt: rotated.inserted.expiresAt,
    supersededKeyPairId: rotated.supersededKeyPairId,
    revokedIssuedTokens: rotated.tokensRevokedBefore !== null,
    revokedKeyPairIds: rotated.revokedKeyPairIds,
    tokensRevokedBefore: rotated.tokensRevokedBefore,
    retiringKeyPairId: rotated.retiringKeyPairId,
    retiresAt: rotated.retiresAt,
    afterSwitchMs: rotated.afterSwitchMs,
    endedRetiringKeyPairId: rotated.endedRetiringKeyPairId,
  };
}

/** The partner's pair of that id (`--key-pair`); another partner's, or none, is not found. */
async function keyPairOf(q: Queryable, partner: PartnerRecord, keyPairId: string): Promise<KeyPairRow> {
  const pair = await keyPairById(q, keyPairId);
  if (!pair || pair.partnerId !== partner.id) {
    throw new AppError('not_found', `partner '${partner.name}' has no key pair '${keyPairId}'`, { field: 'key_pair' });
  }
  return pair;
}

/** A rotation that names the pair it replaces (`keyPairId`) found it replaced already: nothing changed. */
export interface AlreadyRotated {
  changed: false;
  partner: PartnerRecord;
  keyPairId: string;
  state: KeyPairState;
}

export type RotationOutcome = (RotatedKeyPair & { changed: true }) | AlreadyRotated;

/**
 * With `keyPairId` (the pair a leak named), a rotation is re-runnable: it rotates while that pair is the
 * active one; once it is revoked (with `revokeIssuedTokens`), or no longer active (without), it was
 * rotated already and nothing changes (no new secret). A pair that is neither (superseded by another
 * rotation, but not revoked, while its leak asks for revocation) is a conflict: its tokens may be live.
 */
async function rotationOf(unit: Unit, reference: string, pair: NewKeyPair, options: RotationOptions & { keyPairId?: string | undefined }): Promise<RotationOutcome> {
  if (options.keyPairId !== undefined) {
    const partner = await findPartner(unit.tx, reference);
    const named = await keyPairOf(unit.tx, partner, options.keyPairId);
    const state = keyPairState(named, unit.clock.now());
    if (state !== 'active') {
      if (state === 'revoked' || !options.revokeIssuedTokens) return { changed: false, partner, keyPairId: named.id, state };
      throw new AppError('no_active_key_pair', `key pair ${named.id} of '${partner.name}' is ${state}, not active and not revoked: it is not rotated again`, {
        field: 'key_pair',
      });
    }
  }
  return { changed: true, ...(await rotateKeyPairIn(unit, reference, pair, options)) };
}

export async function rotateKeyPair<O extends RotationOptions = Record<never, never>>(
  db: Database,
  who: Actor,
  reference: string,
  options: O = {} as O,
  handOver?: (issued: IssuedKeyPair) => Promise<void>,
): Promise<Issued<O, RotatedKeyPair>> {
  checkRotationOptions(options);
  const pair = await newKeyPair(db.clock, options.publicKey);
  return runUnit(db, who, async (unit) => {
    const rotated = await rotateKeyPairIn(unit, reference, pair, options);
    if (handOver) await handOver(rotated);
    return rotated as Issued<O, RotatedKeyPair>;
  });
}

/** `rotateKeyPair` naming the pair it replaces (`keyPairId`, see rotationOf): a re-run changes nothing. */
export async function rotateKeyPairIfActive<O extends RotationOptions = Record<never, never>>(
  db: Database,
  who: Actor,
  reference: string,
  options: O & { keyPairId?: string | undefined },
  handOver?: (issued: IssuedKeyPair) => Promise<void>,
): Promise<(Issued<O, RotatedKeyPair> & { changed: true }) | AlreadyRotated> {
  checkRotationOptions(options);
  const pair = await newKeyPair(db.clock, options.publicKey);
  return runUnit(db, who, async (unit) => {
    const rotated = await rotationOf(unit, reference, pair, options);
    if (rotated.changed && handOver) await handOver(rotated);
    return rotated as (Issued<O, RotatedKeyPair> & { changed: true }) | AlreadyRotated;
  });
}

export interface FinishedOverlap {
  partner: PartnerRecord;
  /** The pair whose overlap `--finish` ended (superseded now), or null when none was retiring. */
  retiredKeyPairId: string | null;
  endedAt: Date | null;
  changed: boolean;
}

/** `rotate-keys --finish`: the retiring pair is superseded now; nothing retiring is a re-run (`changed: false`). */
async function finishOverlapIn(unit: Unit, reference: string): Promise<FinishedOverlap> {
  const partner = await findPartner(unit.tx, reference);
  const retiring = await liveRetiringIn(unit, partner.id);
  if (!retiring) return { partner, retiredKeyPairId: null, endedAt: null, changed: false };
  const now = new Date(unit.clock.now());
  const ended = retired(retiring, 'finish', now);
  await apply(unit.tx, ended.transition);
  unit.audit(ended.event);
  return { partner, retiredKeyPairId: retiring.id, endedAt: now, changed: true };
}

export function finishOverlap(db: Database, who: Actor, reference: string): Promise<FinishedOverlap> {
  return runUnit(db, who, (unit) => finishOverlapIn(unit, reference));
}

export interface RevokedKeys {
  partner: PartnerRecord;
  revokedKeyPairIds: string[];
  /** Set when the partner's outstanding test tokens (and any token issued before it) are refused. */
  tokensRevokedBefore: number | null;
  changed: boolean;
}

/**
 * Without `keyPairId`: the partner's live pairs (active, retiring and superseded) are revoked, they mint nothing more
 * and every token they minted is refused at once, and so are the partner's outstanding test tokens. With
 * `keyPairId`: exactly that pair. Nothing left to revoke is a re-run: `changed: false`.
 */
export async function revokeKeyPairIn(unit: Unit, reference: string, options: { keyPairId?: string } = {}): Promise<RevokedKeys> {
  const partner = await findPartner(unit.tx, reference);
  const now = new Date(unit.clock.now());
  if (options.keyPairId !== undefined) {
    const pair = await keyPairOf(unit.tx, partner, options.keyPairId);
    if (!revocable(pair)) return { partner, revokedKeyPairIds: [], tokensRevokedBefore: null, changed: false };
    await apply(unit.tx, revoked(pair, now));
    unit.audit(revokedEvent(partner.id, [pair.id], null));
    return { partner, revokedKeyPairIds: [pair.id], tokensRevokedBefore: null, changed: true };
  }
  const pairs = await keyPairsOf(unit.tx, partner.id);
  const live = pairs.filter(revocable);
  const brake = (await partnerGateRow(unit.tx, partner.id))?.tokensRevokedBefore ?? null;
  const testTokensLive = await tokensMayBeLiveSince(unit.tx, partner.id, [], brake, now.getTime());
  if (live.length === 0 && !testTokensLive) return { partner, revokedKeyPairIds: [], tokensRevokedBefore: null, changed: false };
  const revokedKeyPairIds = live.map((pair) => pair.id);
  for (const pair of live) await apply(unit.tx, revoked(pair, now));
  await setTokensRevokedBefore(unit.tx, partner.id, now.getTime());
  unit.audit(revokedEvent(partner.id, revokedKeyPairIds, now.getTime()));
  return { partner, revokedKeyPairIds, tokensRevokedBefore: now.getTime(), changed: true };
}

export function revokeKeyPair(db: Database, who: Actor, reference: string, options: { keyPairId?: string } = {}): Promise<RevokedKeys> {
  return runUnit(db, who, (unit) => revokeKeyPairIn(unit, reference, options));
}

export interface RevokedTokens {
  partner: PartnerRecord;
  tokensRevokedBefore: number;
  changed: boolean;
}

/**
 * A leaked token, keys safe: every token of the partner issued before now (to the millisecond) is refused,
 * test tokens included; the keys are untouched, so the partner's client gets one 401, exchanges its keys
 * again and goes on. A re-run after which no token issued since the previous one can still be live
 * changes nothing.
 */
export async function revokeTokensIn(unit: Unit, reference: string, issuedBefore?: Date): Promise<RevokedTokens> {
  const partner = await findPartner(unit.tx, reference);
  // The cut-off is taken here, with the write lock held (runUnit's first statement takes it): every first
  // token after the previous brake that is handed out before is on record by now (CredentialExchange).
  const now = unit.clock.now();
  const previous = (await partnerGateRow(unit.tx, partner.id))?.tokensRevokedBefore ?? null;
  if (issuedBefore !== undefined) {
    // A brake at a named instant (a leaked token's containment): a re-run finds it set and moves nothing.
    const at = issuedBefore.getTime();
    if (at > now) throw new AppError('invalid_argument', `issued_before ${issuedBefore.toISOString()} is in the future`, { field: 'issued_before' });
    if (previous !== null && previous >= at) return { partner, tokensRevokedBefore: previous, changed: false };
    await setTokensRevokedBefore(unit.tx, partner.id, at);
    unit.audit({ action: 'tokens.revoked', partnerId: partner.id, details: { tokens_revoked_before: at } });
    return { partner, tokensRevokedBefore: at, changed: true };
  }
  if (previous !== null) {
    const pairs = await keyPairsOf(unit.tx, partner.id);
    if (!(await tokensMayBeLiveSince(unit.tx, partner.id, pairs, previous, now))) {
      return { partner, tokensRevokedBefore: previous, changed: false };
    }
  }
  await setTokensRevokedBefore(unit.tx, partner.id, now);
  unit.audit({ action: 'tokens.revoked', partnerId: partner.id, details: { tokens_revoked_before: now } });
  return { partner, tokensRevokedBefore: now, changed: true };
}

/** `issuedBefore`: the brake at that instant (at most now) instead of now; one at or after it already is a re-run. */
export function revokeTokens(db: Database, who: Actor, reference: string, issuedBefore?: Date): Promise<RevokedTokens> {
  return runUnit(db, who, (unit) => revokeTokensIn(unit, reference, issuedBefore));
}

export type KeyPairStatusFilter = 'active' | 'retiring' | 'superseded' | 'revoked' | 'expired';

export interface KeyPairListing {
  keys: (KeyPairListRow & { state: KeyPairState })[];
  nextCursor: string | null;
}

/**
 * Key pairs across partners (never a secret), oldest first, a page at a time. Durations are in ms:
 * `olderThanMs` created longer ago, `expiringWithinMs` active and expiring within (not yet expired),
 * `unusedForMs` live and not used (or, never used, not created) for that long.
 */
export async function listKeyPairs(
  db: Database,
  options: {
    partner?: string;
    status?: KeyPairStatusFilter;
    olderThanMs?: number;
    expiringWithinMs?: number;
    unusedForMs?: number;
    limit: number;
    cursor?: string;
  },
): Promise<KeyPairListing> {
  if (options.cursor !== undefined && !KEY_PAIR_ID_PATTERN.test(options.cursor)) {
    throw new AppError('invalid_argument', `cursor '${options.cursor.slice(0, 40)}' is not a cursor from a previous page`, { field: 'cursor' });
  }
  const partnerId = options.partner === undefined ? undefined : (await findPartner(db.sql, options.partner)).id;
  const now = db.clock.now();
  const expiringBy = options.expiringWithinMs === undefined ? undefined : now + options.expiringWithinMs;
  // The state at `now` is decided here, by keyPairState, of each row read; the query only narrows by the
  // stored columns, so a page may take more than one read when many rows are judged out.
  const wanted = (state: KeyPairState) =>
    (options.status === undefined || state === options.status) &&
    (expiringBy === undefined || state === 'active') &&
    (options.unusedForMs === undefined || state !== 'revoked');
  const storedStatuses = options.status ? STORED_STATUSES_OF[options.status] : expiringBy !== undefined ? STORED_STATUSES_OF.active : undefined;
  // Rows are small: read a few hundred at a time, so that many judged out cost few round trips.
  const batch = Math.max(options.limit + 1, 250);
  const found: (KeyPairListRow & { state: KeyPairState })[] = [];
  let cursor = options.cursor;
  while (found.length <= options.limit) {
    const rows = await keyPairPage(db.sql, {
      ...(partnerId ? { partnerId } : {}),
      ...(storedStatuses ? { storedStatuses } : {}),
      ...(options.olderThanMs !== undefined ? { createdBefore: new Date(now - options.olderThanMs) } : {}),
      ...(expiringBy !== undefined ? { expiresBy: new Date(expiringBy) } : {}),
      ...(options.unusedForMs !== undefined ? { unusedSince: new Date(now - options.unusedForMs) } : {}),
      ...(cursor ? { cursor } : {}),
      limit: batch,
    });
    for (const row of rows) {
      const state = keyPairState(row, now);
      if (wanted(state)) found.push({ ...row, state });
      if (found.length > options.limit) break;
    }
    if (rows.length < batch) break;
    cursor = rows.at(-1)?.id;
  }
  const page = found.slice(0, options.limit);
  return { keys: page, nextCursor: found.length > options.limit ? (page.at(-1)?.id ?? null) : null };
}
