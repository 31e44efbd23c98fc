// Re-runnable provisioning: issue-keys --if-none-active, new credentials into a file of their own
// (--secret-to), apply --issue-keys-to re-run, partners' limits carried by export and apply; and apply's
// plan shown, counted and coloured before its question on a terminal.
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { onTerminal, runCli } from '../support/cli.js';

describe.each(BACKENDS)('re-runnable provisioning on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const cli = (...args: string[]) => runCli(args, backend.env);
    const path = (name: string) => join(backend.dir, name);
    const keyPairs = async (partner: string) => (await cli('show-partner', partner, '--json')).json().key_pairs as { id: string; status: string }[];

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
    });
    afterAll(() => backend.dispose());

    it('issue-keys --if-none-active: the first run issues, a re-run exits 0 with changed: false and no secret', async () => {
      expect((await cli('create-partner', '--name', 'Rerun Keys')).code).toBe(0);
      const first = await cli('issue-keys', 'Rerun Keys', '--if-none-active', '--json');
      expect(first.code, first.stderr).toBe(0);
      expect(first.json()).toMatchObject({ changed: true, secret_key: expect.stringMatching(/^pctl_sk_/) });
      const again = await cli('issue-keys', 'Rerun Keys', '--if-none-active', '--json');
      expect(again.code, again.stderr).toBe(0);
      expect(again.json()).toEqual({ partner_id: first.json().partner_id, key_pair_id: first.json().key_pair_id, changed: false });
      expect(again.stdout).not.toMatch(/pctl_sk_/);
      const text = await cli('issue-keys', 'Rerun Keys', '--if-none-active');
      expect(text.code).toBe(0);
      expect(text.stdout).toMatch(/already has an active key pair .*nothing changed/);
      expect(await keyPairs('Rerun Keys')).toHaveLength(1);
      // Without the flag it is still refused.
      expect((await cli('issue-keys', 'Rerun Keys')).code).toBe(4);
    });

    it('--secret-to: the new credentials go to a new 0600 file, never to stdout; an existing file is refused and nothing changes', async () => {
      expect((await cli('create-partner', '--name', 'Filed Keys')).code).toBe(0);
      const file = path('filed.json');
      const issued = await cli('issue-keys', 'Filed Keys', '--secret-to', file, '--json');
      expect(issued.code, issued.stderr).toBe(0);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const [entry] = JSON.parse(readFileSync(file, 'utf8')).keys as { key_pair_id: string; access_key: string; secret_key: string }[];
      expect(issued.json()).toMatchObject({ key_pair_id: entry!.key_pair_id, access_key: entry!.access_key, secret_to: file, changed: true });
      expect(issued.json()).not.toHaveProperty('secret_key');
      expect(issued.stdout + issued.stderr).not.toContain(entry!.secret_key);
      // The secret in the file is the pair's.
      const looked = await runCli(['lookup', '-', '--json'], backend.env, { input: entry!.secret_key });
      expect(looked.json()).toMatchObject({ key_pair_id: entry!.key_pair_id, genuine: true });

      // A file that exists is never written over: exit 2, the rotation does not happen.
      const before = await keyPairs('Filed Keys');
      const refused = await cli('rotate-keys', 'Filed Keys', '--secret-to', file);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/--secret-to .*exists.*nothing was changed/);
      expect(await keyPairs('Filed Keys')).toEqual(before);
      expect(JSON.parse(readFileSync(file, 'utf8')).keys[0].secret_key).toBe(entry!.secret_key);

      // rotate-keys the same way; the text says where the secret went and never shows it.
      const rotatedFile = path('rotated.json');
      const rotated = await cli('rotate-keys', 'Filed Keys', '--secret-to', rotatedFile);
      expect(rotated.code, rotated.stderr).toBe(0);
      const secret = JSON.parse(readFileSync(rotatedFile, 'utf8')).keys[0].secret_key as string;
      expect(rotated.stdout).toContain(`in ${rotatedFile} (mode 0600)`);
      expect(rotated.stdout).not.toContain(secret);
      expect(statSync(rotatedFile).mode & 0o777).toBe(0o600);
    });

    it('export and apply carry limits: a limit change shows between two exports, apply sets them exactly, {} clears them', async () => {
      expect((await cli('create-partner', '--name', 'Limited')).code).toBe(0);
      const plain = (await cli('export', '--partner', 'Limited', '--json')).json();
      expect(plain.partners[0]).not.toHaveProperty('limits');
      expect((await cli('set-limits', 'Limited', '--rate', '50/s', '--burst', '100')).code).toBe(0);
      const limited = (await cli('export', '--partner', 'Limited', '--json')).json();
      expect(limited.partners[0].limits).toEqual({ rate: '50/s', burst: 100 });
      expect((await cli('export', '--partner', 'Limited')).stdout).toMatch(/limits:\n\s+rate: 50\/s\n\s+burst: 100/);

      // The export applied back changes nothing; a document's limits are the partner's, exactly.
      const doc = path('limits.json');
      writeFileSync(doc, JSON.stringify(limited));
      expect((await cli('apply', '-f', doc, '--json')).json().plan.changes).toBe(0);
      writeFileSync(doc, JSON.stringify({ partners: [{ name: 'Limited', limits: { rate: '3000/m', daily_quota: 1000 } }] }));
      const applied = await cli('apply', '-f', doc, '--json');
      expect(applied.json().plan).toMatchObject({ changes: 1, limits_set: 1, partners: [{ name: 'Limited', limits: { rate: '3000/m', daily_quota: 1000 } }] });
      expect((await cli('show-partner', 'Limited', '--json')).json().limits).toEqual({ rate: '3000/m', burst: null, daily_quota: 1000 });
      expect((await cli('apply', '-f', doc, '--json')).json().plan.changes).toBe(0);
      writeFileSync(doc, JSON.stringify({ partners: [{ name: 'Limited', limits: {} }] }));
      expect((await cli('apply', '-f', doc, '--json')).json().plan.limits_set).toBe(1);
      expect((await cli('show-partner', 'Limited', '--json')).json().limits).toEqual({ rate: null, burst: null, daily_quota: null });

      // A bad rate or an unknown key is named by its path; nothing changes.
      writeFileSync(doc, JSON.stringify({ partners: [{ name: 'Limited', limits: { rate: 'fast', bursts: 3 } }] }));
      const bad = await cli('apply', '-f', doc);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/partners\[0\]\.limits\.rate: rate must look like 50\/s/);
      expect(bad.stderr).toMatch(/unknown key 'bursts': did you mean 'burst'\?/);
    });
  });
});

