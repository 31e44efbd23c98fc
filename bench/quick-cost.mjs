// A quick look at the cost phase while changing the data path (not part of `npm run bench`): the minimal
// proxy and serve alternately under wrk (-t1 -c32), N rounds, CPU per request of each and their ratio per
// round, then the medians. With QUICK_BASE=<another checkout>/bin/partnerctl, that build's serve runs in the
// same rounds on the same database, and the ratio of this build to it is printed too: the way to tell what a
// change bought on a noisy machine. `node bench/quick-cost.mjs [rounds=4] [seconds=4]`. With QUICK_RECORD=<duration>
// (15m), a recording window is open on the benchmarked partner (docs/decisions.md) before the servers start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, cliEnv, median, postJson, round, startHelper, startServe } from './lib.mjs';
import { seedDatabase } from './seed.mjs';
import { wrk } from './wrk.mjs';

const rounds = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const work = mkdtempSync(join(tmpdir(), 'partnerctl-quick-'));
const children = [];
try {
  const file = join(work, 'partnerctl.db');
  const seed = await seedDatabase({ file, partners: 20, mappingsPerPartner: 2, log: () => {} });
  if (process.env.QUICK_RECORD) cli(['record', seed.partner(3).partnerId, '--for', process.env.QUICK_RECORD], cliEnv(file));
  const upstream = await startHelper('upstream.mjs');
  children.push(upstream);
  const minimal = await startHelper('minimal-proxy.mjs', [upstream.url]);
  children.push(minimal);
  const env = process.env.QUICK_ENV ? JSON.parse(process.env.QUICK_ENV) : {};
  const serve = await startServe({ databaseFile: file, upstream: upstream.url, env });
  children.push(serve);
  const base = process.env.QUICK_BASE ? await startServe({ databaseFile: file, upstream: upstream.url, env, cli: process.env.QUICK_BASE }) : null;
  if (base) children.push(base);
  const partner = seed.partner(3);
  const { access_token: token } = await postJson(`${serve.url}/public/v1/auth/token`, { access_key: partner.accessKey, secret_key: partner.secretKey });
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const path = `/public/v1/recommendations?company_id=${partner.companies[0]}`;
  const targets = [
    { label: 'minimal', url: minimal.url + path, pid: minimal.pid, headers },
    { label: 'serve', url: serve.url + path, pid: serve.pid, headers },
    ...(base ? [{ label: 'base', url: base.url + path, pid: base.pid, headers }] : []),
  ];
  for (const t of targets) await wrk({ ...t, seconds: 2 });
  const ratios = { cpu: [], rps: [], base: [] };
  for (let i = 0; i < rounds; i++) {
    const order = i % 2 === 0 ? targets : [...targets].reverse();
    const out = {};
    for (const t of order) out[t.label] = await wrk({ ...t, seconds });
    ratios.cpu.push(out.serve.cpu_us_per_request / out.minimal.cpu_us_per_request);
    ratios.rps.push(out.serve.rps / out.minimal.rps);
    if (base) ratios.base.push(out.serve.cpu_us_per_request / out.base.cpu_us_per_request);
    const line = Object.entries(out).map(([label, r]) => `${label} ${r.cpu_us_per_request} µs ${r.rps} req/s`).join(', ');
    console.log(`round ${i + 1}: ${line}: serve/minimal CPU ${round(ratios.cpu.at(-1))}x${base ? `, serve/base CPU ${round(ratios.base.at(-1))}x` : ''}`);
  }
  console.log(`median serve/minimal CPU ${round(median(ratios.cpu))}x, req/s ${round(median(ratios.rps))}x${base ? `; median serve/base CPU ${round(median(ratios.base), 3)}x` : ''}`);
} finally {
  for (const child of children.reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}
