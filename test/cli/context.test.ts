// Contexts (`partnerctl context`, `--context`): stored per user with private modes, never printing a
// password, and chosen after --database-url and DATABASE_URL; `context show` verifies the login on
// PostgreSQL with the database itself.
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { adminQuery, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe('contexts (sqlite)', () => {
  let backend: TestBackend;
  let env: NodeJS.ProcessEnv;
  let other: string;
  beforeAll(async () => {
    backend = await createBackend('sqlite');
    // Commands below name the database (and the actor) only through a context.
    const { DATABASE_URL: _unused, PARTNERCTL_ACTOR: _actor, ...rest } = backend.env;
    env = rest;
    other = join(backend.dir, 'other.db');
    expect((await runCli(['--database-url', other, 'db', 'migrate', '--create'], env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('adds, lists, uses and removes contexts in a 0600 file in a 0700 folder under XDG_CONFIG_HOME', async () => {
    const added = await runCli(['context', 'add', 'main', '--database-url', backend.url, '--actor', 'alice', '--json'], env);
    expect(added.code, added.stderr).toBe(0);
    expect(added.json()).toMatchObject({ name: 'main', actor: 'alice', current: false, changed: true });
    expect((await runCli(['context', 'add', 'main', '--database-url', backend.url, '--actor', 'alice', '--json'], env)).json().changed).toBe(false);
    expect((await runCli(['context', 'add', 'other', '--database-url', other], env)).code).toBe(0);
    const folder = join(backend.dir, 'config', 'partnerctl');
    expect(statSync(folder).mode & 0o777).toBe(0o700);
    expect(statSync(join(folder, 'contexts.json')).mode & 0o777).toBe(0o600);

    expect((await runCli(['context', 'use', 'main'], env)).code).toBe(0);
    const listed = (await runCli(['context', 'list', '--json'], env)).json();
    expect(listed.current).toBe('main');
    expect(listed.contexts.map((context: { name: string; current: boolean }) => [context.name, context.current])).toEqual([
      ['main', true],
      ['other', false],
    ]);

    // The current context's database and actor: the partner lands there, the audit names alice.
    expect((await runCli(['create-partner', '--name', 'In Main'], env)).code).toBe(0);
    const audit = (await runCli(['audit', '--json'], { ...backend.env })).json();
    expect(audit.events.at(-1)).toMatchObject({ action: 'partner.created', actor: 'alice' });
    // --context picks another for one command; an unknown one is refused even when a URL wins over it.
    expect((await runCli(['--context', 'other', 'list-partners', '--json'], env)).json().partners).toEqual([]);
    const unknown = await runCli(['--context', 'typo', 'list-partners'], { ...env, DATABASE_URL: backend.url });
    expect([unknown.code, unknown.stderr]).toEqual([3, expect.stringMatching(/^partnerctl: not_found: no context 'typo' in /)]);

    const removed = await runCli(['context', 'remove', 'other', '--json'], env);
    expect(removed.json()).toMatchObject({ removed: true, changed: true });
    expect((await runCli(['context', 'remove', 'other', '--json'], env)).json()).toMatchObject({ removed: false, changed: false });
    expect((await runCli(['context', 'use', 'other'], env)).code).toBe(3);
  });

  it('lets --database-url and DATABASE_URL win over the context, and show says which one is in effect and why', async () => {
    expect((await runCli(['context', 'use', 'main'], env)).code).toBe(0);
    const viaContext = (await runCli(['context', 'show', '--json'], env)).json();
    expect(viaContext).toMatchObject({
      context: { name: 'main', chosen_by: 'current', in_effect: true },
      database: { provider: 'sqlite', source: 'context', url: join(backend.dir, 'partnerctl.db') },
      actor: { name: 'alice', source: 'context main' },
      principal: null,
      verified: true,
    });
    const viaEnv = (await runCli(['context', 'show', '--json'], { ...env, DATABASE_URL: `file:${other}` })).json();
    expect(viaEnv.database).toMatchObject({ source: 'env', url: other });
    expect(viaEnv.database.why).toMatch(/DATABASE_URL is set and wins over the current context \(context main not used\)/);
    expect(viaEnv.context).toMatchObject({ name: 'main', in_effect: false });
    // Not in effect, the context's actor does not apply.
    expect(viaEnv.actor.source).not.toBe('context main');
    const viaFlag = await runCli(['--database-url', other, 'context', 'show'], { ...env, DATABASE_URL: backend.url });
    expect(viaFlag.stdout).toMatch(/why\s+--database-url wins over DATABASE_URL and any context/);
    expect((await runCli(['--database-url', other, 'list-partners', '--json'], env)).json().partners).toEqual([]);
  });

  it('never prints a password, in text or JSON, from list, show, add or use', async () => {
    const url = 'postgresql://bob:hunter2-secret@127.0.0.1:1/none?password=other-secret&sslmode=disable';
    const outputs = [
      await runCli(['context', 'add', 'secretive', '--database-url', url], env),
      await runCli(['context', 'add', 'secretive', '--database-url', url, '--json'], env),
      await runCli(['context', 'list'], env),
      await runCli(['context', 'list', '--json'], env),
      await runCli(['--context', 'secretive', 'context', 'show'], env),
      await runCli(['--context', 'secretive', 'context', 'show', '--json'], env),
      await runCli(['context', 'use', 'secretive', '--json'], env),
      await runCli(['context', 'show'], env),
    ];
    for (const result of outputs) {
      expect(`${result.stdout}${result.stderr}`).not.toMatch(/hunter2|other-secret/);
    }
    expect(outputs[3]!.json().contexts.find((context: { name: string }) => context.name === 'secretive').database_url).toBe(
      'postgresql://bob:***@127.0.0.1:1/none?password=***&sslmode=disable',
    );
    // Unreachable: show says so, and still exits 0.
    expect(outputs[5]!.json()).toMatchObject({ verified: false, problem: expect.stringMatching(/^database_unavailable: /) });
    // The file holds what was given (it is the user's own, mode 0600).
    expect(readFileSync(join(backend.dir, 'config', 'partnerctl', 'contexts.json'), 'utf8')).toContain('hunter2-secret');
    expect((await runCli(['context', 'remove', 'secretive'], env)).code).toBe(0);
  });
});

describe.skipIf(!backendAvailable('postgresql'))('context show on PostgreSQL', () => {
  let backend: TestBackend;
  const login = `pctl_ctx_${process.pid}_${randomBytes(3).toString('hex')}`;
  beforeAll(async () => {
    backend = await createBackend('postgresql', { migrated: true });
    expect((await runCli(['db', 'roles', '--apply'], backend.env)).code).toBe(0);
    await adminQuery(backend.url, `CREATE ROLE ${login} LOGIN PASSWORD 'pg-secret-pw' IN ROLE partnerctl_oncall`);
  });
  afterAll(async () => {
    await backend?.dispose();
    const admin = inject('postgresAdminUrl');
    if (admin) await adminQuery(admin, `DROP ROLE IF EXISTS ${login}`);
  });

  it('names the login and the roles the database itself reports, not what the URL claims', async () => {
    const { DATABASE_URL: _unused, ...env } = backend.env;
    const url = new URL(backend.url);
    url.username = login;
    url.password = 'pg-secret-pw';
    expect((await runCli(['context', 'add', 'oncall', '--database-url', url.toString(), '--actor', 'carol'], env)).code).toBe(0);
    const shown = await runCli(['--context', 'oncall', 'context', 'show', '--json'], env);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.json()).toMatchObject({
      database: { provider: 'postgresql', source: 'context' },
      principal: { login, roles: ['partnerctl_support', 'partnerctl_oncall'], superuser: false },
      verified: true,
    });
    const text = await runCli(['--context', 'oncall', 'context', 'show'], env);
    expect(text.stdout).toMatch(new RegExp(`login\\s+${login} \\(verified by the database\\)`));
    expect(text.stdout).toMatch(/role\s+partnerctl_support, partnerctl_oncall/);
    expect(`${shown.stdout}${text.stdout}`).not.toContain('pg-secret-pw');
  });
});
