import type { Database } from '../db/client.js';
import { auditPage } from '../db/repositories/audit.js';
import { findPartner } from './partners.js';

export interface AuditRecord {
  id: number;
  at: Date;
  actor: string;
  action: string;
  partnerId: string | null;
  details: Record<string, unknown>;
}

/** Newest first. */
export async function listAuditEvents(db: Database, options: { partner?: string; limit: number }): Promise<AuditRecord[]> {
  const partnerId = options.partner ? (await findPartner(db.sql, options.partner)).id : undefined;
  const rows = await auditPage(db.sql, { ...(partnerId ? { partnerId } : {}), limit: options.limit });
  return rows.map((row) => ({ ...row, details: JSON.parse(row.details) as Record<string, unknown> }));
}
