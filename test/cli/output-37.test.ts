// Issue 37's points about what a person reads (5, 15, 16), each named after its point. The refusals and the
// exchanges are made by the server in-process over a real SQLite file; what support reads is printed by the
// CLI in-process, through a pipe (runCli: stdout no TTY, as the binary's in a pipeline) or on an injected
// terminal (a TTY of 80 columns, colour on).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../src/db/client.js';
import { createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';
import { serveInProcess } from '../support/serve.js';
import { escapedForm, RAW_CONTROL, RAW_CONTROL_BUT_ESC } from '../support/hostile-values.js';
import { bearer, buildTestApp, seedPartner, startUpstream, type SeededPartner, type TestApp, type TestUpstream } from '../http/support.js';

/** A command line in-process on a terminal of `columns` (stdout a TTY; colour on unless NO_COLOR is set). */
async function onTerminal(args: string[], env: NodeJS.ProcessEnv, columns: number): Promise<{ code: number; stdout: string; stderr: string }> {
  const result = await runCli(args, env, { outIsTTY: true, columns });
  return { code: result.code ?? 1, stdout: result.stdout, stderr: result.stderr };
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: the colour sequences the CLI itself writes
const SGR = /\u001b\[\d+m/g;

describe('issue 37, what a person reads (SQLite, the server in-process, the real binary)', () => {
  let backend: TestBackend;
  let db: Database;
  let upstream: TestUpstream;
  let t: TestApp;
  let acme: SeededPartner;
  let token: string;

  const exchange = async (keys: SeededPartner, remoteAddress = '127.0.0.1') => {
    const response = await t.inject({ method: 'POST', url: '/public/v1/auth/token', remoteAddress, payload: { access_key: keys.accessKey, secret_key: keys.secretKey } });
    expect(response.statusCode, response.body).toBe(200);
    return response.json().access_token as string;
  };
  const data = (bearerToken: string, company: string, remoteAddress = '127.0.0.1') =>
    t.inject({ method: 'GET', url: `/public/v1/prices?company_id=${encodeURIComponent(company)}`, remoteAddress, headers: bearer(bearerToken) });

  beforeAll(async () => {
    backend = await createBackend('sqlite');
    db = await openMigrated(backend);
    upstream = await startUpstream();
    t = await buildTestApp(backend, db, { PUBLIC_API_UPSTREAM_URL: upstream.url });
    acme = await seedPartner(db, ['acme'], 'Acme');
    token = await exchange(acme);
  });

  afterAll(async () => {
    await t?.close();
    await upstream?.close();
    await db?.close();
    await backend?.dispose();
  });

  describe('37.5: a partner cannot write lines or escapes into what support reads', () => {
    const forged = 'acme-2\nWhy: forged\nTo change the answer: partnerctl set-network Acme --clear\u001b[8m';
    let requestId: string;

    beforeAll(async () => {
      const refused = await data(token, forged);
      expect(refused.statusCode, refused.body).toBe(404);
      requestId = refused.json().error.request_id;
      expect(await t.services.decisions.flush()).toBe(true);
    });

    it('explain prints one Why: and no forged remedy, the company id escaped on its own line; JSON keeps the exact value', async () => {
      const explained = await runCli(['explain', requestId], backend.env);
      expect(explained.code, explained.stderr).toBe(0);
      expect(explained.stdout).not.toMatch(RAW_CONTROL);
      const lines = explained.stdout.trimEnd().split('\n');
      expect(lines.filter((line) => line.startsWith('Why: '))).toHaveLength(1);
      // No mapping accepts such an id, so nothing for an operator to run: the only remedy line is the CLI's own.
      expect(lines.filter((line) => line.startsWith('To change the answer: '))).toHaveLength(0);
      expect(lines.slice(-2)).toEqual(['Who can act: the partner\'s client', 'No operator command changes the answer: the one named above must act.']);
      expect(lines.filter((line) => line.startsWith('Who can act: '))).toHaveLength(1);
      for (const line of lines.filter((each) => each.includes('set-network'))) expect(line).toContain('acme-2\\x0aWhy: forged');
      expect(explained.stdout).toContain('  company:  acme-2\\x0aWhy: forged\\x0aTo change the answer: partnerctl set-network Acme --clear\\x1b[8m\n');
      const json = await runCli(['explain', requestId, '--json'], backend.env);
      expect(json.stdout).not.toMatch(RAW_CONTROL);
      expect(json.json().company_id).toBe(forged);
      expect(json.json().explanation).toContain(forged);
      expect(json.json().remedy).toBeNull();
    });

    it('refusals --by company passes no escape, and each count stays one line', async () => {
      const counted = await runCli(['refusals', '--by', 'company'], backend.env);
      expect(counted.code, counted.stderr).toBe(0);
      expect(counted.stdout).not.toMatch(RAW_CONTROL);
      expect(counted.stdout).toContain('acme-2\\x0aWhy: forged\\x0aTo change the answer: partnerctl set-network Acme --clear\\x1b[8m\t1\t');
      expect((await runCli(['refusals', '--by', 'company', '--json'], backend.env)).json().counts.map((count: { company_id: string }) => count.company_id)).toContain(forged);
    });

    it('on a colour terminal the value is escaped too: only the CLI writes colour sequences', async () => {
      const { NO_COLOR: _off, ...colour } = backend.env;
      const env = { ...colour, TERM: 'xterm-256color' };
      for (const args of [['explain', requestId], ['refusals', '--by', 'company']]) {
        const shown = await onTerminal(args, env, 200);
        expect(shown.code, shown.stderr).toBe(0);
        expect(shown.stdout, args.join(' ')).not.toMatch(RAW_CONTROL_BUT_ESC);
        expect(shown.stdout, args.join(' ')).not.toContain('\u001b[8m');
        expect(shown.stdout, args.join(' ')).toContain('\\x1b[8m');
        // Whatever ESC is left opens or closes the CLI's own bold (explain: the headline and the command).
        expect(shown.stdout.replace(SGR, ''), args.join(' ')).not.toContain('\u001b');
      }
      expect((await onTerminal(['explain', requestId], env, 200)).stdout).toContain('\u001b[1m');
    });

    it("serve's readable log (a terminal's) prints a request's values escaped: pino-pretty would print them raw", async () => {
      const { readableLines } = await import('../../src/http/server/server.js');
      const { prettyFactory } = await import('pino-pretty');
      const pretty = prettyFactory({ colorize: false, ignore: 'pid,hostname' });
      const line = `${JSON.stringify({ level: 50, time: 0, msg: `upstream failed for ${forged}`, path: '/public/v1/x\u009b2J\u202e', user_agent: forged })}\n`;
      const shown = readableLines(line + line);
      expect(shown.split('\n').filter(Boolean)).toHaveLength(2);
      const printed = pretty(shown.split('\n')[0]!) as string;
      expect(printed).not.toMatch(RAW_CONTROL);
      expect(printed).toContain(`upstream failed for ${escapedForm(forged)}`);
      expect(printed.split('\n').filter((each) => each.startsWith('Why:'))).toHaveLength(0);
    });

    it('commands write for people only through Output and say`…`: the few raw writes are machine formats', async () => {
      const { readdirSync, readFileSync } = await import('node:fs');
      const folder = new URL('../../src/cli/commands/', import.meta.url);
      const raw = readdirSync(folder)
        .filter((file) => file.endsWith('.ts'))
        .flatMap((file) => [...readFileSync(new URL(file, folder), 'utf8').matchAll(/terminal\.(out|err)\.write\(/g)].map(() => file));
      // exposure --csv and requests --csv (CSV, documented as exact), completion (a shell script; names with no
      // control character), export (YAML, its escapes the JSON-safe ones): data, not text for a person.
      expect(raw.sort()).toEqual(['completion.ts', 'completion.ts', 'exposure.ts', 'requests.ts', 'runbooks.ts']);
    });

    it('an error quoting the value is one line, the value escaped (a line feed as \\x0a, not a space)', async () => {
      const refused = await runCli(['refusals', '--by', forged.slice(0, 30)], backend.env);
      expect(refused.code).toBe(2);
      expect(refused.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(refused.stderr).not.toMatch(RAW_CONTROL);
      expect(refused.stderr).toContain(`got '${escapedForm(forged.slice(0, 30))}'`);
    });
  });

  describe('37.15: tables cut names and free text, never an id, an address or a time', () => {
    const v6 = '2001:db8:1234:5678:9abc:def0:1234:5678';

    beforeAll(async () => {
      const far = await seedPartner(db, ['acme'], `A partner whose name is far longer than any column of any table could hold ${'x'.repeat(20)}`);
      const farToken = await exchange(far, v6);
      for (const address of [v6, '127.0.0.1']) expect((await data(farToken, 'acme', address)).statusCode).toBe(200);
      expect(await t.services.exposure.flush()).toBe(true);
    });

    it('exposure shows every client address whole at 80 columns', async () => {
      const pairs = (await runCli(['list-keys', '--json'], backend.env)).json().keys as { key_pair_id: string; partner_name: string }[];
      const pair = pairs.find((each) => each.partner_name.startsWith('A partner whose name'))!;
      const shown = await onTerminal(['exposure', pair.key_pair_id], backend.env, 80);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(v6);
      expect(shown.stdout).toContain('127.0.0.1');
      expect(shown.stdout).not.toMatch(/\d+\.\d+\.\d*…|[0-9a-f]+:[0-9a-f:]*…/);
    });

    it('list-keys, audit and list-partners show every partner id whole at 80 columns, and cut only names', async () => {
      const partners = (await runCli(['list-partners', '--json'], backend.env)).json().partners as { partner_id: string }[];
      for (const args of [['list-keys'], ['audit'], ['list-partners']]) {
        const shown = await onTerminal(args, backend.env, 80);
        expect(shown.code, shown.stderr).toBe(0);
        for (const line of shown.stdout.trimEnd().split('\n')) expect([...line].length, `${args.join(' ')}: ${line}`).toBeLessThanOrEqual(80);
        for (const { partner_id } of partners) expect(shown.stdout, args.join(' ')).toContain(partner_id);
        // (audit's DETAILS is a summary that shortens ids on purpose: whole with --wide and in --json)
        const values = shown.stdout.split('\n').filter((line) => !line.startsWith('DETAILS '));
        expect(values.join('\n'), args.join(' ')).not.toMatch(/ptn_\w{0,25}…|kp_\w{0,25}…|pctl_ak_\w*…/);
        expect(shown.stdout, args.join(' ')).toMatch(/A partner[^\n]*…/);
      }
    });

    it('instances shows the client address whole (a real serve registered)', async () => {
      const served = await serveInProcess(backend.env);
      try {
        // The instance registers right after its listening line (polled: a spawned process's pace is its own).
        const listed = await vi.waitFor(
          async () => {
            const instances: { instance_id: string; address: string | null }[] = (await runCli(['instances', '--json'], backend.env)).json().instances;
            expect(instances.length).toBeGreaterThan(0);
            return instances;
          },
          { timeout: 10_000, interval: 50 },
        );
        const shown = await onTerminal(['instances'], backend.env, 80);
        expect(shown.code, shown.stderr).toBe(0);
        for (const instance of listed) {
          expect(shown.stdout).toContain(instance.instance_id);
          expect(instance.address).not.toBeNull();
          expect(shown.stdout).toContain(instance.address);
        }
        expect(shown.stdout).not.toMatch(/\d+\.\d+\.\d*…/);
        for (const line of shown.stdout.trimEnd().split('\n')) expect([...line].length, line).toBeLessThanOrEqual(80);
      } finally {
        await served.stop();
      }
    });
  });

  describe('37.16: "last used" is shown with the precision it has', () => {
    it('lookup, show-partner and list-keys show the minute-wide interval, never milliseconds', async () => {
      const used = await seedPartner(db, ['acme'], 'Used Recently');
      await exchange(used);
      expect(await t.services.bookkeeping.flush()).toBe(true);
      const stored = (await runCli(['lookup', used.keyPairId, '--json'], backend.env)).json().last_used_at as string;
      expect(stored).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      const from = stored.slice(0, 19).replace('T', ' ');
      // Through a pipe: an ISO 8601 interval to the second; on a terminal: the interval, to the second.
      const piped = await runCli(['lookup', used.keyPairId], backend.env);
      expect(piped.code, piped.stderr).toBe(0);
      const line = piped.stdout.split('\n').find((each) => each.startsWith('  last used'))!;
      expect(line).toMatch(/^ {2}last used +\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z\/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(line).toContain(`${stored.slice(0, 19)}Z/`);
      expect(line).not.toMatch(/\.\d{3}Z/);
      const shown = await onTerminal(['lookup', used.keyPairId], backend.env, 120);
      expect(shown.stdout).toMatch(new RegExp(`^ {2}last used +${from}–\\d{2}:\\d{2}:\\d{2}$`, 'm'));
      for (const args of [['show-partner', used.partnerId], ['list-keys', '--partner', used.partnerId]]) {
        const table = await onTerminal(args, backend.env, 200);
        expect(table.code, table.stderr).toBe(0);
        expect(table.stdout, args.join(' ')).toContain(`${from}–`);
        const pipedTable = await runCli(args, backend.env);
        expect(pipedTable.stdout, args.join(' ')).not.toContain(stored);
        expect(pipedTable.stdout, args.join(' ')).toContain(`${stored.slice(0, 19)}Z/`);
      }
    });

    it('the interval ends a minute after last_used_at (the margin of the rule), never after now', async () => {
      const { lastUseWindow, LAST_USED_MARGIN_MS } = await import('../../src/domain/rules/key-pair-state.js');
      const at = new Date('2026-11-24T08:41:07.250Z');
      expect(lastUseWindow(at, at.getTime() + 10 * 60_000)).toEqual({ from: at, to: new Date(at.getTime() + LAST_USED_MARGIN_MS) });
      expect(lastUseWindow(at, at.getTime() + 5_000)).toEqual({ from: at, to: new Date(at.getTime() + 5_000) });
    });
  });
});
