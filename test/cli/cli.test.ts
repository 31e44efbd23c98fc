import { readdirSync, statSync, readFileSync } from 'node:fs';
import argon2 from 'argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';
import { productCostEnv } from '../support/argon2-cost.js';
import { resolveDatabase } from '../../src/config.js';
import { openDatabase } from '../../src/db/client.js';

describe.each(BACKENDS)('partnerctl CLI on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const cli = (...args: string[]) => runCli(args, backend.env);
    const auditCount = async () => (await cli('audit', '--limit', '1000', '--json')).json().events.length as number;

    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') {
        const migrated = await cli('db', 'migrate', '--json');
        expect(migrated.code, migrated.stderr).toBe(0);
      }
    });
    afterAll(() => backend.dispose());

    it('the binary stores an argon2id hash at the product\'s parameters (19 MiB, two passes, one lane), never the tests\' cost', async () => {
      const created = await cli('create-partner', '--name', 'Hash Parameters', '--json');
      expect(created.code, created.stderr).toBe(0);
      // Without the tests' argon2 preload (test/support/argon2-cost.cjs): the process as an operator runs it.
      const issued = await runBinary(['issue-keys', 'Hash Parameters', '--json'], productCostEnv(backend.env));
      expect(issued.code, issued.stderr).toBe(0);
      const db = await openDatabase(resolveDatabase(backend.url, {}));
      try {
        const [row] = await db.sql.query<{ secret_hash: string }>('SELECT secret_hash FROM key_pairs WHERE id = $1', [issued.json().key_pair_id]);
        expect(row!.secret_hash).toMatch(/^\$argon2id\$v=19\$m=19456,p=1,t=2\$/);
        expect(await argon2.verify(row!.secret_hash, issued.json().secret_key)).toBe(true);
      } finally {
        await db.close();
      }
    });

    it('provisions a partner end to end with --json', async () => {
      const created = await cli('create-partner', '--name', 'Acme Pricing', '--json');
      expect(created.code, created.stderr).toBe(0);
      const partner = created.json();
      expect(partner).toMatchObject({ name: 'Acme Pricing', status: 'active', created: true });
      expect(partner.partner_id).toMatch(/^ptn_[0-9A-Z]{26}$/);

      const issued = await cli('issue-keys', 'Acme Pricing', '--json');
      expect(issued.code, issued.stderr).toBe(0);
      const keys = issued.json();
      expect(Object.keys(keys).sort()).toEqual(['access_key', 'changed', 'expires_at', 'key_pair_id', 'kind', 'partner_id', 'secret_key']);
      expect(keys.partner_id).toBe(partner.partner_id);
      expect(keys.expires_at).toBeNull();
      expect(keys.access_key).toMatch(/^pctl_ak_[0-9A-Za-z]{28}$/);
      expect(keys.secret_key).toMatch(/^pctl_sk_[0-9A-HJKMNP-TV-Z]{26}[0-9A-Za-z]{49}$/);

      const rotated = await cli('rotate-keys', partner.partner_id, '--json');
      expect(rotated.code, rotated.stderr).toBe(0);
      expect(rotated.json()).toMatchObject({ partner_id: partner.partner_id, superseded_key_pair_id: keys.key_pair_id });
      expect(rotated.json().secret_key).not.toBe(keys.secret_key);

      const mapped = await cli('map-company', 'Acme Pricing', '--company', 'company-42', '--json');
      expect(mapped.code, mapped.stderr).toBe(0);
      expect(mapped.json()).toEqual({
        partner_id: partner.partner_id,
        added: 1,
        unchanged: 0,
        total: 1,
        company_id: 'company-42',
        changed: true,
      });

      const token = await cli('mint-test-token', 'Acme Pricing', '--ttl', '120', '--json');
      expect(token.code, token.stderr).toBe(0);
      expect(token.json()).toMatchObject({ token_type: 'Bearer', expires_in: 120 });
      expect(token.json().access_token.split('.')).toHaveLength(3);

      const shown = await cli('show-partner', 'Acme Pricing', '--json');
      expect(shown.code).toBe(0);
      const details = shown.json();
      expect(details.key_pairs.map((pair: { status: string }) => pair.status).sort()).toEqual(['active', 'superseded']);
      expect(details.companies).toEqual([{ company_id: 'company-42', created_at: expect.any(String) }]);
      expect(details.company_count).toBe(1);
      expect(shown.stdout).not.toContain(keys.secret_key);
      // 39: a pair's kind is named ("kind": "secret"), never a secret or its hash.
      expect(shown.stdout).not.toMatch(/secret_(key|hash)|pctl_sk_/);

      const audit = await cli('audit', 'Acme Pricing', '--json');
      expect(audit.json().events.map((event: { action: string }) => event.action)).toEqual([
        'token.test_minted',
        'company.mapped',
        'keys.rotated',
        'keys.issued',
        'partner.created',
      ]);
      expect(audit.stdout).not.toContain(keys.secret_key);
    });

    it('shows a new secret once, with a warning, in readable output', async () => {
      await cli('create-partner', '--name', 'Readable');
      const issued = await cli('issue-keys', 'Readable');
      expect(issued.code, issued.stderr).toBe(0);
      expect(issued.stdout).toMatch(/secret key\s+pctl_sk_/);
      expect(issued.stdout).toMatch(/shown once/);
      // biome-ignore lint/suspicious/noControlCharactersInRegex: an ESC [ would be a colour escape in the output
      expect(issued.stdout).not.toMatch(/\u001b\[/); // not a terminal: no colour
      const listed = await cli('list-partners');
      expect(listed.stdout).toContain('Readable');
      expect(listed.stdout).not.toMatch(/pctl_sk_/);
    });

    it('lets runbooks re-run: --if-not-exists, map twice, unmap twice', async () => {
      const first = await cli('create-partner', '--name', 'Rerun', '--json');
      const again = await cli('create-partner', '--name', 'Rerun', '--if-not-exists', '--json');
      expect(again.code).toBe(0);
      expect(again.json()).toMatchObject({ partner_id: first.json().partner_id, created: false });

      const duplicate = await cli('create-partner', '--name', 'Rerun');
      expect(duplicate.code).toBe(4);
      expect(duplicate.stderr).toMatch(/^partnerctl: partner_exists: .*--if-not-exists/);

      expect((await cli('map-company', 'Rerun', '--company', 'c-1')).code).toBe(0);
      const before = await auditCount();
      const remap = await cli('map-company', 'Rerun', '--company', 'c-1', '--json');
      expect(remap.code).toBe(0);
      expect(remap.json().changed).toBe(false);
      expect((await cli('unmap-company', 'Rerun', '--company', 'c-1', '--yes', '--json')).json().changed).toBe(true);
      const unmapAgain = await cli('unmap-company', 'Rerun', '--company', 'c-1', '--yes');
      expect(unmapAgain.code).toBe(0);
      expect(unmapAgain.stdout).toMatch(/nothing changed/);
      expect(await auditCount()).toBe(before + 1);
    });

    it('refuses issue-keys when a pair is active and rotate-keys when none is', async () => {
      await cli('create-partner', '--name', 'Keyless');
      const rotate = await cli('rotate-keys', 'Keyless', '--json');
      expect(rotate.code).toBe(4);
      expect(rotate.json().error.code).toBe('no_active_key_pair');
      expect((await cli('issue-keys', 'Keyless')).code).toBe(0);
      const twice = await cli('issue-keys', 'Keyless');
      expect(twice.code).toBe(4);
      expect(twice.stderr).toMatch(/active_key_pair_exists.*rotate-keys/);
    });

    it('never prompts without a terminal: names the missing flag, or --yes', async () => {
      const missingName = await cli('create-partner');
      expect(missingName.code).toBe(2);
      expect(missingName.stderr).toMatch(/missing_argument: missing --name/);

      const missingPartner = await cli('issue-keys');
      expect(missingPartner.code).toBe(2);
      expect(missingPartner.stderr).toMatch(/missing <partner>/);

      await cli('create-partner', '--name', 'Careful');
      await cli('issue-keys', 'Careful');
      const before = await auditCount();
      for (const args of [
        ['revoke-keys', 'Careful'],
        ['rotate-keys', 'Careful', '--revoke-issued-tokens'],
        ['disable-partner', 'Careful'],
        ['unmap-company', 'Careful', '--company', 'x'],
      ]) {
        const refused = await cli(...args);
        expect(refused.code, args.join(' ')).toBe(2);
        expect(refused.stderr).toMatch(/confirmation_required: .*--yes/);
      }
      expect(await auditCount()).toBe(before);

      const revoked = await cli('revoke-keys', 'Careful', '--yes', '--json');
      expect(revoked.code).toBe(0);
      expect(revoked.json().revoked_key_pair_ids).toHaveLength(1);
      const disabled = await cli('disable-partner', 'Careful', '--yes', '--json');
      expect(disabled.json()).toMatchObject({ status: 'disabled', changed: true });
      expect((await cli('enable-partner', 'Careful', '--json')).json()).toMatchObject({ status: 'active', changed: true });
    });

    it('rejects bad input with one line, a stable code and a non-zero exit, changing nothing', async () => {
      const before = await auditCount();
      const cases: [string[], number, RegExp][] = [
        [['create-partner', '--name', ''], 2, /invalid_argument: partner name must not be empty/],
        [['create-partner', '--name', ' padded '], 2, /invalid_argument/],
        [['create-partner', '--name', 'x'.repeat(101)], 2, /longer than 100/],
        [['create-partner', '--name', 'bell\u0007'], 2, /control character/],
        [['map-company', 'Acme Pricing', '--company', 'has space'], 2, /company id/],
        [['map-company', 'Acme Pricing', '--company', 'tab\tchar'], 2, /company id/],
        [['map-company', 'Acme Pricing', '--company', 'c'.repeat(129)], 2, /longer than 128/],
        [['mint-test-token', 'Acme Pricing', '--ttl', '0'], 2, /--ttl/],
        [['mint-test-token', 'Acme Pricing', '--ttl', '901'], 2, /--ttl/],
        [['mint-test-token', 'Acme Pricing', '--ttl', '1e3'], 2, /--ttl/],
        [['list-partners', '--limit', '0'], 2, /--limit/],
        [['list-partners', '--status', 'zombie'], 2, /zombie/],
        [['list-partners', '--cursor', 'garbage'], 2, /--cursor/],
        [['show-partner', 'no-such-partner'], 3, /partner_not_found: .*list-partners/],
        [['issue-keys', 'ptn_00000000000000000000000000'], 3, /partner_not_found/],
        [['no-such-command'], 2, /unknown command/],
        [['list-partners', '--no-such-flag'], 2, /unknown option/],
        [['serve', '--port', '99999'], 2, /--port/],
      ];
      for (const [args, code, pattern] of cases) {
        const result = await cli(...args);
        expect(result.code, args.join(' ')).toBe(code);
        expect(result.stderr, args.join(' ')).toMatch(pattern);
        expect(result.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
        expect(result.stderr).not.toMatch(/\n\s+at /);
      }
      const jsonUsage = await cli('create-partner', '--bogus', '--json');
      expect(jsonUsage.code).toBe(2);
      expect(jsonUsage.json()).toMatchObject({ error: { code: 'invalid_argument', message: "unknown option '--bogus'" } });
      expect(await auditCount()).toBe(before);
    });

    it('pages list-partners with --limit and --cursor', async () => {
      for (const name of ['Page A', 'Page B', 'Page C']) await cli('create-partner', '--name', name, '--if-not-exists');
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const result = await cli('list-partners', '--limit', '2', '--json', ...(cursor ? ['--cursor', cursor] : []));
        expect(result.code).toBe(0);
        const page = result.json();
        expect(page.partners.length).toBeLessThanOrEqual(2);
        seen.push(...page.partners.map((partner: { partner_id: string }) => partner.partner_id));
        cursor = page.next_cursor;
      } while (cursor);
      const all = (await cli('list-partners', '--limit', '1000', '--json')).json().partners.map((p: { partner_id: string }) => p.partner_id);
      expect(seen).toEqual(all);
      expect(new Set(seen).size).toBe(seen.length);
    });

    it('records the actor from --actor, else PARTNERCTL_ACTOR', async () => {
      await runCli(['create-partner', '--name', 'Actor One', '--actor', 'alice'], backend.env);
      await runCli(['create-partner', '--name', 'Actor Two'], { ...backend.env, PARTNERCTL_ACTOR: 'bob' });
      const events = (await cli('audit', '--limit', '2', '--json')).json().events;
      expect(events.map((event: { actor: string }) => event.actor)).toEqual(['bob', 'alice']);
    });

    it('rotates the signing key, keeping the previous one, in a 0600 file', async () => {
      await cli('mint-test-token', 'Acme Pricing', '--json');
      const rotated = await cli('signing-key', 'rotate', '--json');
      expect(rotated.code, rotated.stderr).toBe(0);
      const { file, kid, retired_kid } = rotated.json();
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const keys = JSON.parse(readFileSync(file, 'utf8')).keys;
      expect(keys.map((key: { kid: string }) => key.kid)).toEqual([retired_kid, kid]);
      expect(keys[0].retired_at).toEqual(expect.any(String));
    });

    it('ends with exactly one active pair after concurrent rotate-keys processes', async () => {
      const created = (await cli('create-partner', '--name', 'Concurrent', '--json')).json();
      await cli('issue-keys', 'Concurrent');
      const before = await auditCount();
      // Separate processes racing, as operators' terminals and runbooks do: the real binary.
      const results = await Promise.all(Array.from({ length: 6 }, () => runBinary(['rotate-keys', 'Concurrent', '--json'], backend.env)));
      for (const result of results) {
        expect(result.code, result.stderr).toBe(0);
        expect(result.stderr).not.toMatch(/SQLITE_BUSY|database is locked/);
      }
      const pairs = (await cli('show-partner', created.partner_id, '--json')).json().key_pairs;
      expect(pairs.filter((pair: { status: string }) => pair.status === 'active')).toHaveLength(1);
      expect(pairs.filter((pair: { status: string }) => pair.status === 'superseded')).toHaveLength(6);
      expect(await auditCount()).toBe(before + 6);
    });
  });
});

