import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

describe.each(BACKENDS)("show-partner's updated_at on %s", (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const cli = async (...args: string[]) => {
      const result = await runCli([...args, '--json', '--yes'], backend.env);
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
      return result.json();
    };
    beforeAll(async () => {
      backend = await createBackend(provider, { migrated: true });
    });
    afterAll(() => backend.dispose());

    it('moves with every change to the partner, limits included; not with a test token', async () => {
      const id = (await cli('create-partner', '--name', 'Touched')).partner_id as string;
      let last = (await cli('show-partner', id)).updated_at as string;
      for (const change of [
        ['set-limits', id, '--rate', '5/s'],
        ['map-company', id, '--company', 'c-1'],
        ['issue-keys', id],
        ['revoke-tokens', id],
        ['unmap-company', id, '--company', 'c-1'],
        ['set-limits', id, '--clear'],
      ]) {
        await sleep(5);
        await cli(...change);
        const now = (await cli('show-partner', id)).updated_at as string;
        expect(Date.parse(now), change.join(' ')).toBeGreaterThan(Date.parse(last));
        last = now;
      }
      await sleep(5);
      await cli('mint-test-token', id);
      expect((await cli('show-partner', id)).updated_at).toBe(last);
    });
  });
});
