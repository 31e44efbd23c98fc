// Issue 37's CLI safety points (9, 11, 12, 14, 17), in-process: re-checks that change nothing, contain lines
// that are safe to re-run, `changed` everywhere, flags that beat the environment. The points that need a
// fault from outside the process (6, and 17's migrate lock) are in cli-safety-37-faults.test.ts.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { beatInstance } from '../../src/db/repositories/instances.js';
import { PROGRAM } from '../../src/cli/program.js';
import { mintTestToken } from '../../src/domain/operations/test-tokens.js';
import { bearer, buildTestApp, seedPartner, startUpstream } from '../http/support.js';
import { TestClock } from '../support/clock.js';
import { backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe('37.11: exit 6 points to a read-only re-check; the Contain: line is safe to re-run', () => {
  let backend: TestBackend;
  let db: Database;
  const cli = (...args: string[]) => runCli(args, backend.env);
  const revision = async () => Number((await db.sql.query<{ value: number }>('SELECT value FROM revision WHERE id = 1'))[0]!.value);
  const auditCount = async () => Number((await db.sql.query<{ n: number }>('SELECT COUNT(*) AS n FROM audit_events'))[0]!.n);
  /** A live serve instance that heartbeats but applies nothing (as one frozen mid-apply looks to a receipt). */
  const frozenInstance = (applied: number) =>
    db.sql.transaction(
      (tx) =>
        beatInstance(tx, {
          instanceId: 'srv_00000000000000f0',
          host: hostname(),
          pid: 999_999,
          version: 'test',
          address: '127.0.0.1:1',
          startedAt: new Date(db.clock.now() - 60_000),
          lastSeenAt: new Date(db.clock.now()),
          appliedRevision: applied,
          staleBudgetMs: 0,
          clockOffsetMs: null,
        }),
      { timeoutMs: 5_000 },
    );
  const forgetInstances = () => db.sql.transaction((tx) => tx.run('DELETE FROM serve_instances'), { timeoutMs: 5_000 });

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
  });
  afterAll(async () => {
    await db?.close();
    await backend?.dispose();
  });

  it('exit 6 names `partnerctl receipt <change-id>`; the re-check changes nothing and exits 0 once settled, 6 while not', async () => {
    expect((await cli('create-partner', '--name', 'Recheck')).code).toBe(0);
    expect((await cli('issue-keys', 'Recheck')).code).toBe(0);
    await frozenInstance(await revision());
    const revoked = await cli('revoke-keys', 'Recheck', '--wait', '300ms', '--yes', '--json');
    expect(revoked.code, revoked.stderr).toBe(6);
    const changeId = revoked.json().change_id as number;
    expect(changeId).toBe(revoked.json().receipt.revision);
    expect(revoked.stderr).toContain(`'partnerctl receipt ${changeId} --wait 30s'`);
    expect(revoked.stderr).not.toMatch(/run the same command again/);

    const before = { revision: await revision(), audit: await auditCount() };
    const pending = await cli('receipt', String(changeId), '--wait', '300ms', '--json');
    expect(pending.code, pending.stderr).toBe(6);
    expect(pending.json()).toMatchObject({ change_id: changeId, receipt: { revision: changeId, confirmed: [], unconfirmed: [{ instance_id: 'srv_00000000000000f0' }] } });
    expect(pending.stderr).toContain(`'partnerctl receipt ${changeId} --wait 30s'`);
    const text = await cli('receipt', String(changeId), '--wait', '300ms');
    expect(text.code).toBe(6);
    expect(text.stdout).toMatch(/srv_00000000000000f0 .* NOT CONFIRMED within 300ms/);
    expect({ revision: await revision(), audit: await auditCount() }).toEqual(before);

    await frozenInstance(changeId);
    const settled = await cli('receipt', String(changeId), '--json');
    expect(settled.code, settled.stderr).toBe(0);
    expect(settled.json()).toMatchObject({ change_id: changeId, receipt: { confirmed: [{ instance_id: 'srv_00000000000000f0', after_ms: null }], unconfirmed: [] } });
    expect({ revision: await revision(), audit: await auditCount() }).toEqual(before);
    await forgetInstances();
  });

  it('receipt of no such change exits 3; of something that is not a change id, 2; one line each', async () => {
    const ahead = await cli('receipt', String((await revision()) + 1000));
    expect(ahead.code).toBe(3);
    expect(ahead.stderr.trim().split('\n')).toHaveLength(1);
    for (const bad of ['abc', '0', '-1', '1e3']) {
      const result = await cli('receipt', bad);
      expect(result.code, bad).toBe(2);
      expect(result.stderr.trim().split('\n'), bad).toHaveLength(1);
    }
  });

  it("a leaked secret's Contain: line names the pair and a --secret-to file: a re-run changes nothing and prints no secret", async () => {
    expect((await cli('create-partner', '--name', 'Leaky')).code).toBe(0);
    const keys = (await cli('issue-keys', 'Leaky', '--json')).json();
    const lookup = await runCli(['lookup', '-', '--json'], backend.env, { input: keys.secret_key });
    const line = lookup.json().contain as string;
    expect(line).toContain(`--key-pair ${keys.key_pair_id}`);
    expect(line).toMatch(/ --secret-to \S+\.json /);
    const file = join(backend.dir, 'replacement.json');
    const args = line.split(' ').slice(1).map((word, i, all) => (all[i - 1] === '--secret-to' ? file : word));
    const first = await cli(...args, '--no-wait', '--json');
    expect(first.code, first.stderr).toBe(0);
    expect(first.json()).toMatchObject({ changed: true, secret_to: file });
    expect(first.stdout).not.toMatch(/pctl_sk_/);
    const handedOver = readFileSync(file, 'utf8');
    const pairs = (await cli('show-partner', 'Leaky', '--json')).json().key_pairs.length;

    for (const again of [await cli(...args, '--no-wait', '--json'), await cli(...args, '--no-wait')]) {
      expect(again.code, again.stderr).toBe(0);
      expect(`${again.stdout}${again.stderr}`).not.toMatch(/pctl_sk_/);
    }
    expect((await cli(...args, '--no-wait', '--json')).json()).toMatchObject({ changed: false, key_pair_id: keys.key_pair_id, key_pair_status: 'revoked' });
    expect(readFileSync(file, 'utf8')).toBe(handedOver);
    expect((await cli('show-partner', 'Leaky', '--json')).json().key_pairs).toHaveLength(pairs);
    // The pair handed over is the active one still.
    expect((await cli('show-partner', 'Leaky', '--json')).json().key_pairs.find((p: { status: string }) => p.status === 'active').key_pair_id).toBe(
      JSON.parse(handedOver).keys[0].key_pair_id,
    );
  });

  it("a leaked token's Contain: line names the brake's instant: a re-run does not move it", async () => {
    expect((await cli('create-partner', '--name', 'Token Leak')).code).toBe(0);
    const token = (await cli('mint-test-token', 'Token Leak', '--json')).json().access_token as string;
    const line = (await runCli(['lookup', '-', '--json'], backend.env, { input: token })).json().contain as string;
    expect(line).toMatch(/^partnerctl revoke-tokens ptn_\S+ --issued-before \S+Z --yes$/);
    const args = line.split(' ').slice(1);
    const first = await cli(...args, '--no-wait', '--json');
    expect(first.code, first.stderr).toBe(0);
    expect(first.json().changed).toBe(true);
    expect(args).toContain(first.json().tokens_revoked_before);
    const events = await auditCount();
    const again = await cli(...args, '--no-wait', '--json');
    expect(again.code, again.stderr).toBe(0);
    expect(again.json()).toMatchObject({ changed: false, tokens_revoked_before: first.json().tokens_revoked_before });
    expect(await auditCount()).toBe(events);
    const future = await cli('revoke-tokens', 'Token Leak', '--issued-before', '2999-01-01T00:00:00Z', '--yes', '--no-wait');
    expect(future.code).toBe(2);
    expect(future.stderr).toMatch(/^partnerctl: invalid_argument: --issued-before .* is in the future/);
  });

  it("revoke-tokens keeps its brake at now, and its help says that a re-run moves it", async () => {
    const help = await cli('revoke-tokens', '--help');
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('A re-run moves the brake');
    expect(existsSync(join(backend.dir, 'partnerctl.db'))).toBe(true);
  });
});

