// A quick look at the cost phase while changing the data path (not part of `npm run bench`): the minimal
// proxy and serve alternately under wrk (-t1 -c32), N pairs of rounds, CPU per request of each and the ratio
// of each pair, then the median ratio. `node bench/quick-cost.mjs [pairs=4] [seconds=4]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median, postJson, round, startHelper, startServe } from './lib.mjs';
import { seedDatabase } from './seed.mjs';
import { wrk } from './wrk.mjs';

const pairs = Number(process.argv[2] ?? 4);
const seconds = Number(process.argv[3] ?? 4);
const work = mkdtempSync(join(tmpdir(), 'partnerctl-quick-'));
const children = [];
try {
  const file = join(work, 'partnerctl.db');
  const seed = await seedDatabase({ file, partners: 20, mappingsPerPartner: 2, log: () => {} });
  const upstream = await startHelper('upstream.mjs');
  children.push(upstream);
  const minimal = await startHelper('minimal-proxy.mjs', [upstream.url]);
  children.push(minimal);
  const serve = await startServe({ databaseFile: file, upstream: upstream.url, env: process.env.QUICK_ENV ? JSON.parse(process.env.QUICK_ENV) : {} });
  children.push(serve);
  const partner = seed.partner(3);
  const { access_token: token } = await postJson(`${serve.url}/public/v1/auth/token`, { access_key: partner.accessKey, secret_key: partner.secretKey });
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const path = `/public/v1/recommendations?company_id=${partner.companies[0]}`;
  const targets = [
    { label: 'minimal', url: minimal.url + path, pid: minimal.pid, headers },
    { label: 'serve', url: serve.url + path, pid: serve.pid, headers },
  ];
  for (const t of targets) await wrk({ ...t, seconds: 2 });
  const ratios = [];
  const rps = [];
  for (let i = 0; i < pairs; i++) {
    const order = i % 2 === 0 ? targets : [...targets].reverse();
    const out = {};
    for (const t of order) out[t.label] = await wrk({ ...t, seconds });
    const ratio = out.serve.cpu_us_per_request / out.minimal.cpu_us_per_request;
    ratios.push(ratio);
    rps.push(out.serve.rps / out.minimal.rps);
    console.log(`pair ${i + 1}: minimal ${out.minimal.cpu_us_per_request} µs ${out.minimal.rps} req/s, serve ${out.serve.cpu_us_per_request} µs ${out.serve.rps} req/s: CPU ${round(ratio)}x, req/s ${round(out.serve.rps / out.minimal.rps)}x`);
  }
  console.log(`median CPU ratio ${round(median(ratios))}x, median req/s ratio ${round(median(rps))}x`);
} finally {
  for (const child of children.reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}
