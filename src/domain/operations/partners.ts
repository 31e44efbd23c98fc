import type { Database } from '../../db/client.js';
import { keyPairByAccessKey, keyPairById, secretPairsMintingOf } from '../../db/repositories/key-pairs.js';
import { keyPairState } from '../rules/key-pair-state.js';
import {
  insertPartner,
  partnerById,
  partnerByName,
  partnerByNameKey,
  partnerPage,
  searchPartners as partnersMatching,
  setTokensRevokedBefore,
  updatePartnerStatus,
} from '../../db/repositories/partners.js';
import type { Queryable } from '../../db/unit.js';
import { AppError } from '../../errors.js';
import { closest, masked, nameKey } from '../../text.js';
import { ACCESS_KEY_PREFIX, KEY_PAIR_ID_PATTERN, newId, PARTNER_ID_PATTERN, SECRET_KEY_PREFIX } from '../rules/identifiers.js';
import { runUnit, type Actor, type Unit } from './transactions.js';
import { validatePartnerName } from '../rules/validation.js';

export type PartnerStatus = 'active' | 'disabled';

export interface PartnerRecord {
  id: string;
  name: string;
  status: PartnerStatus;
  createdAt: Date;
  updatedAt: Date;
  /** set-credentials: `secret`, `public-key` or `both`. */
  credentialsPolicy: string;
}

/** A partner id, its unique name, one of its access keys or one of its key-pair ids. */
export async function findPartner(reader: Queryable, reference: string): Promise<PartnerRecord> {
  let found;
  if (PARTNER_ID_PATTERN.test(reference)) found = await partnerById(reader, reference);
  else if (KEY_PAIR_ID_PATTERN.test(reference) || reference.startsWith(ACCESS_KEY_PREFIX)) {
    const pair = reference.startsWith(ACCESS_KEY_PREFIX) ? await keyPairByAccessKey(reader, reference) : await keyPairById(reader, reference);
    // A partner named so before these prefixes were reserved is still found by its name.
    found = pair ? await partnerById(reader, pair.partnerId) : await partnerNamed(reader, reference);
  } else if (reference.startsWith(SECRET_KEY_PREFIX)) {
    throw new AppError('invalid_argument', 'a secret key does not name a partner here (keep it off command lines)', { field: 'secret_key' });
  } else found = await partnerNamed(reader, reference);
  if (!found) {
    // A reference that may be a credential pasted in the wrong place is never echoed whole.
    const shown = /pctl_sk_|^eyJ|^[A-Za-z0-9_+/=-]{32,}$/.test(reference) ? masked(reference) : `'${printable(reference)}'`;
    throw new AppError('partner_not_found', `no partner with id, name, access key or key-pair id ${shown}`, {
      hint: await didYouMeanPartner(reader, reference),
      field: 'partner',
    });
  }
  return found as PartnerRecord;
}

/** The partner with this name, or else the one whose name is the same ignoring case and Unicode form. */
async function partnerNamed(reader: Queryable, name: string) {
  return (await partnerByName(reader, name.normalize('NFC'))) ?? (await partnerByNameKey(reader, nameKey(name)));
}

/** Refuses a name that differs only in case or Unicode form from an existing partner's, naming that partner. */
export async function refuseSimilarName(reader: Queryable, name: string): Promise<void> {
  const similar = await partnerByNameKey(reader, nameKey(name));
  if (similar && similar.name !== name) {
    throw new AppError(
      'partner_exists',
      `a partner named '${printable(similar.name)}' already exists (${similar.id}); names are unique ignoring case and Unicode form`,
      { hint: `refer to that partner as '${printable(similar.name)}' or ${similar.id}, or choose another name` },
    );
  }
}

/** The closest names (or ids, for an id) to a reference that found nothing, as a hint; undefined when none is close. */
async function didYouMeanPartner(reader: Queryable, reference: string): Promise<string | undefined> {
  if (reference.includes('pctl_') || reference.length > 100) return undefined;
  // Few enough partners to compare them all here; an error path, not a hot one.
  const partners = await partnersMatching(reader, '', 5000);
  const byId = reference.toLowerCase().startsWith('ptn_');
  const near = closest(reference, partners.map((partner) => (byId ? partner.id : partner.name)), 3);
  if (near.length === 0) return undefined;
  const shown = near.map((value) => {
    const partner = partners.find((candidate) => (byId ? candidate.id : candidate.name) === value)!;
    return `'${printable(partner.name)}' (${partner.id})`;
  });
  return `did you mean ${shown.join(' or ')}?`;
}

