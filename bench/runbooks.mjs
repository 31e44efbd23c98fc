// The runbook figures of issue 11, as a part of `npm run bench`'s cli phase (and runnable alone:
// `node bench/runbooks.mjs`): every command's median wall time as a ratio to `node -e 0` (mutations
// included), map-company --from-file with 100,000 ids on SQLite and PostgreSQL, and apply -f of
// 1,000 partners x 100 companies onto an empty database, then again (no change).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { CLI, cliEnv, median, round } from './lib.mjs';

/** One CLI run: wall milliseconds; throws on a non-zero exit. */
function run(args, env, what = args.join(' ')) {
  const started = performance.now();
  const result = spawnSync(process.execPath, args, { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`${what} exited ${result.status}: ${result.stderr}`);
  return ms;
}

function shuffled(items) {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
}

function documentOf(partners, companies, prefix) {
  return JSON.stringify({
    partners: Array.from({ length: partners }, (_, p) => ({
      name: `${prefix} ${String(p).padStart(5, '0')}`,
      companies: Array.from({ length: companies }, (_, c) => `co-${p}-${c}`),
    })),
  });
}

/** Median wall time of each command (fresh arguments per run where a mutation must change something). */
export function runbookCommands(dir, { runs = 15, log = () => {} } = {}) {
  const env = cliEnv(join(dir, 'partnerctl.db'));
  const doc = join(dir, 'small.json');
  writeFileSync(doc, documentOf(200, 10, 'Bench'));
  run([CLI, 'db', 'migrate'], env);
  run([CLI, 'apply', '-f', doc], env);
  const name = 'Bench 00007';
  run([CLI, 'map-company', name, '--from-file', '-'], env); // (empty input: nothing to do, exercises stdin)
  let n = 0;
  const commands = {
    node_e_0: () => ['-e', '0'],
    help: () => [CLI, '--help'],
    list_partners_json: () => [CLI, 'list-partners', '--json'],
    list_partners_company: () => [CLI, 'list-partners', '--company', 'co-7-3', '--json'],
    show_partner: () => [CLI, 'show-partner', name],
    list_companies: () => [CLI, 'list-companies', name, '--json'],
    audit: () => [CLI, 'audit', '--limit', '50'],
    export_partner: () => [CLI, 'export', '--partner', name],
    completion: () => [CLI, 'completion', 'bash'],
    db_status: () => [CLI, 'db', 'status'],
    db_migrate_nothing_pending: () => [CLI, 'db', 'migrate'],
    create_partner: () => [CLI, 'create-partner', '--name', `New ${process.pid} ${n++}`],
    map_company: () => [CLI, 'map-company', name, '--company', `new-${n++}`],
    map_company_unchanged: () => [CLI, 'map-company', name, '--company', 'co-7-1'],
    unmap_company: () => [CLI, 'unmap-company', name, '--company', `co-7-${n++ % 10}`, '--yes'],
    disable_enable: () => [CLI, n++ % 2 ? 'enable-partner' : 'disable-partner', 'Bench 00009', '--yes'],
    apply_reapply: () => [CLI, 'apply', '-f', doc],
    apply_dry_run: () => [CLI, 'apply', '-f', doc, '--dry-run'],
  };
  const times = Object.fromEntries(Object.keys(commands).map((key) => [key, []]));
  for (const key of Object.keys(commands)) run(commands[key](), env, key);
  for (let i = 0; i < runs; i++) {
    for (const key of shuffled(Object.keys(commands))) times[key].push(run(commands[key](), env, key));
  }
  log(`runbook commands: ${runs} runs each`);
  return Object.fromEntries(Object.entries(times).map(([key, values]) => [key, round(median(values), 1)]));
}

async function postgresDatabase(log) {
  const adminUrl = process.env.PARTNERCTL_TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 3_000 });
  try {
    await admin.connect();
  } catch (error) {
    log(`PostgreSQL figures skipped: ${adminUrl} unreachable (${error.message})`);
    return null;
  }
  const name = `partnerctl_bench_${process.pid}`;
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/** Bulk figures: 100,000 ids by map-company --from-file, and apply -f of 1,000 x 100 then again. */
export async function runbookScale(dir, { log = () => {} } = {}) {
  const results = {};
  const ids = join(dir, 'ids.txt');
  writeFileSync(ids, `${Array.from({ length: 100_000 }, (_, i) => `bulk-company-${String(i).padStart(6, '0')}`).join('\n')}\n`);
  const big = join(dir, 'big.json');
  writeFileSync(big, documentOf(1_000, 100, 'Apply'));
  const targets = [['sqlite', cliEnv(join(dir, 'scale', 'partnerctl.db'))]];
  mkdirSync(join(dir, 'scale'), { recursive: true });
  const pgTarget = await postgresDatabase(log);
  if (pgTarget) targets.push(['postgresql', { ...cliEnv(join(dir, 'scale', 'unused.db')), DATABASE_URL: pgTarget.url }]);
  try {
    for (const [provider, env] of targets) {
      run([CLI, 'db', 'migrate'], env);
      run([CLI, 'create-partner', '--name', 'Bulk'], env);
      const mapped = run([CLI, 'map-company', 'Bulk', '--from-file', ids], env) / 1000;
      const again = run([CLI, 'map-company', 'Bulk', '--from-file', ids], env) / 1000;
      const applied = run([CLI, 'apply', '-f', big], env) / 1000;
      const reapplied = run([CLI, 'apply', '-f', big], env) / 1000;
      results[provider] = {
        map_100k_s: round(mapped, 2),
        map_100k_rerun_s: round(again, 2),
        apply_1000x100_s: round(applied, 2),
        reapply_1000x100_s: round(reapplied, 2),
      };
      log(`runbook scale on ${provider}: ${JSON.stringify(results[provider])}`);
    }
  } finally {
    await pgTarget?.drop();
  }
  return results;
}