describe('partnerctl db on an unmigrated PostgreSQL database', () => {
  describe.skipIf(!backendAvailable('postgresql'))('', () => {
    let backend: TestBackend;
    beforeAll(async () => {
      backend = await createBackend('postgresql');
    });
    afterAll(() => backend.dispose());

    it('refuses to work until migrated, then migrates once', async () => {
      const history = readdirSync(new URL('../../prisma/postgresql/migrations', import.meta.url), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
        .sort();
      expect(history[0]).toBe('20261122083000_init');
      const refused = await runCli(['list-partners'], backend.env);
      expect(refused.code).toBe(5);
      expect(refused.stderr).toMatch(/schema_out_of_date: .*db migrate/);
      const status = await runCli(['db', 'status', '--json'], backend.env);
      expect(status.code).toBe(1);
      expect(status.json()).toMatchObject({ up_to_date: false, pending: history });
      const migrated = await runCli(['db', 'migrate', '--json'], backend.env);
      expect(migrated.json().applied).toEqual(history);
      expect((await runCli(['db', 'migrate', '--json'], backend.env)).json().applied).toEqual([]);
      expect((await runCli(['db', 'status'], backend.env)).code).toBe(0);
      expect((await runCli(['list-partners', '--json'], backend.env)).json()).toEqual({ partners: [], next_cursor: null });
    });

    it('refuses to sign tokens on PostgreSQL without a named, shared signing-key file', async () => {
      expect((await runCli(['create-partner', '--name', 'Keyed'], backend.env)).code).toBe(0);
      const env = { ...backend.env, PARTNERCTL_SIGNING_KEY_FILE: undefined };
      const refused = await runCli(['mint-test-token', 'Keyed'], env);
      expect(refused.code).toBe(5);
      expect(refused.stderr).toMatch(/^partnerctl: signing_key_unavailable: PARTNERCTL_SIGNING_KEY_FILE is not set/);
      expect((await runCli(['mint-test-token', 'Keyed', '--json'], backend.env)).code).toBe(0);
    });
  });
});

describe('partnerctl on the embedded default', () => {
  it('creates and migrates the SQLite file in the per-user data folder on the first command', async () => {
    const backend = await createBackend('sqlite');
    try {
      const env = { ...backend.env, DATABASE_URL: undefined, PARTNERCTL_SIGNING_KEY_FILE: undefined };
      const result = await runCli(['create-partner', '--name', 'First', '--json'], env);
      expect(result.code, result.stderr).toBe(0);
      const status = await runCli(['db', 'status', '--json'], env);
      expect(status.json().database).toBe(`${backend.dir}/xdg/partnerctl/partnerctl.db`);
      const token = await runCli(['mint-test-token', 'First', '--json'], env);
      expect(token.code, token.stderr).toBe(0);
      expect(statSync(`${backend.dir}/xdg/partnerctl/signing-keys.json`).mode & 0o777).toBe(0o600);
    } finally {
      await backend.dispose();
    }
  });

  it('answers --help fast, without touching a database', async () => {
    const result = await runCli(['--help'], { ...process.env, DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none' });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('rotate-keys');
    // The default database is told in 'help global', with the rest of the program's notes.
    const global = await runCli(['help', 'global'], { ...process.env, DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none' });
    expect(global.code).toBe(0);
    expect(global.stdout).toContain('.local/share/partnerctl');
  });
});
