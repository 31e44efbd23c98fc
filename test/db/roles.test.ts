// The four roles of `partnerctl db roles` on a real PostgreSQL, used by real login roles (unique names per
// run, dropped afterwards): what each may do, that a refusal changes nothing, and that the audit trail
// records the login whatever --actor claims.
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { adminQuery, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli, type CliResult } from '../support/cli.js';
import { serve } from '../support/serve.js';
import { startUpstream } from '../http/support.js';

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
      // And a principal it sends is replaced by its login.
      await client.query("INSERT INTO audit_events (actor, action, principal) VALUES ('x', 'test.forged', 'someone_else')");
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
    const server = await serve({ ...backend.env, DATABASE_URL: urlAs(logins.server), PUBLIC_API_UPSTREAM_URL: upstream.url });
    try {
      const tokenResponse = await fetch(`${server.url}/public/v1/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: keys.access_key, secret_key: keys.secret_key }),
      });
      expect(tokenResponse.status).toBe(200);
      const { access_token: token } = (await tokenResponse.json()) as { access_token: string };
      const data = await fetch(`${server.url}/public/v1/prices?company_id=shop-1`, { headers: { authorization: `Bearer ${token}` } });
      expect(data.status).toBe(200);
    } finally {
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
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
    const server = await serve({
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
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
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
});
