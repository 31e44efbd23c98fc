import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as runCommandLine } from '../../src/cli/run.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

/** A command line in-process against a terminal of the given width (stdout a TTY). */
async function onTerminal(args: string[], env: NodeJS.ProcessEnv, columns: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  err.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await runCommandLine(['node', 'partnerctl', ...args], {
    out,
    err,
    in: Readable.from(['']),
    env: { ...env },
    inIsTTY: false,
    outIsTTY: true,
    columns,
    signals: new EventEmitter(),
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { code, stdout, stderr };
}

const SHORT_TIME = /\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b/;

// Table layout is the CLI's, the same on both backends: SQLite here.
describe('tables at 80 columns keep ids, times and actions whole (defect 12)', () => {
  let backend: TestBackend;
  const pairs: string[] = [];
  const partners: string[] = [];

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    for (const name of ['A partner with a really very long name indeed', 'Beta Rates International Holdings']) {
      const created = await runCli(['create-partner', '--name', name, '--json'], backend.env);
      partners.push(created.json().partner_id);
      pairs.push((await runCli(['issue-keys', created.json().partner_id, '--json'], backend.env)).json().key_pair_id);
      expect((await runCli(['set-limits', created.json().partner_id, '--rate', '10/s', '--burst', '20'], backend.env)).code).toBe(0);
    }
    const file = new Database(join(backend.dir, 'partnerctl.db'));
    const insert = file.prepare(
      'INSERT INTO usage_hours (partner_id, company_id, period_start, accepted, client_errors, server_errors, rate_limited, engine_ms_sum) VALUES (?, ?, ?, 123456, 7890, 12, 345, 987654.3)',
    );
    const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000).toISOString();
    for (const id of partners) insert.run(id, 'a-company-with-a-long-identifier', hour);
    file.close();
  });
  afterAll(() => backend.dispose());

  const fits = (text: string, width: number) => {
    for (const line of text.trimEnd().split('\n')) expect([...line].length, line).toBeLessThanOrEqual(width);
  };

  it('list-keys shows every key-pair id whole at 80 and 120 columns', async () => {
    for (const width of [80, 120]) {
      const { code, stdout } = await onTerminal(['list-keys'], backend.env, width);
      expect(code).toBe(0);
      fits(stdout, width);
      for (const id of pairs) expect(stdout).toContain(id);
      expect(stdout).toMatch(SHORT_TIME);
      expect(stdout).not.toMatch(/\d{4}-\d{2}-\d{2}…|\d{4}-\d{2}-…/);
    }
    const wide = await onTerminal(['list-keys', '--wide'], backend.env, 80);
    expect(wide.stdout).toContain('LAST REFUSED');
    expect(wide.stdout).toContain('A partner with a really very long name indeed');
    expect(wide.stdout).toMatch(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/);
  });

  it('audit shows whole times (to the minute) and whole actions at 80 columns', async () => {
    const { code, stdout } = await onTerminal(['audit'], backend.env, 80);
    expect(code).toBe(0);
    fits(stdout, 80);
    const rows = stdout.trimEnd().split('\n').slice(2);
    expect(rows.length).toBeGreaterThanOrEqual(6);
    for (const row of rows) expect(row).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2} {2}(partner\.created|keys\.issued|partner\.limits_set)\b/);
    expect((await onTerminal(['audit', '--wide'], backend.env, 80)).stdout).toContain('"rate"');
  });

  it('usage shows whole times and counts at 80 columns, by company too', async () => {
    for (const args of [['usage'], ['usage', '--by', 'company'], ['usage', '--by', 'hour']]) {
      const { code, stdout } = await onTerminal(args, backend.env, 80);
      expect(code, args.join(' ')).toBe(0);
      fits(stdout, 80);
      expect(stdout).toMatch(SHORT_TIME);
      expect(stdout).toContain('131358');
      expect(stdout).not.toMatch(/\d{4}-\d{2}-\d{2}[T ]?\d*…/);
    }
    const wide = await onTerminal(['usage', '--by', 'company', '--wide'], backend.env, 80);
    expect(wide.stdout).toContain('ENGINE S');
    expect(wide.stdout).toContain('a-company-with-a-long-identifier');
  });
});
