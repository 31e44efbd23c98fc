import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { insertDecisions, type DecisionRow } from '../../src/db/repositories/decisions.js';
import { issueKeyPair, revokeKeyPair, revokeTokens } from '../../src/domain/operations/key-pairs.js';
import { setNetwork } from '../../src/domain/operations/networks.js';
import { createPartner, setPartnerStatus } from '../../src/domain/operations/partners.js';
import { explainRequest, refusalsReport } from '../../src/domain/operations/refusals.js';
import { ANSWER_CAUSES, GATE_REFUSAL_REASONS } from '../../src/reasons.js';
import { DecisionRecorder } from '../../src/domain/runtime/decision-records.js';
import { loadConfig } from '../../src/config.js';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { mapCompany } from '../support/domain.js';

const who = { actor: 'test' };

describe('the domain of refusals writes no command lines', () => {
  it('refusals.ts and exposure.ts return typed remedies, never CLI words', () => {
    for (const file of ['operations/refusals.ts', 'operations/exposure.ts', 'runtime/decision-records.ts', 'runtime/exposure-counts.ts']) {
      const code = readFileSync(new URL(`../../src/domain/${file}`, import.meta.url), 'utf8').replace(/^\s*(\/\/|\*|\/\*\*).*$/gm, '');
      expect(code, file).not.toMatch(/partnerctl [a-z]|--[a-z]{3,}/);
    }
  });

  it('38.1: docs/reasons.md explains every cause on record, the gate\'s and the server\'s (one list)', () => {
    const text = readFileSync(new URL('../../docs/reasons.md', import.meta.url), 'utf8');
    for (const reason of ANSWER_CAUSES) expect(text, reason).toContain(`| \`${reason}\` |`);
    expect(new Set(ANSWER_CAUSES).size).toBe(ANSWER_CAUSES.length);
  });
});

describe('PUBLIC_API_DECISION_RETENTION', () => {
  it('takes days or hours, 30 days by default', () => {
    expect(loadConfig({}, {}).server!.decisionRetentionMs).toBe(30 * 86_400_000);
    expect(loadConfig({ PUBLIC_API_DECISION_RETENTION: '12h' }, {}).server!.decisionRetentionMs).toBe(12 * 3_600_000);
    expect(() => loadConfig({ PUBLIC_API_DECISION_RETENTION: '30' }, {})).toThrow(/PUBLIC_API_DECISION_RETENTION must be a number of days or hours/);
  });
});

