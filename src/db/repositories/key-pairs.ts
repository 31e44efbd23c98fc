import type { Columns } from '../models.js';
import { toDate } from '../sql.js';
import type { Queryable, SqlTx } from '../unit.js';

/**
 * A key pair's columns as stored, every one but the secret's hash. `status` is the stored column: what the pair
 * is at an instant (expired, an overlap that has ended) is derived in the domain (domain/key-pair-state.ts), never here.
 */
export type KeyPairRow = Omit<Columns<'KeyPair'>, 'secretHash'>;

type Raw = {
  id: string;
  partner_id: string;
  access_key: string;
  kind: string;
  public_key: string | null;
  public_key_alg: string | null;
  kid: string | null;
  status: string;
  created_at: unknown;
  superseded_at: unknown;
  revoked_at: unknown;
  last_used_at: unknown;
  expires_at: unknown;
  last_refused_at: unknown;
  retires_at: unknown;
  switched_at: unknown;
  after_switch_seconds: unknown;
  unlisted_refused_at: unknown;
  unlisted_refused_address: string | null;
  leak_reported_at: unknown;
  leak_url: string | null;
};

const COLUMNS =
  'id, partner_id, access_key, kind, public_key, public_key_alg, kid, status, created_at, superseded_at, revoked_at, last_used_at, expires_at, last_refused_at, retires_at, switched_at, after_switch_seconds, unlisted_refused_at, unlisted_refused_address, leak_reported_at, leak_url';

function fromRaw(row: Raw): KeyPairRow {
  return {
    id: row.id,
    partnerId: row.partner_id,
    accessKey: row.access_key,
    kind: row.kind,
    publicKey: row.public_key ?? null,
    publicKeyAlg: row.public_key_alg ?? null,
    kid: row.kid ?? null,
    status: row.status,
    createdAt: toDate(row.created_at)!,
    supersededAt: toDate(row.superseded_at),
    revokedAt: toDate(row.revoked_at),
    lastUsedAt: toDate(row.last_used_at),
    expiresAt: toDate(row.expires_at),
    lastRefusedAt: toDate(row.last_refused_at),
    retiresAt: toDate(row.retires_at),
    switchedAt: toDate(row.switched_at),
    afterSwitchSeconds: row.after_switch_seconds == null ? null : Number(row.after_switch_seconds),
    leakReportedAt: toDate(row.leak_reported_at),
    leakUrl: row.leak_url ?? null,
    unlistedRefusedAt: toDate(row.unlisted_refused_at),
    unlistedRefusedAddress: row.unlisted_refused_address ?? null,
  };
}

/** A new pair's row as the domain made it (domain/key-pair-lifecycle.ts): its status included. */
export interface NewKeyPairRow
  extends Pick<KeyPairRow, 'id' | 'partnerId' | 'accessKey' | 'kind' | 'publicKey' | 'publicKeyAlg' | 'kid' | 'status' | 'createdAt' | 'expiresAt'> {
  /** Null for a public_key pair: it has no secret. */
  secretHash: string | null;
}

export async function insertKeyPair(tx: SqlTx, pair: NewKeyPairRow): Promise<void> {
  await tx.run(
    'INSERT INTO key_pairs (id, partner_id, access_key, kind, secret_hash, public_key, public_key_alg, kid, status, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)',
    [pair.id, pair.partnerId, pair.accessKey, pair.kind, pair.secretHash, pair.publicKey, pair.publicKeyAlg, pair.kid, pair.status, pair.createdAt, pair.expiresAt],
  );
}

/** The pair registered with this public key's RFC 7638 thumbprint, if any. */
export async function keyPairByKid(q: Queryable, kid: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE kid = $1`, [kid]);
  return row ? fromRaw(row) : null;
}

export async function activeKeyPair(q: Queryable, partnerId: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE partner_id = $1 AND status = 'active'`, [partnerId]);
  return row ? fromRaw(row) : null;
}

