// The fault kit's hostile values (test/support/hostile-values.ts) through every field that reaches a
// terminal, a log line or a JSON output: typed as arguments, sent by a partner in a data request, held by the
// database (a hand edit, an older version). Text output never carries one raw; JSON carries the exact value.
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database as PartnerDatabase } from '../../src/db/client.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';
import { escapedForm, HOSTILE_VALUES, RAW_CONTROL } from '../support/hostile-values.js';
import { bearer, buildTestApp, seedPartner, startUpstream, type TestApp, type TestUpstream } from '../http/support.js';

/** Every hostile character at once (the very long one aside, and NUL, which no argv can hold): what the real binary is given. */
const ALL_AT_ONCE = HOSTILE_VALUES.filter((hostile) => hostile.value.length < 1_000)
  .map((hostile) => hostile.value.replace('\u0000', ''))
  .join('|');

/** A query value, percent-encoded; a lone surrogate (which encodeURIComponent refuses) as invalid UTF-8 bytes. */
function queryValue(value: string): string {
  return [...value].map((char) => (/[\ud800-\udfff]/.test(char) ? '%ED%A0%80' : encodeURIComponent(char))).join('');
}

function clean(printed: { stdout: string; stderr: string }, what: string): void {
  expect(printed.stdout, `${what}: stdout`).not.toMatch(RAW_CONTROL);
  expect(printed.stderr, `${what}: stderr`).not.toMatch(RAW_CONTROL);
}

