// Helpers of the benchmark harness: child processes (upstream, `partnerctl serve`), autocannon runs,
// statistics. Everything listens on 127.0.0.1 only.
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CLI = join(ROOT, 'bin/partnerctl');

export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

export const round = (value, digits = 2) => (value === null || value === undefined ? null : Number(value.toFixed(digits)));

function firstLine(stream, match, timeoutMs, what) {
  return new Promise((resolvePromise, reject) => {
    const lines = createInterface({ input: stream });
    const seen = [];
    const timer = setTimeout(() => reject(new Error(`${what} did not start within ${timeoutMs} ms:\n${seen.join('\n')}`)), timeoutMs);
    lines.on('line', (line) => {
      seen.push(line);
      const found = match(line);
      if (found) {
        clearTimeout(timer);
        lines.removeAllListeners('line');
        lines.on('line', () => {});
        resolvePromise(found);
      }
    });
    lines.on('close', () => {
      clearTimeout(timer);
      reject(new Error(`${what} exited before it was ready:\n${seen.join('\n')}`));
    });
  });
}

async function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A helper server of bench/ (upstream.mjs, minimal-proxy.mjs) as a child process. */
export async function startHelper(script, args = [], { cpuProfileDir } = {}) {
  const nodeArgs = cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bench', script), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await firstLine(child.stdout, (line) => JSON.parse(line).port, 10_000, script);
  return { url: `http://127.0.0.1:${port}`, pid: child.pid, stop: () => stopChild(child) };
}

/** The environment of a partnerctl process working on `databaseFile` (its own key file beside it). */
export function cliEnv(databaseFile, extra = {}) {
  const env = { ...process.env, ...extra };
  env.DATABASE_URL = `file:${databaseFile}`;
  env.PARTNERCTL_SIGNING_KEY_FILE = join(dirname(databaseFile), 'signing-keys.json');
  env.XDG_DATA_HOME = dirname(databaseFile);
  env.NO_COLOR = '1';
  return env;
}

/**
 * The real `partnerctl serve` as a child process, throttles of the token endpoint off (the benchmark is one
 * address hammering a few keys). The request log stays at its default (info, one JSON line per request)
 * and goes to /dev/null, so its cost is included as in production. `baseEnv` (a whole environment) instead
 * of `databaseFile` for another database (PostgreSQL); `env` and `args` add to it; `cli` another build's binary.
 */
export async function startServe({ databaseFile, baseEnv, upstream, cpuProfileDir, env = {}, args = [], cli = CLI }) {
  const nodeArgs = cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [];
  const child = spawn(process.execPath, [...nodeArgs, cli, 'serve', '--port', '0', '--host', '127.0.0.1', '--upstream', upstream, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: {
      ...(baseEnv ?? cliEnv(databaseFile)),
      PUBLIC_API_TOKEN_RATE_LIMIT_PER_KEY: '0',
      PUBLIC_API_TOKEN_RATE_LIMIT_PER_IP: '0',
      ...env,
    },
  });
  // With a metrics port, the line naming its URL follows the listening one.
  const withMetrics = Boolean(env.PUBLIC_API_METRICS_PORT) || args.includes('--metrics-port');
  let url;
  const metricsUrl = await firstLine(
    child.stderr,
    (line) => {
      url ??= /listening on (http:\/\/\S+)/.exec(line)?.[1];
      if (!withMetrics) return url;
      return url && /metrics on (http:\/\/\S+)/.exec(line)?.[1];
    },
    60_000,
    'partnerctl serve',
  );
  return { url, metricsUrl: withMetrics ? metricsUrl : null, pid: child.pid, stop: () => stopChild(child) };
}

/** One autocannon run; throws when any request failed, so a broken setup never passes for a fast one. */
export async function load({ url, requests, connections, duration, amount, label, allowNon2xx = false }) {
  const options = { url, requests, connections, pipelining: 1, timeout: 30 };
  if (amount) options.amount = amount;
  else options.duration = duration;
  const started = performance.now();
  const instance = autocannon(options);
  // autocannon notices that `amount` is reached only on its next one-second tick: time up to the last
  // response instead, or short runs come out quantised to whole seconds.
  let lastResponse = started;
  instance.on('response', () => {
    lastResponse = performance.now();
  });
  const result = await instance;
  const seconds = (lastResponse - started) / 1000;
  const failed = result.errors + result.timeouts + (allowNon2xx ? 0 : result.non2xx);
  if (failed > 0) {
    throw new Error(`${label}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx of ${result.requests.total}`);
  }
  return {
    requests: result.requests.total,
    seconds: round(seconds, 2),
    // Completed requests over the time to the last response: exact for short `amount` runs too.
    rps: round(result.requests.total / seconds, 1),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
  };
}

/** Wall time of one CLI run, in milliseconds; throws on a non-zero exit. */
export function timeCommand(args, env) {
  const started = performance.now();
  const result = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`node ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return ms;
}

export async function postJson(url, body) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${url}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/** The real binary, synchronously; its stdout, or a throw naming the command and its stderr. */
export function cli(args, env) {
  const result = spawnSync(process.execPath, [CLI, ...args], { env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`partnerctl ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return result.stdout;
}

/** One statement on a PostgreSQL server (CREATE DATABASE, DROP DATABASE, a count), on a connection of its own. */
export async function pgQuery(url, sql) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}