describe('37.14: every command that can change something has changed (true or false) in its --json', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  /** Every command the program marks as able to change something, by its path ('webhooks add'). */
  function changingCommands(): string[] {
    const paths: string[] = [];
    for (const command of PROGRAM.subcommands ?? []) {
      if (command.changes) paths.push(command.name);
      for (const sub of command.subcommands ?? []) if (sub.changes) paths.push(`${command.name} ${sub.name}`);
    }
    return paths.sort();
  }

  it('walks every changing command: the change says changed: true, a re-run (where re-runnable) changed: false', async () => {
    backend = await createBackend('sqlite');
    const walked = new Set<string>();
    let db: Database | undefined;
    /** Runs `args` (a command of `path`) with --json and checks its exit code and `changed`. */
    const step = async (path: string, args: string[], changed: boolean, code = 0) => {
      const result = await runCli([...args, '--json'], backend.env);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(code);
      expect(result.json().changed, `${args.join(' ')}: ${result.stdout}`).toBe(changed);
      walked.add(path);
      return result.json();
    };
    try {
      await step('db migrate', ['db', 'migrate'], true);
      await step('db migrate', ['db', 'migrate'], false);
      const partner = (await step('create-partner', ['create-partner', '--name', 'Walk', '--if-not-exists'], true)).partner_id as string;
      await step('create-partner', ['create-partner', '--name', 'Walk', '--if-not-exists'], false);
      for (const [path, args] of [
        ['set-limits', ['set-limits', partner, '--rate', '10/s']],
        ['set-network', ['set-network', partner, '--allow', '10.0.0.0/8']],
        ['set-credentials', ['set-credentials', partner, '--allow', 'secret']],
        ['map-company', ['map-company', partner, '--company', 'walk-1']],
        ['unmap-company', ['unmap-company', partner, '--company', 'walk-1', '--yes']],
        ['issue-keys', ['issue-keys', partner, '--if-none-active']],
      ] as const) {
        await step(path, [...args], true);
        await step(path, [...args], false);
      }
      const companies = join(backend.dir, 'companies.txt');
      writeFileSync(companies, 'walk-2\nwalk-3\n');
      await step('map-company', ['map-company', partner, '--from-file', companies], true);
      await step('map-company', ['map-company', partner, '--from-file', companies], false);
      await step('rotate-keys', ['rotate-keys', partner, '--overlap', '1d'], true);
      await step('rotate-keys', ['rotate-keys', partner, '--finish'], true);
      await step('rotate-keys', ['rotate-keys', partner, '--finish'], false);
      await step('mint-test-token', ['mint-test-token', partner], true);
      await step('record', ['record', partner, '--for', '15m'], true);
      await step('record', ['record', partner, '--stop'], true);
      await step('record', ['record', partner, '--stop'], false);
      await step('revoke-tokens', ['revoke-tokens', partner, '--yes', '--no-wait'], true);
      await step('revoke-tokens', ['revoke-tokens', partner, '--yes', '--no-wait'], false);
      await step('revoke-keys', ['revoke-keys', partner, '--yes', '--no-wait'], true);
      await step('revoke-keys', ['revoke-keys', partner, '--yes', '--no-wait'], false);
      await step('disable-partner', ['disable-partner', partner, '--yes', '--no-wait'], true);
      await step('disable-partner', ['disable-partner', partner, '--yes', '--no-wait'], false);
      await step('enable-partner', ['enable-partner', partner], true);
      await step('enable-partner', ['enable-partner', partner], false);
      const document = join(backend.dir, 'partners.yaml');
      writeFileSync(document, 'partners:\n  - name: Walk Applied\n    status: active\n    companies: [walk-4]\n');
      await step('apply', ['apply', '-f', document, '--dry-run'], false);
      await step('apply', ['apply', '-f', document, '--yes'], true);
      await step('apply', ['apply', '-f', document, '--yes'], false);
      const hook = (await step('webhooks add', ['webhooks', 'add', '--url', 'http://127.0.0.1:9/walk', '--insecure', '--if-not-exists'], true)).id as string;
      await step('webhooks add', ['webhooks', 'add', '--url', 'http://127.0.0.1:9/walk', '--insecure', '--if-not-exists'], false);
      await step('issue-keys', ['issue-keys', 'Walk Applied'], true);
      // The event just recorded is attempted (port 9 refuses: retried later, exit 1); at once again, nothing is due.
      await step('webhooks deliver', ['webhooks', 'deliver'], true, 1);
      await step('webhooks deliver', ['webhooks', 'deliver'], false);
      await step('webhooks remove', ['webhooks', 'remove', hook, '--yes'], true);
      await step('webhooks remove', ['webhooks', 'remove', hook, '--yes'], false);
      await step('signing-key rotate', ['signing-key', 'rotate'], true);
      db = await openMigrated(backend);
      await db.sql.transaction(
        (tx) =>
          beatInstance(tx, {
            instanceId: 'srv_00000000000000aa',
            host: hostname(),
            pid: 1,
            version: 'test',
            address: '127.0.0.1:1',
            startedAt: new Date(0),
            lastSeenAt: new Date(0),
            appliedRevision: null,
            staleBudgetMs: 0,
            clockOffsetMs: null,
          }),
        { timeoutMs: 5_000 },
      );
      await step('instances', ['instances', '--forget', 'srv_00000000000000aa', '--yes'], true);
      const instances = await runCli(['instances', '--json'], backend.env);
      expect(instances.json().changed).toBeUndefined();
      await step('context add', ['context', 'add', 'walk', '--database-url', backend.url], true);
      await step('context add', ['context', 'add', 'walk', '--database-url', backend.url], false);
      await step('context use', ['context', 'use', 'walk'], true);
      await step('context use', ['context', 'use', 'walk'], false);
      await step('context remove', ['context', 'remove', 'walk'], true);
      await step('context remove', ['context', 'remove', 'walk'], false);
    } finally {
      await db?.close();
    }
    if (backendAvailable('postgresql')) {
      const postgres = await createBackend('postgresql', { migrated: true });
      try {
        const first = await runCli(['db', 'roles', '--apply', '--json'], postgres.env);
        expect(first.code, first.stderr).toBe(0);
        expect(typeof first.json().changed).toBe('boolean');
        const again = await runCli(['db', 'roles', '--apply', '--json'], postgres.env);
        expect(again.json().changed).toBe(false);
        walked.add('db roles');
      } finally {
        await postgres.dispose();
      }
    }
    // Every changing command is walked: one added without a step here fails this test.
    expect([...walked].sort()).toEqual(changingCommands().filter((path) => path !== 'db roles' || backendAvailable('postgresql')));
  });
});

