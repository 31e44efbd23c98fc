import { setTimeout as sleep } from 'node:timers/promises';
import type { Database, Tx } from '../db/client.js';
import { AppError } from '../errors.js';
import { newId, newKeyMaterial } from './identifiers.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { hashSecret } from './secrets.js';
import { mutate, type Actor } from './transactions.js';

export type KeyPairStatus = 'active' | 'superseded' | 'revoked';

export interface IssuedKeyPair {
  partner: PartnerRecord;
  keyPairId: string;
  accessKey: string;
  /** Shown once to the operator; only its argon2id hash is stored. */
  secretKey: string;
}

async function newPair() {
  const material = newKeyMaterial();
  return { ...material, id: newId('kp'), secretHash: await hashSecret(material.secretKey) };
}

async function insertPair(tx: Tx, partnerId: string, pair: Awaited<ReturnType<typeof newPair>>) {
  await tx.keyPair.create({
    data: { id: pair.id, partnerId, accessKey: pair.accessKey, secretHash: pair.secretHash, status: 'active' },
  });
}

function activePair(tx: Tx, partnerId: string) {
  return tx.keyPair.findFirst({ where: { partnerId, status: 'active' }, select: { id: true, accessKey: true } });
}

export async function issueKeyPair(db: Database, who: Actor, reference: string): Promise<IssuedKeyPair> {
  const pair = await newPair();
  return mutate(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    const active = await activePair(tx, partner.id);
    if (active) {
      throw new AppError('active_key_pair_exists', `partner '${partner.name}' already has an active key pair (${active.accessKey})`, {
        hint: "use 'partnerctl rotate-keys' to replace it",
      });
    }
    await insertPair(tx, partner.id, pair);
    return {
      result: { partner, keyPairId: pair.id, accessKey: pair.accessKey, secretKey: pair.secretKey },
      audit: { action: 'keys.issued', partnerId: partner.id, details: { key_pair_id: pair.id, access_key: pair.accessKey } },
    };
  });
}

export interface RotatedKeyPair extends IssuedKeyPair {
  supersededKeyPairId: string;
  revokedIssuedTokens: boolean;
}

/**
 * In one transaction the active pair stops minting (superseded, or revoked when its tokens must die now)
 * and a new pair becomes active, so there is never a moment with none or two.
 */
export async function rotateKeyPair(
  db: Database,
  who: Actor,
  reference: string,
  options: { revokeIssuedTokens?: boolean } = {},
): Promise<RotatedKeyPair> {
  const pair = await newPair();
  const revoke = options.revokeIssuedTokens === true;
  return mutate(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    const active = await activePair(tx, partner.id);
    if (!active) {
      throw new AppError('no_active_key_pair', `partner '${partner.name}' has no active key pair to rotate`, {
        hint: "use 'partnerctl issue-keys' to issue one",
      });
    }
    const now = new Date();
    await tx.keyPair.update({
      where: { id: active.id },
      data: revoke ? { status: 'revoked', supersededAt: now, revokedAt: now } : { status: 'superseded', supersededAt: now },
    });
    await pauseForCrashTest();
    await insertPair(tx, partner.id, pair);
    return {
      result: {
        partner,
        keyPairId: pair.id,
        accessKey: pair.accessKey,
        secretKey: pair.secretKey,
        supersededKeyPairId: active.id,
        revokedIssuedTokens: revoke,
      },
      audit: {
        action: 'keys.rotated',
        partnerId: partner.id,
        details: { key_pair_id: pair.id, access_key: pair.accessKey, superseded_key_pair_id: active.id, revoked_issued_tokens: revoke },
      },
    };
  });
}

/** The active pair is revoked: it mints nothing more and every token it minted is refused at once. */
export async function revokeKeyPair(
  db: Database,
  who: Actor,
  reference: string,
): Promise<{ partner: PartnerRecord; revokedKeyPairIds: string[] }> {
  return mutate(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    const live = await tx.keyPair.findMany({
      where: { partnerId: partner.id, status: { in: ['active', 'superseded'] } },
      select: { id: true, status: true },
    });
    if (!live.some((pair) => pair.status === 'active')) {
      throw new AppError('no_active_key_pair', `partner '${partner.name}' has no active key pair to revoke`);
    }
    // Superseded pairs may still have tokens in flight; revoking the partner's keys kills those too.
    const now = new Date();
    await tx.keyPair.updateMany({
      where: { id: { in: live.map((pair) => pair.id) } },
      data: { status: 'revoked', revokedAt: now },
    });
    const revokedKeyPairIds = live.map((pair) => pair.id);
    return {
      result: { partner, revokedKeyPairIds },
      audit: { action: 'keys.revoked', partnerId: partner.id, details: { key_pair_ids: revokedKeyPairIds } },
    };
  });
}

/** Test hook for the crash-safety test: holds the rotation open inside its transaction. */
async function pauseForCrashTest(): Promise<void> {
  const ms = Number(process.env.PARTNERCTL_TEST_PAUSE_IN_ROTATION_MS ?? 0);
  if (ms > 0) {
    process.stderr.write('partnerctl: test hook: paused inside the rotation transaction\n');
    await sleep(ms);
  }
}
