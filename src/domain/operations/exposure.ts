// What a leaked credential did (docs/decisions.md, docs/leaked-credentials.md): for the key pair, token or
// partner a value resolves to (as `lookup` resolves it), its first and last use, the instant its
// containment took effect, every company and client address it reached with counts, and what it was refused
// after containment. Reads exposure_hours and gate_decisions only.
import type { Database } from '../../db/client.js';
import { decisionCounts, latestDecisions, type DecisionFilter, type DecisionRow } from '../../db/repositories/decisions.js';
import { exposureCells, type ExposureCounts, type ExposureFilter } from '../../db/repositories/exposure.js';
import type { KeyPairRow } from '../../db/repositories/key-pairs.js';
import { partnerGateRow } from '../../db/repositories/partners.js';
import { AppError, isAppError } from '../../errors.js';
import { keyPairStanding } from '../rules/key-pair-state.js';
import { lookup } from './lookup.js';
import { findPartner } from './partners.js';
import type { SigningKeys } from './signing-keys.js';

const HOUR_MS = 3_600_000;
const LATEST_REFUSALS = 10;

export interface ExposureOptions {
  since?: Date;
  until?: Date;
}

export interface ExposureReport {
  kind: 'key_pair' | 'token' | 'partner';
  partnerId: string;
  partnerName: string;
  keyPairId: string | null;
  tokenId: string | null;
  /** Its first and last accepted data request in the window; null when it made none. */
  firstUse: Date | null;
  lastUse: Date | null;
  /** When its containment took effect (a pair revoked, the partner's brake); null when not contained. */
  containedAt: Date | null;
  companies: Array<ExposureCounts & { companyId: string }>;
  addresses: Array<ExposureCounts & { clientAddress: string }>;
  /**
   * Where its secret was exchanged for tokens, per client address: `accepted` tokens minted, `clientErrors`
   * and `serverErrors` refused attempts naming its access key. Empty for a token.
   */
  mintedFrom: Array<ExposureCounts & { clientAddress: string }>;
  /** Refusals on record from the containment on (the same credential tried again); null when not contained. */
  refusedAfterContainment: {
    refusals: number;
    byReason: Array<{ reason: string; refusals: number }>;
    byAddress: Array<{ clientAddress: string; refusals: number }>;
    latest: DecisionRow[];
  } | null;
}

type Credential = Pick<ExposureReport, 'kind' | 'partnerId' | 'partnerName' | 'keyPairId' | 'tokenId' | 'containedAt'>;

function earliest(...dates: Array<Date | number | null | undefined>): Date | null {
  let first: number | null = null;
  for (const date of dates) {
    if (date === null || date === undefined) continue;
    const time = new Date(date).getTime();
    if (first === null || time < first) first = time;
  }
  return first === null ? null : new Date(first);
}

/** The first or the last of many dates (no spread: there may be more than a call takes). */
function bound(dates: Date[], which: 'first' | 'last'): Date | null {
  let found: number | null = null;
  for (const date of dates) {
    const time = date.getTime();
    if (found === null || (which === 'first' ? time < found : time > found)) found = time;
  }
  return found === null ? null : new Date(found);
}

/**
 * A pair is contained once it mints nothing and none of its tokens is accepted: revoked, or stopped (rotated
 * away, expired) with the partner's brake at or after the stop. A pair only superseded lets its tokens live
 * out their lifetime: not a containment.
 */
function pairContainedAt(pair: KeyPairRow, brake: number | null, now: number): Date | null {
  const stoppedAt = keyPairStanding(pair, now).stoppedAt;
  const braked = brake !== null && stoppedAt !== null && brake >= stoppedAt.getTime() ? brake : null;
  return earliest(pair.revokedAt, braked);
}

