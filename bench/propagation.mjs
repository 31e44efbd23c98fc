// The propagation phase of `npm run bench` (issue 13): the time from a CLI command's exit (`unmap-company`,
// `revoke-keys`, `disable-partner`) to the first refused request at running `serve` instances, on SQLite
// (one instance; the revision poll) and on PostgreSQL (two instances on one database; NOTIFY, the poll as
// the fallback).
//
// Each trial has a partner of its own (provisioned with one `apply --issue-keys-to`), one company and one
// token. The benchmark process polls every instance in a tight loop (one request in flight per instance,
// keep-alive, an undici Client), sees 200s, runs the command through the real binary, and notes the first
// non-200 answer of each instance. The figure is that answer's arrival minus the command's exit as the
// benchmark process sees it (the command commits before it exits, so a value can be slightly negative: the
// refusal arrived while the process was still tearing down; it is reported as measured).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from 'undici';
import pg from 'pg';
import { CLI, cli, median, pgQuery, postJson, round, startServe } from './lib.mjs';

const COMMANDS = ['unmap-company', 'revoke-keys', 'disable-partner'];
const DATA_PATH = '/public/v1/recommendations';
const TOKEN_PATH = '/public/v1/auth/token';
const GIVE_UP_MS = 5_000;

function envFor(dir, databaseUrl) {
  return {
    ...process.env,
    DATABASE_URL: databaseUrl,
    PARTNERCTL_SIGNING_KEY_FILE: join(dir, 'signing-keys.json'),
    XDG_DATA_HOME: dir,
    PARTNERCTL_ACTOR: 'bench',
    NO_COLOR: '1',
  };
}

/** Runs a command; resolves with performance.now() at its exit (the 'exit' event of the child). */
function runTimed(args, env) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('exit', (code) => {
      const at = performance.now();
      if (code === 0) resolve(at);
      else reject(new Error(`partnerctl ${args.join(' ')} exited ${code}: ${stderr}`));
    });
  });
}

/**
 * Polls one instance until it answers anything but 200; resolves with { at, status } of that answer.
 * `ready` resolves after the first few 200s (the poller is warm).
 */
function poll(client, path, token) {
  let stop = false;
  let markReady;
  const ready = new Promise((resolve) => (markReady = resolve));
  const done = (async () => {
    const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
    let oks = 0;
    const giveUpAt = performance.now() + 60_000;
    while (!stop && performance.now() < giveUpAt) {
      const response = await client.request({ method: 'GET', path, headers });
      await response.body.dump();
      const at = performance.now();
      if (response.statusCode !== 200) {
        markReady();
        return { at, status: response.statusCode, oks };
      }
      if (++oks === 20) markReady();
    }
    markReady();
    return { at: Infinity, status: null, oks };
  })();
  return { ready, done, cancel: () => (stop = true) };
}

