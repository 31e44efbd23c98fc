import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

// Raw control characters a terminal would act on: C0, DEL, C1 (U+009B is a CSI) and the bidi controls.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

describe('what reaches the terminal (SQLite, the real binary)', () => {
  let backend: TestBackend;
  let partnerId: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    const created = await runCli(['create-partner', '--name', 'Plain', '--json'], backend.env);
    expect(created.code, created.stderr).toBe(0);
    partnerId = created.json().partner_id;
    // A name no command accepts today, as an older version or a hand edit may have left it.
    const file = new Database(join(backend.dir, 'partnerctl.db'));
    file.prepare('UPDATE partners SET name = ? WHERE id = ?').run('Evil\u009b2J\u202eeman\u2066\u001b]0;title\u0007', partnerId);
    file.close();
  });
  afterAll(() => backend.dispose());

  it('escapes C1 and bidi controls echoed in an error (defect 9)', async () => {
    const result = await runBinary(['lookup', 'x\u009b2J\u202ey\u2066z'], backend.env);
    expect(result.code).toBe(2);
    expect(result.stderr).not.toMatch(RAW);
    const named = await runBinary(['show-partner', 'x\u009b2J\u202ey\u2066z'], backend.env);
    expect(named.code).toBe(3);
    expect(named.stderr).not.toMatch(RAW);
    expect(named.stderr).toContain('x\\x9b2J\\u202ey\\u2066z');
  });

  it('escapes control characters of names from the database in tables, fields and JSON', async () => {
    for (const args of [['list-partners'], ['show-partner', partnerId], ['audit']]) {
      const result = await runBinary(args, backend.env);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout, args.join(' ')).not.toMatch(RAW);
    }
    const table = await runBinary(['list-partners'], backend.env);
    expect(table.stdout).toContain('Evil\\x9b2J\\u202eeman\\u2066\\x1b]0;title\\x07');
    const json = await runBinary(['list-partners', '--json'], backend.env);
    expect(json.stdout).not.toMatch(RAW);
    // Escaped as JSON escapes: the value is unchanged for a program.
    expect(json.json().partners[0].name).toBe('Evil\u009b2J\u202eeman\u2066\u001b]0;title\u0007');
  });

  it('escapes them in export (as YAML escapes: the same value) and leaves such names out of completion', async () => {
    const exported = await runBinary(['export'], backend.env);
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stdout).not.toMatch(RAW);
    const { parse } = await import('yaml');
    expect(parse(exported.stdout).partners.map((partner: { name: string }) => partner.name)).toContain('Evil\u009b2J\u202eeman\u2066\u001b]0;title\u0007');
    const completed = await runBinary(['__complete-partners', 'E'], backend.env);
    expect(completed.stdout).not.toMatch(RAW);
  });

  it('escapes them in usage errors too', async () => {
    const result = await runBinary(['list-partners', '--status', 'x\u009b\u202e'], backend.env);
    expect(result.code).toBe(2);
    expect(result.stderr).not.toMatch(RAW);
  });

  it('takes a pasted secret in its common wrappings, and never echoes more than a masked prefix of one (defect 8)', async () => {
    const other = await runCli(['create-partner', '--name', 'Secretive', '--json'], backend.env);
    const keys = (await runCli(['issue-keys', other.json().partner_id, '--json'], backend.env)).json();
    const secret = keys.secret_key as string;
    for (const pasted of [`"${secret}"`, `'${secret}'`, `SECRET=${secret}`, `export PARTNER_SECRET="${secret}";`, `Bearer ${secret}`,
      `Authorization: Bearer ${secret}`, `${secret},`, `"secret_key": "${secret}",`, `  ${secret}\n`]) {
      // The wrappings are the parser's matter: in-process, the same code as the binary's minus its start-up
      // (the binary itself is run on the last wrapping below).
      const result = await runCli(['lookup', pasted, '--json'], backend.env);
      expect(result.code, pasted).toBe(0);
      expect(result.json(), pasted).toMatchObject({ kind: 'secret_key', genuine: true, key_pair_id: keys.key_pair_id });
    }
    const body = secret.slice('pctl_sk_'.length, 'pctl_sk_'.length + 6);
    // Wrappings it does not know, and the same values as a partner: an error that shows at most a prefix.
    for (const args of [['lookup', `<${secret}>`], ['lookup', `x${secret}`], ['lookup', `secret is ${secret}`], ['show-partner', `x${secret}`],
      ['show-partner', `${secret.slice(8)}`], ['lookup', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl!']]) {
      for (const json of [[], ['--json']]) {
        const result = await runCli([...args, ...json], backend.env);
        expect(result.code, args.join(' ')).toBeGreaterThanOrEqual(2);
        expect(result.stderr, args.join(' ')).not.toContain(body);
        expect(result.stdout, args.join(' ')).not.toContain(body);
        expect(result.stderr).not.toContain('c2lnbmF0dXJl');
        expect(result.stderr).not.toMatch(/\n\s+at /);
      }
    }
    // The real binary, on a wrapping it takes and on one it refuses.
    const taken = await runBinary(['lookup', `  ${secret}\n`, '--json'], backend.env);
    expect(taken.code, taken.stderr).toBe(0);
    expect(taken.json()).toMatchObject({ kind: 'secret_key', genuine: true, key_pair_id: keys.key_pair_id });
    const refused = await runBinary(['lookup', `secret is ${secret}`], backend.env);
    expect(refused.code).toBeGreaterThanOrEqual(2);
    expect(refused.stderr + refused.stdout).not.toContain(body);
    expect(refused.stderr).not.toMatch(/\n\s+at /);
  });

  it('lookup says whose status it shows, and prints no Contain: when there is nothing to contain (a revoked pair)', async () => {
    const created = await runCli(['create-partner', '--name', 'Revoked Pair Co', '--json'], backend.env);
    const keys = (await runCli(['issue-keys', created.json().partner_id, '--json'], backend.env)).json();
    // A live pair's secret has something to contain; its access key alone (public by design) has not.
    const live = await runBinary(['lookup', keys.secret_key], backend.env);
    expect(live.code, live.stderr).toBe(0);
    expect(live.stdout).toMatch(/partner status +active/);
    expect(live.stdout).toMatch(/key pair status +active/);
    expect(live.stdout).toMatch(/^Contain: partnerctl rotate-keys /m);
    const accessKey = await runBinary(['lookup', keys.access_key], backend.env);
    expect(accessKey.code, accessKey.stderr).toBe(0);
    expect(accessKey.stdout).toMatch(/key pair status +active/);
    expect(accessKey.stdout).not.toContain('Contain:');
    expect((await runCli(['revoke-keys', created.json().partner_id, '--yes'], backend.env)).code).toBe(0);
    const revoked = await runBinary(['lookup', keys.access_key], backend.env);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(/partner status +active/);
    expect(revoked.stdout).toMatch(/key pair status +revoked/);
    expect(revoked.stdout).not.toContain('Contain:');
    expect(revoked.stdout).toMatch(/nothing to contain/i);
    expect((await runBinary(['lookup', keys.key_pair_id, '--json'], backend.env)).json()).toMatchObject({ status: 'revoked', contain: null });
  });
});
