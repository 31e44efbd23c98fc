import type { Database } from '../../src/db/client.js';
import { auditEventsPage, type AuditQuery, type AuditRecord } from '../../src/domain/operations/audit.js';
import { changeMappings } from '../../src/domain/operations/companies.js';
import type { PartnerRecord } from '../../src/domain/operations/partners.js';
import type { Actor } from '../../src/domain/operations/transactions.js';

export interface MappingChange {
  partner: PartnerRecord;
  companyId: string;
  /** False when the mapping was already as asked. */
  changed: boolean;
}

/** One company mapped to a partner as `map-company` maps it (the product's one path, changeMappings). */
export async function mapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  const change = await changeMappings(db, who, reference, [company], 'map');
  return { partner: change.partner, companyId: company, changed: change.changedIds.length > 0 };
}

/** One company unmapped, as `unmap-company` does it. */
export async function unmapCompany(db: Database, who: Actor, reference: string, company: string): Promise<MappingChange> {
  const change = await changeMappings(db, who, reference, [company], 'unmap');
  return { partner: change.partner, companyId: company, changed: change.changedIds.length > 0 };
}

/** Newest first: one page's audit events. */
export async function listAuditEvents(db: Database, options: AuditQuery): Promise<AuditRecord[]> {
  return (await auditEventsPage(db, options)).events;
}
