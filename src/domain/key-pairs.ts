import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../db/client.js';
import { activeKeyPair, insertKeyPair, keyPairsOf, revokeKeyPairs, supersedeKeyPair } from '../db/repositories/key-pairs.js';
import { AppError } from '../errors.js';
import { newId, newKeyMaterial } from './identifiers.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { hashSecret } from './secrets.js';
import { runUnit, type Actor, type Unit } from './transactions.js';

export interface IssuedKeyPair {
  partner: PartnerRecord;
  keyPairId: string;
  accessKey: string;
  /** Shown once to the operator; only its argon2id hash is stored. */
  secretKey: string;
}

/** A new pair, hashed before any transaction opens: argon2 takes tens of milliseconds. */
export interface NewKeyPair {
  id: string;
  accessKey: string;
  secretKey: string;
  secretHash: string;
}

export async function newKeyPair(): Promise<NewKeyPair> {
  const material = newKeyMaterial();
  return { ...material, id: newId('kp'), secretHash: await hashSecret(material.secretKey) };
}

export async function issueKeyPairIn(unit: Unit, reference: string, pair: NewKeyPair): Promise<IssuedKeyPair> {
  const partner = await findPartner(unit.tx, reference);
  const active = await activeKeyPair(unit.tx, partner.id);
  if (active) {
    throw new AppError('active_key_pair_exists', `partner '${partner.name}' already has an active key pair (${active.accessKey})`);
  }
  await insertKeyPair(unit.tx, { ...pair, partnerId: partner.id }, new Date());
  unit.audit({ action: 'keys.issued', partnerId: partner.id, details: { key_pair_id: pair.id, access_key: pair.accessKey } });
  return { partner, keyPairId: pair.id, accessKey: pair.accessKey, secretKey: pair.secretKey };
}

export async function issueKeyPair(db: Database, who: Actor, reference: string): Promise<IssuedKeyPair> {
  const pair = await newKeyPair();
  return runUnit(db, who, (unit) => issueKeyPairIn(unit, reference, pair));
}

export interface RotatedKeyPair extends IssuedKeyPair {
  supersededKeyPairId: string;
  revokedIssuedTokens: boolean;
}

export interface RotationOptions {
  revokeIssuedTokens?: boolean;
  /** Test hook for the crash-safety test: holds the rotation open inside its transaction. */
  pauseInsideMs?: number;
  /** Told when the test hook's pause begins (the CLI says so on stderr). */
  onPaused?: () => void;
}

/**
 * In one unit the active pair stops minting (superseded, or revoked when its tokens must die now) and a new
 * pair becomes active, so there is never a moment with none or two.
 */
export async function rotateKeyPairIn(unit: Unit, reference: string, pair: NewKeyPair, options: RotationOptions = {}): Promise<RotatedKeyPair> {
  const revoke = options.revokeIssuedTokens === true;
  const partner = await findPartner(unit.tx, reference);
  const active = await activeKeyPair(unit.tx, partner.id);
  if (!active) {
    throw new AppError('no_active_key_pair', `partner '${partner.name}' has no active key pair to rotate`);
  }
  const now = new Date();
  if (revoke) await revokeKeyPairs(unit.tx, [active.id], now, { superseding: active.id });
  else await supersedeKeyPair(unit.tx, active.id, now);
  if (options.pauseInsideMs) {
    options.onPaused?.();
    await sleep(options.pauseInsideMs);
  }
  await insertKeyPair(unit.tx, { ...pair, partnerId: partner.id }, now);
  unit.audit({
    action: 'keys.rotated',
    partnerId: partner.id,
    details: { key_pair_id: pair.id, access_key: pair.accessKey, superseded_key_pair_id: active.id, revoked_issued_tokens: revoke },
  });
  return {
    partner,
    keyPairId: pair.id,
    accessKey: pair.accessKey,
    secretKey: pair.secretKey,
    supersededKeyPairId: active.id,
    revokedIssuedTokens: revoke,
  };
}

export async function rotateKeyPair(db: Database, who: Actor, reference: string, options: RotationOptions = {}): Promise<RotatedKeyPair> {
  const pair = await newKeyPair();
  return runUnit(db, who, (unit) => rotateKeyPairIn(unit, reference, pair, options));
}

/** The partner's live pairs are revoked: they mint nothing more and every token they minted is refused at once. */
export async function revokeKeyPairIn(unit: Unit, reference: string): Promise<{ partner: PartnerRecord; revokedKeyPairIds: string[] }> {
  const partner = await findPartner(unit.tx, reference);
  const live = (await keyPairsOf(unit.tx, partner.id)).filter((pair) => pair.status === 'active' || pair.status === 'superseded');
  if (!live.some((pair) => pair.status === 'active')) {
    throw new AppError('no_active_key_pair', `partner '${partner.name}' has no active key pair to revoke`);
  }
  // Superseded pairs may still have tokens in flight; revoking the partner's keys kills those too.
  const revokedKeyPairIds = live.map((pair) => pair.id);
  await revokeKeyPairs(unit.tx, revokedKeyPairIds, new Date());
  unit.audit({ action: 'keys.revoked', partnerId: partner.id, details: { key_pair_ids: revokedKeyPairIds } });
  return { partner, revokedKeyPairIds };
}

export function revokeKeyPair(db: Database, who: Actor, reference: string): Promise<{ partner: PartnerRecord; revokedKeyPairIds: string[] }> {
  return runUnit(db, who, (unit) => revokeKeyPairIn(unit, reference));
}
