// A flood of refused requests from one address (issue 31; not part of `npm run bench`): what the server writes
// to gate_decisions and whether it keeps answering at its usual rate. Accepted data requests under wrk,
// then 100,000 unauthenticated requests (401 token_missing) from 127.0.0.1 as fast as autocannon sends them,
// then accepted requests again; after a clean stop, the rows the flood left. `node bench/refusal-flood.mjs [requests=100000]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load, postJson, startHelper, startServe } from './lib.mjs';
import { seedDatabase } from './seed.mjs';
import { wrk } from './wrk.mjs';

const flood = Number(process.argv[2] ?? 100_000);
const work = mkdtempSync(join(tmpdir(), 'partnerctl-flood-'));
const children = [];
try {
  const file = join(work, 'partnerctl.db');
  const seed = await seedDatabase({ file, partners: 5, mappingsPerPartner: 2, log: () => {} });
  const upstream = await startHelper('upstream.mjs');
  children.push(upstream);
  const serve = await startServe({ databaseFile: file, upstream: upstream.url });
  children.push(serve);
  const partner = seed.partner(1);
  const { access_token: token } = await postJson(`${serve.url}/public/v1/auth/token`, { access_key: partner.accessKey, secret_key: partner.secretKey });
  const accepted = { url: `${serve.url}/public/v1/recommendations?company_id=${partner.companies[0]}`, headers: { authorization: `Bearer ${token}` }, pid: serve.pid, label: 'accepted' };
  await wrk({ ...accepted, seconds: 2 });
  const before = await wrk({ ...accepted, seconds: 5 });
  const refused = await load({ url: `${serve.url}/public/v1/recommendations?company_id=x`, amount: flood, connections: 32, label: 'flood', allowNon2xx: true });
  const after = await wrk({ ...accepted, seconds: 5 });
  await serve.stop();
  children.pop();
  const Sqlite = createRequire(import.meta.url)('better-sqlite3');
  const db = new Sqlite(file, { readonly: true });
  const rows = db.prepare("SELECT substr(at, 1, 16) AS minute, COUNT(*) AS n FROM gate_decisions WHERE reason = 'token_missing' GROUP BY 1 ORDER BY 1").all();
  const counters = db.prepare("SELECT substr(minute, 1, 16) AS minute, key_kind, key_value, refusals FROM gate_decisions_unrecorded ORDER BY 1").all();
  db.close();
  console.log(JSON.stringify({
    flood: { requests: refused.requests, seconds: refused.seconds, rps: refused.rps, p99_ms: refused.p99_ms },
    accepted_rps: { before: before.rps, after: after.rps },
    accepted_cpu_us_per_request: { before: before.cpu_us_per_request, after: after.cpu_us_per_request },
    recorded_per_minute: rows,
    unrecorded_counters: counters,
    rows_written: rows.reduce((sum, row) => sum + row.n, 0) + counters.length,
  }, null, 2));
} finally {
  for (const child of children.reverse()) await child.stop();
  rmSync(work, { recursive: true, force: true });
}
