import type { Database } from '../db/client.js';
import { deleteMapping, insertMapping, isMapped } from '../db/repositories/companies.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { runUnit, type Actor, type Unit } from './transactions.js';
import { validateCompanyId } from './validation.js';

export interface MappingChange {
  partner: PartnerRecord;
  companyId: string;
  /** False when the mapping was already as asked (runbooks re-run). */
  changed: boolean;
}

export async function mapCompanyIn(unit: Unit, reference: string, company: string): Promise<MappingChange> {
  const companyId = validateCompanyId(company);
  const partner = await findPartner(unit.tx, reference);
  if (await isMapped(unit.tx, partner.id, companyId)) return { partner, companyId, changed: false };
  await insertMapping(unit.tx, partner.id, companyId, new Date());
  unit.audit({ action: 'company.mapped', partnerId: partner.id, details: { company_id: companyId } });
  return { partner, companyId, changed: true };
}

export function mapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  return runUnit(db, who, (unit) => mapCompanyIn(unit, reference, company));
}

export async function unmapCompanyIn(unit: Unit, reference: string, company: string): Promise<MappingChange> {
  const companyId = validateCompanyId(company);
  const partner = await findPartner(unit.tx, reference);
  if ((await deleteMapping(unit.tx, partner.id, companyId)) === 0) return { partner, companyId, changed: false };
  unit.audit({ action: 'company.unmapped', partnerId: partner.id, details: { company_id: companyId } });
  return { partner, companyId, changed: true };
}

export function unmapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  return runUnit(db, who, (unit) => unmapCompanyIn(unit, reference, company));
}
