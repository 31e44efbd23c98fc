import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runBinary, runCli } from '../support/cli.js';

describe.each(BACKENDS)('one key-pair state in every view on %s', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    beforeAll(async () => {
      backend = await createBackend(provider);
      if (provider === 'postgresql') await (await openMigrated(backend)).close();
    });
    afterAll(async () => backend?.dispose());

    const cli = async (...args: string[]) => {
      const result = await runCli(['--json', ...args], backend.env);
      expect(result.code, result.stderr).toBe(0);
      return result.json();
    };

    it('a pair issued with --expires-in 1s is expired a second later: show-partner (table and JSON), list-keys, lookup', async () => {
      await cli('create-partner', '--name', 'expiring');
      const keys = await cli('issue-keys', 'expiring', '--expires-in', '1s');
      await sleep(1_100);
      expect((await cli('show-partner', 'expiring')).key_pairs).toEqual([expect.objectContaining({ key_pair_id: keys.key_pair_id, status: 'expired' })]);
      expect((await cli('list-keys', '--partner', 'expiring')).keys).toEqual([expect.objectContaining({ key_pair_id: keys.key_pair_id, status: 'expired' })]);
      expect(await cli('lookup', keys.access_key)).toMatchObject({ status: 'expired', key_pair_status: 'expired', accepted: false, reason: 'pair_expired' });
      // The real binary, as an operator runs it: the table says so too.
      const table = await runBinary(['show-partner', 'expiring'], { ...backend.env, COLUMNS: '200' });
      expect(table.code, table.stderr).toBe(0);
      const row = table.stdout.split('\n').find((line) => line.includes(keys.key_pair_id));
      expect(row).toContain('expired');
      expect(row).not.toContain('active');
    });

    it('lookup --json names the reason of a refused credential (null when accepted); the CLI words the next step', async () => {
      await cli('create-partner', '--name', 'reasons');
      const keys = await cli('issue-keys', 'reasons');
      expect(await cli('lookup', keys.secret_key)).toMatchObject({ accepted: true, reason: null, network_allow: null });
      await cli('set-network', 'reasons', '--allow', '10.0.0.0/8');
      expect(await cli('lookup', keys.secret_key)).toMatchObject({ accepted: true, reason: null, network_allow: ['10.0.0.0/8'] });
      await runCli(['--json', '--yes', 'disable-partner', 'reasons'], backend.env);
      expect(await cli('lookup', keys.secret_key)).toMatchObject({ accepted: false, reason: 'partner_disabled' });
      const partnerId = await runCli(['lookup', keys.partner_id], backend.env);
      expect(partnerId.code).toBe(2);
      expect(partnerId.stderr).toContain(`partnerctl show-partner ${keys.partner_id}`);
    });
  });
});
