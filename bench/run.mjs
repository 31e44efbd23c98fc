// `npm run bench`: the speed figures of issue 5, each next to a baseline measured in the same run.
// Loopback only; bounded in time (a few minutes on 2 cores). See BENCHMARKS.md for the method.
//
// Environment: BENCH_DURATION (seconds per load phase, default 5), BENCH_CONNECTIONS (default 64),
// BENCH_SCALE (fraction of the 100,000-partner / 1,000,000-mapping database, default 1),
// BENCH_CPU_PROF=<dir> (run both servers under `node --cpu-prof`), BENCH_KEEP=1 (keep the databases),
// BENCH_ONLY=cost,limits,gate,in-process,exchange,cold,cli,propagation (a subset of the phases, while profiling).
// The limits phase uses the Redis at BENCH_REDIS_URL (default redis://127.0.0.1:6379); without it, its Redis row is skipped.
// BENCH_POSTGRES_URL (the PostgreSQL server of the propagation phase, default postgresql://postgres@127.0.0.1:5432/postgres;
// a fresh database is created on it and dropped after), BENCH_PROPAGATION_TRIALS (default 21).
// The cost phase needs wrk (apt-get install wrk); without it the phase is skipped with a note.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { execFileSync } from 'node:child_process';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { CLI, ROOT, cliEnv, load, median, postJson, round, startHelper, startServe, timeCommand } from './lib.mjs';
import { seedDatabase } from './seed.mjs';
import { wrk, wrkAvailable } from './wrk.mjs';
import { runbookCommands, runbookRows, runbookScale } from './runbooks.mjs';
import { propagation } from './propagation.mjs';
import { assertionCost } from './assertion-cost.mjs';

const env = process.env;
const config = {
  durationSeconds: Number(env.BENCH_DURATION ?? 5),
  warmupSeconds: 2,
  connections: Number(env.BENCH_CONNECTIONS ?? 64),
  scale: Number(env.BENCH_SCALE ?? 1),
  smallPartners: 2_000,
  mappingsPerPartner: 10,
  gateTokens: 32,
  inProcessCombos: 1_000,
  inProcessSeconds: 2,
  warmPairs: 8,
  coldExchanges: 300,
  coldConnections: 4,
  timingRounds: 60,
  timingWarmupRounds: 5,
  cliRuns: 15,
  // The cost phase (wrk): issue 13's method.
  wrkThreads: 1,
  wrkConnections: 32,
  wrkSeconds: Number(env.BENCH_WRK_SECONDS ?? 6),
  costPasses: Number(env.BENCH_COST_PASSES ?? 4),
  listRuns: 7,
};
config.bigPartners = Math.round(100_000 * config.scale);

const PHASES = ['cost', 'limits', 'gate', 'in-process', 'exchange', 'assertion', 'cold', 'cli', 'propagation'];
const only = env.BENCH_ONLY ? new Set(env.BENCH_ONLY.split(',')) : new Set(PHASES);
const TOKEN_PATH = '/public/v1/auth/token';
const DATA_PATH = '/public/v1/recommendations';
const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);
const log = (line) => process.stderr.write(`bench: ${line}\n`);

/** Distinct partner indices in a scattered order (a stride coprime with n), so big-file reads are not all on one page. */
function picker(n) {
  const gcd = (a, b) => (b === 0 ? a : gcd(b, a % b));
  let stride = 7919 % n || 1;
  while (gcd(stride, n) !== 1) stride++;
  let next = 0;
  return () => {
    if (next >= n) throw new Error(`out of unused partners (${n})`);
    return (next++ * stride) % n;
  };
}

const shuffled = (items) => {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
};

// ---------------------------------------------------------------------------------------------- phases

async function gateTokens(target) {
  const requests = [];
  const direct = [];
  for (let n = 0; n < config.gateTokens; n++) {
    const partner = target.seed.partner(target.next());
    const { access_token: token } = await postJson(target.serve.url + TOKEN_PATH, { access_key: partner.accessKey, secret_key: partner.secretKey });
    const company = partner.companies[n % partner.companies.length];
    const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
    requests.push({ method: 'GET', path: `${DATA_PATH}?company_id=${company}`, headers });
    direct.push({ method: 'GET', path: `/recommendations?company_id=${company}`, headers });
  }
  return { requests, direct };
}