export async function createPartnerIn(
  unit: Unit,
  input: { name: string; ifNotExists?: boolean },
): Promise<{ partner: PartnerRecord; created: boolean }> {
  const name = validatePartnerName(input.name);
  const existing = await partnerByName(unit.tx, name);
  if (existing) {
    if (input.ifNotExists) return { partner: existing as PartnerRecord, created: false };
    throw new AppError('partner_exists', `a partner named '${printable(name)}' already exists (${existing.id})`);
  }
  await refuseSimilarName(unit.tx, name);
  const partner = (await insertPartner(unit.tx, { id: newId('ptn', unit.clock.now()), name, nameKey: nameKey(name) }, new Date(unit.clock.now()))) as PartnerRecord;
  unit.audit({ action: 'partner.created', partnerId: partner.id, details: { name } });
  return { partner, created: true };
}

export function createPartner(
  db: Database,
  who: Actor,
  input: { name: string; ifNotExists?: boolean },
): Promise<{ partner: PartnerRecord; created: boolean }> {
  return runUnit(db, who, (unit) => createPartnerIn(unit, input));
}

export async function setPartnerStatusIn(
  unit: Unit,
  reference: string,
  status: PartnerStatus,
): Promise<{ partner: PartnerRecord; changed: boolean }> {
  const partner = await findPartner(unit.tx, reference);
  if (partner.status === status) return { partner, changed: false };
  const now = new Date(unit.clock.now());
  await updatePartnerStatus(unit.tx, partner.id, status, now);
  if (status === 'disabled') {
    unit.audit({ action: 'partner.disabled', partnerId: partner.id });
  } else {
    // Enabling restores the keys, not the tokens issued before the disable (disable may have been the
    // containment of a leak): they stay refused, and the partner's client exchanges its keys once more.
    await setTokensRevokedBefore(unit.tx, partner.id, now.getTime());
    unit.audit({ action: 'partner.enabled', partnerId: partner.id, details: { tokens_revoked_before: now.getTime() } });
  }
  return { partner: { ...partner, status, updatedAt: now }, changed: true };
}

export function setPartnerStatus(
  db: Database,
  who: Actor,
  reference: string,
  status: PartnerStatus,
): Promise<{ partner: PartnerRecord; changed: boolean }> {
  return runUnit(db, who, (unit) => setPartnerStatusIn(unit, reference, status));
}

export interface PartnerPage {
  /** `activeSharedSecret`: a shared-secret pair of the partner still exchanges (active, or retiring in its overlap). */
  partners: (PartnerRecord & { companyCount: number; activeAccessKey: string | null; activeSharedSecret: boolean })[];
  nextCursor: string | null;
}

/** One page, oldest first (ids sort by creation). */
export async function listPartners(
  db: Database,
  options: { status?: PartnerStatus; limit: number; cursor?: string; companyId?: string },
): Promise<PartnerPage> {
  if (!Number.isInteger(options.limit) || options.limit < 1 || options.limit > 1000) {
    throw new AppError('invalid_argument', `limit must be a whole number from 1 to 1000, got '${options.limit}'`, { field: 'limit' });
  }
  if (options.cursor !== undefined && !PARTNER_ID_PATTERN.test(options.cursor)) {
    throw new AppError('invalid_argument', `cursor '${printable(options.cursor)}' is not a cursor from a previous page`, { field: 'cursor' });
  }
  const rows = await partnerPage(db.sql, { ...options, limit: options.limit + 1 });
  const page = rows.slice(0, options.limit) as Omit<PartnerPage['partners'][number], 'activeSharedSecret'>[];
  // A migration off shared secrets is tracked by this: the state of each secret pair, decided once (key-pair-state.ts).
  const now = db.clock.now();
  const secretPairs = await secretPairsMintingOf(db.sql, page.map((partner) => partner.id));
  const holding = new Set(secretPairs.filter((pair) => ['active', 'retiring'].includes(keyPairState(pair, now))).map((pair) => pair.partnerId));
  const partners = page.map((partner) => ({ ...partner, activeSharedSecret: holding.has(partner.id) }));
  return { partners, nextCursor: rows.length > options.limit ? (page.at(-1)?.id ?? null) : null };
}

/** Partners whose name contains `term` (any case), by name: for pickers and shell completion. */
export function searchPartners(db: Database, term: string, limit: number): Promise<{ id: string; name: string; status: string }[]> {
  return partnersMatching(db.sql, term, limit);
}

/** For messages: a user-supplied string with its control characters made visible and its length capped. */
export function printable(value: string): string {
  const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  return shown.slice(1, -1);
}
