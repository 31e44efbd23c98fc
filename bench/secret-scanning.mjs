// What a GitHub secret-scanning batch costs at the product's argon2 parameters (not part of `npm run bench`):
// a real `serve` with the receiver on, a key list on loopback, and per round one batch of 100 well-formed
// secrets of an existing pair (each one argon2 verification), one batch of 100 secret-shaped garbage items
// (none), and 100 bare argon2 verifications in this process for comparison. The tests assert how many
// verifications each batch makes (test/http/secret-scanning.test.ts); the time is measured here.
// `npm run build && node bench/secret-scanning.mjs [rounds=5]`
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import argon2 from 'argon2';
import { keyListBody, signedHeaders } from '../scripts/secret-scanning-alert.mjs';
import { CLI, ROOT, cliEnv, median, round, startHelper, startServe } from './lib.mjs';

const rounds = Number(process.argv[2] ?? 5);
const { newKeyMaterial } = await import(pathToFileURL(join(ROOT, 'dist/domain/rules/identifiers.js')).href);
const github = generateKeyPairSync('ec', { namedCurve: 'P-256' });

const work = mkdtempSync(join(tmpdir(), 'partnerctl-scanning-'));
const children = [];
const keyList = keyListBody(github.publicKey);
const keyServer = createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(keyList));
try {
  const file = join(work, 'partnerctl.db');
  const env = cliEnv(file);
  const cli = (...args) => JSON.parse(execFileSync(process.execPath, [CLI, '--json', '--yes', ...args], { env, encoding: 'utf8' }));
  cli('db', 'migrate', '--create');
  cli('create-partner', '--name', 'Scanned');
  const pair = cli('issue-keys', 'Scanned');
  await new Promise((resolve) => keyServer.listen(0, '127.0.0.1', resolve));
  const upstream = await startHelper('upstream.mjs');
  children.push(upstream);
  const serve = await startServe({
    databaseFile: file,
    upstream: upstream.url,
    env: { PUBLIC_API_SECRET_SCANNING: 'github', PUBLIC_API_SECRET_SCANNING_KEYS_URL: `http://127.0.0.1:${keyServer.address().port}/keys` },
  });
  children.push(serve);
  /** One signed batch; its wall time in ms. */
  const batch = async (tokens) => {
    const body = JSON.stringify(tokens.map((token, i) => ({ token, type: 'partnerctl_secret_key', url: `https://github.com/o/r/${randomBytes(6).toString('hex')}/${i}`, source: 'content' })));
    const headers = signedHeaders(body, github.privateKey);
    const started = performance.now();
    const response = await fetch(`${serve.url}/secret-scanning/github`, { method: 'POST', headers, body });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`batch answered ${response.status}`);
    return performance.now() - started;
  };
  const reference = await argon2.hash('reference', { type: argon2.argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 });
  const figures = { costly_ms: [], garbage_ms: [], bare_argon2_ms: [] };
  // One round unmeasured first, to warm both paths.
  for (let r = -1; r < rounds; r++) {
    const costly = await batch(Array.from({ length: 100 }, () => newKeyMaterial(pair.key_pair_id).secretKey));
    const garbage = await batch(Array.from({ length: 100 }, (_, i) => `pctl_sk_${randomBytes(40).toString('base64url')}${i}`));
    const started = performance.now();
    await Promise.all(Array.from({ length: 100 }, () => argon2.verify(reference, 'other')));
    const bare = performance.now() - started;
    if (r < 0) continue;
    figures.costly_ms.push(round(costly, 1));
    figures.garbage_ms.push(round(garbage, 1));
    figures.bare_argon2_ms.push(round(bare, 1));
  }
  console.log(
    JSON.stringify(
      {
        rounds,
        median_ms: { costly_batch_100: round(median(figures.costly_ms), 1), garbage_batch_100: round(median(figures.garbage_ms), 1), bare_argon2_100: round(median(figures.bare_argon2_ms), 1) },
        ...figures,
      },
      null,
      2,
    ),
  );
} finally {
  for (const child of children.reverse()) await child.stop();
  keyServer.close();
  rmSync(work, { recursive: true, force: true });
}
