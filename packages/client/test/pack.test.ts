// The package as a partner receives it: `npm pack` of this folder, the tarball installed offline in an empty
// folder, and imported there by name (Node's own resolution, nothing of this repository reachable), then its
// types checked by a TypeScript consumer. The pack uses the dist/ that the root build made (`npm test` builds
// first); --ignore-scripts keeps prepack from rewriting dist/ while other test files import it.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperator, PACKAGE_DIR, run, startEngine, startServe, UUID } from './support.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The environment without what `npm test` set for itself (npm_config_local_prefix would point npm at the root). */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.toLowerCase().startsWith('npm_') || /^npm_config_(cache|userconfig)$/i.test(name)) env[name] = value;
  }
  return env;
}

interface Packed {
  name: string;
  filename: string;
  files: { path: string }[];
}

describe('the packed @partnerctl/client, installed in an empty folder', () => {
  let dir: string;
  let consumer: string;
  let packed: Packed;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'partnerctl-client-pack-'));
    const out = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], { cwd: PACKAGE_DIR, env: npmEnv() });
    packed = (JSON.parse(out.stdout) as Packed[])[0]!;
    consumer = join(dir, 'consumer');
    mkdirSync(consumer);
    writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], { cwd: consumer, env: npmEnv() });
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('holds the module, its types, the README and the manifest, nothing else', () => {
    expect(packed.name).toBe('@partnerctl/client');
    expect(packed.files.map((file) => file.path).sort()).toEqual(['README.md', 'dist/index.d.ts', 'dist/index.js', 'package.json']);
  });

  it('installs offline and alone: no dependency of any kind', () => {
    const lock = JSON.parse(readFileSync(join(consumer, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
    expect(Object.keys(lock.packages).sort()).toEqual(['', 'node_modules/@partnerctl/client']);
    const manifest = JSON.parse(readFileSync(join(consumer, 'node_modules/@partnerctl/client/package.json'), 'utf8')) as Record<string, unknown>;
    for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies', 'bundledDependencies']) {
      expect(manifest[field], field).toBeUndefined();
    }
  });

  it('imports by name there and talks to a real partnerctl serve', async () => {
    const operator = createOperator();
    const engine = await startEngine();
    try {
      const partner = await operator.partner(['acme']);
      const server = await startServe(operator, engine);
      try {
        const script = `
          import * as client from '@partnerctl/client';
          const { PartnerApiError, PartnerClient } = client;
          const partner = new PartnerClient({ baseUrl: process.env.BASE_URL, accessKey: process.env.ACCESS_KEY, secretKey: process.env.SECRET_KEY });
          const got = await partner.post('/prices', 'acme', { skus: ['a'] });
          const refused = await partner.get('/prices', 'not-mine').catch((error) => error);
          partner.close();
          console.log(JSON.stringify({
            resolved: import.meta.resolve('@partnerctl/client'),
            exports: Object.keys(client).sort(),
            status: got.status,
            data: got.data,
            requestId: got.requestId,
            exchanges: partner.exchanges,
            refused: { apiError: refused instanceof PartnerApiError, status: refused.status, code: refused.code },
          }));
        `;
        const env = { ...npmEnv(), BASE_URL: `${server.url}/public/v1`, ACCESS_KEY: partner.accessKey, SECRET_KEY: partner.secretKey };
        const out = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: consumer, env });
        const seen = JSON.parse(out.stdout) as Record<string, unknown>;
        expect(fileURLToPath(seen.resolved as string)).toBe(join(consumer, 'node_modules/@partnerctl/client/dist/index.js'));
        expect(seen.exports).toEqual(['PartnerApiError', 'PartnerClient', 'pemSigner', 'signClientAssertion']);
        expect(seen).toMatchObject({ status: 200, data: { engine: 'ok' }, exchanges: 1, refused: { apiError: true, status: 404, code: 'not_found' } });
        expect(seen.requestId).toMatch(UUID);
        expect(JSON.parse(engine.received[0]!.body)).toEqual({ skus: ['a'], company_id: 'acme' });
      } finally {
        await server.stop();
      }
    } finally {
      await engine.close();
      operator.dispose();
    }
  });

  it("types: its README's example compiles against the packed .d.ts, and misuse does not", async () => {
    const readme = readFileSync(join(consumer, 'node_modules/@partnerctl/client/README.md'), 'utf8');
    const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toBeDefined();
    writeFileSync(join(consumer, 'example.ts'), example!);
    writeFileSync(
      join(consumer, 'misuse.ts'),
      `import { PartnerClient, type PartnerResponse } from '@partnerctl/client';
// @ts-expect-error a credential is required: secretKey, privateKey or signer
new PartnerClient({ baseUrl: 'https://api.example.com/public/v1', accessKey: 'a' });
// @ts-expect-error one credential, never two
new PartnerClient({ baseUrl: 'https://api.example.com/public/v1', accessKey: 'a', secretKey: 's', privateKey: 'p' });
const client = new PartnerClient({ baseUrl: 'https://api.example.com/public/v1', accessKey: 'a', secretKey: 's' });
// @ts-expect-error the company is a string
void client.get('/x', 42);
// @ts-expect-error a body is an object
void client.post('/x', 'acme', 'text');
const typed: Promise<PartnerResponse<{ n: number }>> = client.get<{ n: number }>('/x', 'acme');
// @ts-expect-error data is typed by the caller
void typed.then((answer) => answer.data.missing);
`,
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const flags = ['--noEmit', '--strict', '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext'];
    // Node's types from the repository (the README says a consumer needs @types/node); the package's own from the tarball.
    const types = ['--types', 'node', '--typeRoots', join(ROOT, 'node_modules/@types')];
    await run(process.execPath, [tsc, ...flags, ...types, 'example.ts', 'misuse.ts'], { cwd: consumer, env: npmEnv() });
  });
});
