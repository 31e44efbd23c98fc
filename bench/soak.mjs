// The soak (issue 33's load): data requests with many partners' tokens through two `serve` instances on one
// fresh PostgreSQL database for SOAK_SECONDS, while CLI changes run alongside one after another (companies
// mapped and unmapped, limits set, network rules set, partners created, keys rotated on partners outside the
// load). Then the figures that say whether anything was lost: failed requests (errors, timeouts, non-2xx),
// the accepted requests counted in usage_hours against the engine's own count, and each server's memory.
//
//   npm run build && node bench/soak.mjs            # 300 s
//   SOAK_SECONDS=60 SOAK_CONNECTIONS=32 node bench/soak.mjs
//
// Exits 1 when a request failed or a count differs. Everything listens on 127.0.0.1.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { CLI, cli, pgQuery, postJson, round, startHelper, startServe } from './lib.mjs';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 300);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 32);
const PARTNERS = 20;
const COMPANIES_PER_PARTNER = 5;
const ADMIN_URL = process.env.BENCH_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
const DATA_PATH = '/public/v1/recommendations';

const log = (line) => process.stderr.write(`[soak] ${line}\n`);

function cliAsync(args, env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

function rssMb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  } catch {
    return null;
  }
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'partnerctl-soak-'));
  const database = `partnerctl_soak_${process.pid}_${randomBytes(3).toString('hex')}`;
  await pgQuery(ADMIN_URL, `CREATE DATABASE ${database}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  const env = {
    ...process.env,
    DATABASE_URL: url.toString(),
    PARTNERCTL_SIGNING_KEY_FILE: join(work, 'signing-keys.json'),
    XDG_DATA_HOME: work,
    XDG_CONFIG_HOME: work,
    PARTNERCTL_ACTOR: 'soak',
    NO_COLOR: '1',
  };
  const stops = [];
  try {
    cli(['db', 'migrate', '--json'], env);
    // The engine counts what reaches it (GET /__count).
    const engine = await startHelper('upstream.mjs');
    stops.push(engine.stop);
    const servers = [];
    for (let i = 0; i < 2; i++) {
      const server = await startServe({ baseEnv: env, upstream: engine.url });
      stops.push(server.stop);
      servers.push(server);
    }

    // The loaded partners (each with its companies and a token), and partners the changes may rotate.
    const names = Array.from({ length: PARTNERS }, (_, i) => `soak-${String(i).padStart(2, '0')}`);
    const company = (p, c) => `soak-company-${p}-${c}`;
    const document = { partners: names.map((name, p) => ({ name, companies: Array.from({ length: COMPANIES_PER_PARTNER }, (_, c) => company(p, c)) })) };
    writeFileSync(join(work, 'partners.json'), JSON.stringify(document));
    cli(['apply', '-f', join(work, 'partners.json'), '--issue-keys-to', join(work, 'keys.json'), '--yes', '--json'], env);
    const keys = JSON.parse(readFileSync(join(work, 'keys.json'), 'utf8')).keys;
    const requests = [];
    for (const key of keys) {
      const p = names.indexOf(key.name);
      const { access_token: token } = await postJson(servers[0].url + '/public/v1/auth/token', { access_key: key.access_key, secret_key: key.secret_key });
      for (let c = 0; c < COMPANIES_PER_PARTNER; c++) {
        requests.push({ method: 'GET', path: `${DATA_PATH}?company_id=${company(p, c)}`, headers: { authorization: `Bearer ${token}` } });
      }
    }
    for (let r = 0; r < 3; r++) {
      cli(['create-partner', '--name', `soak-rotated-${r}`, '--json'], env);
      cli(['issue-keys', `soak-rotated-${r}`, '--json'], env);
    }
    log(`${keys.length} partners x ${COMPANIES_PER_PARTNER} companies through ${servers.length} instances, ${CONNECTIONS} connections each, ${SECONDS} s`);

    // The changes alongside: one after another until the load ends.
    let loading = true;
    const changes = { made: 0, failed: [] };
    const changing = (async () => {
      for (let i = 0; loading; i++) {
        const p = i % PARTNERS;
        const step = [
          ['map-company', names[p], '--company', `soak-extra-${i}`],
          ['unmap-company', names[p], '--company', `soak-extra-${i - 1}`, '--yes'],
          ['set-limits', names[p], '--rate', '100000/s', '--daily-quota', '1000000000'],
          ['set-network', names[p], '--allow', '127.0.0.0/8', '--allow', '::1/128', '--yes'],
          ['create-partner', '--name', `soak-new-${i}`],
          ['rotate-keys', `soak-rotated-${i % 3}`, '--yes'],
          ['set-limits', names[p], '--clear', '--yes'],
        ][i % 7];
        const result = await cliAsync([...step, '--json'], env);
        changes.made++;
        if (result.code !== 0) changes.failed.push(`${step.join(' ')}: exit ${result.code}: ${result.stderr.trim()}`);
      }
    })();

    const memory = servers.map(() => []);
    const sample = () => {
      for (const [i, server] of servers.entries()) memory[i].push(round(rssMb(server.pid), 1));
    };
    sample();
    const sampler = setInterval(sample, 10_000);
    const started = performance.now();
    const results = await Promise.all(
      servers.map((server) => autocannon({ url: server.url, requests, connections: CONNECTIONS, pipelining: 1, duration: SECONDS, timeout: 30 })),
    );
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    sample();
    loading = false;
    await changing;

    const sent = results.reduce((sum, r) => sum + r.requests.total, 0);
    const ok = results.reduce((sum, r) => sum + r['2xx'], 0);
    const failed = results.reduce((sum, r) => sum + r.errors + r.timeouts + r.non2xx, 0);
    const engineCount = Number(await (await fetch(`${engine.url}/__count`)).text());
    // SIGTERM: each server writes what it still holds (usage included) before it exits.
    for (const server of servers) await server.stop();
    const [usage] = await pgQuery(
      url.toString(),
      'SELECT COALESCE(SUM(accepted), 0)::bigint AS accepted, COALESCE(SUM(client_errors + server_errors + rate_limited), 0)::bigint AS refused FROM usage_hours',
    );
    const figures = {
      seconds: round(seconds, 1),
      requests: sent,
      rps: round(sent / seconds, 0),
      ok,
      failed,
      in_flight_at_stop: engineCount - ok,
      p99_ms: Math.max(...results.map((r) => r.latency.p99)),
      engine_count: engineCount,
      usage_accepted: Number(usage.accepted),
      usage_refused: Number(usage.refused),
      cli_changes: changes.made,
      cli_changes_failed: changes.failed.length,
      // Each server's resident memory: before the load, then every minute (one sample each 10 s is taken).
      rss_mb: memory.map((samples) => ({ before: samples[0], per_minute: samples.filter((_, i) => i > 0 && i % 6 === 0), max: Math.max(...samples), last: samples.at(-1) })),
    };
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    for (const line of changes.failed.slice(0, 5)) log(`change failed: ${line}`);
    // Requests still in flight when autocannon stops (one per connection at most) reached the engine and are
    // counted there, not by autocannon.
    const inFlight = engineCount - ok;
    const lost = failed !== 0 || figures.usage_accepted !== engineCount || inFlight < 0 || inFlight > CONNECTIONS * servers.length || changes.failed.length > 0;
    log(lost ? 'SOMETHING WAS LOST: see the figures' : 'nothing lost: every request answered 2xx, usage equals the engine count');
    process.exitCode = lost ? 1 : 0;
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await pgQuery(ADMIN_URL, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {});
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
