import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli, type CliResult } from '../support/cli.js';
import { openProbe, provision, writeMarks, type Probe } from './support.js';

/**
 * Bad flags, arguments and settings given to the real CLI: each gets one line on stderr naming a stable code
 * (commander's own usage errors name the flag instead), a non-zero exit, no stack trace, and nothing is
 * written (the audit trail's length and the revision number stay as they were). The cases of
 * test/cli/cli.test.ts are not repeated.
 */

type Case = { args: string[]; exit: number; pattern: RegExp; env?: NodeJS.ProcessEnv };

const ONE_LINE = /^partnerctl: [^\n]+$/;
const RAW = /\n\s+at |SQLITE_|PrismaClient|DriverAdapterError|TypeError|ReferenceError|undefined/;

function expectOneLineError(result: CliResult, label: string, exit: number, pattern: RegExp) {
  expect(result.code, `${label}: ${result.stderr}`).toBe(exit);
  expect(result.stderr.trimEnd(), label).toMatch(ONE_LINE);
  expect(result.stderr, label).toMatch(pattern);
  expect(result.stderr, label).not.toMatch(RAW);
}

/**
 * Runs the cases one after the other, in-process, in order of the list (two in-process commands at once on
 * one SQLite file would wait on each other's lock inside one event loop; separate processes do not).
 */
async function runAll(cases: Case[], env: NodeJS.ProcessEnv): Promise<CliResult[]> {
  const results: CliResult[] = [];
  for (const c of cases) results.push(await runCli(c.args, { ...env, ...c.env }));
  return results;
}