describe('37.9: --context beats DATABASE_URL, and says so', () => {
  let intended: TestBackend;
  let stray: TestBackend;
  afterAll(async () => {
    await intended?.dispose();
    await stray?.dispose();
  });

  it('a partner created with --context lands in the context\'s database, with one line on stderr naming the conflict', async () => {
    intended = await createBackend('sqlite', { migrated: true });
    stray = await createBackend('sqlite', { migrated: true });
    // The contexts live with the stray environment's config folder; DATABASE_URL names the stray database.
    expect((await runCli(['context', 'add', 'prod', '--database-url', intended.url], stray.env)).code).toBe(0);
    const created = await runCli(['--context', 'prod', 'create-partner', '--name', 'Right Place', '--json'], stray.env);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^partnerctl: note: --context prod wins over DATABASE_URL/)]);
    const names = async (env: NodeJS.ProcessEnv) =>
      ((await runCli(['list-partners', '--json'], env)).json().partners as { name: string }[]).map((partner) => partner.name);
    expect(await names(intended.env)).toEqual(['Right Place']);
    expect(await names(stray.env)).toEqual([]);
    const shown = (await runCli(['--context', 'prod', 'context', 'show', '--json'], stray.env)).json();
    expect(shown.database).toMatchObject({ source: 'context', url: intended.url.replace(/^file:/, '') });
    expect(shown.database.why).toMatch(/named by --context: a flag wins over DATABASE_URL \(set, not used\)/);
    // --database-url, a flag too, still wins over --context; without --context, DATABASE_URL wins over the current context.
    const byUrl = await runCli(['--context', 'prod', '--database-url', stray.url, 'list-partners', '--json'], stray.env);
    expect(byUrl.json().partners).toEqual([]);
    expect(byUrl.stderr).toBe('');
    expect((await runCli(['context', 'use', 'prod'], stray.env)).code).toBe(0);
    const byEnv = await runCli(['list-partners', '--json'], stray.env);
    expect(byEnv.json().partners).toEqual([]);
    expect(byEnv.stderr).toBe('');
  });
});

