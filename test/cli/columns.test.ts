import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

/** A command line in-process against a terminal of the given width (stdout a TTY). */
async function onTerminal(args: string[], env: NodeJS.ProcessEnv, columns: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const result = await runCli(args, env, { outIsTTY: true, columns });
  return { code: result.code ?? 1, stdout: result.stdout, stderr: result.stderr };
}

const SHORT_TIME = /\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b/;

// Table layout is the CLI's, the same on both backends: SQLite here.
describe('tables at 80 columns keep ids, times and actions whole (defect 12)', () => {
  let backend: TestBackend;
  const pairs: string[] = [];
  const partners: string[] = [];

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
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

  it('audit shows whole times (to the minute), whole actions and whole partner ids at 80 columns', async () => {
    const { code, stdout } = await onTerminal(['audit'], backend.env, 80);
    expect(code).toBe(0);
    fits(stdout, 80);
    // Too narrow for a table of whole ids: a record at a time.
    const times = stdout.split('\n').filter((line) => line.startsWith('AT '));
    expect(times.length).toBeGreaterThanOrEqual(6);
    for (const line of times) expect(line).toMatch(/^AT +\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/);
    for (const line of stdout.split('\n').filter((each) => each.startsWith('ACTION '))) expect(line).toMatch(/^ACTION +(partner\.created|keys\.issued|partner\.limits_set)$/);
    for (const id of partners) expect(stdout).toContain(`(${id})`);
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

// Every table on a terminal: one time format (to the minute, never cut), partner ids whole at any width, and
// audit details a summary to read (whole in --wide and --json).
describe('tables keep their promise (issue 30, point 9)', () => {
  let backend: TestBackend;
  const partners: string[] = [];
  const ISO = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/;
  const CUT_TIME = /\d{4}-\d{2}-\d{2}[T ]?[\d:]*…/;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    for (const name of ['A partner whose name is far longer than any column could ever hope to hold whole', 'Short']) {
      const created = await runCli(['create-partner', '--name', name, '--json'], backend.env);
      partners.push(created.json().partner_id);
      expect((await runCli(['map-company', name, '--company', `c-${partners.length}`], backend.env)).code).toBe(0);
    }
    expect((await runCli(['webhooks', 'add', '--url', 'https://ops.example.com/hooks'], backend.env)).code).toBe(0);
    for (const id of partners) expect((await runCli(['issue-keys', id], backend.env)).code).toBe(0);
    expect((await runCli(['rotate-keys', partners[0]!, '--overlap', '7d'], backend.env)).code).toBe(0);
    // A leak report with a long URL: the widest cell of list-keys.
    const file = new Database(join(backend.dir, 'partnerctl.db'));
    file
      .prepare('UPDATE key_pairs SET leak_reported_at = created_at, leak_url = ? WHERE partner_id = ?')
      .run(`https://github.com/acme/some-repository/blob/${'f'.repeat(40)}/config/settings.yaml#L12`, partners[0]);
    file.close();
  });
  afterAll(() => backend.dispose());

  it('shows every time to the minute, whole, in every table at 80 columns', async () => {
    const commands = [
      ['list-partners'], ['show-partner', partners[0]!], ['list-companies', partners[0]!], ['list-keys'], ['audit'],
      ['webhooks', 'list'], ['webhooks', 'deliveries'],
    ];
    for (const args of commands) {
      const { code, stdout } = await onTerminal(args, backend.env, 80);
      expect(code, args.join(' ')).toBe(0);
      expect(stdout, args.join(' ')).toMatch(SHORT_TIME);
      expect(stdout, args.join(' ')).not.toMatch(ISO);
      // A summary of audit details is free text, cut where it must be (whole with --wide and in --json).
      expect(stdout.split('\n').filter((line) => !line.startsWith('DETAILS ')).join('\n'), args.join(' ')).not.toMatch(CUT_TIME);
    }
    // Key/value blocks are tables of two columns: show-partner's fields and lookup's, the same way.
    const shown = (await onTerminal(['show-partner', partners[0]!], backend.env, 80)).stdout;
    expect(shown).toMatch(/^ {2}created +\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/m);
    const pair = (await runCli(['show-partner', partners[0]!, '--json'], backend.env)).json().key_pairs[0].key_pair_id as string;
    const looked = await onTerminal(['lookup', pair], backend.env, 80);
    expect(looked.code, looked.stderr).toBe(0);
    expect(looked.stdout).toMatch(/^ {2}created +\d{4}-\d{2}-\d{2} \d{2}:\d{2}$/m);
    expect(looked.stdout).not.toMatch(ISO);
    expect((await runCli(['show-partner', partners[0]!], backend.env)).stdout).toMatch(/^ {2}created +\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/m);
    // --wide and pipes carry the whole time.
    expect((await onTerminal(['webhooks', 'list'], backend.env, 80)).stdout).not.toMatch(ISO);
    expect((await runCli(['webhooks', 'list'], backend.env)).stdout).toMatch(ISO);
  });

  it('never cuts a partner id in list-keys where the width allows it (120 and 200 columns)', async () => {
    for (const args of [['list-keys']]) {
      for (const width of [120, 200]) {
        const { stdout, stderr } = await onTerminal(args, backend.env, width);
        expect(stderr).toBe('');
        for (const line of stdout.trimEnd().split('\n')) expect([...line].length, line).toBeLessThanOrEqual(width);
        for (const id of partners) expect(stdout, `${args.join(' ')} at ${width}`).toContain(`(${id})`);
      }
    }
    const keys = (await onTerminal(['list-keys'], backend.env, 200)).stdout;
    expect(keys).toMatch(/ {2}A[^\n]*… \(ptn_\w{26}\) {2}/);
  });

  it("summarises audit details at 80 columns; --wide and --json give the whole", async () => {
    const { stdout } = await onTerminal(['audit', partners[0]!, '--action', 'keys.rotated'], backend.env, 80);
    expect(stdout).toMatch(/^DETAILS +key_pair=kp_\w{6}… /m);
    expect(stdout).not.toContain('{"');
    // Wider, the rest of the summary: short ids, times to the minute, the overlap as it was asked for.
    const roomy = (await onTerminal(['audit', partners[0]!, '--action', 'keys.rotated'], backend.env, 300)).stdout;
    expect(roomy).toMatch(/ {2}key_pair=kp_\w{6}… retiring_key_pair=kp_\w{6}… retires=\d{4}-\d{2}-\d{2} \d{2}:\d{2} after_switch=\S+\n/);
    expect(roomy).not.toMatch(/access_key|revoked_issued_tokens/);
    const wide = (await onTerminal(['audit', partners[0]!, '--action', 'keys.rotated', '--wide'], backend.env, 80)).stdout;
    expect(wide).toContain('{"key_pair_id":"kp_');
    const json = (await runCli(['audit', partners[0]!, '--action', 'keys.rotated', '--json'], backend.env)).json();
    expect(json.events[0].details).toMatchObject({ key_pair_id: expect.stringMatching(/^kp_/), access_key: expect.any(String) });
  });
});
