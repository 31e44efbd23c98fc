import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

// Raw control characters a terminal would act on: C0, DEL, C1 (U+009B is a CSI) and the bidi controls.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this pattern's purpose
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

describe('what reaches the terminal (SQLite, the real binary)', () => {
  let backend: TestBackend;
  let partnerId: string;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
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
    expect(result.stderr).toContain('\\x9b2J\\u202ey\\u2066z');
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

  it('escapes them in usage errors too', async () => {
    const result = await runBinary(['list-partners', '--status', 'x\u009b\u202e'], backend.env);
    expect(result.code).toBe(2);
    expect(result.stderr).not.toMatch(RAW);
  });
});
