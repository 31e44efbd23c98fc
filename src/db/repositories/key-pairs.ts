import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

export interface KeyPairRow {
  id: string;
  partnerId: string;
  accessKey: string;
  status: string;
  createdAt: Date;
  supersededAt: Date | null;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

type Raw = {
  id: string;
  partner_id: string;
  access_key: string;
  status: string;
  created_at: unknown;
  superseded_at: unknown;
  revoked_at: unknown;
  last_used_at: unknown;
};

const COLUMNS = 'id, partner_id, access_key, status, created_at, superseded_at, revoked_at, last_used_at';

function fromRaw(row: Raw): KeyPairRow {
  return {
    id: row.id,
    partnerId: row.partner_id,
    accessKey: row.access_key,
    status: row.status,
    createdAt: toDate(row.created_at)!,
    supersededAt: toDate(row.superseded_at),
    revokedAt: toDate(row.revoked_at),
    lastUsedAt: toDate(row.last_used_at),
  };
}

export async function insertKeyPair(
  tx: SqlTx,
  pair: { id: string; partnerId: string; accessKey: string; secretHash: string },
  now: Date,
): Promise<void> {
  await tx.run(
    "INSERT INTO key_pairs (id, partner_id, access_key, secret_hash, status, created_at) VALUES ($1, $2, $3, $4, 'active', $5)",
    [pair.id, pair.partnerId, pair.accessKey, pair.secretHash, now],
  );
}

export async function activeKeyPair(q: Queryable, partnerId: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE partner_id = $1 AND status = 'active'`, [partnerId]);
  return row ? fromRaw(row) : null;
}

export async function keyPairById(q: Queryable, id: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE id = $1`, [id]);
  return row ? fromRaw(row) : null;
}

/** What a token exchange needs about the pair of an access key, and its partner's status. */
export interface ExchangeRow {
  id: string;
  secretHash: string;
  status: string;
  lastUsedAt: Date | null;
  partnerId: string;
  partnerStatus: string;
}

export async function keyPairForExchange(q: Queryable, accessKey: string): Promise<ExchangeRow | null> {
  const [row] = await q.query<{ id: string; secret_hash: string; status: string; last_used_at: unknown; partner_id: string; partner_status: string }>(
    `SELECT k.id, k.secret_hash, k.status, k.last_used_at, p.id AS partner_id, p.status AS partner_status
     FROM key_pairs k JOIN partners p ON p.id = k.partner_id WHERE k.access_key = $1`,
    [accessKey],
  );
  return row
    ? {
        id: row.id,
        secretHash: row.secret_hash,
        status: row.status,
        lastUsedAt: toDate(row.last_used_at),
        partnerId: row.partner_id,
        partnerStatus: row.partner_status,
      }
    : null;
}

/** Newest first. */
export async function keyPairsOf(q: Queryable, partnerId: string): Promise<KeyPairRow[]> {
  const rows = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE partner_id = $1 ORDER BY created_at DESC, id DESC`, [partnerId]);
  return rows.map(fromRaw);
}

export async function supersedeKeyPair(tx: SqlTx, id: string, now: Date): Promise<void> {
  await tx.run("UPDATE key_pairs SET status = 'superseded', superseded_at = $1 WHERE id = $2", [now, id]);
}

/** Revokes the pairs (a pair being superseded by the same change gets that time too). */
export async function revokeKeyPairs(tx: SqlTx, ids: readonly string[], now: Date, options: { superseding?: string } = {}): Promise<void> {
  for (const id of ids) {
    await tx.run(
      "UPDATE key_pairs SET status = 'revoked', revoked_at = $1, superseded_at = CASE WHEN id = $2 THEN $3 ELSE superseded_at END WHERE id = $4",
      [now, options.superseding ?? null, now, id],
    );
  }
}

/** Bookkeeping outside any unit of work: when a pair last minted a token. */
export async function touchLastUsed(q: Queryable, id: string, at: Date): Promise<void> {
  await q.query('UPDATE key_pairs SET last_used_at = $1 WHERE id = $2', [at, id]);
}