export async function keyPairByAccessKey(q: Queryable, accessKey: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE access_key = $1`, [accessKey]);
  return row ? fromRaw(row) : null;
}

/** The stored hash, for `lookup` to confirm a secret (never leaves the domain). */
export async function secretHashOf(q: Queryable, id: string): Promise<string | null> {
  const [row] = await q.query<{ secret_hash: string | null }>('SELECT secret_hash FROM key_pairs WHERE id = $1', [id]);
  return row?.secret_hash ?? null;
}

export async function keyPairById(q: Queryable, id: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE id = $1`, [id]);
  return row ? fromRaw(row) : null;
}

/** What a token exchange needs about the pair of an access key, and its partner's status. */
export interface ExchangeRow
  extends Columns<
      'KeyPair',
      | 'id'
      | 'kind'
      | 'secretHash'
      | 'publicKey'
      | 'publicKeyAlg'
      | 'kid'
      | 'status'
      | 'supersededAt'
      | 'revokedAt'
      | 'lastUsedAt'
      | 'lastRefusedAt'
      | 'unlistedRefusedAt'
      | 'unlistedRefusedAddress'
      | 'expiresAt'
      | 'partnerId'
      | 'retiresAt'
    >,
    Columns<'Partner', 'tokensRevokedBefore'> {
  /** `status` is as stored (the domain derives the state); the partner's brake (ms) refuses tokens issued before it. */
  partnerStatus: string;
  /** The partner's set-credentials policy: `secret`, `public-key` or `both`. */
  credentialsPolicy: string;
  /** Another pair of the partner stored 'retiring', if any (what the switch changes). */
  retiring: Pick<KeyPairRow, 'id' | 'retiresAt' | 'switchedAt' | 'afterSwitchSeconds'> | null;
  /** The partner's network rules (partner_networks.allow_from); null: none. */
  allowFrom: string | null;
}

export async function keyPairForExchange(q: Queryable, accessKey: string): Promise<ExchangeRow | null> {
  const [row] = await q.query<{
    id: string;
    kind: string;
    secret_hash: string | null;
    public_key: string | null;
    public_key_alg: string | null;
    kid: string | null;
    status: string;
    superseded_at: unknown;
    revoked_at: unknown;
    last_used_at: unknown;
    last_refused_at: unknown;
    unlisted_refused_at: unknown;
    unlisted_refused_address: string | null;
    expires_at: unknown;
    partner_id: string;
    partner_status: string;
    credentials_policy: string;
    tokens_revoked_before: unknown;
    retires_at: unknown;
    r_id: string | null;
    r_retires_at: unknown;
    r_switched_at: unknown;
    r_after_switch_seconds: unknown;
    allow_from: string | null;
  }>(
    `SELECT k.id, k.kind, k.secret_hash, k.public_key, k.public_key_alg, k.kid, k.status, k.superseded_at, k.revoked_at, k.last_used_at, k.last_refused_at, k.unlisted_refused_at,
       k.unlisted_refused_address, k.expires_at, p.id AS partner_id, p.status AS partner_status, p.credentials_policy, p.tokens_revoked_before, k.retires_at,
       r.id AS r_id, r.retires_at AS r_retires_at, r.switched_at AS r_switched_at, r.after_switch_seconds AS r_after_switch_seconds,
       n.allow_from
     FROM key_pairs k JOIN partners p ON p.id = k.partner_id
     LEFT JOIN key_pairs r ON r.partner_id = k.partner_id AND r.status = 'retiring' AND r.id <> k.id
     LEFT JOIN partner_networks n ON n.partner_id = p.id
     WHERE k.access_key = $1`,
    [accessKey],
  );
  return row
    ? {
        id: row.id,
        kind: row.kind,
        secretHash: row.secret_hash ?? null,
        publicKey: row.public_key ?? null,
        publicKeyAlg: row.public_key_alg ?? null,
        kid: row.kid ?? null,
        status: row.status,
        supersededAt: toDate(row.superseded_at),
        revokedAt: toDate(row.revoked_at),
        retiresAt: toDate(row.retires_at),
        retiring: row.r_id
          ? {
              id: row.r_id,
              retiresAt: toDate(row.r_retires_at),
              switchedAt: toDate(row.r_switched_at),
              afterSwitchSeconds: row.r_after_switch_seconds == null ? null : Number(row.r_after_switch_seconds),
            }
          : null,
        lastUsedAt: toDate(row.last_used_at),
        lastRefusedAt: toDate(row.last_refused_at),
        unlistedRefusedAt: toDate(row.unlisted_refused_at),
        unlistedRefusedAddress: row.unlisted_refused_address ?? null,
        expiresAt: toDate(row.expires_at),
        partnerId: row.partner_id,
        partnerStatus: row.partner_status,
        credentialsPolicy: row.credentials_policy,
        tokensRevokedBefore: row.tokens_revoked_before == null ? null : Number(row.tokens_revoked_before),
        allowFrom: row.allow_from ?? null,
      }
    : null;
}