async function measured(spec) {
  await load({ ...spec, duration: config.warmupSeconds, label: `${spec.label} (warm-up)` });
  return load({ ...spec, duration: config.durationSeconds });
}

/** Runs each named load in A B C / C B A order and keeps each one's best round: noise only ever slows a run down. */
async function abba(specs) {
  const best = {};
  for (const order of [specs, [...specs].reverse()]) {
    for (const spec of order) {
      const result = await measured(spec);
      log(`${spec.label}: ${result.rps} req/s, p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms`);
      if (!best[spec.label] || result.rps > best[spec.label].rps) best[spec.label] = result;
    }
  }
  return best;
}

/**
 * wrk rounds over `specs` in A B C / C B A / … order, `passes` times, after one 2 s warm-up per target; `around`
 * wraps each round (a scraper while it runs). Per target: its rounds, and the median CPU per request and
 * median req/s of them (p50/p99 from its median-req/s round). Medians rather than the best round: on this
 * shared machine one lucky round of either side moved a best-of-two ratio by 0.15.
 */
async function wrkPasses(specs, passes, around = (_spec, run) => run()) {
  const common = { threads: config.wrkThreads, connections: config.wrkConnections };
  for (const spec of specs) await around(spec, () => wrk({ ...spec, ...common, seconds: 2, label: `${spec.label} (warm-up)` }));
  const rounds = {};
  const perPass = [];
  for (let pass = 0; pass < passes; pass++) {
    const results = {};
    for (const spec of pass % 2 === 0 ? specs : [...specs].reverse()) {
      const result = await around(spec, () => wrk({ ...spec, ...common, seconds: config.wrkSeconds }));
      log(`wrk ${spec.label}: ${result.rps} req/s, p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms, ${result.cpu_us_per_request} µs CPU/request`);
      rounds[spec.label] ??= [];
      rounds[spec.label].push(result);
      results[spec.label] = result;
    }
    perPass.push(results);
  }
  const out = {};
  for (const [label, results] of Object.entries(rounds)) {
    const byRps = [...results].sort((a, b) => a.rps - b.rps);
    const middle = byRps[Math.floor((byRps.length - 1) / 2)];
    out[label] = { ...middle, rps: round(median(results.map((r) => r.rps)), 0), cpu_us_per_request: round(median(results.map((r) => r.cpu_us_per_request)), 1), rounds: results };
  }
  return { out, perPass };
}

/**
 * wrk (1 thread, 32 connections) against the engine directly, the minimal Node proxy and serve, four passes
 * (wrkPasses): one partner, one token, one company (a warm cache), every request forwarded. Beside the
 * medians, serve ÷ minimal proxy within each pass (measured seconds apart), whose spread shows the noise.
 */
async function costPhase(target, upstream, minimalProxy) {
  const partner = target.seed.partner(target.next());
  const { access_token: token } = await postJson(target.serve.url + TOKEN_PATH, { access_key: partner.accessKey, secret_key: partner.secretKey });
  const company = partner.companies[0];
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const specs = [
    { label: 'engine_direct', url: `${upstream.url}/recommendations?company_id=${company}`, pid: upstream.pid, headers },
    { label: 'minimal_proxy', url: `${minimalProxy.url}${DATA_PATH}?company_id=${company}`, pid: minimalProxy.pid, headers },
    { label: 'serve', url: `${target.serve.url}${DATA_PATH}?company_id=${company}`, pid: target.serve.pid, headers },
  ];
  const { out, perPass } = await wrkPasses(specs, config.costPasses);
  out.paired = {
    cpu: perPass.map((p) => round(p.serve.cpu_us_per_request / p.minimal_proxy.cpu_us_per_request)),
    rps: perPass.map((p) => round(p.serve.rps / p.minimal_proxy.rps)),
  };
  log(`serve ÷ minimal proxy per pass: CPU per request ${out.paired.cpu.join(', ')}; req/s ${out.paired.rps.join(', ')}`);
  return out;
}