describe.each(BACKENDS)('bad CLI input changes nothing (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    let probe: Probe;
    let partnerId: string;

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
      probe = await openProbe(backend);
      partnerId = (await provision(backend, 'Target', ['c-1'])).partnerId;
    });
    afterAll(async () => {
      await probe?.close();
      await backend?.dispose();
    });

    it('refuses control characters, odd unicode, huge and empty values, edge numbers and unknown flags', async () => {
      const huge = 'h'.repeat(100_000);
      const name: Case[] = [
        ['\u001b[31mred', /control character/],
        ['line\nbreak', /control character/],
        ['carriage\rreturn', /control character/],
        ['\u202eevil', /control character/],
        ['para\u2029graph', /control character/],
        ['c1\u0085control', /control character/],
        ['   ', /must not be empty/],
        ['\t', /must not be empty/],
        ['ptn_lookalike', /ptn_/],
        ['😀'.repeat(101), /longer than 100/],
        [huge, /longer than 100/],
      ].map(([value, pattern]) => ({ args: ['create-partner', '--name', value as string], exit: 2, pattern: pattern as RegExp }));
      const company: Case[] = [
        ['', /must not be empty/],
        ['café', /visible ASCII/],
        ['😀', /visible ASCII/],
        ['esc\u001b', /visible ASCII/],
        [huge, /longer than 128/],
      ].map(([value, pattern]) => ({ args: ['map-company', partnerId, '--company', value as string], exit: 2, pattern: pattern as RegExp }));
      const ttl: Case[] = ['-1', '900.5', '0x10', ' 60', '+60', '60s', 'Infinity', 'NaN', '99999999999999999999', '', '٣٠'].map((value) => ({
        args: ['mint-test-token', partnerId, `--ttl=${value}`],
        exit: 2,
        pattern: /invalid_argument: --ttl/,
      }));
      const limits: Case[] = [
        ...['1001', '-5', '1.5', '', 'abc', '1e2', '99999999999999999999'].map((value) => ({ args: ['list-partners', `--limit=${value}`], exit: 2, pattern: /--limit/ })),
        ...['0', '1001', 'x'].map((value) => ({ args: ['audit', `--limit=${value}`], exit: 2, pattern: /--limit/ })),
      ];
      const actor: Case[] = ['', '   ', 'a\nb', '\u001b[2J', 'a'.repeat(201)].map((value) => ({
        // The name is valid: only the actor is wrong, and the partner must not be created anyway.
        args: ['create-partner', '--name', `actor-case-${value.length}`, '--actor', value],
        exit: 2,
        pattern: /invalid_argument: --actor/,
      }));
      const usage: Case[] = [
        { args: ['rotate-keys', partnerId, '--revoke-issued-token'], exit: 2, pattern: /unknown option/ },
        { args: ['issue-keys', partnerId, '--force'], exit: 2, pattern: /unknown option/ },
        { args: ['create-partner', '--name', 'x', '--if-not-exist'], exit: 2, pattern: /unknown option/ },
        { args: ['-z', 'list-partners'], exit: 2, pattern: /unknown option/ },
        { args: ['issue-keys', partnerId, 'extra'], exit: 2, pattern: /too many arguments/ },
        { args: ['map-company', partnerId, '--company'], exit: 2, pattern: /argument missing/ },
        { args: ['create-partner', '--name'], exit: 2, pattern: /argument missing/ },
        { args: ['signing-key', 'rotate', '--now', '2020-01-01'], exit: 2, pattern: /unknown option/ },
        { args: ['db', 'drop'], exit: 2, pattern: /unknown command/ },
        { args: ['serve', '--port', '-1'], exit: 2, pattern: /--port/ },
        { args: ['serve', '--port', '80.5'], exit: 2, pattern: /--port/ },
      ];
      const references: Case[] = [
        { args: ['rotate-keys', '\u001b[2J'], exit: 3, pattern: /partner_not_found/ },
        { args: ['rotate-keys', huge], exit: 3, pattern: /partner_not_found/ },
        { args: ['revoke-keys', 'Ωmega', '--yes'], exit: 3, pattern: /partner_not_found/ },
        { args: ['disable-partner', 'ptn_ZZZZZZZZZZZZZZZZZZZZZZZZZZ', '--yes'], exit: 3, pattern: /partner_not_found/ },
        { args: ['map-company', "Target' OR '1'='1", '--company', 'c-2'], exit: 3, pattern: /partner_not_found/ },
      ];
      const cases = [...name, ...company, ...ttl, ...limits, ...actor, ...usage, ...references];
      const before = await writeMarks(probe);
      const results = await runAll(cases, backend.env);
      for (const [index, result] of results.entries()) {
        const { args, exit, pattern } = cases[index]!;
        expectOneLineError(result, JSON.stringify(args).slice(0, 120), exit, pattern);
        expect(result.stdout, JSON.stringify(args).slice(0, 120)).toBe('');
      }
      expect(await writeMarks(probe)).toEqual(before);
      console.info(`[hardening] ${provider}: ${cases.length} bad CLI invocations, each one line and a non-zero exit, nothing written`);
    }, 180_000);

    it('with --json, a bad value is one JSON error object on stdout and one line on stderr', async () => {
      const before = await writeMarks(probe);
      const cases: [string[], string][] = [
        [['create-partner', '--name', 'tab\there', '--json'], 'invalid_argument'],
        [['mint-test-token', partnerId, '--ttl', '901', '--json'], 'invalid_argument'],
        [['map-company', partnerId, '--company', 'x y', '--json'], 'invalid_argument'],
        [['rotate-keys', 'nobody-at-all', '--json'], 'partner_not_found'],
      ];
      for (const [args, code] of cases) {
        const result = await runCli(args, backend.env);
        expect(result.code).not.toBe(0);
        expect(result.stderr.trimEnd()).toMatch(ONE_LINE);
        expect(result.json()).toMatchObject({ error: { code } });
      }
      expect(await writeMarks(probe)).toEqual(before);
    }, 60_000);

    it('generated partner names holding a control or bidi character are all refused', async () => {
      const before = await writeMarks(probe);
      const control = fc.constantFrom('\u0001', '\u0007', '\u0008', '\u000b', '\u000c', '\u001b', '\u007f', '\u0090', '\u009b', '\u200e', '\u200f', '\u202a', '\u202e', '\u2066', '\u2069', '\u2028');
      // biome-ignore lint/suspicious/noControlCharactersInRegex: a NUL cannot travel in a command-line argument, so the generated text holds none
      const text = fc.string({ minLength: 1, maxLength: 20 }).map((value) => value.replace(/[\u0000\s]/g, 'x'));
      await fc.assert(
        fc.asyncProperty(text, control, text, async (prefix, bad, suffix) => {
          const result = await runCli(['create-partner', '--name', `${prefix}${bad}${suffix}`], backend.env);
          expectOneLineError(result, JSON.stringify(prefix + bad + suffix), 2, /invalid_argument: partner name contains a control character/);
        }),
        { numRuns: 12, endOnFailure: true },
      );
      expect(await writeMarks(probe)).toEqual(before);
    }, 120_000);

    it('bad database and key-file settings: one line, the right exit code, nothing created', async () => {
      const before = await writeMarks(probe);
      const garbageKeys = join(backend.dir, 'garbage-keys.json');
      writeFileSync(garbageKeys, 'not json', { mode: 0o600 });
      const keyFolder = join(backend.dir, 'a-folder');
      mkdirSync(keyFolder, { recursive: true });
      const nowhere = join(backend.dir, 'never', 'created.db');
      const cases: Case[] = [
        { args: ['list-partners'], env: { DATABASE_URL: 'mysql://root@127.0.0.1/x' }, exit: 2, pattern: /invalid_argument: unsupported database URL/ },
        { args: ['list-partners'], env: { DATABASE_URL: 'file:' }, exit: 2, pattern: /invalid_argument/ },
        { args: ['list-partners'], env: { DATABASE_URL: 'http://127.0.0.1:1/db' }, exit: 2, pattern: /invalid_argument/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: 'postgresql://nobody:s3cret-pw@127.0.0.1:1/none' }, exit: 5, pattern: /database_unavailable/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: 'postgresql://%zz@127.0.0.1:1/none' }, exit: 5, pattern: /database_unavailable|invalid_argument/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/partnerctl_no_such_database' }, exit: 5, pattern: /database_unavailable/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: `file:${backend.dir}` }, exit: 5, pattern: /database_unavailable/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: `${garbageKeys}/under-a-file.db` }, exit: 3, pattern: /database_not_found: no SQLite database at / },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: `file:${nowhere}` }, exit: 3, pattern: /database_not_found/ },
        { args: ['create-partner', '--name', 'x'], env: { PARTNERCTL_DB_POOL_SIZE: '0' }, exit: 2, pattern: /PARTNERCTL_DB_POOL_SIZE/ },
        { args: ['create-partner', '--name', 'x', '--database-url', 'ftp://127.0.0.1/x'], exit: 2, pattern: /unsupported database URL/ },
        { args: ['mint-test-token', partnerId], env: { PARTNERCTL_SIGNING_KEY_FILE: garbageKeys }, exit: 5, pattern: /signing_key_unavailable/ },
        { args: ['mint-test-token', partnerId], env: { PARTNERCTL_SIGNING_KEY_FILE: keyFolder }, exit: 5, pattern: /signing_key_unavailable/ },
        { args: ['signing-key', 'rotate'], env: { PARTNERCTL_SIGNING_KEY_FILE: garbageKeys }, exit: 5, pattern: /signing_key_unavailable/ },
        { args: ['create-partner', '--name', 'x'], env: { DATABASE_URL: `file:${nowhere}`, PARTNERCTL_DB_POOL_SIZE: 'lots' }, exit: 2, pattern: /PARTNERCTL_DB_POOL_SIZE/ },
      ];
      const results = await runAll(cases, backend.env);
      for (const [index, result] of results.entries()) {
        const { args, env, exit, pattern } = cases[index]!;
        const label = `${JSON.stringify(env)} ${args.join(' ')}`;
        expectOneLineError(result, label, exit, pattern);
        // A password in the URL is never echoed.
        expect(result.stderr, label).not.toContain('s3cret-pw');
      }
      expect(existsSync(nowhere)).toBe(false);
      expect(existsSync(join(backend.dir, 'never'))).toBe(false);
      expect(await writeMarks(probe)).toEqual(before);
    }, 120_000);
  });
});