/** The shared-secret pairs of these partners stored with a status that may still exchange (active, retiring). */
export async function secretPairsMintingOf(q: Queryable, partnerIds: readonly string[]): Promise<KeyPairRow[]> {
  if (partnerIds.length === 0) return [];
  const rows = await q.query<Raw>(
    `SELECT ${COLUMNS} FROM key_pairs WHERE kind = 'secret' AND status IN ('active', 'retiring') AND partner_id IN (${partnerIds.map((_id, i) => `$${i + 1}`).join(', ')})`,
    partnerIds,
  );
  return rows.map(fromRaw);
}

/** Newest first. */
export async function keyPairsOf(q: Queryable, partnerId: string): Promise<KeyPairRow[]> {
  const rows = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE partner_id = $1 ORDER BY created_at DESC, id DESC`, [partnerId]);
  return rows.map(fromRaw);
}

/** The stored columns a transition changes (decided by domain/key-pair-lifecycle.ts). */
export type KeyPairChange = Partial<Pick<KeyPairRow, 'status' | 'supersededAt' | 'revokedAt' | 'retiresAt' | 'afterSwitchSeconds'>>;

const CHANGE_COLUMNS: Readonly<Record<keyof KeyPairChange, string>> = {
  status: 'status',
  supersededAt: 'superseded_at',
  revokedAt: 'revoked_at',
  retiresAt: 'retires_at',
  afterSwitchSeconds: 'after_switch_seconds',
};

/**
 * Writes a transition's columns, and only those (the server's role may update only some). With `expected`,
 * only while the pair is still stored so: resolves how many rows changed (0: another writer was first).
 */
export function updateKeyPair(tx: SqlTx, id: string, change: KeyPairChange, expected: string | null): Promise<number> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  const set = (Object.keys(change) as (keyof KeyPairChange)[]).map((field) => `${CHANGE_COLUMNS[field]} = ${p(change[field])}`);
  const where = [`id = ${p(id)}`, ...(expected === null ? [] : [`status = ${p(expected)}`])];
  return tx.run(`UPDATE key_pairs SET ${set.join(', ')} WHERE ${where.join(' AND ')}`, params);
}

/** A stored 'retiring' pair of the partner (its overlap may have ended: see domain/key-pair-state.ts). */
export async function retiringKeyPair(q: Queryable, partnerId: string): Promise<KeyPairRow | null> {
  const [row] = await q.query<Raw>(`SELECT ${COLUMNS} FROM key_pairs WHERE partner_id = $1 AND status = 'retiring'`, [partnerId]);
  return row ? fromRaw(row) : null;
}

/**
 * The switch, noted outside any unit (by the bookkeeping): the new pair exchanged at `at`, so the retiring
 * pair's end moves to `retiresAt` (domain/key-pair-lifecycle.ts decides both). Only once: the first switch
 * written stands, whichever instance saw it.
 */
export async function noteSwitch(q: Queryable, id: string, at: Date, retiresAt: Date): Promise<void> {
  await q.query("UPDATE key_pairs SET switched_at = $1, retires_at = $2 WHERE id = $3 AND status = 'retiring' AND switched_at IS NULL", [
    at,
    retiresAt,
    id,
  ]);
}

/**
 * Bookkeeping outside any unit of work: when a pair last minted a token. Never moved back: an older use
 * written late (held through a busy lock) must not hide the first token after a brake, which the exchange
 * reads from this column.
 */
export async function touchLastUsed(q: Queryable, id: string, at: Date): Promise<void> {
  await q.query('UPDATE key_pairs SET last_used_at = $1 WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < $3)', [at, id, at]);
}

/** Bookkeeping outside any unit of work: when a refused pair (superseded, revoked, expired, wrong secret) was last tried. */
export async function touchLastRefused(q: Queryable, id: string, at: Date): Promise<void> {
  await q.query('UPDATE key_pairs SET last_refused_at = $1 WHERE id = $2 AND (last_refused_at IS NULL OR last_refused_at < $3)', [at, id, at]);
}

/** Bookkeeping outside any unit of work: a genuine secret refused from outside the partner's network rules. */
export async function touchUnlistedRefused(q: Queryable, id: string, at: Date, address: string): Promise<void> {
  await q.query(
    'UPDATE key_pairs SET unlisted_refused_at = $1, unlisted_refused_address = $2 WHERE id = $3 AND (unlisted_refused_at IS NULL OR unlisted_refused_at < $4)',
    [at, address, id, at],
  );
}

export interface KeyPairListRow extends KeyPairRow {
  partnerName: string;
}

/**
 * Key pairs across partners, oldest first (ids sort by creation); the cursor is the last id of the previous
 * page. Every condition here narrows by stored columns only: what state a pair is in at an instant is
 * decided by domain/key-pair-state.ts over the rows read, never in SQL.
 */
export async function keyPairPage(
  q: Queryable,
  options: {
    partnerId?: string;
    /** Stored statuses to read (domain/key-pair-state.ts STORED_STATUSES_OF). */
    storedStatuses?: readonly string[];
    createdBefore?: Date;
    /** Only pairs with an expiry at or before this instant. */
    expiresBy?: Date;
    /** Only pairs last used (or, never used, created) before this instant. */
    unusedSince?: Date;
    cursor?: string;
    limit: number;
  },
): Promise<KeyPairListRow[]> {
  const conditions: string[] = [];
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  if (options.partnerId) conditions.push(`k.partner_id = ${p(options.partnerId)}`);
  if (options.storedStatuses) conditions.push(`k.status IN (${options.storedStatuses.map(p).join(', ')})`);
  if (options.createdBefore) conditions.push(`k.created_at < ${p(options.createdBefore)}`);
  if (options.expiresBy) conditions.push(`k.expires_at IS NOT NULL AND k.expires_at <= ${p(options.expiresBy)}`);
  if (options.unusedSince) conditions.push(`COALESCE(k.last_used_at, k.created_at) < ${p(options.unusedSince)}`);
  if (options.cursor) conditions.push(`k.id > ${p(options.cursor)}`);
  const rows = await q.query<Raw & { partner_name: string }>(
    `SELECT ${COLUMNS.split(', ').map((column) => `k.${column}`).join(', ')}, p.name AS partner_name
     FROM key_pairs k JOIN partners p ON p.id = k.partner_id
     ${conditions.length ? `WHERE ${conditions.join(' AND ')}` : ''}
     ORDER BY k.id LIMIT ${p(options.limit)}`,
    params,
  );
  return rows.map((row) => ({ ...fromRaw(row), partnerName: row.partner_name }));
}

/**
 * Notes a client assertion's jti as used until `expiresAt`, unless a live note of the same jti for the same
 * pair exists: resolves whether it was fresh (false: a replay, on whichever instance it was first seen). An
 * expired note is taken over, so a jti is refused exactly for its assertion's lifetime.
 */
export async function noteAssertionJti(q: Queryable, keyPairId: string, jti: string, expiresAt: Date, now: Date): Promise<boolean> {
  const rows = await q.query<{ jti: string }>(
    `INSERT INTO assertion_jtis (key_pair_id, jti, expires_at) VALUES ($1, $2, $3)
     ON CONFLICT (key_pair_id, jti) DO UPDATE SET expires_at = excluded.expires_at WHERE assertion_jtis.expires_at <= $4
     RETURNING jti`,
    [keyPairId, jti, expiresAt, now],
  );
  return rows.length === 1;
}

/** Drops the jti notes whose assertions have expired. */
export async function pruneAssertionJtis(q: Queryable, before: Date): Promise<void> {
  await q.query('DELETE FROM assertion_jtis WHERE expires_at <= $1', [before]);
}