/**
 * Issue 14: the gated, forwarded request of the cost phase (wrk, one token, one company) through four serve
 * processes on the same database, in A B C D / D C B A order: no limits and no usage or metrics (the
 * baseline), a per-partner limit counted in memory, the same limit counted in Redis, and usage counting with
 * metrics on (and a scrape per second, as Prometheus would). The limit is far above what wrk sends, so every
 * request is accepted and all of it is the limit's bookkeeping. Kept per variant: the lowest CPU per request.
 */
async function limitsPhase(target, upstream, cpuProfileDir) {
  const redisUrl = env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const redisUp = await redisAnswers(redisUrl);
  if (!redisUp) log(`limits phase: Redis at ${redisUrl} does not answer; the Redis variant is skipped`);
  const off = { PUBLIC_API_USAGE: '0', REDIS_URL: '', PUBLIC_API_DEFAULT_RATE_LIMIT: '', PUBLIC_API_METRICS_PORT: '' };
  const limit = { PUBLIC_API_DEFAULT_RATE_LIMIT: '1000000/s' };
  const variants = [
    { label: 'no_limits', env: off },
    { label: 'limit_memory', env: { ...off, ...limit } },
    ...(redisUp ? [{ label: 'limit_redis', env: { ...off, ...limit, REDIS_URL: redisUrl } }] : []),
    { label: 'usage_metrics', env: { ...off, PUBLIC_API_USAGE: '1', PUBLIC_API_METRICS_PORT: '0' } },
  ];
  const servers = [];
  try {
    for (const variant of variants) {
      const server = await startServe({ databaseFile: target.file, upstream: upstream.url, cpuProfileDir, env: variant.env });
      servers.push(server);
      variant.server = server;
    }
    const partner = target.seed.partner(target.next());
    const company = partner.companies[0];
    const specs = [];
    for (const variant of variants) {
      const { access_token: token } = await postJson(variant.server.url + TOKEN_PATH, { access_key: partner.accessKey, secret_key: partner.secretKey });
      specs.push({
        label: variant.label,
        url: `${variant.server.url}${DATA_PATH}?company_id=${company}`,
        pid: variant.server.pid,
        headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
        metricsUrl: variant.server.metricsUrl,
      });
    }
    // A scrape a second while metrics are on: what Prometheus costs the server too.
    const withScrapes = async (spec, run) => {
      const scraper = spec.metricsUrl ? setInterval(() => void fetch(spec.metricsUrl).then((r) => r.arrayBuffer()).catch(() => {}), 1_000) : undefined;
      try {
        return await run();
      } finally {
        clearInterval(scraper);
      }
    };
    const { out } = await wrkPasses(specs, config.costPasses, withScrapes);
    return out;
  } finally {
    for (const server of servers) await server.stop().catch(() => {});
  }
}

async function redisAnswers(url) {
  const { Redis } = await import('ioredis');
  const client = new Redis(url, { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

async function inProcessGate(target, { cached }) {
  const [{ resolveDatabase, loadConfig }, { createServices }, { mintToken }] = await Promise.all([
    dist('config.js'),
    dist('http/server/services.js'),
    dist('domain/operations/tokens.js'),
  ]);
  // The server's own wiring; maxCached 0 for the verifier: every token's signature is verified again, the
  // baseline of what the caches buy.
  const services = await createServices(
    { server: loadConfig({}, {}).server, database: resolveDatabase(`file:${target.file}`, {}), signingKeyFile: target.keyFile },
    cached ? {} : { verifierCacheSize: 0 },
  );
  const { access, keys, verifier } = services;
  try {
    const combos = [];
    const pick = picker(target.seed.rows.partners);
    for (let n = 0; n < config.inProcessCombos; n++) {
      const partner = target.seed.partner(pick());
      const minted = await mintToken(keys, { partnerId: partner.partnerId, keyPairId: partner.keyPairId });
      combos.push({ token: minted.accessToken, company: partner.companies[n % partner.companies.length] });
    }
    const check = async ({ token, company }) => access.authorize(await verifier.verify(token), company);
    for (const combo of combos) await check(combo);
    let checks = 0;
    const started = performance.now();
    const until = started + config.inProcessSeconds * 1000;
    while (performance.now() < until) {
      for (let i = 0; i < 1_000; i++) await check(combos[(checks + i) % combos.length]);
      checks += 1_000;
      // Let the revision poll (a timer) run, as it would between requests in the server.
      await yieldToLoop();
    }
    return round(checks / ((performance.now() - started) / 1000), 0);
  } finally {
    await services.close();
  }
}

async function argon2Ceiling(seconds) {
  const { hashSecret, verifySecret } = await dist('domain/rules/secrets.js');
  const secret = 'pctl_sk_' + 'x'.repeat(43);
  const hash = await hashSecret(secret);
  // libuv's default thread pool (4 threads), as the server uses it.
  let done = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (performance.now() < until) {
        await verifySecret(hash, secret);
        done++;
      }
    }),
  );
  return round(done / ((performance.now() - started) / 1000), 1);
}

