import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { duplicateJsonKey } from '../../src/cli/commands/runbooks.js';
import { createBackend, type TestBackend } from '../support/backends.js';
import { BIN, runBinary, runCli, runShell } from '../support/cli.js';

// What apply and --from-file refuse before touching the database (the same on both backends: SQLite here).
describe('documents apply and --from-file refuse (SQLite)', () => {
  let backend: TestBackend;
  const cli = (...args: string[]) => runCli(args, backend.env);
  const file = (name: string, content: string | Buffer) => {
    const path = join(backend.dir, name);
    writeFileSync(path, content);
    return path;
  };
  const partnerCount = async () => (await cli('list-partners', '--json')).json().partners.length as number;

  beforeAll(async () => {
    backend = await createBackend('sqlite', { migrated: true });
    expect((await cli('create-partner', '--name', 'Existing')).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('refuses a JSON document with a duplicated key, naming its path, as YAML does (defect 10)', async () => {
    const path = file('dup.json', '{"partners": [{"name": "Existing", "status": "active", "status": "disabled"}]}');
    for (const args of [['apply', '-f', path], ['apply', '-f', path, '--dry-run']]) {
      const result = await runBinary(args, backend.env);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/^partnerctl: invalid_argument: -f .*dup\.json: not valid JSON: duplicate key at partners\[0\]\.status; nothing was changed/);
    }
    expect((await cli('show-partner', 'Existing', '--json')).json().status).toBe('active');
    const top = await cli('apply', '-f', file('dup-top.json', '{"partners": [], "partners": [{"name": "X"}]}'));
    expect(top.code).toBe(2);
    expect(top.stderr).toContain('duplicate key at partners;');
    expect(await partnerCount()).toBe(1);
  });

  it('finds duplicates at any depth, and not in strings, arrays or sibling objects', () => {
    expect(duplicateJsonKey('{"a": {"b": 1, "c": [ {"d": 1}, {"d": 2, "e": "\\"d\\", {", "d": 3} ]}}')).toBe('a.c[1].d');
    expect(duplicateJsonKey('{"partners": [{"name": "a,b", "companies": ["x", "x"]}, {"name": "c"}]}')).toBeNull();
    expect(duplicateJsonKey('{"a": 1, "\\u0061": 2}')).toBe('a');
    expect(duplicateJsonKey('{"odd key": {}, "odd key": 1}')).toBe('"odd key"');
  });

  it('refuses a document or a --from-file list that is not UTF-8, naming the line (defect 11)', async () => {
    const latin1 = file('latin1.yaml', Buffer.concat([Buffer.from('partners:\n  - name: Plain\n  - name: Caf'), Buffer.from([0xe9]), Buffer.from('\n')]));
    for (const args of [['apply', '-f', latin1], ['apply', '-f', latin1, '--dry-run']]) {
      const result = await runBinary(args, backend.env);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toMatch(/^partnerctl: invalid_argument: -f .*latin1\.yaml: not valid UTF-8 on line 3; nothing was changed/);
    }
    const piped = await runShell(`printf 'partners:\\n  - name: Caf\\351\\n' | ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} apply -f -`, backend.env);
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain('-f - (stdin): not valid UTF-8 on line 2');
    const list = file('companies.txt', Buffer.concat([Buffer.from('company-1\ncompany-2\nco-'), Buffer.from([0xc3, 0x28]), Buffer.from('\n')]));
    const mapped = await runBinary(['map-company', 'Existing', '--from-file', list], backend.env);
    expect(mapped.code).toBe(2);
    expect(mapped.stderr).toContain('not valid UTF-8 on line 3');
    expect(await partnerCount()).toBe(1);
    expect((await cli('list-companies', 'Existing', '--json')).json().companies ?? []).toHaveLength(0);
    // A byte-order mark is not an error.
    const bom = file('bom.json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"partners": [{"name": "Existing"}]}')]));
    expect((await cli('apply', '-f', bom, '--dry-run')).code).toBe(0);
  });
});