async function trials({ name, env, servers, partners, trialCount, log }) {
  const clients = servers.map((server) => new Client(server.url, { pipelining: 1, keepAliveTimeout: 60_000 }));
  const samples = servers.map(() => []);
  const byCommand = Object.fromEntries(COMMANDS.map((command) => [command, servers.map(() => [])]));
  const statuses = {};
  try {
    for (let trial = 0; trial < trialCount; trial++) {
      const command = COMMANDS[trial % COMMANDS.length];
      const partner = partners[trial];
      const path = `${DATA_PATH}?company_id=${partner.company}`;
      const pollers = clients.map((client) => poll(client, path, partner.token));
      await Promise.all(pollers.map((poller) => poller.ready));
      const args =
        command === 'unmap-company'
          ? ['unmap-company', partner.partnerId, '--company', partner.company, '--yes', '--json']
          : [command, partner.partnerId, '--yes', '--json'];
      let exitedAt;
      try {
        exitedAt = await runTimed(args, env);
      } catch (error) {
        for (const poller of pollers) poller.cancel();
        throw error;
      }
      const timer = setTimeout(() => {
        for (const poller of pollers) poller.cancel();
      }, GIVE_UP_MS);
      const results = await Promise.all(pollers.map((poller) => poller.done));
      clearTimeout(timer);
      results.forEach((result, i) => {
        if (result.oks < 20) throw new Error(`${name}: instance ${i} refused before the command ran (${result.status})`);
        const ms = round(result.at - exitedAt, 1);
        samples[i].push(ms);
        byCommand[command][i].push(ms);
        statuses[result.status] = (statuses[result.status] ?? 0) + 1;
      });
      log(`propagation ${name} #${trial + 1} ${command}: ${results.map((r) => `${round(r.at - exitedAt, 1)} ms (${r.status})`).join(', ')}`);
    }
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
  const summary = (values) => ({ median_ms: round(median(values), 1), worst_ms: round(Math.max(...values), 1), best_ms: round(Math.min(...values), 1) });
  const all = samples.flat();
  return {
    instances: servers.length,
    trials: trialCount,
    ...summary(all),
    per_instance: samples.map(summary),
    per_command: Object.fromEntries(Object.entries(byCommand).map(([command, values]) => [command, summary(values.flat())])),
    refusal_statuses: statuses,
    samples_ms: samples,
  };
}

/** Provisions `count` partners (one company each, one key pair) with one apply, and exchanges a token for each. */
async function provision({ dir, env, count, serverUrl }) {
  const names = Array.from({ length: count }, (_, i) => `prop-${String(i).padStart(3, '0')}`);
  const document = { partners: names.map((name, i) => ({ name, companies: [`company-prop-${i}`] })) };
  const documentFile = join(dir, 'partners.json');
  const keysFile = join(dir, 'keys.json');
  writeFileSync(documentFile, JSON.stringify(document));
  cli(['apply', '-f', documentFile, '--issue-keys-to', keysFile, '--yes', '--json'], env);
  const keys = JSON.parse(readFileSync(keysFile, 'utf8')).keys;
  const byName = new Map(keys.map((key) => [key.name, key]));
  const partners = [];
  for (const [i, name] of names.entries()) {
    const key = byName.get(name);
    const { access_token: token } = await postJson(serverUrl + TOKEN_PATH, { access_key: key.access_key, secret_key: key.secret_key });
    partners.push({ partnerId: key.partner_id, company: `company-prop-${i}`, token });
  }
  return partners;
}

async function backend({ name, dir, databaseUrl, instances, upstream, trialCount, log, cpuProfileDir }) {
  mkdirSync(dir, { recursive: true });
  const env = envFor(dir, databaseUrl);
  cli(['db', 'migrate', '--json'], env);
  const servers = [];
  try {
    for (let i = 0; i < instances; i++) {
      servers.push(await startServe({ baseEnv: env, upstream: upstream.url, cpuProfileDir }));
    }
    const partners = await provision({ dir, env, count: trialCount, serverUrl: servers[0].url });
    return await trials({ name, env, servers, partners, trialCount, log });
  } finally {
    for (const server of servers) await server.stop().catch(() => {});
  }
}

async function postgresReachable(adminUrl) {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    return false;
  }
}

/**
 * The phase: SQLite with one instance, PostgreSQL (a fresh database on `adminUrl`'s server, dropped after)
 * with two. Skips PostgreSQL with a loud note when it is not reachable.
 */
export async function propagation({ work, upstream, adminUrl, trials: trialCount = 21, log, cpuProfileDir }) {
  const out = {};
  out.sqlite = await backend({
    name: 'sqlite',
    dir: join(work, 'sqlite'),
    databaseUrl: `file:${join(work, 'sqlite', 'partnerctl.db')}`,
    instances: 1,
    upstream,
    trialCount,
    log,
    cpuProfileDir,
  });
  if (!(await postgresReachable(adminUrl))) {
    log(`PROPAGATION ON POSTGRESQL SKIPPED: ${new URL(adminUrl).host} is not reachable (BENCH_POSTGRES_URL)`);
    return out;
  }
  const database = `partnerctl_bench_${process.pid}_${randomBytes(3).toString('hex')}`;
  await pgQuery(adminUrl, `CREATE DATABASE ${database}`);
  try {
    const url = new URL(adminUrl);
    url.pathname = `/${database}`;
    out.postgresql = await backend({
      name: 'postgresql',
      dir: join(work, 'postgresql'),
      databaseUrl: url.toString(),
      instances: 2,
      upstream,
      trialCount,
      log,
      cpuProfileDir,
    });
  } finally {
    await pgQuery(adminUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
  return out;
}