function coldExchanges(target) {
  const body = () => {
    const partner = target.seed.partner(target.next());
    return JSON.stringify({ access_key: partner.accessKey, secret_key: partner.secretKey });
  };
  return load({
    url: target.serve.url,
    connections: config.coldConnections,
    amount: config.coldExchanges,
    label: `cold exchanges ${target.name}`,
    requests: [{ method: 'POST', path: TOKEN_PATH, headers: { 'content-type': 'application/json' }, setupRequest: (request) => ({ ...request, body: body() }) }],
  });
}

/** One request at a time, the three kinds interleaved in a shuffled order each round, wall time per request. */
async function refusalTiming(target) {
  const { newKeyMaterial } = await dist('domain/rules/identifiers.js');
  const samples = { unknown_key: [], wrong_secret: [], valid_cold: [] };
  const expected = { unknown_key: 401, wrong_secret: 401, valid_cold: 200 };
  const bodyOf = (kind) => {
    if (kind === 'unknown_key') return newKeyMaterial();
    const partner = target.seed.partner(target.next());
    if (kind === 'wrong_secret') return { accessKey: partner.accessKey, secretKey: newKeyMaterial().secretKey };
    return partner;
  };
  for (let round_ = 0; round_ < config.timingWarmupRounds + config.timingRounds; round_++) {
    for (const kind of shuffled(Object.keys(samples))) {
      const { accessKey, secretKey } = bodyOf(kind);
      const started = performance.now();
      const response = await fetch(target.serve.url + TOKEN_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ access_key: accessKey, secret_key: secretKey }),
      });
      await response.arrayBuffer();
      const ms = performance.now() - started;
      if (response.status !== expected[kind]) throw new Error(`timing ${kind}: status ${response.status}, expected ${expected[kind]}`);
      if (round_ >= config.timingWarmupRounds) samples[kind].push(ms);
    }
  }
  const medians = Object.fromEntries(Object.entries(samples).map(([kind, values]) => [kind, round(median(values), 2)]));
  const values = Object.values(medians);
  return { medians_ms: medians, max_ratio: round(Math.max(...values) / Math.min(...values), 3), samples_per_kind: config.timingRounds };
}

function cliStartup(small) {
  const commands = {
    node_e_0: ['-e', '0'],
    help: [CLI, '--help'],
    list_partners_json: [CLI, 'list-partners', '--json'],
  };
  const times = Object.fromEntries(Object.keys(commands).map((name) => [name, []]));
  const envOf = cliEnv(small.file);
  for (const name of Object.keys(commands)) timeCommand(commands[name], envOf);
  for (let run = 0; run < config.cliRuns; run++) {
    for (const name of shuffled(Object.keys(commands))) times[name].push(timeCommand(commands[name], envOf));
  }
  return Object.fromEntries(Object.entries(times).map(([name, values]) => [name, round(median(values), 1)]));
}

