import type { Database } from '../../db/client.js';
import { deleteMappings, insertMappings, mappingPage } from '../../db/repositories/companies.js';
import { AppError } from '../../errors.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { runUnit, type Actor, type Unit, type UnitPolicy } from './transactions.js';
import { isValidCompanyId, validateCompanyId } from '../rules/validation.js';

/**
 * Company ids per audit event of a bulk change: the trail still answers "who mapped company X to this
 * partner, and when" (each event lists its ids), in a few events rather than one per company.
 */
const AUDIT_IDS_PER_EVENT = 1_000;

export interface BulkMappingChange {
  partner: PartnerRecord;
  /** Distinct ids asked for. */
  total: number;
  /** Ids this change mapped (or unmapped). */
  changedIds: string[];
}

/** Distinct ids in first-seen order; every id must already be valid. */
function distinctCompanyIds(ids: readonly string[]): string[] {
  for (const id of ids) validateCompanyId(id);
  return [...new Set(ids)];
}

function auditChunks(unit: Unit, action: 'company.mapped' | 'company.unmapped', partnerId: string, ids: readonly string[]): void {
  if (ids.length === 1) {
    // One company (map-company): one event naming it.
    unit.audit({ action, partnerId, details: { company_id: ids[0] } });
    return;
  }
  for (let start = 0; start < ids.length; start += AUDIT_IDS_PER_EVENT) {
    const chunk = ids.slice(start, start + AUDIT_IDS_PER_EVENT);
    unit.audit({ action, partnerId, details: { company_ids: chunk, count: chunk.length } });
  }
}

/** Maps many companies to one partner inside the caller's unit: multi-row statements, a few audit events. */
export async function mapCompaniesIn(
  unit: Unit,
  partner: PartnerRecord,
  ids: readonly string[],
  progress?: (done: number) => void,
): Promise<BulkMappingChange> {
  const distinct = distinctCompanyIds(ids);
  const added = await insertMappings(unit.tx, partner.id, distinct, new Date(unit.clock.now()), progress);
  if (added.length > 0) auditChunks(unit, 'company.mapped', partner.id, added);
  return { partner, total: distinct.length, changedIds: added };
}

export async function unmapCompaniesIn(
  unit: Unit,
  partner: PartnerRecord,
  ids: readonly string[],
  progress?: (done: number) => void,
): Promise<BulkMappingChange> {
  const distinct = distinctCompanyIds(ids);
  const removed = await deleteMappings(unit.tx, partner.id, distinct, progress);
  if (removed.length > 0) auditChunks(unit, 'company.unmapped', partner.id, removed);
  return { partner, total: distinct.length, changedIds: removed };
}

/** A bulk change's time budget: a minute, plus a second per 2,000 ids. */
export function bulkPolicy(count: number): UnitPolicy {
  return { timeoutMs: 60_000 + Math.ceil(count / 2_000) * 1_000 };
}

/** One-shot bulk change of one partner's mappings: one transaction, all or nothing. */
export function changeMappings(
  db: Database,
  who: Actor,
  reference: string,
  ids: readonly string[],
  action: 'map' | 'unmap',
  progress?: (done: number) => void,
): Promise<BulkMappingChange> {
  const distinct = distinctCompanyIds(ids);
  return runUnit(
    db,
    who,
    async (unit) => {
      const partner = await findPartner(unit.tx, reference);
      return (action === 'map' ? mapCompaniesIn : unmapCompaniesIn)(unit, partner, distinct, progress);
    },
    bulkPolicy(distinct.length),
  );
}

export interface CompanyPage {
  partner: PartnerRecord;
  companies: { companyId: string; createdAt: Date }[];
  nextCursor: string | null;
}

/** One page of a partner's companies, by id. */
export async function listCompanies(db: Database, reference: string, options: { limit: number; cursor?: string }): Promise<CompanyPage> {
  if (options.cursor !== undefined && !isValidCompanyId(options.cursor)) {
    throw new AppError('invalid_argument', 'cursor is not a cursor from a previous page', { field: 'cursor' });
  }
  const partner = await findPartner(db.sql, reference);
  const rows = await mappingPage(db.sql, partner.id, { cursor: options.cursor, limit: options.limit + 1 });
  const companies = rows.slice(0, options.limit);
  return { partner, companies, nextCursor: rows.length > options.limit ? (companies.at(-1)?.companyId ?? null) : null };
}
