import type { Database } from '../db/client.js';
import { auditPage } from '../db/repositories/audit.js';
import { AppError } from '../errors.js';
import { findPartner } from './partners.js';
import { isValidCompanyId } from './validation.js';

export interface AuditRecord {
  id: number;
  at: Date;
  actor: string;
  action: string;
  partnerId: string | null;
  partnerName: string | null;
  details: Record<string, unknown>;
}

/** The actions recorded today (the README lists them); `--action` takes any name of this shape. */
const AUDIT_ACTIONS = [
  'partner.created',
  'partner.disabled',
  'partner.enabled',
  'partner.limits_set',
  'keys.issued',
  'keys.rotated',
  'keys.retired',
  'keys.revoked',
  'tokens.revoked',
  'company.mapped',
  'company.unmapped',
  'token.test_minted',
] as const;

export interface AuditQuery {
  partner?: string;
  since?: Date;
  action?: string;
  company?: string;
  cursor?: string;
  limit: number;
}

/** Whether an event's details name the company (`company_id`, or among `company_ids`). */
function namesCompany(details: Record<string, unknown>, company: string): boolean {
  if (details.company_id === company) return true;
  return Array.isArray(details.company_ids) && details.company_ids.includes(company);
}

/** Newest first, a page at a time; `nextCursor` continues after the last event of this page. */
export async function auditEventsPage(db: Database, options: AuditQuery): Promise<{ events: AuditRecord[]; nextCursor: string | null }> {
  if (options.action !== undefined && !/^[a-z_]{1,40}\.[a-z_]{1,40}$/.test(options.action)) {
    throw new AppError('invalid_argument', `--action must be an action name such as keys.revoked, got '${options.action.slice(0, 40)}'`, {
      hint: `recorded actions: ${AUDIT_ACTIONS.join(', ')}`,
    });
  }
  if (options.company !== undefined && !isValidCompanyId(options.company)) {
    throw new AppError('invalid_argument', 'company id may hold only visible ASCII characters, 1 to 128', { field: 'company_id' });
  }
  if (options.cursor !== undefined && !/^[1-9]\d{0,15}$/.test(options.cursor)) {
    throw new AppError('invalid_argument', `--cursor '${options.cursor.slice(0, 40)}' is not a cursor from a previous page`);
  }
  const partnerId = options.partner ? (await findPartner(db.sql, options.partner)).id : undefined;
  const rows = await auditPage(db.sql, {
    ...(partnerId ? { partnerId } : {}),
    ...(options.since ? { since: options.since } : {}),
    ...(options.action ? { action: options.action } : {}),
    ...(options.company ? { company: options.company } : {}),
    ...(options.cursor ? { beforeId: Number(options.cursor) } : {}),
    limit: options.limit + 1,
  });
  const page = rows.slice(0, options.limit);
  const nextCursor = rows.length > options.limit ? String(page.at(-1)!.id) : null;
  const events = page
    .map((row) => ({ ...row, details: JSON.parse(row.details) as Record<string, unknown> }))
    .filter((event) => options.company === undefined || namesCompany(event.details, options.company));
  return { events, nextCursor };
}

/** Newest first: one page's events. */
export async function listAuditEvents(db: Database, options: AuditQuery): Promise<AuditRecord[]> {
  return (await auditEventsPage(db, options)).events;
}