/** The cells summed per company or per address, most requests first (then by key). */
function fold<Cell extends ExposureCounts>(cells: readonly Cell[], keyOf: (cell: Cell) => string): Array<ExposureCounts & { key: string }> {
  const sums = new Map<string, ExposureCounts & { key: string }>();
  for (const cell of cells) {
    const key = keyOf(cell);
    const known = sums.get(key);
    if (!known) {
      sums.set(key, { key, accepted: cell.accepted, clientErrors: cell.clientErrors, serverErrors: cell.serverErrors, firstAt: cell.firstAt, lastAt: cell.lastAt });
      continue;
    }
    known.accepted += cell.accepted;
    known.clientErrors += cell.clientErrors;
    known.serverErrors += cell.serverErrors;
    if (cell.firstAt < known.firstAt) known.firstAt = cell.firstAt;
    if (cell.lastAt > known.lastAt) known.lastAt = cell.lastAt;
  }
  const requests = (row: ExposureCounts) => row.accepted + row.clientErrors + row.serverErrors;
  return [...sums.values()].sort((a, b) => requests(b) - requests(a) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** What `value` names, as `lookup` reads it (and a partner id or name besides). */
async function resolve(db: Database, value: string, openKeys: () => Promise<SigningKeys | null>): Promise<Credential> {
  let found;
  try {
    found = await lookup(db, value, openKeys);
  } catch (error) {
    if (!isAppError(error) || error.code !== 'invalid_argument') throw error;
    const partner = await findPartner(db.sql, value.trim()).catch(() => {
      throw error;
    });
    const brake = (await partnerGateRow(db.sql, partner.id))?.tokensRevokedBefore ?? null;
    return { kind: 'partner', partnerId: partner.id, partnerName: partner.name, keyPairId: null, tokenId: null, containedAt: brake === null ? null : new Date(brake) };
  }
  const partner = found.partner;
  if (!partner) throw new AppError('not_found', 'the value names no partner here');
  const brake = (await partnerGateRow(db.sql, partner.id))?.tokensRevokedBefore ?? null;
  const now = db.clock.now();
  if (found.token) {
    const jti = found.token.jti;
    if (jti === null) throw new AppError('not_found', 'the token carries no token id: its use cannot be traced', { field: 'token_id' });
    const issued = found.token.issuedAt?.getTime() ?? null;
    const braked = brake !== null && issued !== null && issued < brake ? brake : null;
    const containedAt = earliest(braked, found.pair ? pairContainedAt(found.pair, brake, now) : null);
    return { kind: 'token', partnerId: partner.id, partnerName: partner.name, keyPairId: found.pair?.id ?? null, tokenId: jti, containedAt };
  }
  const pair = found.pair!;
  if (found.genuine === false) throw new AppError('not_found', `this is not the secret of ${pair.id}: it matches no stored hash, so nothing of ours leaked`);
  return { kind: 'key_pair', partnerId: partner.id, partnerName: partner.name, keyPairId: pair.id, tokenId: null, containedAt: pairContainedAt(pair, brake, now) };
}

/** The exposure report of the credential `value` resolves to, over the window (all that is kept by default). */
export async function exposureReport(
  db: Database,
  value: string,
  openKeys: () => Promise<SigningKeys | null>,
  options: ExposureOptions = {},
): Promise<ExposureReport> {
  const credential = await resolve(db, value, openKeys);
  const since = options.since ?? new Date(0);
  const until = options.until ?? new Date(db.clock.now() + HOUR_MS);
  const whose =
    credential.kind === 'token' ? { tokenId: credential.tokenId! } : credential.kind === 'key_pair' ? { keyPairId: credential.keyPairId! } : { partnerId: credential.partnerId };
  const filter: ExposureFilter = { ...whose, since: new Date(Math.floor(since.getTime() / HOUR_MS) * HOUR_MS), until };
  const [cells, exchanges] = await Promise.all([
    exposureCells(db.sql, filter),
    credential.kind === 'token' ? Promise.resolve([]) : exposureCells(db.sql, { ...filter, exchanges: true }),
  ]);
  const mintedFrom = fold(exchanges, (cell) => cell.clientAddress);
  const companies = fold(cells, (cell) => cell.companyId);
  const addresses = fold(cells, (cell) => cell.clientAddress);
  let refusedAfterContainment: ExposureReport['refusedAfterContainment'] = null;
  if (credential.containedAt !== null) {
    // Refusals only: not the successes a recording window put on record. A pair_revoked refusal of this pair
    // or token came after the containment whatever instant its instance dated it with (a revocation is final);
    // a partner's brake can be one of several, so its refusals are taken by their instant alone.
    const causedReason = credential.kind === 'partner' ? undefined : 'pair_revoked';
    const refused: DecisionFilter = { ...whose, since, until, statusFrom: 400, after: { at: credential.containedAt, causedReason } };
    const [byAddressAndReason, latest] = await Promise.all([decisionCounts(db.sql, refused, 'address'), latestDecisions(db.sql, refused, LATEST_REFUSALS)]);
    const byReason = new Map<string, number>();
    const byAddress = new Map<string, number>();
    for (const count of byAddressAndReason) {
      byReason.set(count.reason, (byReason.get(count.reason) ?? 0) + count.refusals);
      byAddress.set(count.key!, (byAddress.get(count.key!) ?? 0) + count.refusals);
    }
    const sorted = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    refusedAfterContainment = {
      refusals: byAddressAndReason.reduce((sum, count) => sum + count.refusals, 0),
      byReason: sorted(byReason).map(([reason, refusals]) => ({ reason, refusals })),
      byAddress: sorted(byAddress).map(([clientAddress, refusals]) => ({ clientAddress, refusals })),
      latest,
    };
  }
  return {
    ...credential,
    firstUse: bound(addresses.map((row) => row.firstAt), 'first'),
    lastUse: bound(addresses.map((row) => row.lastAt), 'last'),
    companies: companies.map(({ key, ...counts }) => ({ companyId: key, ...counts })),
    addresses: addresses.map(({ key, ...counts }) => ({ clientAddress: key, ...counts })),
    mintedFrom: mintedFrom.map(({ key, ...counts }) => ({ clientAddress: key, ...counts })),
    refusedAfterContainment,
  };
}
