import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

// One error format: `partnerctl: <code>: <message>; hint: <hint>`, one line, never a bracket inside a bracket.
const ONE_LINE = /^partnerctl: [a-z_]+: [^\n]+; hint: [^\n]+\n$/;
const NESTED = /\([^()]*\(/;

describe('error lines and usage hints (SQLite, the real binary)', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createBackend('sqlite');
    expect((await runCli(['create-partner', '--name', 'Hinted'], backend.env)).code).toBe(0);
  });
  afterAll(() => backend.dispose());

  it.each([
    [['list-partners', '--status', 'actve'], "--status must be one of active, disabled, got 'actve'", "did you mean --status active? see 'partnerctl list-partners --help'"],
    [['list-keys', '--status', 'revokd'], "got 'revokd'", "did you mean --status revoked? see 'partnerctl list-keys --help'"],
    [['usage', '--by', 'compny'], "--by must be company, hour or day, got 'compny'", "did you mean --by company? see 'partnerctl usage --help'"],
    [['list-partners', '--stauts', 'x'], "unknown option '--stauts'", "did you mean --status? see 'partnerctl list-partners --help'"],
    [['db', 'migrat'], "unknown command 'migrat'", "did you mean migrate? see 'partnerctl db --help'"],
    // A kid drawn with a leading '-' (base64url: one in 64) reads as an option: it goes after '--'.
    [['lookup', '-PU5TcikGdlnP20RoxUaDe3iR9KiUa4bHrXX_FicOIM'], "unknown option '-PU5TcikGdlnP20RoxUaDe3iR9KiUa4bHrXX_FicOIM'", "did you mean -- -PU5TcikGdlnP20RoxUaDe3iR9KiUa4bHrXX_FicOIM? see 'partnerctl lookup --help'"],
    [['list-keys', '--status', 'zzzzzz'], "got 'zzzzzz'", "see 'partnerctl list-keys --help'"],
  ])('%j: a did-you-mean and that command\'s help', async (args, message, hint) => {
    const result = await runBinary(args, backend.env);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(ONE_LINE);
    expect(result.stderr).toContain(`${message}; hint: ${hint}\n`);
    const json = await runBinary([...args, '--json'], backend.env);
    expect(json.json().error).toMatchObject({ code: 'invalid_argument', hint });
  });

  it("looks up a value that starts with '-' given after '--', as the hint says", async () => {
    const looked = await runCli(['--json', 'lookup', '--', '-PU5TcikGdlnP20RoxUaDe3iR9KiUa4bHrXX_FicOIM'], backend.env);
    // Read as the value (an unregistered kid here): lookup's own answer, not a usage error.
    expect(looked.code, looked.stderr).toBe(2);
    expect(looked.stderr).toContain("'-PU5…' (43 characters) is not an access key");
    expect(looked.stderr).not.toContain('unknown option');
  });

  it('writes every hint the same way, without nested brackets', async () => {
    for (const args of [['rotate-keys', 'Hinted', '--revoke-issued-tokens'], ['show-partner'], ['issue-keys', 'Nobody'], ['create-partner', '--name', 'Hinted']]) {
      const result = await runBinary(args, backend.env);
      expect(result.code, args.join(' ')).toBeGreaterThan(0);
      expect(result.stderr, args.join(' ')).toMatch(ONE_LINE);
      expect(result.stderr).not.toMatch(NESTED);
      expect(result.stderr).not.toContain('(hint');
    }
  });
});

describe.each(BACKENDS)('a partner that is not found on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const ids: Record<string, string> = {};
    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
      for (const name of ['Acme Pricing', 'Acme Rates', 'Initech']) {
        ids[name] = (await runCli(['create-partner', '--name', name, '--json'], backend.env)).json().partner_id;
      }
    });
    afterAll(() => backend.dispose());

    it('gets a did-you-mean with the closest names and ids', async () => {
      const typo = await runCli(['show-partner', 'Acme Pricng'], backend.env);
      expect(typo.code).toBe(3);
      expect(typo.stderr).toContain(`; hint: did you mean 'Acme Pricing' (${ids['Acme Pricing']})`);
      expect(typo.stderr).not.toContain('Initech');
      const id = ids.Initech!;
      const wrongId = `${id.slice(0, -1)}${id.endsWith('0') ? '1' : '0'}`;
      const byId = await runCli(['issue-keys', wrongId, '--json'], backend.env);
      expect(byId.code).toBe(3);
      expect(byId.json().error).toMatchObject({ code: 'partner_not_found', hint: `did you mean 'Initech' (${id})? see 'partnerctl list-partners'` });
      const nothing = await runCli(['show-partner', 'Zzyzx Quorum'], backend.env);
      expect(nothing.stderr).toMatch(/; hint: see 'partnerctl list-partners'\n$/);
    });
  });
});