describe.each(BACKENDS)('every reason code explained (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let db: Database;

    beforeAll(async () => {
      backend = await createBackend(provider);
      db = await openMigrated(backend);
    });
    afterAll(async () => {
      await db?.close();
      await backend?.dispose();
    });

    it('says each refusal in words and names the remedy an operator can apply', async () => {
      const { partner } = await createPartner(db, who, { name: 'Acme Pricing' });
      const pair = await issueKeyPair(db, who, partner.id);
      await mapCompany(db, who, partner.id, 'acme-1');
      await setNetwork(db, who, partner.id, ['10.0.0.0/8']);
      await revokeTokens(db, who, partner.id);
      const at = new Date(db.clock.now());
      const tokenId = `${partner.id}.${pair.keyPairId}.${at.getTime() - 60_000}.0123456789abcdef`;
      const rows: DecisionRow[] = GATE_REFUSAL_REASONS.map((reason, n) => ({
        requestId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
        at,
        instanceId: 'srv_test',
        route: ['secret_mismatch', 'pair_superseded', 'pair_expired', 'credentials_malformed', 'exchange_throttled'].includes(reason) ? 'exchange' : 'data',
        partnerId: partner.id,
        keyPairId: pair.keyPairId,
        tokenId,
        companyId: 'acme-7',
        clientAddress: '192.0.2.1',
        status: 401,
        reason,
        method: 'GET',
        path: '/public/v1/prices',
        engineStatus: null,
        engineMs: null,
        traceId: null,
        bytes: null,
      }));
      await db.sql.transaction((tx) => insertDecisions(tx, rows), { timeoutMs: 5_000 });
      const explained = new Map<string, Awaited<ReturnType<typeof explainRequest>>>();
      for (const row of rows) explained.set(row.reason, await explainRequest(db, row.requestId));
      const texts = [...explained.values()].map((e) => e.explanation);
      // One sentence per reason, none the catch-all.
      expect(new Set(texts).size).toBe(GATE_REFUSAL_REASONS.length);
      for (const [reason, e] of explained) expect(e.explanation, reason).not.toMatch(/^refused \(/);
      expect(explained.get('company_not_mapped')).toMatchObject({
        explanation: 'company acme-7 is not mapped to Acme Pricing: the partner may only ask for companies mapped to it',
        remedy: { action: 'map_company', partnerName: 'Acme Pricing', companyId: 'acme-7' },
      });
      expect(explained.get('tokens_revoked')!.explanation).toMatch(
        new RegExp(`^token issued ${new Date(at.getTime() - 60_000).toISOString().replace(/\./g, '\\.')} before the brake of \\S+: the client must exchange again$`),
      );
      // Never "allow the caller": the key pair is looked up first (its credential may be out).
      expect(explained.get('address_not_allowed')!.remedy).toEqual({ action: 'look_up_key_pair', partnerName: 'Acme Pricing', keyPairId: expect.stringMatching(/^kp_/) });
      expect(explained.get('address_not_allowed')!.explanation).toContain('10.0.0.0/8');
      // The pair is active: the client has the keys to use, no operator remedy.
      expect(explained.get('pair_revoked')!.remedy).toBeNull();
      await revokeKeyPair(db, who, partner.id);
      expect((await explainRequest(db, rows.find((r) => r.reason === 'pair_revoked')!.requestId)).remedy).toEqual({ action: 'issue_keys', partnerName: 'Acme Pricing' });
      expect(explained.get('partner_disabled')!.remedy).toBeNull();
      await setPartnerStatus(db, who, partner.id, 'disabled');
      expect((await explainRequest(db, rows.find((r) => r.reason === 'partner_disabled')!.requestId)).remedy).toEqual({ action: 'enable_partner', partnerName: 'Acme Pricing' });

      await expect(explainRequest(db, '00000000-0000-4000-8000-999999999999')).rejects.toMatchObject({ code: 'not_found' });
      const report = await refusalsReport(db, { partner: 'Acme Pricing', since: new Date(at.getTime() - 1_000), until: new Date(at.getTime() + 1_000), examples: 3 });
      expect(report.counts.map((c) => c.reason).sort()).toEqual([...GATE_REFUSAL_REASONS].sort());
      expect(report.latest).toHaveLength(3);
      await expect(refusalsReport(db, { since: at, until: at, reason: 'nope', examples: 1 })).rejects.toMatchObject({ code: 'invalid_argument' });
    });

    it('prunes decisions, their counters and exposure hours past the retention, and nothing newer', async () => {
      const now = db.clock.now();
      const old = new Date(now - 3 * 86_400_000);
      const recent = new Date(now - 86_400_000 + 60_000);
      const decision = (requestId: string, at: Date): DecisionRow => ({
        requestId, at, instanceId: 'srv_prune', route: 'data', partnerId: null, keyPairId: null, tokenId: null, companyId: null, clientAddress: '192.0.2.9', status: 401, reason: 'token_missing',
        method: 'GET', path: '/public/v1/prices', engineStatus: null, engineMs: null, traceId: null, bytes: null,
      });
      await db.sql.transaction(async (tx) => {
        await insertDecisions(tx, [decision('00000000-0000-4000-8000-0000000000a1', old), decision('00000000-0000-4000-8000-0000000000a2', recent)]);
        for (const at of [old, recent]) {
          await tx.run("INSERT INTO gate_decisions_unrecorded (minute, instance_id, key_kind, key_value, refusals) VALUES ($1, 'srv_prune', 'address', '192.0.2.9', 5)", [at]);
          await tx.run(
            "INSERT INTO exposure_hours (key_pair_id, company_id, client_address, token_id, period_start, partner_id, accepted, client_errors, server_errors, first_at, last_at) VALUES ('kp_prune', 'c', '192.0.2.9', 't', $1, 'ptn_prune', 1, 0, 0, $2, $3)",
            [at, at, at],
          );
        }
      }, { timeoutMs: 5_000 });
      const recorder = new DecisionRecorder(db, db.clock, 'srv_prune', { retentionMs: 86_400_000 });
      expect(await recorder.prune()).toBe(true);
      const left = async (sql: string) => Number((await db.sql.query<{ n: number | string }>(sql))[0]!.n);
      expect(await left("SELECT COUNT(*) AS n FROM gate_decisions WHERE instance_id = 'srv_prune'")).toBe(1);
      expect(await left("SELECT COUNT(*) AS n FROM gate_decisions_unrecorded WHERE instance_id = 'srv_prune'")).toBe(1);
      expect(await left("SELECT COUNT(*) AS n FROM exposure_hours WHERE key_pair_id = 'kp_prune'")).toBe(1);
      await recorder.stop();
    });

    it('flush() writes what was refused before it, even while a write that took its batch earlier is under way', async () => {
      const recorder = new DecisionRecorder(db, db.clock, 'srv_flush', { retentionMs: 86_400_000 });
      const refusal = (requestId: string) => ({
        requestId, method: 'GET', partnerId: null, keyPairId: null, tokenId: null, companyNamed: null, client: '192.0.2.10',
        status: 401, reason: 'token_missing' as const, traceId: null, engineStatus: null, engineMs: 0, bytes: 96,
      });
      recorder.refused(refusal('00000000-0000-7000-8000-0000000000f1'), '/public/v1/prices');
      const earlier = recorder.flush();
      // Refused after the write above took its batch: a flush called now answers for it too.
      recorder.refused(refusal('00000000-0000-7000-8000-0000000000f2'), '/public/v1/prices');
      expect(await recorder.flush()).toBe(true);
      expect(await earlier).toBe(true);
      expect(recorder.pending).toBe(0);
      const rows = await db.sql.query<{ request_id: string }>("SELECT request_id FROM gate_decisions WHERE instance_id = 'srv_flush' ORDER BY request_id");
      expect(rows.map((row) => row.request_id)).toEqual(['00000000-0000-7000-8000-0000000000f1', '00000000-0000-7000-8000-0000000000f2']);
      await recorder.stop();
    });
  });
});
