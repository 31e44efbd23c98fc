// The tamper-evident audit chain on both backends: tampering named by `audit verify`, a cut-off tail caught
// by `verify --head`, concurrent commands from several processes, and older events chained by the migration.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveDatabase } from '../../src/config.js';
import { eventHash } from '../../src/db/audit-hash.js';
import { dialectOf } from '../../src/db/dialect.js';
import { openDatabase, type Database } from '../../src/db/client.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { backendAvailable, BACKENDS, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

describe.concurrent.each(BACKENDS)('%s: the audit chain', (provider) => {
  describe.skipIf(!backendAvailable(provider))(provider, { sequential: true }, () => {
    const opened: { backend: TestBackend; db: Database }[] = [];
    afterEach(async () => {
      for (const { backend, db } of opened.splice(0)) {
        await db.close();
        await backend.dispose();
      }
    });

    /** A database with a partner and `mappings` company.mapped events after its partner.created. */
    async function chainOf(mappings: number) {
      const backend = await createBackend(provider, { migrated: true });
      const cli = (...args: string[]) => runCli(['--yes', ...args], backend.env);
      const db = await openDatabase(resolveDatabase(backend.url, {}));
      opened.push({ backend, db });
      expect((await cli('create-partner', '--name', 'acme')).code).toBe(0);
      for (let i = 1; i <= mappings; i++) expect((await cli('map-company', 'acme', '--company', `shop-${i}`)).code).toBe(0);
      // Tampering as the database's owner (the only role PostgreSQL lets change audit rows).
      const tamper = async (sql: string, params: unknown[] = []) => {
        if (provider === 'sqlite') return void (await db.sql.query(sql, params));
        const client = new pg.Client({ connectionString: backend.url });
        await client.connect();
        try {
          await client.query(sql, params);
        } finally {
          await client.end();
        }
      };
      const verify = async (...args: string[]) => {
        const result = await cli('--json', 'audit', 'verify', ...args);
        return { code: result.code, report: result.json() };
      };
      return { backend, db, cli, tamper, verify };
    }

    it('is intact after ordinary commands: exit 0 with the number of events and the head', async () => {
      const { cli, verify } = await chainOf(3);
      const { code, report } = await verify();
      expect(code).toBe(0);
      const head = (await cli('--json', 'audit', 'head')).json();
      expect(report).toMatchObject({ ok: true, events: 4, head: head.hash, events_before_chain: 0 });
      expect(head).toMatchObject({ id: 4, seq: 4, hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
      expect((await verify('--head', head.hash)).code).toBe(0);
    });

    it("names an event whose details were edited: 'altered'", async () => {
      const { tamper, verify } = await chainOf(3);
      await tamper(`UPDATE audit_events SET details = '{"company_id":"elsewhere"}' WHERE id = 3`);
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report).toMatchObject({ ok: false, broken_at: 3, reason: 'altered', events: 2 });
    });

    it("names the event after a deleted one: 'removed'", async () => {
      const { tamper, verify } = await chainOf(3);
      await tamper('DELETE FROM audit_events WHERE id = 2');
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report).toMatchObject({ ok: false, broken_at: 3, reason: 'removed' });
      expect(report.message).toContain('chain positions 2-2');
    });

    it("names an event inserted in the middle, even one carrying a well-formed hash: 'inserted'", async () => {
      const { tamper, verify, cli, db, backend } = await chainOf(2);
      // Ids lost to rolled-back transactions leave gaps; a forger fills one between two chained events.
      await tamper(provider === 'sqlite' ? "UPDATE sqlite_sequence SET seq = 10 WHERE name = 'audit_events'" : "SELECT setval('audit_events_id_seq', 10)");
      expect((await cli('map-company', 'acme', '--company', 'shop-late')).code).toBe(0);
      const [third] = await db.sql.query<{ hash: string }>('SELECT hash FROM audit_events WHERE id = 3');
      const at = new Date();
      const forged = {
        seq: 4,
        at: dialectOf(provider).atText(at),
        actor: 'root',
        // On PostgreSQL the trigger writes the forger's own login, and a careful forger hashes that.
        principal: provider === 'sqlite' ? null : decodeURIComponent(new URL(backend.url).username),
        principalVerified: provider === 'postgresql',
        action: 'keys.revoked',
        partnerId: null,
        details: '{}',
        prevHash: third!.hash,
      };
      await tamper(
        'INSERT INTO audit_events (id, at, actor, action, details, seq, prev_hash, hash) VALUES (5, $1, $2, $3, $4, $5, $6, $7)',
        [provider === 'sqlite' ? forged.at : at, forged.actor, forged.action, forged.details, forged.seq, forged.prevHash, eventHash(forged)],
      );
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report, JSON.stringify(report)).toMatchObject({ ok: false, broken_at: 5, reason: 'inserted' });
    });

    it("names a copy of an event at the copy's own id: 'inserted'", async () => {
      const { tamper, verify, cli } = await chainOf(4);
      await tamper(
        `INSERT INTO audit_events (id, at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash)
         SELECT 6, at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash FROM audit_events WHERE id = 5`,
      );
      if (provider === 'postgresql') await tamper("SELECT setval('audit_events_id_seq', 6)");
      expect((await cli('map-company', 'acme', '--company', 'shop-late')).code).toBe(0);
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report, JSON.stringify(report)).toMatchObject({ ok: false, broken_at: 6, reason: 'inserted', events: 5 });
      expect(report.message).toContain('#6 repeats #5');
    });

    it("names two events whose ids were swapped: 'reordered', not 'removed'", async () => {
      const { tamper, verify } = await chainOf(4);
      await tamper('UPDATE audit_events SET id = -4 WHERE id = 4');
      await tamper('UPDATE audit_events SET id = 4 WHERE id = 5');
      await tamper('UPDATE audit_events SET id = 5 WHERE id = -4');
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report, JSON.stringify(report)).toMatchObject({ ok: false, broken_at: 4, reason: 'reordered', events: 3 });
      expect(report.message).toContain('#4 (chain position 5) is stored before #5 (position 4)');
    });

    it('walks the events at or below id 0 too, and a write says what such a row is and how to repair it', async () => {
      const { tamper, verify, cli } = await chainOf(2);
      // A copy of a chained event, slipped in below every id: not part of the chain.
      await tamper(
        `INSERT INTO audit_events (id, at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash)
         SELECT 0, at, actor, principal, principal_verified, action, partner_id, details, seq, prev_hash, hash FROM audit_events WHERE id = 2`,
      );
      expect((await verify()).report).toMatchObject({ ok: false, broken_at: 0, reason: 'inserted' });
      expect((await cli('map-company', 'acme', '--company', 'shop-x')).code).toBe(0);
      await tamper('DELETE FROM audit_events WHERE id = 0');
      expect((await verify()).report).toMatchObject({ ok: true, events: 4 });
      // A back-dated row without chain data, below the chain's legacy mark (0 here): writes stop, and say why.
      await tamper("INSERT INTO audit_events (id, at, actor, action, details) VALUES (-7, $1, 'root', 'keys.revoked', '{}')", [new Date(0)]);
      const { code, report } = await verify();
      expect(code).toBe(1);
      expect(report).toMatchObject({ ok: false, broken_at: -7, reason: 'inserted' });
      expect(report.message).toContain('written around partnerctl');
      const refused = await cli('map-company', 'acme', '--company', 'shop-y');
      expect(refused.code).toBe(5);
      expect(refused.stderr).toMatch(/^partnerctl: audit_chain_broken: audit event\(s\) #-7 sit at or below the start of the audit chain/);
      expect(refused.stderr).toContain('DELETE FROM audit_events WHERE hash IS NULL AND id IN (-7)');
      expect(refused.stderr).not.toContain('db migrate');
      await tamper('DELETE FROM audit_events WHERE id = -7');
      expect((await cli('map-company', 'acme', '--company', 'shop-y')).code).toBe(0);
      expect((await verify()).report).toMatchObject({ ok: true, events: 5 });
    });

    it('verify --head catches a truncated tail that the chain alone cannot see', async () => {
      const { tamper, verify, cli } = await chainOf(3);
      const head = (await cli('--json', 'audit', 'head')).json();
      await tamper('DELETE FROM audit_events WHERE id = 4');
      expect((await verify()).code).toBe(0);
      const { code, report } = await verify('--head', head.hash);
      expect(code).toBe(1);
      expect(report).toMatchObject({ ok: false, reason: 'removed', events: 3 });
      expect(report.message).toContain('events after #3 were removed');
      const bad = await cli('audit', 'verify', '--head', 'not-a-hash');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/^partnerctl: invalid_argument: --head must be a hash/);
      expect(bad.stderr).toContain("hint: the hash 'partnerctl audit head' printed");
    });

    it('stays one chain under concurrent commands from several processes', async () => {
      const { backend, verify } = await chainOf(0);
      const processes = Array.from({ length: 4 }, (_, p) =>
        (async () => {
          for (let i = 0; i < 3; i++) {
            const result = await runBinary(['map-company', 'acme', '--company', `p${p}-c${i}`], backend.env);
            expect(result.code, result.stderr).toBe(0);
          }
        })(),
      );
      await Promise.all(processes);
      const { code, report } = await verify();
      expect(code).toBe(0);
      expect(report).toMatchObject({ ok: true, events: 13 });
    });

    it('chains the events written before the chain existed once, and says from where it vouches', async () => {
      const backend = await createBackend(provider);
      const config = resolveDatabase(backend.url, {});
      await applyMigrations(config, { through: '20261125000000_key_overlap' });
      const old = await openDatabase(config);
      for (const action of ['partner.created', 'keys.issued', 'company.mapped']) {
        await old.sql.query('INSERT INTO audit_events (at, actor, action, details) VALUES ($1, $2, $3, $4)', [new Date(), 'old-timer', action, '{}']);
      }
      await old.close();
      // The audit chain's migration first, then whatever came after it.
      expect((await applyMigrations(config))[0]).toBe('20261125010000_audit_chain');
      const db = await openDatabase(config);
      opened.push({ backend, db });
      const cli = (...args: string[]) => runCli(['--yes', ...args], backend.env);
      expect((await cli('create-partner', '--name', 'acme')).code).toBe(0);
      const result = await cli('--json', 'audit', 'verify');
      expect(result.code).toBe(0);
      expect(result.json()).toMatchObject({ ok: true, events: 4, events_before_chain: 3 });
      const text = await cli('audit', 'verify');
      expect(text.stdout).toContain('Events #1-#3 predate the chain');
      // Tampering with an older event after the migration shows too.
      if (provider === 'sqlite') await db.sql.query("UPDATE audit_events SET actor = 'someone' WHERE id = 2");
      else {
        const client = new pg.Client({ connectionString: backend.url });
        await client.connect();
        await client.query("UPDATE audit_events SET actor = 'someone' WHERE id = 2");
        await client.end();
      }
      expect((await cli('--json', 'audit', 'verify')).json()).toMatchObject({ ok: false, broken_at: 2, reason: 'altered' });
    });
  });
});
