import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { BIN, runCli, runShell } from '../support/cli.js';

/** Runs a shell pipeline and returns what its last stage printed. */

describe('output through a pipe', () => {
  let backend: TestBackend;
  const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}`;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    const created = await runCli(['create-partner', '--name', 'Pipe Partner', '--json'], backend.env);
    expect(created.code, created.stderr).toBe(0);
    // 3,000 audit events, written straight into the file: a long trail without 3,000 processes.
    const file = new Database(join(backend.dir, 'partnerctl.db'));
    const insert = file.prepare(
      "INSERT INTO audit_events (actor, action, partner_id, details, at) VALUES ('seeder', 'company.mapped', ?, ?, ?)",
    );
    const partnerId = created.json().partner_id as string;
    file.transaction(() => {
      for (let i = 0; i < 3000; i++) {
        insert.run(partnerId, JSON.stringify({ company_id: `company-${i}-${'x'.repeat(250)}` }), new Date(Date.now() - i).toISOString());
      }
    })();
    file.close();
  });
  afterAll(() => backend.dispose());

  it.each([
    ['JSON', 'audit --limit 1000 --json'],
    ['a table', 'audit --limit 1000'],
  ])('delivers every byte of a large output (%s) to a slow reader, then exits 0', async (_what, args) => {
    const file = join(backend.dir, `out-${args.length}.txt`);
    const whole = await runShell(`${cli} ${args} > ${file}`, backend.env);
    expect(whole.code, whole.stderr).toBe(0);
    const expected = readFileSync(file, 'utf8');
    expect(Buffer.byteLength(expected)).toBeGreaterThan(300 * 1024);

    // The reader starts late and reads slowly: the CLI finishes long before the pipe is drained.
    const slow = await runShell(`${cli} ${args} | (sleep 1; while IFS= read -r line; do printf '%s\\n' "$line"; done)`, backend.env);
    expect(slow.code, slow.stderr).toBe(0);
    expect(slow.stdout.length).toBe(expected.length);
    expect(slow.stdout).toBe(expected);
    if (args.endsWith('--json')) expect(JSON.parse(slow.stdout).events).toHaveLength(1000);
  });

  it('stops quietly, exit 0, when the reader goes away early (| head)', async () => {
    const result = await runShell(`${cli} audit --limit 1000 --json | head -c 100 > /dev/null`, backend.env);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
  });
});