describe('37.12: db migrate creates a missing SQLite path only with --create', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('a mistyped path: exit 3 database_not_found naming --create, nothing created (folders included); --create creates it', async () => {
    backend = await createBackend('sqlite');
    const typo = join(backend.dir, 'tpyo', 'nested', 'partnerctl.db');
    for (const env of [{ ...backend.env, DATABASE_URL: `file:${typo}` }, backend.env]) {
      const args = env === backend.env ? ['--database-url', typo, 'db', 'migrate'] : ['db', 'migrate'];
      const refused = await runCli(args, env);
      expect(refused.code, refused.stderr).toBe(3);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      expect(refused.stderr).toMatch(/^partnerctl: database_not_found: no SQLite database at .*tpyo.*hint: .*'partnerctl db migrate --create'/);
      expect(existsSync(join(backend.dir, 'tpyo'))).toBe(false);
    }
    const created = await runCli(['--database-url', typo, 'db', 'migrate', '--create', '--json'], backend.env);
    expect(created.code, created.stderr).toBe(0);
    expect(created.json()).toMatchObject({ created: true, changed: true });
    expect(existsSync(typo)).toBe(true);
    const again = await runCli(['--database-url', typo, 'db', 'migrate', '--create', '--json'], backend.env);
    expect(again.json()).toMatchObject({ created: false, applied: [], changed: false });
    // An existing file needs no --create.
    expect((await runCli(['--database-url', typo, 'db', 'migrate', '--json'], backend.env)).json().changed).toBe(false);
  });
});

