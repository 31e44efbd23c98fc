// Issue 37's defects that a hostile tester and a new on-call engineer found, each named after its point.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/config.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe('37.8: a database password is never printed in part', () => {
  it.each([
    ['postgresql://alice:Tr0ub4dor@Horse-Battery-Staple@db.example/partners', 'postgresql://alice:***@db.example/partners'],
    ['postgresql://alice:a:b@c@db.example:5432/partners?sslmode=require', 'postgresql://alice:***@db.example:5432/partners?sslmode=require'],
    ['postgresql://alice:p%40ss@db.example/partners', 'postgresql://alice:***@db.example/partners'],
    ['postgresql://alice@db.example/partners', 'postgresql://alice@db.example/partners'],
    ['postgresql://db.example/partners?user=alice&password=s3cr@t&sslmode=require', 'postgresql://db.example/partners?user=alice&password=***&sslmode=require'],
  ])('%s', (url, shown) => {
    expect(redactUrl(url)).toBe(shown);
  });

  it('db status and context add show the URL without any of its password', async () => {
    const home = mkdtempSync(join(tmpdir(), 'partnerctl-37-8-'));
    try {
      const url = 'postgresql://alice:Tr0ub4dor@Horse-Battery-Staple@127.0.0.1:1/partners';
      const env = { XDG_CONFIG_HOME: home, XDG_DATA_HOME: home, DATABASE_URL: url, PARTNERCTL_SIGNING_KEY_FILE: join(home, 'keys.json') };
      const status = await runCli(['db', 'status'], env);
      expect(status.code).not.toBe(0);
      const added = await runCli(['context', 'add', 'prod', '--database-url', url], { XDG_CONFIG_HOME: home, XDG_DATA_HOME: home });
      const listed = await runCli(['context', 'list'], { XDG_CONFIG_HOME: home, XDG_DATA_HOME: home });
      for (const printed of [status.stdout, status.stderr, added.stdout, added.stderr, listed.stdout, listed.stderr]) {
        expect(printed).not.toMatch(/Tr0ub4dor|Horse-Battery-Staple/);
      }
      expect(listed.stdout).toContain('alice:***@127.0.0.1:1/partners');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('37.10: an input file that is a folder or missing is a one-line usage error', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('map-company --from-file and apply -f: exit 2, one line naming the path, nothing changed', async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Folder Test'], backend.env)).code).toBe(0);
    const folder = backend.dir;
    const missing = join(backend.dir, 'no-such-file.txt');
    for (const args of [
      ['map-company', 'Folder Test', '--from-file', folder],
      ['map-company', 'Folder Test', '--from-file', missing],
      ['apply', '-f', folder, '--yes'],
      ['apply', '-f', missing, '--yes'],
    ]) {
      const result = await runCli(args, backend.env);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(2);
      expect(result.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(result.stderr).not.toMatch(/internal_error|EISDIR|this is a bug/);
      expect(result.stderr).toContain(args.at(-1) === '--yes' ? args.at(-2)! : args.at(-1)!);
    }
    const shown = await runCli(['show-partner', 'Folder Test', '--json'], backend.env);
    expect(JSON.stringify(shown.json())).not.toContain('"companies":[{');
  });
});

describe('37.17: explain of something that is not a request id is a usage error', () => {
  let backend: TestBackend;
  afterAll(async () => backend?.dispose());

  it('exit 2, one line', async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await runCli(['create-partner', '--name', 'Explain Test'], backend.env)).code).toBe(0);
    const result = await runCli(['explain', 'not-a-uuid'], backend.env);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
  });
});
