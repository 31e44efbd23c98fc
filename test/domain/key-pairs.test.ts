import { toDate } from '../../src/db/sql.js';
import { existsSync, readFileSync } from 'node:fs';
import argon2 from 'argon2';
import { describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import type { Database } from '../../src/db/client.js';
import { issueKeyPair, revokeKeyPair, rotateKeyPair } from '../../src/domain/operations/key-pairs.js';
import { ACCESS_KEY_FORMAT as ACCESS_KEY_PATTERN, SECRET_KEY_FORMAT as SECRET_KEY_PATTERN } from '../support/key-format.js';
import { createPartner } from '../../src/domain/operations/partners.js';
import { atProductCost } from '../support/argon2-cost.js';
import { backendAvailable, BACKENDS } from '../support/backends.js';
import { hintFor } from '../../src/cli/hints.js';
import { ALICE, auditCount, expectAppError, revisionOf, uniqueName, useMigratedDatabase } from './fixtures.js';

/** The algorithm, version and cost parameters of a PHC-format hash (node-argon2 writes them as m,p,t). */
function argon2Parameters(hash: string) {
  const match = /^\$(argon2(?:id|i|d))\$v=(\d+)\$([^$]+)\$[^$]+\$[^$]+$/.exec(hash);
  if (!match) return undefined;
  const parameters = Object.fromEntries(match[3]!.split(',').map((pair) => pair.split('=') as [string, string]));
  return { type: match[1], version: Number(match[2]), m: Number(parameters.m), t: Number(parameters.t), p: Number(parameters.p) };
}
const TABLES = ['partners', 'key_pairs', 'company_mappings', 'audit_events', 'revision', '_prisma_migrations'];

/** Every row of every table, as text: what an attacker with a copy of the database would read. */
async function everyStoredValue(db: Database): Promise<string> {
  const dumps = await Promise.all(
    TABLES.map(async (table) => JSON.stringify(await db.sql.query(`SELECT * FROM ${table}`), (_, value) =>
      typeof value === 'bigint' ? value.toString() : value,
    )),
  );
  return dumps.join('\n');
}

async function pairsOf(db: Database, partnerId: string) {
  const rows = await db.sql.query<{
    id: string;
    access_key: string;
    status: string;
    secret_hash: string;
    superseded_at: unknown;
    revoked_at: unknown;
    last_used_at: unknown;
  }>(
    'SELECT id, access_key, status, secret_hash, superseded_at, revoked_at, last_used_at FROM key_pairs WHERE partner_id = $1 ORDER BY created_at, id',
    [partnerId],
  );
  return rows.map((row) => ({
    id: row.id,
    accessKey: row.access_key,
    status: row.status,
    secretHash: row.secret_hash,
    lastUsedAt: toDate(row.last_used_at),
    supersededAt: toDate(row.superseded_at),
    revokedAt: toDate(row.revoked_at),
  }));
}

describe.each(BACKENDS)('key pairs on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, () => {
    const ctx = useMigratedDatabase(provider);
    const newPartner = async () => (await createPartner(ctx.db, ALICE, { name: uniqueName() })).partner;

    describe('issueKeyPair', () => {
      it("hashes at the tests' own argon2 cost outside atProductCost (test/support/argon2-cost.cjs is in force)", async () => {
        const issued = await issueKeyPair(ctx.db, ALICE, (await newPartner()).name);
        const [row] = await ctx.db.sql.query<{ secret_hash: string }>('SELECT secret_hash FROM key_pairs WHERE id = $1', [issued.keyPairId]);
        expect(argon2Parameters(row!.secret_hash)).toEqual({ type: 'argon2id', version: 19, m: 1024, t: 1, p: 1 });
        expect(await argon2.verify(row!.secret_hash, issued.secretKey)).toBe(true);
      });

      it('returns the secret once and stores only its argon2id hash (OWASP parameters)', async () => {
        const partner = await newPartner();
        const issued = await atProductCost(() => issueKeyPair(ctx.db, ALICE, partner.name));
        expect(issued.partner.id).toBe(partner.id);
        expect(issued.accessKey).toMatch(ACCESS_KEY_PATTERN);
        expect(issued.secretKey).toMatch(SECRET_KEY_PATTERN);

        const [row] = await pairsOf(ctx.db, partner.id);
        expect(row).toMatchObject({ id: issued.keyPairId, accessKey: issued.accessKey, status: 'active', lastUsedAt: null });
        // OWASP's argon2id minimum: 19 MiB, two passes, one lane.
        expect(argon2Parameters(row!.secretHash)).toEqual({ type: 'argon2id', version: 19, m: 19_456, t: 2, p: 1 });
        expect(await argon2.verify(row!.secretHash, issued.secretKey)).toBe(true);
        expect(await argon2.verify(row!.secretHash, `${issued.secretKey}x`)).toBe(false);

        const secretBody = issued.secretKey.slice('pctl_sk_'.length);
        const stored = await everyStoredValue(ctx.db);
        expect(stored).not.toContain(secretBody);
        if (provider === 'sqlite') {
          const file = ctx.db.config.url;
          for (const path of [file, `${file}-wal`]) {
            if (existsSync(path)) expect(readFileSync(path).includes(secretBody)).toBe(false);
          }
        }
      });

      it('makes a different access key and secret every time, with at least 256 bits of secret', async () => {
        const a = await issueKeyPair(ctx.db, ALICE, (await newPartner()).id);
        const b = await issueKeyPair(ctx.db, ALICE, (await newPartner()).id);
        expect(a.accessKey).not.toBe(b.accessKey);
        expect(a.secretKey).not.toBe(b.secretKey);
        // pctl_sk_ + the pair's id (not secret) + 43 base62 characters (43 * log2(62) ≈ 256.03 bits) + a 6-character checksum.
        expect(a.secretKey.slice('pctl_sk_'.length, 'pctl_sk_'.length + 26)).toBe(a.keyPairId.slice('kp_'.length));
        expect(a.secretKey.slice('pctl_sk_'.length + 26, -6)).toHaveLength(43);
      });

      it('refuses with active_key_pair_exists while a pair is active, writing nothing', async () => {
        const partner = await newPartner();
        const issued = await issueKeyPair(ctx.db, ALICE, partner.id);
        const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db, partner.id)];
        const error = await expectAppError(issueKeyPair(ctx.db, ALICE, partner.id), 'active_key_pair_exists');
        expect(hintFor(error)).toMatch(/rotate-keys/);
        expect(error.message).toContain(issued.accessKey);
        expect(await pairsOf(ctx.db, partner.id)).toHaveLength(1);
        expect(await revisionOf(ctx.db)).toBe(revision);
        expect(await auditCount(ctx.db, partner.id)).toBe(events);
      });

      it('issues again after the pair was revoked', async () => {
        const partner = await newPartner();
        await issueKeyPair(ctx.db, ALICE, partner.id);
        await revokeKeyPair(ctx.db, ALICE, partner.id);
        const again = await issueKeyPair(ctx.db, ALICE, partner.id);
        const pairs = await pairsOf(ctx.db, partner.id);
        expect(pairs.filter((pair) => pair.status === 'active').map((pair) => pair.id)).toEqual([again.keyPairId]);
      });

      it('says partner_not_found for an unknown partner', async () => {
        await expectAppError(issueKeyPair(ctx.db, ALICE, 'nobody-here'), 'partner_not_found');
      });
    });

    describe('rotateKeyPair', () => {
      it('supersedes the active pair and activates a new one, in one step', async () => {
        const partner = await newPartner();
        const first = await issueKeyPair(ctx.db, ALICE, partner.id);
        const rotated = await rotateKeyPair(ctx.db, ALICE, partner.id);
        expect(rotated).toMatchObject({ supersededKeyPairId: first.keyPairId, revokedIssuedTokens: false });
        expect(rotated.keyPairId).not.toBe(first.keyPairId);
        expect(rotated.secretKey).toMatch(SECRET_KEY_PATTERN);

        const pairs = await pairsOf(ctx.db, partner.id);
        const old = pairs.find((pair) => pair.id === first.keyPairId)!;
        expect(old).toMatchObject({ status: 'superseded', revokedAt: null });
        expect(old.supersededAt).toBeInstanceOf(Date);
        expect(pairs.filter((pair) => pair.status === 'active').map((pair) => pair.id)).toEqual([rotated.keyPairId]);
        const fresh = pairs.find((pair) => pair.id === rotated.keyPairId)!;
        expect(await argon2.verify(fresh.secretHash, rotated.secretKey)).toBe(true);
      });

      it('leaves exactly one active pair after several rotations', async () => {
        const partner = await newPartner();
        await issueKeyPair(ctx.db, ALICE, partner.id);
        for (let i = 0; i < 3; i++) await rotateKeyPair(ctx.db, ALICE, partner.id);
        const pairs = await pairsOf(ctx.db, partner.id);
        expect(pairs).toHaveLength(4);
        expect(pairs.map((pair) => pair.status).sort()).toEqual(['active', 'superseded', 'superseded', 'superseded']);
      });

      it('marks the old pair revoked with revokeIssuedTokens', async () => {
        const partner = await newPartner();
        const first = await issueKeyPair(ctx.db, ALICE, partner.id);
        const rotated = await rotateKeyPair(ctx.db, ALICE, partner.id, { revokeIssuedTokens: true });
        expect(rotated.revokedIssuedTokens).toBe(true);
        const old = (await pairsOf(ctx.db, partner.id)).find((pair) => pair.id === first.keyPairId)!;
        expect(old.status).toBe('revoked');
        expect(old.revokedAt).toBeInstanceOf(Date);
        expect(old.supersededAt).toBeInstanceOf(Date);
      });

      it('says no_active_key_pair when there is none, writing nothing', async () => {
        const partner = await newPartner();
        const revision = await revisionOf(ctx.db);
        const error = await expectAppError(rotateKeyPair(ctx.db, ALICE, partner.id), 'no_active_key_pair');
        expect(hintFor(error)).toMatch(/issue-keys/);
        expect(await revisionOf(ctx.db)).toBe(revision);
        expect(await pairsOf(ctx.db, partner.id)).toHaveLength(0);

        await issueKeyPair(ctx.db, ALICE, partner.id);
        await revokeKeyPair(ctx.db, ALICE, partner.id);
        await expectAppError(rotateKeyPair(ctx.db, ALICE, partner.id), 'no_active_key_pair');
      });

      it('says partner_not_found for an unknown partner', async () => {
        await expectAppError(rotateKeyPair(ctx.db, ALICE, 'nobody-here'), 'partner_not_found');
      });
    });

    describe('revokeKeyPair', () => {
      it('revokes the active pair and the superseded ones still in flight', async () => {
        const partner = await newPartner();
        const first = await issueKeyPair(ctx.db, ALICE, partner.id);
        const second = await rotateKeyPair(ctx.db, ALICE, partner.id);
        const { revokedKeyPairIds } = await revokeKeyPair(ctx.db, ALICE, partner.name);
        expect(revokedKeyPairIds.sort()).toEqual([first.keyPairId, second.keyPairId].sort());
        const pairs = await pairsOf(ctx.db, partner.id);
        expect(pairs.every((pair) => pair.status === 'revoked' && pair.revokedAt instanceof Date)).toBe(true);
      });

      it('is a re-run (changed: false) when nothing is left to revoke, writing nothing', async () => {
        const partner = await newPartner();
        expect((await revokeKeyPair(ctx.db, ALICE, partner.id)).changed).toBe(false);
        await issueKeyPair(ctx.db, ALICE, partner.id);
        expect((await revokeKeyPair(ctx.db, ALICE, partner.id)).changed).toBe(true);
        const [revision, events] = [await revisionOf(ctx.db), await auditCount(ctx.db, partner.id)];
        expect(await revokeKeyPair(ctx.db, ALICE, partner.id)).toMatchObject({ changed: false, revokedKeyPairIds: [] });
        expect(await revisionOf(ctx.db)).toBe(revision);
        expect(await auditCount(ctx.db, partner.id)).toBe(events);
      });
    });

    it('works the same through a second connection on the same database', async () => {
      const { openDatabase } = await import('../../src/db/client.js');
      const other = await openDatabase(resolveDatabase(ctx.backend.url, {}));
      try {
        const partner = await newPartner();
        await issueKeyPair(other, ALICE, partner.id);
        await expectAppError(issueKeyPair(ctx.db, ALICE, partner.id), 'active_key_pair_exists');
      } finally {
        await other.close();
      }
    });
  });
});