describe('37.17: explain of an expired test token names its own lifetime', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('a --ttl 1 test token refused as expired: "minted to live 1 s", never "tokens live 15 minutes"', async () => {
    backend = await createBackend('sqlite');
    const opened = await openMigrated(backend);
    const clock = new TestClock(Date.now());
    const db: Database = { ...opened, clock };
    const upstream = await startUpstream();
    const t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url }, { clock });
    try {
      const seeded = await seedPartner(db, ['acme']);
      const test = await mintTestToken(db, { actor: 'test-runner' }, t.keys, seeded.partnerId, 1);
      // The gate decides from a snapshot read now (as a running server does within its 1 s bound).
      await t.access.refresh();
      expect((await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(test.accessToken) })).statusCode).toBe(200);
      clock.advance(2_000);
      await t.access.refresh();
      const refused = await t.inject({ method: 'GET', url: '/public/v1/prices?company_id=acme', headers: bearer(test.accessToken) });
      expect(refused.statusCode, refused.body).toBe(401);
      const requestId = (refused.json() as { error: { request_id: string } }).error.request_id;
      expect(await t.services.decisions.flush()).toBe(true);
      const explained = await runCli(['explain', requestId, '--json'], backend.env);
      expect(explained.code, explained.stderr).toBe(0);
      expect(explained.json().reason).toBe('token_expired');
      expect(explained.json().explanation).toMatch(/a test token minted to live 1 s, until \S+Z\)/);
      expect(explained.json().explanation).not.toMatch(/15 minutes/);
    } finally {
      await t.close();
      await upstream.close();
      await opened.close();
    }
  });
});

describe('37.17: a secret given to lookup or exposure as an argument is warned about', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('a secret key or a token in argv: one warning on stderr naming the history and stdin; not from a pipe, not for an access key', async () => {
    backend = await createBackend('sqlite', { migrated: true });
    const partner = (await runCli(['create-partner', '--name', 'Argv Leak', '--json'], backend.env)).json().partner_id as string;
    const keys = (await runCli(['issue-keys', partner, '--json'], backend.env)).json();
    const token = (await runCli(['mint-test-token', partner, '--json'], backend.env)).json().access_token as string;
    for (const [command, value] of [
      ['lookup', keys.secret_key],
      ['exposure', keys.secret_key],
      ['lookup', token],
    ] as const) {
      const result = await runCli([command, value, '--json'], backend.env);
      expect(result.code, result.stderr).toBe(0);
      const warnings = result.stderr.split('\n').filter((line) => line.startsWith('partnerctl: warning:'));
      expect(warnings, `${command} ${value.slice(0, 12)}`).toEqual([expect.stringMatching(new RegExp(`in this shell's history.*partnerctl ${command} -`))]);
      expect(result.stderr).not.toContain(value.slice(10));
    }
    for (const quiet of [
      await runCli(['lookup', '-', '--json'], backend.env, { input: keys.secret_key }),
      await runCli(['lookup', keys.access_key, '--json'], backend.env),
      await runCli(['lookup', keys.key_pair_id, '--json'], backend.env),
    ]) {
      expect(quiet.code, quiet.stderr).toBe(0);
      expect(quiet.stderr).not.toMatch(/warning/);
    }
  });
});