describe('hostile values through every field a person or a program reads (SQLite)', () => {
  let backend: TestBackend;
  let db: PartnerDatabase;
  let upstream: TestUpstream;
  let t: TestApp;

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    upstream = await startUpstream();
    t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
  });

  afterAll(async () => {
    await t?.close();
    await upstream?.close();
    await db?.close();
    await backend?.dispose();
  });

  it('as arguments (names, company ids, network rules, contexts, actors, webhook URLs and descriptions): refused in one escaped line, or stored and shown escaped', async () => {
    expect((await runCli(['create-partner', '--name', 'Target'], backend.env)).code).toBe(0);
    const commands = (value: string): string[][] => [
      ['create-partner', '--name', value],
      ['show-partner', value],
      ['lookup', value],
      ['map-company', 'Target', '--company', value],
      ['set-network', 'Target', '--allow', value],
      ['context', 'add', value, '--database-url', 'file:/tmp/x.db'],
      ['--actor', value, 'create-partner', '--name', 'By Someone'],
      ['webhooks', 'add', '--url', value],
      ['webhooks', 'add', '--url', 'https://hooks.example.com/x', '--description', value, '--if-not-exists'],
      ['list-partners', '--company', value],
    ];
    for (const { name, value } of HOSTILE_VALUES) {
      for (const args of commands(value)) {
        for (const json of [[], ['--json']]) {
          const result = await runCli([...args, ...json], backend.env);
          clean(result, `${name}: ${args[0]} ${json.join('')}`);
          if (result.code !== 0) {
            expect(result.stderr.trimEnd().split('\n'), `${name}: ${args[0]}`).toHaveLength(1);
            if (json.length > 0) expect(result.json().error.code).toEqual(expect.any(String));
          } else if (json.length > 0) {
            expect(() => result.json(), `${name}: ${args[0]}`).not.toThrow();
          }
        }
      }
    }
    // The real binary, every character at once.
    for (const args of commands(ALL_AT_ONCE)) clean(await runBinary(args, backend.env), `binary: ${args[0]}`);
    // A description is free text: what was accepted (the first that passed its rule) is shown escaped, exact in JSON.
    const listed = await runBinary(['webhooks', 'list'], backend.env);
    clean(listed, 'webhooks list');
    const descriptions = (await runBinary(['webhooks', 'list', '--json'], backend.env)).json().webhooks.map((endpoint: { description: string | null }) => endpoint.description);
    expect(descriptions).toHaveLength(1);
    // (white space around it trimmed, as the rule says: U+FEFF is white space to String.trim)
    expect(HOSTILE_VALUES.map((hostile) => hostile.value.trim())).toContain(descriptions[0]);
    expect(listed.stdout).toContain(escapedForm(descriptions[0]));
  });

  it('as company ids of data requests: refusals, explain and usage show them escaped; JSON round-trips them', async () => {
    const partner = await seedPartner(db, ['acme'], 'Hostile Requests');
    const exchanged = await t.inject({ method: 'POST', url: '/public/v1/auth/token', payload: { access_key: partner.accessKey, secret_key: partner.secretKey } });
    const token = exchanged.json().access_token as string;
    const refused: { name: string; value: string; requestId: string }[] = [];
    for (const { name, value } of HOSTILE_VALUES) {
      const answer = await t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${queryValue(value)}`, headers: bearer(token) });
      expect(answer.statusCode, name).toBeGreaterThanOrEqual(400);
      const requestId = answer.json().error.request_id as string;
      refused.push({ name, value, requestId });
    }
    expect(await t.services.decisions.flush()).toBe(true);
    for (const { name, value, requestId } of refused) {
      const text = await runCli(['explain', requestId], backend.env);
      clean(text, `explain ${name}`);
      expect(text.stdout.trimEnd().split('\n').filter((line) => line.startsWith('Why: ')), name).toHaveLength(1);
      const json = await runCli(['explain', requestId, '--json'], backend.env);
      clean(json, `explain --json ${name}`);
      const companyId = json.json().company_id as string | null;
      // What the server recorded is what it was sent (a lone surrogate arrives as invalid UTF-8: U+FFFD).
      if (companyId !== null && !/[\ud800-\udfff]/.test(value)) {
        expect(companyId, name).toBe(value);
        expect(text.stdout, name).toContain(`  company:  ${escapedForm(value)}\n`);
      }
    }
    for (const args of [['refusals', '--by', 'company'], ['refusals', '--by', 'address'], ['refusals', 'Hostile Requests'], ['explain', refused[0]!.requestId]]) {
      clean(await runCli(args, backend.env), args.join(' '));
    }
    const counts = (await runCli(['refusals', '--by', 'company', '--json'], backend.env)).json().counts as { company_id: string | null }[];
    expect(counts.map((count) => count.company_id)).toContain(HOSTILE_VALUES[0]!.value);
    // The request log is JSON, one object a line, whatever the request held.
    for (const line of t.logText) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('as names the database holds (a hand edit, an older version): tables, fields, audit, export and JSON', async () => {
    const file = new Database(join(backend.dir, 'partnerctl.db'));
    const ids: string[] = [];
    for (const { value } of HOSTILE_VALUES) {
      const created = await runCli(['create-partner', '--name', `Plain ${ids.length}`, '--json'], backend.env);
      const id = created.json().partner_id as string;
      ids.push(id);
      file.prepare('UPDATE partners SET name = ? WHERE id = ?').run(`db:${value}`, id);
    }
    file.close();
    for (const args of [['list-partners', '--limit', '1000'], ['audit', '--limit', '1000'], ['list-keys'], ['usage'], ['export'], ['show-partner', ids[0]!], ['show-partner', ids[2]!]]) {
      clean(await runCli(args, backend.env), args.join(' '));
    }
    const names = (await runCli(['list-partners', '--limit', '1000', '--json'], backend.env)).json().partners.map((partner: { name: string }) => partner.name);
    for (const { name, value } of HOSTILE_VALUES) {
      if (/[\ud800-\udfff]/.test(value)) continue;
      expect(names, name).toContain(`db:${value}`);
    }
    const shown = await runCli(['show-partner', ids[0]!], backend.env);
    expect(shown.stdout.split('\n')[0]).toBe(escapedForm(`db:${HOSTILE_VALUES[0]!.value}`));
  });

  it("serve's start-up lines show a database path with a line feed and an ESC escaped", async () => {
    const { copyFileSync, mkdirSync, rmSync } = await import('node:fs');
    const folder = join(backend.dir, 'odd\nWhy: forged\u001b[8m');
    mkdirSync(folder);
    copyFileSync(join(backend.dir, 'partnerctl.db'), join(folder, 'partnerctl.db'));
    const { serveInProcess } = await import('../support/serve.js');
    const served = await serveInProcess({ ...backend.env, DATABASE_URL: `file:${join(folder, 'partnerctl.db')}` });
    try {
      const lines = served.stderr().trimEnd().split('\n');
      expect(served.stderr()).not.toMatch(RAW_CONTROL);
      expect(lines.filter((line) => line.startsWith('Why:'))).toHaveLength(0);
      expect(lines.find((line) => line.includes('listening on'))).toContain('odd\\x0aWhy: forged\\x1b[8m');
    } finally {
      await served.stop();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
