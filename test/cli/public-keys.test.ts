// Issue 39: registering a partner's public key (issue-keys / rotate-keys --public-key), through the CLI
// in-process on real SQLite and PostgreSQL databases: what is accepted, and one line for everything else.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, backendAvailable, createBackend, openMigrated, type TestBackend } from '../support/backends.js';
import { runCli } from '../support/cli.js';

let counter = 0;

describe.each(BACKENDS)('39: issue-keys --public-key (%s)', (provider) => {
  describe.skipIf(!backendAvailable(provider))('', () => {
    let backend: TestBackend;
    const run = (args: string[], input?: string) => runCli(args, backend.env, input === undefined ? {} : { input });
    const partner = async () => {
      const name = `keys-${process.pid}-${++counter}`;
      const created = await run(['create-partner', '--name', name]);
      expect(created.code, created.stderr).toBe(0);
      return name;
    };
    const file = (name: string, text: string) => {
      const path = join(backend.dir, name);
      writeFileSync(path, text);
      return path;
    };

    beforeAll(async () => {
      backend = await createBackend(provider);
      await (await openMigrated(backend)).close();
    });
    afterAll(async () => {
      await backend?.dispose();
    });

    it('39: registers Ed25519, P-256 (PEM or JWK, from a file or stdin) and RSA-2048 keys: an access key and a kid, no secret', async () => {
      const ed = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const ec = JSON.stringify(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ format: 'jwk' }));
      const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
      for (const [args, input] of [
        [['--public-key', file('ed.pem', ed)], undefined],
        [['--public-key', '-'], ec],
        [['--public-key', file('rsa.pem', rsa)], undefined],
      ] as [string[], string | undefined][]) {
        const name = await partner();
        const result = await run(['--json', 'issue-keys', name, ...args], input);
        expect(result.code, result.stderr).toBe(0);
        const json = result.json();
        expect(json).toMatchObject({ kind: 'public_key', changed: true });
        expect(json.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(json.access_key).toMatch(/^pctl_ak_/);
        expect(result.stdout).not.toMatch(/secret_key|pctl_sk_/);
      }
    });

    it('39: refuses a private key, RSA under 2048 bits, another curve, a certificate-less blob, an HMAC JWK and --secret-to, each with one line and exit 2', async () => {
      const name = await partner();
      const ed = generateKeyPairSync('ed25519');
      const cases: [string, string][] = [
        [ed.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'private key'],
        [generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString(), 'at least 2048 bits'],
        [generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).publicKey.export({ type: 'spki', format: 'pem' }).toString(), 'P-256'],
        [JSON.stringify({ ...ed.privateKey.export({ format: 'jwk' }) }), 'private'],
        [JSON.stringify({ kty: 'oct', k: 'c2VjcmV0' }), 'symmetric'],
        [JSON.stringify({ ...ed.publicKey.export({ format: 'jwk' }), alg: 'HS256' }), 'alg'],
        ['not a key at all', 'PEM SPKI'],
      ];
      for (const [text, says] of cases) {
        const result = await run(['issue-keys', name, '--public-key', '-'], text);
        expect(result.code, text).toBe(2);
        const lines = result.stderr.trim().split('\n');
        expect(lines, text).toHaveLength(1);
        expect(lines[0], text).toContain('--public-key');
        expect(lines[0], text).toContain(says);
        expect(result.stderr).not.toContain('MC4CAQAw');
      }
      const pem = file('ok.pem', ed.publicKey.export({ type: 'spki', format: 'pem' }).toString());
      const both = await run(['issue-keys', name, '--public-key', pem, '--secret-to', join(backend.dir, 'out.json')]);
      expect(both.code).toBe(2);
      // Nothing was issued by any of the refusals.
      expect((await run(['--json', 'show-partner', name])).json().key_pairs).toEqual([]);
    });

    it('39: a key is registered once; rotate-keys --public-key supersedes as today', async () => {
      const name = await partner();
      const first = file('first.pem', generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString());
      const second = file('second.pem', generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString());
      expect((await run(['issue-keys', name, '--public-key', first])).code).toBe(0);
      const rotated = await run(['--json', '--yes', 'rotate-keys', name, '--public-key', second]);
      expect(rotated.code, rotated.stderr).toBe(0);
      expect(rotated.json()).toMatchObject({ kind: 'public_key', superseded_key_pair_id: expect.stringMatching(/^kp_/) });
      const again = await run(['--json', '--yes', 'rotate-keys', name, '--public-key', first]);
      expect(again.code).toBe(4);
      expect(again.json().error.code).toBe('public_key_exists');
    });
  });
});
