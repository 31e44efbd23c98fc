import type { Database } from '../db/client.js';
import { findPartner, type PartnerRecord } from './partners.js';
import { mutate, type Actor } from './transactions.js';
import { validateCompanyId } from './validation.js';

export interface MappingChange {
  partner: PartnerRecord;
  companyId: string;
  /** False when the mapping was already as asked (runbooks re-run). */
  changed: boolean;
}

export async function mapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  const companyId = validateCompanyId(company);
  return mutate<MappingChange>(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    const key = { partnerId_companyId: { partnerId: partner.id, companyId } };
    if (await tx.companyMapping.findUnique({ where: key })) {
      return { result: { partner, companyId, changed: false }, audit: null };
    }
    await tx.companyMapping.create({ data: { partnerId: partner.id, companyId } });
    return {
      result: { partner, companyId, changed: true },
      audit: { action: 'company.mapped', partnerId: partner.id, details: { company_id: companyId } },
    };
  });
}

export async function unmapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  const companyId = validateCompanyId(company);
  return mutate<MappingChange>(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    const { count } = await tx.companyMapping.deleteMany({ where: { partnerId: partner.id, companyId } });
    if (count === 0) return { result: { partner, companyId, changed: false }, audit: null };
    return {
      result: { partner, companyId, changed: true },
      audit: { action: 'company.unmapped', partnerId: partner.id, details: { company_id: companyId } },
    };
  });
}
