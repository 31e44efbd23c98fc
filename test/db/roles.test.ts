// The four roles of `partnerctl db roles` on a real PostgreSQL, used by real login roles (unique names per
// run, dropped afterwards): what each may do, that a refusal changes nothing, and that the audit trail
// records the login whatever --actor claims.
import type { Database } from '../../src/db/client.js';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { eventHash, GENESIS } from '../../src/db/audit-hash.js';
import { postgresqlDialect } from '../../src/db/dialect.js';
import { permissionDenied } from '../../src/db/roles.js';
import { adminQuery, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli, type CliResult } from '../support/cli.js';
import { serveInProcess } from '../support/serve.js';
import { startUpstream } from '../http/support.js';
import { tokenFor } from '../hardening/support.js';

describe.skipIf(!backendAvailable('postgresql'))('PostgreSQL roles with real logins', () => {
  let backend: TestBackend;
  const suffix = `${process.pid}_${randomBytes(3).toString('hex')}`;
  const logins = { support: `pctl_sup_${suffix}`, oncall: `pctl_onc_${suffix}`, server: `pctl_srv_${suffix}` };
  let partner: { partner_id: string; access_key: string; secret_key: string };

  const urlAs = (login: string) => {
    const url = new URL(backend.url);
    url.username = login;
    url.password = '';
    return url.toString();
  };
  const as = (login: string | null, ...args: string[]): Promise<CliResult> =>
    runCli(['--yes', ...args], { ...backend.env, DATABASE_URL: login ? urlAs(login) : backend.url });
  const owner = (...args: string[]) => as(null, ...args);
  const query = async (sql: string) => {
    const client = new pg.Client({ connectionString: backend.url });
    await client.connect();
    try {
      return (await client.query(sql)).rows;
    } finally {
      await client.end();
    }
  };
  const auditCount = async () => Number((await query('SELECT COUNT(*) AS n FROM audit_events'))[0].n);
  /** A login's own connection, closed after `work`. */
  const connectedAs = async <T>(login: string, work: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: urlAs(login) });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  };
  /**
   * By hand, what a unit of work writes for one event on a login's connection, inside the caller's
   * transaction: the revision bumped first, then the event at the chain's head with the hash of its content.
   */
  const appendLikeAUnit = async (
    client: pg.Client,
    login: string,
    event: { action: string; partnerId?: string | null; details?: string; principal?: string },
  ): Promise<number> => {
    await client.query('UPDATE revision SET value = value + 1 WHERE id = 1');
    const [head] = (await client.query('SELECT seq, hash FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1')).rows;
    const at = new Date();
    const content = {
      seq: Number(head?.seq ?? 0) + 1,
      at: postgresqlDialect.atText(at),
      actor: 'by-hand',
      principal: login,
      principalVerified: true,
      action: event.action,
      partnerId: event.partnerId ?? null,
      details: event.details ?? '{}',
      prevHash: head?.hash ?? GENESIS,
    };
    await client.query(
      'INSERT INTO audit_events (at, actor, action, partner_id, details, seq, prev_hash, hash, principal) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
      [at, content.actor, content.action, content.partnerId, content.details, content.seq, content.prevHash, eventHash(content), event.principal ?? login],
    );
    return content.seq;
  };

  beforeAll(async () => {
    backend = await createBackend('postgresql');
    expect((await owner('db', 'migrate')).code).toBe(0);
    const roles = await owner('db', 'roles', '--apply');
    expect(roles.code, roles.stderr).toBe(0);
    await adminQuery(
      backend.url,
      `CREATE ROLE ${logins.support} LOGIN IN ROLE partnerctl_support;
       CREATE ROLE ${logins.oncall} LOGIN IN ROLE partnerctl_oncall;
       CREATE ROLE ${logins.server} LOGIN IN ROLE partnerctl_server;`,
    );
    expect((await owner('create-partner', '--name', 'acme')).code).toBe(0);
    partner = (await owner('--json', 'issue-keys', 'acme')).json();
    expect((await owner('map-company', 'acme', '--company', 'shop-1')).code).toBe(0);
  });
  afterAll(async () => {
    await backend?.dispose();
    const admin = inject('postgresAdminUrl');
    if (admin) await adminQuery(admin, `DROP ROLE IF EXISTS ${Object.values(logins).join(', ')}`);
  });

  it('prints re-runnable SQL that grants no UPDATE or DELETE of audit events and makes no role an owner', async () => {
    const printed = await owner('db', 'roles');
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain('IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = \'partnerctl_admin\')');
    // Applying it again reuses the roles.
    expect((await owner('db', 'roles', '--apply')).code).toBe(0);
    const grants = await query(
      `SELECT grantee, privilege_type FROM information_schema.role_table_grants
       WHERE table_name = 'audit_events' AND grantee LIKE 'partnerctl_%' ORDER BY grantee, privilege_type`,
    );
    expect(grants.filter((row) => ['UPDATE', 'DELETE', 'TRUNCATE'].includes(row.privilege_type))).toEqual([]);
    const owners = await query("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'");
    expect(owners.map((row) => row.tableowner)).not.toContain('partnerctl_admin');
    expect(owners.every((row) => !String(row.tableowner).startsWith('partnerctl_'))).toBe(true);
  });

  it('support looks up and maps, records its login as the principal whatever --actor says, and cannot revoke keys', async () => {
    expect((await as(logins.support, 'show-partner', 'acme')).code).toBe(0);
    expect((await as(logins.support, 'lookup', partner.access_key)).code).toBe(0);
    const mapped = await as(logins.support, '--actor', 'admin:mallory', 'map-company', 'acme', '--company', 'shop-2');
    expect(mapped.code, mapped.stderr).toBe(0);
    const [event] = (await owner('--json', 'audit', '--limit', '1')).json().events;
    expect(event).toMatchObject({ actor: 'admin:mallory', principal: logins.support, principal_verified: true, action: 'company.mapped' });
    const filtered = (await owner('--json', 'audit', '--principal', logins.support)).json().events;
    expect(filtered.map((row: { action: string }) => row.action)).toEqual(['company.mapped']);

    const before = await auditCount();
    const refused = await as(logins.support, 'revoke-keys', 'acme');
    expect(refused.code).toBe(7);
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(/^partnerctl: permission_denied: UPDATE on key_pairs is not granted to pctl_sup_\S+; partnerctl_oncall has it/);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
    expect(await auditCount()).toBe(before);
    const [pair] = await query(`SELECT status FROM key_pairs WHERE access_key = '${partner.access_key}'`);
    expect(pair.status).toBe('active');
  });

  it('refuses UPDATE and DELETE of audit events to any role but the owner, even one granted them', async () => {
    await adminQuery(backend.url, `GRANT UPDATE, DELETE ON audit_events TO ${logins.support}`);
    const client = new pg.Client({ connectionString: urlAs(logins.support) });
    await client.connect();
    try {
      await expect(client.query("UPDATE audit_events SET details = '{}'")).rejects.toMatchObject({ code: '42501' });
      await expect(client.query('DELETE FROM audit_events')).rejects.toMatchObject({ code: '42501' });
      // And a principal it sends, in an event written as a unit writes it, is replaced by its login.
      await client.query('BEGIN');
      await appendLikeAUnit(client, logins.support, { action: 'test.forged', principal: 'someone_else' });
      await client.query('COMMIT');
      const [row] = (await client.query("SELECT principal, principal_verified FROM audit_events WHERE action = 'test.forged'")).rows;
      expect(row).toEqual({ principal: logins.support, principal_verified: true });
    } finally {
      await client.end();
      await adminQuery(backend.url, `REVOKE UPDATE, DELETE ON audit_events FROM ${logins.support}; DELETE FROM audit_events WHERE action = 'test.forged'`);
    }
  });

  it('on-call contains a leak (revoke, rotate, revoke tokens, disable) but cannot apply', async () => {
    for (const args of [['rotate-keys', 'acme'], ['revoke-tokens', 'acme'], ['revoke-keys', 'acme'], ['disable-partner', 'acme'], ['enable-partner', 'acme']]) {
      const result = await as(logins.oncall, ...args);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
    }
    const file = join(backend.dir, 'desired.yaml');
    writeFileSync(file, 'partners:\n  - name: newcomer\n    companies: [shop-9]\n');
    const before = await auditCount();
    const refused = await as(logins.oncall, 'apply', '-f', file);
    expect(refused.code).toBe(7);
    expect(refused.stderr).toMatch(/permission_denied: INSERT on partners is not granted to pctl_onc_\S+; partnerctl_admin has it/);
    expect(await auditCount()).toBe(before);
    expect(await query("SELECT id FROM partners WHERE name = 'newcomer'")).toEqual([]);
  });

  it('the server login serves and counts usage, and cannot insert a partner', async () => {
    const keys = (await owner('--json', 'issue-keys', 'acme')).json();
    const upstream = await startUpstream();
    const server = await serveInProcess({ ...backend.env, DATABASE_URL: urlAs(logins.server), PUBLIC_API_UPSTREAM_URL: upstream.url });
    try {
      // The next tests count on this token having been issued (a revoke-tokens after it changes something).
      const token = await tokenFor(server.url, keys.access_key, keys.secret_key);
      const data = await fetch(`${server.url}/public/v1/prices?company_id=shop-1`, { headers: { authorization: `Bearer ${token}` } });
      expect(data.status).toBe(200);
    } finally {
      expect(await server.stop()).toBe(0);
      await upstream.close();
    }
    const [usage] = await query("SELECT SUM(accepted) AS n FROM usage_hours WHERE company_id = 'shop-1'");
    expect(Number(usage.n)).toBe(1);
    expect(server.stderr()).not.toMatch(/permission denied/i);
    const client = new pg.Client({ connectionString: urlAs(logins.server) });
    await client.connect();
    try {
      await expect(
        client.query("INSERT INTO partners (id, name, updated_at) VALUES ('ptn_x', 'sneaky', now())"),
      ).rejects.toMatchObject({ code: '42501' });
      await expect(
        client.query(`INSERT INTO key_pairs (id, partner_id, access_key, secret_hash) VALUES ('kp_x', '${partner.partner_id}', 'ak', 'h')`),
      ).rejects.toMatchObject({ code: '42501' });
    } finally {
      await client.end();
    }
  });

  it('webhooks and secret scanning under the roles: on-call writes events, the server contains a leak and delivers', async () => {
    const name = 'leaky';
    expect((await owner('create-partner', '--name', name)).code).toBe(0);
    const keys = (await owner('--json', 'issue-keys', name)).json();
    // A receiver and GitHub's key list on loopback.
    const github = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const received: { type: string; headers: Record<string, unknown> }[] = [];
    const listener = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        if (request.url === '/keys') {
          const key = github.publicKey.export({ type: 'spki', format: 'pem' }).toString();
          response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ public_keys: [{ key_identifier: 'k1', key, is_current: true }] }));
          return;
        }
        received.push({ type: (JSON.parse(body) as { type: string }).type, headers: request.headers });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
    const support = await as(logins.support, 'webhooks', 'add', '--url', `${base}/hook`, '--insecure');
    expect(support.code).toBe(7);
    const added = await owner('--json', 'webhooks', 'add', '--url', `${base}/hook`, '--insecure', '--partner', name);
    expect(added.code, added.stderr).toBe(0);
    // Support and on-call list the endpoints, but never read a signing secret (only the admin and the server do).
    const listed = await as(logins.support, '--json', 'webhooks', 'list');
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(added.json<{ id: string }>().id);
    expect(listed.stdout).not.toContain('whsec_');
    const tested = await as(logins.oncall, 'webhooks', 'test', added.json<{ id: string }>().id);
    expect(tested.code).toBe(7);
    expect(tested.stderr).toMatch(/^partnerctl: permission_denied: SELECT on webhook_endpoints/);
    // On-call's change writes its event in the same transaction.
    const revoked = await as(logins.oncall, 'revoke-tokens', name);
    expect(revoked.code, revoked.stderr).toBe(0);
    const server = await serveInProcess({
      ...backend.env,
      DATABASE_URL: urlAs(logins.server),
      PUBLIC_API_SECRET_SCANNING: 'github',
      PUBLIC_API_SECRET_SCANNING_KEYS_URL: `${base}/keys`,
    });
    try {
      const body = JSON.stringify([{ token: keys.secret_key, type: 'partnerctl_secret_key', url: 'https://github.com/o/r/blob/1/x', source: 'content' }]);
      const signature = sign('sha256', Buffer.from(body), { key: github.privateKey, dsaEncoding: 'der' }).toString('base64');
      const alert = await fetch(`${server.url}/secret-scanning/github`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'github-public-key-identifier': 'k1', 'github-public-key-signature': signature },
        body,
      });
      expect(alert.status).toBe(200);
      expect(((await alert.json()) as { label: string }[])[0]!.label).toBe('true_positive');
      const deadline = Date.now() + 10_000;
      while (received.length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(received.map((item) => item.type).sort()).toEqual(['keys.revoked', 'leak.reported', 'tokens.revoked']);
    } finally {
      expect(await server.stop()).toBe(0);
      await new Promise((resolve) => listener.close(resolve));
    }
    expect(server.stderr()).not.toMatch(/permission denied/i);
    expect(server.stdout()).not.toMatch(/permission denied|write deferred/i);
    const [pair] = await query(`SELECT status, leak_url FROM key_pairs WHERE access_key = '${keys.access_key}'`);
    expect(pair).toEqual({ status: 'revoked', leak_url: 'https://github.com/o/r/blob/1/x' });
    const [delivered] = await query("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'delivered'");
    expect(Number(delivered.n)).toBe(3);
  });

  it('the binary prints the refusal as one line, without a stack', async () => {
    const result = await runBinary(['revoke-tokens', 'acme', '--yes'], { ...backend.env, DATABASE_URL: urlAs(logins.support) });
    expect(result.code).toBe(7);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('permission_denied: UPDATE on partners');
  });
  it('writes audit events only as a unit of work does: no forged id at or below the chain, no event outside the write lock', async () => {
    const before = await auditCount();
    await connectedAs(logins.support, async (client) => {
      for (const id of [0, -1]) {
        await expect(client.query(`INSERT INTO audit_events (id, actor, action) VALUES (${id}, 'x', 'keys.revoked')`)).rejects.toMatchObject({ code: '42501' });
      }
      // Without the revision row's lock, in a well-formed shape.
      const [head] = (await client.query('SELECT seq, hash FROM audit_events WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1')).rows;
      await expect(
        client.query("INSERT INTO audit_events (actor, action, seq, prev_hash, hash) VALUES ('x', 'keys.revoked', $1, $2, $3)", [
          Number(head.seq) + 1,
          head.hash,
          'f'.repeat(64),
        ]),
      ).rejects.toMatchObject({ code: '42501' });
      // Under the lock, but an explicit id below the others, a position off the head, or a hash that is not its content's.
      for (const forge of [
        "INSERT INTO audit_events (id, actor, action) VALUES (0, 'x', 'keys.revoked')",
        "INSERT INTO audit_events (actor, action, seq, prev_hash, hash) VALUES ('x', 'keys.revoked', 1, repeat('0', 64), repeat('a', 64))",
        `INSERT INTO audit_events (actor, action, seq, prev_hash, hash) VALUES ('x', 'keys.revoked', ${Number(head.seq) + 1}, '${head.hash}', repeat('a', 64))`,
      ]) {
        await client.query('BEGIN');
        await client.query('UPDATE revision SET value = value + 1 WHERE id = 1');
        await expect(client.query(forge)).rejects.toMatchObject({ code: '42501' });
        await client.query('ROLLBACK');
      }
    });
    expect(await auditCount()).toBe(before);
    // Every role's writes go on, and the chain is whole.
    expect((await as(logins.support, 'map-company', 'acme', '--company', 'shop-after-forgery')).code).toBe(0);
    const verified = await owner('--json', 'audit', 'verify');
    expect(verified.json(), verified.stdout).toMatchObject({ ok: true });
  });

  it('moves the revision only by one, with the audit events of a change, and past int4', async () => {
    await connectedAs(logins.support, async (client) => {
      await expect(client.query('UPDATE revision SET value = 2147483647 WHERE id = 1')).rejects.toMatchObject({ code: '42501' });
      await expect(client.query('UPDATE revision SET value = value - 1 WHERE id = 1')).rejects.toMatchObject({ code: '42501' });
      // By one, but with no change behind it: refused when it would commit.
      await expect(client.query('UPDATE revision SET value = value + 1 WHERE id = 1')).rejects.toMatchObject({ code: '42501' });
    });
    await adminQuery(backend.url, 'UPDATE revision SET value = 2147483646 WHERE id = 1');
    for (const company of ['shop-int4-a', 'shop-int4-b']) {
      const mapped = await as(logins.support, 'map-company', 'acme', '--company', company);
      expect(mapped.code, mapped.stderr).toBe(0);
    }
    const [revision] = await query('SELECT value FROM revision WHERE id = 1');
    expect(String(revision.value)).toBe('2147483648');
  });

  it('on-call cannot write an outbox event or delivery that no audit event of the same transaction vouches for', async () => {
    const added = await owner('--json', 'webhooks', 'add', '--url', 'http://127.0.0.1:9/forged', '--insecure');
    expect(added.code, added.stderr).toBe(0);
    const endpoint = added.json<{ id: string }>().id;
    const body = (type: string, data: Record<string, unknown>) =>
      JSON.stringify({ type, timestamp: new Date().toISOString(), data: { partner_id: partner.partner_id, partner_name: 'acme', actor: 'by-hand', ...data } });
    const insertEvent = (client: pg.Client, id: string, type: string, data: string, auditSeq: number | null) =>
      client.query('INSERT INTO webhook_events (id, type, partner_id, data, created_at, audit_seq) VALUES ($1, $2, $3, $4, now(), $5)', [
        id,
        type,
        partner.partner_id,
        data,
        auditSeq,
      ]);
    try {
      await connectedAs(logins.oncall, async (client) => {
        // No audit event at all.
        await expect(insertEvent(client, 'msg_forged_1', 'keys.revoked', body('keys.revoked', {}), null)).rejects.toMatchObject({ code: '42501' });
        // An audit event of an earlier transaction.
        const [old] = (await client.query("SELECT seq FROM audit_events WHERE action = 'tokens.revoked' ORDER BY seq DESC LIMIT 1")).rows;
        await expect(insertEvent(client, 'msg_forged_2', 'tokens.revoked', body('tokens.revoked', {}), Number(old.seq))).rejects.toMatchObject({ code: '42501' });
        // An audit event of this transaction, but a body that says more than it.
        await client.query('BEGIN');
        const seq = await appendLikeAUnit(client, logins.oncall, { action: 'tokens.revoked', partnerId: partner.partner_id });
        await expect(insertEvent(client, 'msg_forged_3', 'tokens.revoked', body('tokens.revoked', { note: 'pay to IBAN …' }), seq)).rejects.toMatchObject({
          code: '42501',
        });
        await client.query('ROLLBACK');
        // A delivery of an existing event, written outside that event's transaction.
        const [existing] = (await client.query('SELECT id FROM webhook_events LIMIT 1')).rows;
        expect(existing).toBeDefined();
        await expect(
          client.query(
            "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, created_at) VALUES ($1, $2, 'pending', 0, now(), now())",
            [existing.id, endpoint],
          ),
        ).rejects.toMatchObject({ code: '42501' });
        // What the unit of work writes is accepted: the event exactly as its audit event says, with its delivery.
        await client.query('BEGIN');
        const vouched = await appendLikeAUnit(client, logins.oncall, { action: 'tokens.revoked', partnerId: partner.partner_id });
        await insertEvent(client, 'msg_vouched', 'tokens.revoked', body('tokens.revoked', {}), vouched);
        await client.query(
          "INSERT INTO webhook_deliveries (event_id, endpoint_id, status, attempts, next_attempt_at, created_at) VALUES ('msg_vouched', $1, 'pending', 0, now(), now())",
          [endpoint],
        );
        await client.query('ROLLBACK');
      });
      expect(await query("SELECT id FROM webhook_events WHERE id LIKE 'msg_forged%'")).toEqual([]);
      // On-call's own commands still write their events.
      expect((await as(logins.oncall, 'revoke-tokens', 'acme')).code).toBe(0);
      const [written] = await query(`SELECT COUNT(*) AS n FROM webhook_deliveries WHERE endpoint_id = '${endpoint}'`);
      expect(Number(written.n)).toBe(1);
    } finally {
      expect((await owner('webhooks', 'remove', endpoint)).code).toBe(0);
    }
  });

  it('names the role that holds the signing secret when support tests a webhook', async () => {
    const added = await owner('--json', 'webhooks', 'add', '--url', 'http://127.0.0.1:9/hint', '--insecure');
    const endpoint = added.json<{ id: string }>().id;
    try {
      const tested = await as(logins.support, 'webhooks', 'test', endpoint);
      expect(tested.code).toBe(7);
      expect(tested.stderr).toMatch(/^partnerctl: permission_denied: SELECT on webhook_endpoints is not granted to pctl_sup_\S+; partnerctl_admin has it/);
      expect(tested.stderr).not.toContain('partnerctl_support');
      // A refusal by a rule of the schema says its reason, not a grant.
      const refusal = await connectedAs(logins.support, async (client) => {
        const statement = "INSERT INTO audit_events (id, actor, action) VALUES (0, 'x', 'y')";
        const error = await client.query(statement).catch((caught: unknown) => Object.assign(caught as Error, { statement }));
        // Only the handle's reads are used: those of this login's own connection.
        const sql = { dialect: postgresqlDialect, query: async (text: string, params?: readonly unknown[]) => (await client.query(text, params as unknown[])).rows };
        return permissionDenied({ provider: 'postgresql', sql } as unknown as Database, error);
      });
      expect(refusal.message).toMatch(/^INSERT on audit_events refused for pctl_sup_\S+: events are appended by a change that holds the write lock/);
      expect(refusal.hint).toBe('see docs/roles.md');
    } finally {
      await owner('webhooks', 'remove', endpoint);
    }
  });
});