const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe.skipIf(process.platform !== 'linux')('apply on a terminal', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createBackend('sqlite');
    expect((await runCli(['create-partner', '--name', 'Going Away'], backend.env)).code).toBe(0);
    expect((await runCli(['map-company', 'Going Away', '--company', 'g-1', '--company', 'g-2'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it('shows the plan, coloured, before a question that counts every kind of change', async () => {
    const doc = join(backend.dir, 'plan.yaml');
    writeFileSync(doc, 'partners:\n  - name: Going Away\n    status: disabled\n    companies: [g-1]\n  - name: Brand New\n    companies: [n-1]\n');
    // (The test backends set NO_COLOR; a terminal without it is coloured.)
    const { NO_COLOR: _plain, ...env } = backend.env;
    const { code, screen } = await onTerminal(['apply', '-f', doc, '--prune'], env, [[/y\/N\)/, 'n\r']]);
    expect(code, screen).toBe(130);
    const flat = screen.replace(/\r?\n/g, '');
    // The plan comes before the question, additions green, removals red.
    const question = flat.indexOf('Apply 4 changes');
    expect(question).toBeGreaterThan(0);
    const green = (text: string) => `\u001b[32m${text}\u001b[39m`;
    const red = (text: string) => `\u001b[31m${text}\u001b[39m`;
    const plan = flat.slice(0, question);
    expect(plan).toContain(`${green('+')} Brand New: ${green('create (active)')}, ${green('map 1 company')}`);
    expect(plan).toMatch(new RegExp(`Going Away \\(ptn_\\w+\\): ${escaped(red('disable'))}, ${escaped(red('unmap 1 company'))}`));
    // (The terminal wraps the question, possibly inside a word, and its styles end and start again at each line.)
    const plain = stripVTControlCharacters(flat);
    expect(plain).toMatch(/Apply 4 changes \(1 partner created, 1 partner disabled, 1 company mapped, 1 company unmapped\)/);
    expect((await runCli(['show-partner', 'Brand New'], backend.env)).code).toBe(3);
    expect(existsSync(doc)).toBe(true);
  });
});
