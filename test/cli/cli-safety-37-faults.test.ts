// Issue 37's CLI safety points that need a fault from outside the process: a PostgreSQL connection cut at
// COMMIT by a relay of the test's own (37.6), and SQLite migrations from several processes at once (37.17).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';
import { TcpRelay } from '../support/relay.js';

describe.skipIf(!backendAvailable('postgresql'))('37.6: --secret-to keeps the only copy of a secret when the COMMIT\'s outcome is unknown', () => {
  let backend: TestBackend;
  let relay: TcpRelay;
  let through: NodeJS.ProcessEnv;
  const cli = (...args: string[]) => runCli(args, backend.env);

  beforeAll(async () => {
    backend = await createBackend('postgresql', { migrated: true });
    const target = new URL(backend.url);
    relay = await TcpRelay.start(target.hostname, Number(target.port || 5432));
    through = { ...backend.env, DATABASE_URL: TcpRelay.through(backend.url, relay) };
  });
  afterAll(async () => {
    await relay?.close();
    await backend?.dispose();
  });

  it('cut at COMMIT (the database committed, the CLI never heard): exit 5, the file kept, the error names the read-only check', async () => {
    const partner = (await cli('create-partner', '--name', 'Cut At Commit', '--json')).json().partner_id as string;
    const file = join(backend.dir, 'cut-at-commit.json');
    const fired = relay.trapStatement({ after: /^INSERT INTO key_pairs/, at: /^COMMIT/, action: 'cut' });
    const issued = await runCli(['issue-keys', partner, '--secret-to', file, '--json'], through);
    await fired;
    expect(issued.code, issued.stderr).toBe(5);
    expect(issued.stderr.trim().split('\n')).toHaveLength(1);
    expect(issued.stderr).toMatch(/^partnerctl: database_unavailable: .*while the change was committing: it may have committed/);
    expect(issued.stderr).toContain(file);
    expect(issued.stderr).toContain(`'partnerctl show-partner ${partner}'`);
    expect(issued.json().error.code).toBe('database_unavailable');
    // It did commit: the file holds the only copy of the active pair's secret, and it works.
    expect(existsSync(file)).toBe(true);
    const handed = JSON.parse(readFileSync(file, 'utf8')).keys[0];
    const shown = (await cli('show-partner', partner, '--json')).json();
    expect(shown.key_pairs).toEqual([expect.objectContaining({ key_pair_id: handed.key_pair_id, status: 'active' })]);
    expect(issued.stderr).toContain(handed.key_pair_id);
    const looked = (await runCli(['lookup', '-', '--json'], backend.env, { input: handed.secret_key })).json();
    expect(looked).toMatchObject({ key_pair_id: handed.key_pair_id, genuine: true, accepted: true });
  });

  it('cut before COMMIT (rolled back for sure): exit 5, nothing issued, the file removed', async () => {
    const partner = (await cli('create-partner', '--name', 'Cut Before Commit', '--json')).json().partner_id as string;
    const file = join(backend.dir, 'cut-before-commit.json');
    const fired = relay.trapStatement({ at: /^INSERT INTO key_pairs/, action: 'cut' });
    const issued = await runCli(['issue-keys', partner, '--secret-to', file], through);
    await fired;
    expect(issued.code, issued.stderr).toBe(5);
    expect(issued.stderr).not.toMatch(/may have committed|is kept/);
    expect(existsSync(file)).toBe(false);
    expect((await cli('show-partner', partner, '--json')).json().key_pairs).toEqual([]);
  });
});

describe('37.17: no migrate-lock file is left beside the database', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('three processes migrating one new file at once: each migration applied once, nothing left but the database', async () => {
    backend = await createBackend('sqlite');
    const file = join(backend.dir, 'fresh', 'partnerctl.db');
    const env = { ...backend.env, DATABASE_URL: `file:${file}` };
    const runs = await Promise.all([1, 2, 3].map(() => runBinary(['db', 'migrate', '--create', '--json'], env)));
    for (const run of runs) expect(run.code, run.stderr).toBe(0);
    const applied = runs.flatMap((run) => run.json().applied as string[]);
    expect(applied.length).toBeGreaterThan(0);
    expect(new Set(applied).size).toBe(applied.length);
    expect((await runCli(['db', 'status', '--json'], env)).json().up_to_date).toBe(true);
    expect(readdirSync(join(backend.dir, 'fresh'))).toEqual(['partnerctl.db']);
    // A re-run on the existing file leaves nothing either.
    expect((await runCli(['db', 'migrate', '--json'], env)).json().changed).toBe(false);
    expect(readdirSync(join(backend.dir, 'fresh'))).toEqual(['partnerctl.db']);
  });
});
