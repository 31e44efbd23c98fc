import { createWriteStream, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

describe.each(BACKENDS)('bulk mapping and support queries on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const cli = (...args: string[]) => runCli(args, backend.env);
    const cliIn = (input: string, ...args: string[]) => runCli(args, backend.env, { input });
    const companies = async (partner: string) => {
      const listed = await cli('list-companies', partner, '--limit', '1000', '--json');
      expect(listed.code, listed.stderr).toBe(0);
      return listed.json().companies.map((company: { company_id: string }) => company.company_id) as string[];
    };
    const auditCount = async () => (await cli('audit', '--limit', '1000', '--json')).json().events.length as number;
    const file = (name: string, text: string) => {
      const path = join(backend.dir, name);
      writeFileSync(path, text);
      return path;
    };

    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      for (const name of ['Bulk One', 'Bulk Two']) expect((await cli('create-partner', '--name', name)).code).toBe(0);
    });
    afterAll(() => backend.dispose());

    it('maps every --company given (not only the last), in one change, and a re-run changes nothing', async () => {
      const first = await cli('map-company', 'Bulk One', '--company', 'a-1', '--company', 'a-2', '--company', 'a-1', '--json');
      expect(first.code, first.stderr).toBe(0);
      expect(first.json()).toEqual({ partner_id: expect.stringMatching(/^ptn_/), added: 2, unchanged: 0, total: 2, changed: true });
      expect(await companies('Bulk One')).toEqual(['a-1', 'a-2']);
      const events = await auditCount();
      const again = await cli('map-company', 'Bulk One', '--company', 'a-1', '--company', 'a-2', '--json');
      expect(again.code).toBe(0);
      expect(again.json()).toMatchObject({ added: 0, unchanged: 2, total: 2 });
      expect(await auditCount()).toBe(events);
    });

    it('reads --from-file: comments, blank lines, CRLF, surrounding spaces; a .csv gives its first column', async () => {
      const list = file('ids.txt', '# companies of Bulk One\r\nb-1\r\n\r\n  b-2  \n# b-3 is commented out\nb-4\n');
      const mapped = await cli('map-company', 'Bulk One', '--from-file', list, '--json');
      expect(mapped.code, mapped.stderr).toBe(0);
      expect(mapped.json()).toMatchObject({ added: 3, unchanged: 0, total: 3 });
      expect(mapped.json()).not.toHaveProperty('company_id');
      const csv = file('ids.csv', 'company_id,label\nc-1,first\n"c,2",second\n# note\nc-3\n');
      expect((await cli('map-company', 'Bulk Two', '--from-file', csv, '--json')).json()).toMatchObject({ added: 3, total: 3 });
      expect(await companies('Bulk Two')).toEqual(expect.arrayContaining(['c-1', 'c,2', 'c-3']));
      expect(await companies('Bulk Two')).not.toContain('company_id');
    });

    it("reads --from-file - from stdin, together with --company", async () => {
      const mapped = await cliIn('d-1\nd-2\n', 'map-company', 'Bulk Two', '--from-file', '-', '--company', 'd-3', '--json');
      expect(mapped.code, mapped.stderr).toBe(0);
      expect(mapped.json()).toMatchObject({ added: 3, total: 3 });
    });

    it('fails the whole input on any bad line, naming every bad line number, and writes nothing', async () => {
      const events = await auditCount();
      const before = await companies('Bulk One');
      const bad = file('bad.txt', `ok-1\nhas space\nok-2\n${'x'.repeat(129)}\nok-3\ntab\there\n`);
      const refused = await cli('map-company', 'Bulk One', '--from-file', bad);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/^partnerctl: invalid_argument: --from-file .*bad\.txt: invalid company id on lines 2, 4, 6 .*nothing was changed/);
      expect(refused.stderr.trim().split('\n')).toHaveLength(1);
      const viaJson = await cli('map-company', 'Bulk One', '--from-file', bad, '--json');
      expect(viaJson.json().error.code).toBe('invalid_argument');
      const badFlag = await cli('map-company', 'Bulk One', '--company', 'fine', '--company', 'not fine');
      expect(badFlag.code).toBe(2);
      expect(badFlag.stderr).toMatch(/company id .*--company/);
      expect((await cli('map-company', 'Bulk One', '--from-file', join(backend.dir, 'missing.txt'))).code).toBe(2);
      expect(await companies('Bulk One')).toEqual(before);
      expect(await auditCount()).toBe(events);
    });

    it('unmaps the same inputs: the confirmation states the count, --yes skips it, a re-run changes nothing', async () => {
      const list = file('unmap.txt', 'b-1\nb-2\nnever-mapped\n');
      const asked = await cli('unmap-company', 'Bulk One', '--from-file', list);
      expect(asked.code).toBe(2);
      expect(asked.stderr).toMatch(/Unmap 3 companies from 'Bulk One'.*needs confirmation.*--yes/);
      const done = await cli('unmap-company', 'Bulk One', '--from-file', list, '--yes', '--json');
      expect(done.code, done.stderr).toBe(0);
      expect(done.json()).toMatchObject({ removed: 2, unchanged: 1, total: 3 });
      expect(await companies('Bulk One')).toEqual(['a-1', 'a-2', 'b-4']);
      expect((await cli('unmap-company', 'Bulk One', '--from-file', list, '--yes', '--json')).json()).toMatchObject({ removed: 0, unchanged: 3 });
      const single = await cli('unmap-company', 'Bulk One', '--company', 'a-1', '--yes', '--json');
      expect(single.json()).toMatchObject({ company_id: 'a-1', changed: true, removed: 1 });
    });

    it('keeps the audit trail able to say who mapped company X to a partner, and when', async () => {
      const ids = Array.from({ length: 2_500 }, (_, i) => `trail-${i}`);
      const mapped = await runCli(['map-company', 'Bulk Two', '--from-file', file('trail.txt', ids.join('\n')), '--actor', 'ops:alice', '--json'], backend.env);
      expect(mapped.json()).toMatchObject({ added: 2_500 });
      const events = (await cli('audit', 'Bulk Two', '--limit', '10', '--json')).json().events as {
        actor: string;
        action: string;
        details: { company_ids?: string[]; company_id?: string };
      }[];
      const bulk = events.filter((event) => event.details.company_ids?.some((id) => id.startsWith('trail-')));
      expect(bulk).toHaveLength(3);
      expect(bulk.every((event) => event.actor === 'ops:alice' && event.action === 'company.mapped')).toBe(true);
      expect(bulk.flatMap((event) => event.details.company_ids).sort()).toEqual([...ids].sort());
    });

    it('answers which partners can reach a company, pages a partner\'s companies, and shows the first 20', async () => {
      const both = await cli('map-company', 'Bulk One', '--company', 'shared-1', '--json');
      expect(both.code).toBe(0);
      await cli('map-company', 'Bulk Two', '--company', 'shared-1');
      const reach = await cli('list-partners', '--company', 'shared-1', '--json');
      expect(reach.json().partners.map((partner: { name: string }) => partner.name)).toEqual(['Bulk One', 'Bulk Two']);
      expect((await cli('list-partners', '--company', 'nobody-has-it', '--json')).json().partners).toEqual([]);
      expect((await cli('list-partners', '--company', 'bad id')).code).toBe(2);

      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await cli('list-companies', 'Bulk Two', '--limit', '700', '--json', ...(cursor ? ['--cursor', cursor] : []));
        expect(page.code, page.stderr).toBe(0);
        seen.push(...page.json().companies.map((company: { company_id: string }) => company.company_id));
        cursor = page.json().next_cursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(4);
      expect(new Set(seen).size).toBe(seen.length);
      const shown = await cli('show-partner', 'Bulk Two', '--json');
      expect(shown.json().company_count).toBe(seen.length);
      expect(shown.json().companies).toHaveLength(20);
      expect(shown.json().companies.map((company: { company_id: string }) => company.company_id)).toEqual(seen.slice(0, 20));
      const text = await cli('show-partner', 'Bulk Two');
      expect(text.stdout).toContain(`Companies (${seen.length})`);
      expect(text.stdout).toMatch(/and \d+ more: partnerctl list-companies ptn_\w+/);
    });

    it.skipIf(provider !== 'sqlite')('maps a million ids from a file through the real binary, streamed, in a bounded heap', async () => {
      const path = join(backend.dir, 'million.txt');
      const out = createWriteStream(path);
      for (let i = 0; i < 1_000_000; i++) out.write(`million-${String(i).padStart(7, '0')}\n`);
      await new Promise((resolve) => out.end(resolve));
      expect((await cli('create-partner', '--name', 'Bulk Million')).code).toBe(0);
      // The heap capped well below what holding the file, its lines and their copies whole would take.
      const mapped = await runBinary(['map-company', 'Bulk Million', '--from-file', path, '--json'], {
        ...backend.env,
        NODE_OPTIONS: '--max-old-space-size=192',
      });
      expect(mapped.code, mapped.stderr.slice(0, 500)).toBe(0);
      expect(mapped.json()).toMatchObject({ added: 1_000_000, unchanged: 0, total: 1_000_000 });
      const file = new BetterSqlite3(backend.url.replace(/^file:/, ''), { readonly: true });
      try {
        const row = file
          .prepare("SELECT COUNT(*) AS n FROM company_mappings m JOIN partners p ON p.id = m.partner_id WHERE p.name = 'Bulk Million'")
          .get() as { n: number };
        expect(row.n).toBe(1_000_000);
      } finally {
        file.close();
      }
    }, 180_000);

    it('maps 20,000 ids from a pipe through the real binary, whole', async () => {
      const ids = Array.from({ length: 20_000 }, (_, i) => `piped-${String(i).padStart(6, '0')}`);
      const mapped = await runBinary(['map-company', 'Bulk One', '--from-file', '-', '--json'], backend.env, { input: `${ids.join('\n')}\n` });
      expect(mapped.code, mapped.stderr).toBe(0);
      expect(mapped.json()).toMatchObject({ added: 20_000, unchanged: 0, total: 20_000 });
      // No progress bar without a terminal.
      expect(mapped.stderr).toBe('');
      const exported = await runBinary(['export', '--partner', 'Bulk One', '--json'], backend.env);
      expect(exported.json().partners[0].companies.filter((id: string) => id.startsWith('piped-'))).toHaveLength(20_000);
    });
  });
});
