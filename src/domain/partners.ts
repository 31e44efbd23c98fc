import type { Database, SqlDatabase, Tx } from '../db/client.js';
import { toDate } from '../db/sql.js';
import { AppError } from '../errors.js';
import { newId, PARTNER_ID_PATTERN } from './identifiers.js';
import { mutate, type Actor } from './transactions.js';
import { validatePartnerName } from './validation.js';

export type PartnerStatus = 'active' | 'disabled';
export const PARTNER_STATUSES: readonly PartnerStatus[] = ['active', 'disabled'];

export interface PartnerRecord {
  id: string;
  name: string;
  status: PartnerStatus;
  createdAt: Date;
  updatedAt: Date;
}

type Reader = Database['prisma'] | Tx;

/** A partner id or its unique name. */
export async function findPartner(reader: Reader, reference: string): Promise<PartnerRecord> {
  const found = PARTNER_ID_PATTERN.test(reference)
    ? await reader.partner.findUnique({ where: { id: reference } })
    : await reader.partner.findUnique({ where: { name: reference.normalize('NFC') } });
  if (!found) {
    throw new AppError('partner_not_found', `no partner with id or name '${printable(reference)}'`, {
      hint: "see 'partnerctl list-partners'",
    });
  }
  return found as PartnerRecord;
}

export async function createPartner(
  db: Database,
  who: Actor,
  input: { name: string; ifNotExists?: boolean },
): Promise<{ partner: PartnerRecord; created: boolean }> {
  const name = validatePartnerName(input.name);
  return mutate<{ partner: PartnerRecord; created: boolean }>(db, who, async (tx) => {
    const existing = await tx.partner.findUnique({ where: { name } });
    if (existing) {
      if (input.ifNotExists) return { result: { partner: existing as PartnerRecord, created: false }, audit: null };
      throw new AppError('partner_exists', `a partner named '${name}' already exists (${existing.id})`, {
        hint: 'add --if-not-exists to reuse it',
      });
    }
    const partner = (await tx.partner.create({ data: { id: newId('ptn'), name } })) as PartnerRecord;
    return {
      result: { partner, created: true },
      audit: { action: 'partner.created', partnerId: partner.id, details: { name } },
    };
  });
}

export async function setPartnerStatus(
  db: Database,
  who: Actor,
  reference: string,
  status: PartnerStatus,
): Promise<{ partner: PartnerRecord; changed: boolean }> {
  return mutate<{ partner: PartnerRecord; changed: boolean }>(db, who, async (tx) => {
    const partner = await findPartner(tx, reference);
    if (partner.status === status) return { result: { partner, changed: false }, audit: null };
    const updated = (await tx.partner.update({ where: { id: partner.id }, data: { status } })) as PartnerRecord;
    return {
      result: { partner: updated, changed: true },
      audit: { action: status === 'disabled' ? 'partner.disabled' : 'partner.enabled', partnerId: partner.id },
    };
  });
}

export interface PartnerPage {
  partners: (PartnerRecord & { companyCount: number; activeAccessKey: string | null })[];
  nextCursor: string | null;
}

/**
 * One page, oldest first (ids sort by creation). Plain SQL on purpose: it is the command operators run most,
 * and it must not pay for loading the Prisma client.
 */
export async function listPartners(
  db: SqlDatabase,
  options: { status?: PartnerStatus; limit: number; cursor?: string },
): Promise<PartnerPage> {
  if (!Number.isInteger(options.limit) || options.limit < 1 || options.limit > 1000) {
    throw new AppError('invalid_argument', `--limit must be a whole number from 1 to 1000, got '${options.limit}'`);
  }
  if (options.cursor !== undefined && !PARTNER_ID_PATTERN.test(options.cursor)) {
    throw new AppError('invalid_argument', `--cursor '${printable(options.cursor)}' is not a cursor from a previous page`);
  }
  const conditions: string[] = [];
  const params: unknown[] = [];
  if (options.status) conditions.push(`p.status = $${params.push(options.status)}`);
  if (options.cursor) conditions.push(`p.id > $${params.push(options.cursor)}`);
  const rows = await db.sql.query<{
    id: string;
    name: string;
    status: PartnerStatus;
    created_at: unknown;
    updated_at: unknown;
    company_count: number | string;
    active_access_key: string | null;
  }>(
    `SELECT p.id, p.name, p.status, p.created_at, p.updated_at,
       (SELECT COUNT(*) FROM company_mappings m WHERE m.partner_id = p.id) AS company_count,
       (SELECT k.access_key FROM key_pairs k WHERE k.partner_id = p.id AND k.status = 'active') AS active_access_key
     FROM partners p
     ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
     ORDER BY p.id
     LIMIT $${params.push(options.limit + 1)}`,
    params,
  );
  const page = rows.slice(0, options.limit);
  return {
    partners: page.map((row) => ({
      id: row.id,
      name: row.name,
      status: row.status,
      createdAt: toDate(row.created_at)!,
      updatedAt: toDate(row.updated_at)!,
      companyCount: Number(row.company_count),
      activeAccessKey: row.active_access_key,
    })),
    nextCursor: rows.length > options.limit ? (page.at(-1)?.id ?? null) : null,
  };
}

export interface PartnerDetails {
  partner: PartnerRecord;
  keyPairs: {
    id: string;
    accessKey: string;
    status: string;
    createdAt: Date;
    supersededAt: Date | null;
    revokedAt: Date | null;
    lastUsedAt: Date | null;
  }[];
  companies: { companyId: string; createdAt: Date }[];
}

export async function showPartner(db: Database, reference: string): Promise<PartnerDetails> {
  const partner = await findPartner(db.prisma, reference);
  const [keyPairs, companies] = await Promise.all([
    db.prisma.keyPair.findMany({
      where: { partnerId: partner.id },
      orderBy: { createdAt: 'desc' },
      select: {
        id: true,
        accessKey: true,
        status: true,
        createdAt: true,
        supersededAt: true,
        revokedAt: true,
        lastUsedAt: true,
      },
    }),
    db.prisma.companyMapping.findMany({
      where: { partnerId: partner.id },
      orderBy: { companyId: 'asc' },
      select: { companyId: true, createdAt: true },
    }),
  ]);
  return { partner, keyPairs, companies };
}

/** For messages: a user-supplied string with its control characters made visible and its length capped. */
export function printable(value: string): string {
  const shown = JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
  return shown.slice(1, -1);
}