async function listPages(small, big) {
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const db = new BetterSqlite3(big.file, { readonly: true });
  const deepAt = Math.floor(big.seed.rows.partners * 0.9);
  const cursor = db.prepare('SELECT id FROM partners ORDER BY id LIMIT 1 OFFSET ?').get(deepAt).id;
  db.close();
  const runs = {
    small_first_page: [[CLI, 'list-partners', '--limit', '50', '--json'], cliEnv(small.file)],
    big_first_page: [[CLI, 'list-partners', '--limit', '50', '--json'], cliEnv(big.file)],
    big_deep_page: [[CLI, 'list-partners', '--limit', '50', '--json', '--cursor', cursor], cliEnv(big.file)],
  };
  const times = Object.fromEntries(Object.keys(runs).map((name) => [name, []]));
  for (const [args, envOf] of Object.values(runs)) timeCommand(args, envOf);
  for (let run = 0; run < config.listRuns; run++) {
    for (const name of shuffled(Object.keys(runs))) times[name].push(timeCommand(...runs[name]));
  }
  return { deep_page_offset: deepAt, ...Object.fromEntries(Object.entries(times).map(([name, values]) => [name, round(median(values), 1)])) };
}

// ---------------------------------------------------------------------------------------------- table

function table(rows) {
  const header = ['measure', 'value', 'baseline (same run)', 'ratio', 'target', 'result'];
  const cells = rows.map((row) => [row.measure, row.value, row.baseline, row.ratio === null ? '' : String(row.ratio), row.target ?? '', row.met === undefined ? '' : row.met ? 'met' : 'MISSED']);
  const widths = header.map((title, i) => Math.max(title.length, ...cells.map((cell) => cell[i].length)));
  const line = (cell) => `| ${cell.map((text, i) => text.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`, ...cells.map(line)].join('\n');
}