/** Rows for bench/run.mjs's table. */
export function runbookRows(r, add) {
  const c = r.runbook_commands_ms;
  if (c) {
    for (const [key, ms] of Object.entries(c)) {
      if (key === 'node_e_0') continue;
      const ratio = ms / c.node_e_0;
      add(`CLI ${key.replace(/_/g, ' ')}`, `${ms} ms`, `node -e 0 ${c.node_e_0} ms`, ratio, '<= 3x', ratio <= 3);
    }
  }
  const s = r.runbook_scale_s;
  if (s) {
    const limits = { sqlite: 10, postgresql: 30 };
    for (const [provider, x] of Object.entries(s)) {
      add(`map-company --from-file 100,000 ids, ${provider}`, `${x.map_100k_s} s`, `re-run ${x.map_100k_rerun_s} s`, null, `<= ${limits[provider]} s`, x.map_100k_s <= limits[provider]);
      add(`apply -f 1,000 partners x 100 companies, empty ${provider} db`, `${x.apply_1000x100_s} s`, '', null, '<= 60 s', x.apply_1000x100_s <= 60);
      add(`apply -f again (no change), ${provider}`, `${x.reapply_1000x100_s} s`, '', null, '<= 10 s', x.reapply_1000x100_s <= 10);
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const dir = mkdtempSync(join(tmpdir(), 'partnerctl-runbooks-'));
  const log = (line) => process.stderr.write(`bench: ${line}\n`);
  try {
    const results = {
      runbook_commands_ms: runbookCommands(join(dir), { runs: Number(process.env.BENCH_CLI_RUNS ?? 15), log }),
      runbook_scale_s: process.env.BENCH_RUNBOOK_SCALE === '0' ? undefined : await runbookScale(dir, { log }),
    };
    const rows = [];
    runbookRows(results, (measure, value, baseline, ratio, target, met) => rows.push({ measure, value, baseline, ratio: ratio === null ? '' : round(ratio, 2), target, met: met ? 'met' : 'MISSED' }));
    console.table(rows);
    console.log(JSON.stringify(results));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
