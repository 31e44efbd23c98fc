// The CPU a warm token exchange costs the server: a shared secret's (its HMAC fast path, after the first
// argon2 verification) beside a client assertion's (private_key_jwt: a signature check per exchange, and the
// jti written to the database), for each accepted key type. The real `partnerctl serve` on a fresh SQLite file;
// its CPU read from /proc over each run, rounds alternated (ABBA), medians reported. Assertions are signed
// ahead of each run (the client's cost is not the server's). `node bench/assertion-cost.mjs [rounds=4] [requests=2000]`.
import { generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, cliEnv, median, postJson, round, startHelper, startServe } from './lib.mjs';
import { seedDatabase } from './seed.mjs';

const TOKEN_PATH = '/public/v1/auth/token';
const AUDIENCE = 'https://api.bench.invalid/public/v1/auth/token';
const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const CONCURRENCY = 16;
const TICKS = 100;

function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS;
}

const b64 = (data) => Buffer.from(data).toString('base64url');

function keyOf(type) {
  if (type === 'EdDSA') return generateKeyPairSync('ed25519');
  if (type === 'ES256') return generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return generateKeyPairSync('rsa', { modulusLength: 2048 });
}

function assertion(alg, privateKey, accessKey) {
  const iat = Math.floor(Date.now() / 1000);
  const input = `${b64(JSON.stringify({ alg, typ: 'JWT' }))}.${b64(JSON.stringify({ iss: accessKey, sub: accessKey, aud: AUDIENCE, iat, exp: iat + 120, jti: randomUUID() }))}`;
  const signature =
    alg === 'EdDSA' ? sign(null, Buffer.from(input), privateKey) : alg === 'ES256' ? sign('sha256', Buffer.from(input), { key: privateKey, dsaEncoding: 'ieee-p1363' }) : sign('sha256', Buffer.from(input), privateKey);
  return `${input}.${b64(signature)}`;
}

/** `bodies` POSTed to the token endpoint, CONCURRENCY at a time; the server's CPU per exchange and the rate. */
async function run(url, pid, bodies) {
  let next = 0;
  const cpuBefore = cpuSeconds(pid);
  const started = performance.now();
  const worker = async () => {
    while (next < bodies.length) {
      const body = bodies[next++];
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`exchange answered ${response.status}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuSeconds(pid) - cpuBefore;
  return { cpu_us: (cpu / bodies.length) * 1e6, rps: bodies.length / seconds };
}

export async function assertionCost({ rounds = 4, requests = 2000, log = console.log } = {}) {
  const work = mkdtempSync(join(tmpdir(), 'partnerctl-assertion-'));
  const children = [];
  try {
    const file = join(work, 'partnerctl.db');
    const seed = await seedDatabase({ file, partners: 20, mappingsPerPartner: 1, log: () => {} });
    const env = cliEnv(file);
    const kinds = {};
    for (const alg of ['EdDSA', 'ES256', 'RS256']) {
      const { privateKey, publicKey } = keyOf(alg);
      const pem = join(work, `${alg}.pub.pem`);
      writeFileSync(pem, publicKey.export({ type: 'spki', format: 'pem' }));
      const name = `bench-${alg.toLowerCase()}`;
      cli(['create-partner', '--name', name], env);
      const issued = JSON.parse(cli(['issue-keys', name, '--public-key', pem, '--json'], env));
      kinds[alg] = { privateKey, accessKey: issued.access_key };
    }
    const upstream = await startHelper('upstream.mjs');
    children.push(upstream);
    const serve = await startServe({ databaseFile: file, upstream: upstream.url, env: { PUBLIC_API_TOKEN_URL: AUDIENCE } });
    children.push(serve);
    const url = serve.url + TOKEN_PATH;
    const partner = seed.partner(3);
    const secretBody = JSON.stringify({ access_key: partner.accessKey, secret_key: partner.secretKey });
    // The secret's first exchange pays argon2 and fills the fast path: every later one is the warm case.
    await postJson(url, JSON.parse(secretBody));
    const bodiesOf = (label) =>
      Array.from({ length: requests }, () =>
        label === 'secret' ? secretBody : JSON.stringify({ client_assertion_type: JWT_BEARER, client_assertion: assertion(label, kinds[label].privateKey, kinds[label].accessKey) }),
      );
    const labels = ['secret', 'EdDSA', 'ES256', 'RS256'];
    // Warm-up: the JIT, the key imports, the connection pool.
    for (const label of labels) await run(url, serve.pid, bodiesOf(label).slice(0, 300));
    const samples = Object.fromEntries(labels.map((label) => [label, { cpu_us: [], rps: [] }]));
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? labels : [...labels].reverse();
      const line = [];
      for (const label of order) {
        const result = await run(url, serve.pid, bodiesOf(label));
        samples[label].cpu_us.push(result.cpu_us);
        samples[label].rps.push(result.rps);
        line.push(`${label} ${round(result.cpu_us, 0)} µs ${round(result.rps, 0)}/s`);
      }
      log(`round ${i + 1}: ${line.join(', ')}`);
    }
    const secret = median(samples.secret.cpu_us);
    const result = Object.fromEntries(
      labels.map((label) => [label, { cpu_us_per_exchange: round(median(samples[label].cpu_us), 0), rps: round(median(samples[label].rps), 0), vs_secret: round(median(samples[label].cpu_us) / secret) }]),
    );
    log(JSON.stringify(result));
    return result;
  } finally {
    for (const child of children.reverse()) await child.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await assertionCost({ rounds: Number(process.argv[2] ?? 4), requests: Number(process.argv[3] ?? 2000) });
}