function buildRows(r) {
  const rows = [];
  const add = (measure, value, baseline, ratio, target, met) => rows.push({ measure, value, baseline, ratio: ratio === null ? null : round(ratio, 2), target, met });
  const reqs = (x) => `${Math.round(x.rps)} req/s, p50 ${x.p50_ms} / p99 ${x.p99_ms} ms`;
  const scale = [];
  const k = r.cost;
  if (k) {
    const costOf = (x) => `${x.rps} req/s, p50 ${x.p50_ms} / p99 ${x.p99_ms} ms, ${x.cpu_us_per_request} µs CPU/req`;
    const cpuRatio = k.serve.cpu_us_per_request / k.minimal_proxy.cpu_us_per_request;
    add('serve CPU per request (wrk, 1 token)', `${k.serve.cpu_us_per_request} µs`, `minimal proxy ${k.minimal_proxy.cpu_us_per_request} µs`, cpuRatio, '<= 1.3x', cpuRatio <= 1.3);
    const rpsRatio = k.serve.rps / k.minimal_proxy.rps;
    add('serve throughput (wrk, 1 token)', costOf(k.serve), `minimal proxy ${costOf(k.minimal_proxy)}`, rpsRatio, '>= 0.75x', rpsRatio >= 0.75);
    add('(reference) engine directly (wrk)', costOf(k.engine_direct), '', null, '', undefined);
    add('(spread) serve ÷ minimal proxy per pass', `CPU ${k.paired.cpu.join(', ')}`, `req/s ${k.paired.rps.join(', ')}`, null, '', undefined);
  }
  const lim = r.limits;
  if (lim) {
    const base = lim.no_limits;
    const row = (label, measure, target, max) => {
      const x = lim[label];
      if (!x) return;
      const ratio = x.cpu_us_per_request / base.cpu_us_per_request;
      add(measure, `${x.cpu_us_per_request} µs CPU/req, ${x.rps} req/s`, `no limits ${base.cpu_us_per_request} µs, ${base.rps} req/s`, ratio, target, ratio <= max);
    };
    row('limit_memory', 'gated request, per-partner limit in memory (wrk)', '<= 1.1x', 1.1);
    row('limit_redis', 'gated request, per-partner limit in Redis (wrk)', '<= 1.5x', 1.5);
    row('usage_metrics', 'gated request, usage counting + metrics on (wrk)', '<= 1.1x', 1.1);
  }
  const g = r.gate_http;
  if (g) {
    for (const db of ['small', 'big']) {
      const ratio = g[db].rps / g.direct.rps;
      add(`gate via serve, ${db} db`, reqs(g[db]), `direct upstream ${reqs(g.direct)}`, ratio, '>= 0.6', ratio >= 0.6);
    }
    add('(reference) minimal Node proxy, no gate', reqs(g.minimal_proxy), `direct upstream ${reqs(g.direct)}`, g.minimal_proxy.rps / g.direct.rps, '', undefined);
    add('(reference) gate via serve vs minimal proxy', reqs(g.small), `minimal proxy ${reqs(g.minimal_proxy)}`, g.small.rps / g.minimal_proxy.rps, '', undefined);
    scale.push(['scale: gate via serve', g.big.rps, g.small.rps]);
  }
  const ip = r.gate_in_process;
  if (ip) {
    for (const db of ['small', 'big']) {
      const ratio = ip[db].cached / ip[db].uncached;
      add(`gate in-process, ${db} db`, `${ip[db].cached} checks/s`, `no token cache ${ip[db].uncached} checks/s`, ratio, '>= 50,000/s', ip[db].cached >= 50_000);
    }
    scale.push(['scale: gate in-process', ip.big.cached, ip.small.cached]);
  }
  const w = r.exchange_warm;
  if (w) {
    for (const db of ['small', 'big']) {
      add(`exchange warm, ${db} db`, reqs(w[db]), `GET /healthz ${reqs(w.healthz)}`, w[db].rps / w.healthz.rps, '>= 1,000/s', w[db].rps >= 1_000);
    }
    scale.push(['scale: exchange warm', w.big.rps, w.small.rps]);
  }
  const c = r.exchange_cold;
  if (c) {
    for (const db of ['small', 'big']) {
      add(`exchange cold, ${db} db`, reqs(c[db]), `argon2 verify ceiling ${c.argon2_ceiling_per_s}/s`, c[db].rps / c.argon2_ceiling_per_s, '>= 60/s', c[db].rps >= 60);
    }
    scale.push(['scale: exchange cold', c.big.rps, c.small.rps]);
    for (const db of ['small', 'big']) {
      const { medians_ms: m, max_ratio: ratio } = r.refusal_timing[db];
      add(`refusal timing, ${db} db (medians)`, `unknown ${m.unknown_key} / wrong ${m.wrong_secret} / valid-cold ${m.valid_cold} ms`, 'each other', ratio, 'max/min <= 1.10', ratio <= 1.1);
    }
  }
  for (const [measure, big, small] of scale) add(`${measure} (big/small)`, String(big), `small db ${small}`, big / small, '>= 0.90', big / small >= 0.9);
  const cli = r.cli_startup_ms;
  if (cli) {
    add('CLI --help', `${cli.help} ms`, `node -e 0 ${cli.node_e_0} ms`, cli.help / cli.node_e_0, '<= 2x', cli.help / cli.node_e_0 <= 2);
    add('CLI list-partners --json', `${cli.list_partners_json} ms`, `node -e 0 ${cli.node_e_0} ms`, cli.list_partners_json / cli.node_e_0, '<= 3x', cli.list_partners_json / cli.node_e_0 <= 3);
    const l = r.list_pages_ms;
    add('list-partners first page, big db', `${l.big_first_page} ms`, `small db ${l.small_first_page} ms`, l.big_first_page / l.small_first_page, '<= 1.10', l.big_first_page / l.small_first_page <= 1.1);
    add(`list-partners page at ${l.deep_page_offset}, big db`, `${l.big_deep_page} ms`, `small db ${l.small_first_page} ms`, l.big_deep_page / l.small_first_page, '<= 1.10', l.big_deep_page / l.small_first_page <= 1.1);
  }
  runbookRows(r, add);
  const p = r.propagation;
  if (p) {
    for (const [backend, limit] of [['sqlite', 1000], ['postgresql', 100]]) {
      const x = p[backend];
      if (!x) continue;
      add(
        `revocation propagation, ${backend} (${x.instances} instance${x.instances > 1 ? 's' : ''}, ${x.trials} trials)`,
        `median ${x.median_ms} / worst ${x.worst_ms} ms`,
        `staleness bound 1000 ms`,
        x.worst_ms / 1000,
        `worst <= ${limit} ms`,
        x.worst_ms <= limit,
      );
    }
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------- main

const work = mkdtempSync(join(tmpdir(), 'partnerctl-bench-'));
const children = [];
const started = performance.now();
const loadAtStart = loadavg().map((x) => round(x, 2));
try {
  log(`work folder ${work}; ${JSON.stringify(config)}`);
  const targets = {};
  // The propagation phase provisions its own databases; the others share the seeded small and big files.
  // The cost and limits phases need only the small file: the 100,000-partner one is seeded for the others.
  const seeded = [...only].some((phase) => phase !== 'propagation');
  const needsBig = [...only].some((phase) => !['propagation', 'cost', 'limits'].includes(phase));
  const files = [['small', config.smallPartners], ...(needsBig ? [['big', config.bigPartners]] : [])];
  for (const [name, partners] of seeded ? files : []) {
    mkdirSync(join(work, name));
    const file = join(work, name, 'partnerctl.db');
    const seed = await seedDatabase({ file, partners, mappingsPerPartner: config.mappingsPerPartner, log });
    targets[name] = { name, file, keyFile: join(work, name, 'signing-keys.json'), seed, next: picker(partners) };
  }
  const upstream = await startHelper('upstream.mjs');
  children.push(upstream);
  const cpuProfileDir = env.BENCH_CPU_PROF ? resolve(env.BENCH_CPU_PROF) : undefined;
  // Under BENCH_CPU_PROF the minimal proxy is profiled too (its profile in a subfolder), so the two compare.
  const minimalProxy = await startHelper('minimal-proxy.mjs', [upstream.url], { cpuProfileDir: cpuProfileDir && join(cpuProfileDir, 'minimal-proxy') });
  children.push(minimalProxy);
  for (const target of Object.values(targets)) {
    target.serve = await startServe({ databaseFile: target.file, upstream: upstream.url, cpuProfileDir });
    children.push(target.serve);
  }
  const { small, big } = targets;

  const connections = config.connections;
  const results = {};

  if (only.has('cost')) {
    if (!wrkAvailable()) {
      log('cost phase skipped: wrk is not installed (apt-get install wrk)');
    } else {
      log(`cost per forwarded request (wrk -t${config.wrkThreads} -c${config.wrkConnections} -d${config.wrkSeconds}s)`);
      results.cost = await costPhase(small, upstream, minimalProxy);
    }
  }

  if (only.has('limits')) {
    if (!wrkAvailable()) {
      log('limits phase skipped: wrk is not installed (apt-get install wrk)');
    } else {
      log(`limits: the forwarded request with a limit in memory, in Redis, with usage and metrics (wrk -t${config.wrkThreads} -c${config.wrkConnections} -d${config.wrkSeconds}s)`);
      results.limits = await limitsPhase(small, upstream, cpuProfileDir);
    }
  }

  if (only.has('gate')) {
    log('data-request gate through serve vs the upstream directly');
    const tokensSmall = await gateTokens(small);
    const tokensBig = await gateTokens(big);
    results.gate_http = await abba([
      { label: 'direct', url: upstream.url, connections, requests: tokensSmall.direct },
      { label: 'minimal_proxy', url: minimalProxy.url, connections, requests: tokensSmall.requests },
      { label: 'small', url: small.serve.url, connections, requests: tokensSmall.requests },
      { label: 'big', url: big.serve.url, connections, requests: tokensBig.requests },
    ]);
  }

  if (only.has('in-process')) {
    log('gate in-process');
    const gateInProcess = {};
    for (const target of [small, big]) gateInProcess[target.name] = { uncached: await inProcessGate(target, { cached: false }) };
    for (const order of [[small, big], [big, small], [small, big]]) {
      for (const target of order) {
        const checks = await inProcessGate(target, { cached: true });
        log(`in-process ${target.name}: ${checks} checks/s`);
        gateInProcess[target.name].cached = Math.max(gateInProcess[target.name].cached ?? 0, checks);
      }
    }
    results.gate_in_process = gateInProcess;
  }

  if (only.has('exchange')) {
    log('token exchange, warm');
    const warmRequests = (target) =>
      Array.from({ length: config.warmPairs }, () => {
        const partner = target.seed.partner(target.next());
        const body = JSON.stringify({ access_key: partner.accessKey, secret_key: partner.secretKey });
        return { method: 'POST', path: TOKEN_PATH, headers: { 'content-type': 'application/json' }, body };
      });
    const warmSmall = warmRequests(small);
    const warmBig = warmRequests(big);
    // Each pair's first exchange pays argon2 and fills the fast path; the warm-up runs then warm the JIT.
    for (const [target, requests] of [[small, warmSmall], [big, warmBig]]) {
      for (const request of requests) await postJson(target.serve.url + TOKEN_PATH, JSON.parse(request.body));
    }
    const warm = await abba([
      { label: 'healthz', url: small.serve.url, connections, requests: [{ method: 'GET', path: '/healthz' }] },
      { label: 'small', url: small.serve.url, connections, requests: warmSmall },
      { label: 'big', url: big.serve.url, connections, requests: warmBig },
    ]);
    results.exchange_warm = warm;
  }

  if (only.has('cold')) {
    log('token exchange, cold');
    const cold = { argon2_ceiling_per_s: await argon2Ceiling(2) };
    for (const target of [small, big]) {
      cold[target.name] = await coldExchanges(target);
      log(`cold ${target.name}: ${cold[target.name].rps}/s`);
    }
    results.exchange_cold = cold;
    log('refusal timing');
    const timing = {};
    for (const target of [small, big]) {
      timing[target.name] = await refusalTiming(target);
      log(`timing ${target.name}: ${JSON.stringify(timing[target.name])}`);
    }
    results.refusal_timing = timing;
  }
  for (const target of Object.values(targets)) await target.serve.stop();

  if (only.has('assertion')) {
    log('token exchange, warm: a client assertion (private_key_jwt) beside a shared secret, CPU per exchange');
    results.assertion_exchange = await assertionCost({ rounds: 4, requests: 2000, log });
  }

  if (only.has('propagation')) {
    log('revocation propagation: CLI command exit -> first refused request (SQLite one instance, PostgreSQL two)');
    results.propagation = await propagation({
      work: join(work, 'propagation'),
      upstream,
      adminUrl: env.BENCH_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres',
      trials: Number(env.BENCH_PROPAGATION_TRIALS ?? 21),
      log,
      cpuProfileDir,
    });
  }

  if (only.has('cli')) {
    log('CLI start-up and list pages');
    results.cli_startup_ms = cliStartup(small);
    results.list_pages_ms = await listPages(small, big);
    log('CLI: every command against node -e 0, and the runbook scale figures (issue 11)');
    mkdirSync(join(work, 'runbooks'));
    results.runbook_commands_ms = runbookCommands(join(work, 'runbooks'), { runs: config.cliRuns, log });
    results.runbook_scale_s = await runbookScale(join(work, 'runbooks'), { log });
  }
  results.seed = Object.fromEntries(Object.values(targets).map((target) => [target.name, { rows: target.seed.rows, seconds: target.seed.seconds }]));

  const rows = buildRows(results);
  const output = table(rows);
  let commit = null;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {}
  const report = {
    date: new Date().toISOString(),
    commit,
    machine: { node: process.version, cpus: availableParallelism(), cpu_model: cpus()[0]?.model ?? null, loadavg_at_start: loadAtStart, loadavg_at_end: loadavg().map((x) => round(x, 2)) },
    config,
    wall_seconds: round((performance.now() - started) / 1000, 1),
    rows,
    results,
  };
  mkdirSync(join(ROOT, 'bench-results'), { recursive: true });
  writeFileSync(join(ROOT, 'bench-results/latest.json'), `${JSON.stringify(report, null, 2)}\n`);
  console.log(output);
  console.log(`\n${rows.filter((row) => row.met === false).length} of ${rows.filter((row) => row.met !== undefined).length} targets missed; ${report.wall_seconds} s; figures in bench-results/latest.json`);
} finally {
  for (const child of children.reverse()) await child.stop().catch(() => {});
  if (env.BENCH_KEEP) log(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
