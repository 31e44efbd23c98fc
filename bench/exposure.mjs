// `partnerctl exposure` at size (issue 31; not part of `npm run bench`): a key pair that reached 10,000
// companies every day for 30 days (one exposure_hours row per company and day, 96 tokens a day, 20 client
// addresses: 300,000 rows), seeded directly on SQLite, then the report timed in-process (the domain
// function, median of 5) and end to end (the binary, `--json`). Target: under 2 s.
// `node bench/exposure.mjs [companies=10000] [days=30]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliEnv, CLI, median, round, timeCommand } from './lib.mjs';
import { seedDatabase } from './seed.mjs';

const companies = Number(process.argv[2] ?? 10_000);
const days = Number(process.argv[3] ?? 30);
const HOUR_MS = 3_600_000;
const work = mkdtempSync(join(tmpdir(), 'partnerctl-exposure-'));
try {
  const file = join(work, 'partnerctl.db');
  const seed = await seedDatabase({ file, partners: 2, mappingsPerPartner: 1, log: () => {} });
  const { partnerId, keyPairId } = seed.partner(0);
  const other = seed.partner(1);
  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const sqlite = new BetterSqlite3(file);
  sqlite.pragma('synchronous = OFF');
  const insert = sqlite.prepare(
    `INSERT INTO exposure_hours (key_pair_id, token_id, company_id, client_address, period_start, partner_id, accepted, client_errors, server_errors, first_at, last_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`,
  );
  const iso = (ms) => new Date(ms).toISOString().replace('Z', '+00:00');
  const firstHour = Math.floor(Date.now() / HOUR_MS) - days * 24;
  const seeded = performance.now();
  sqlite.transaction(() => {
    for (let day = 0; day < days; day++) {
      for (let c = 0; c < companies; c++) {
        const hour = firstHour + day * 24 + (c % 24);
        const start = hour * HOUR_MS;
        const token = `${partnerId}.${keyPairId}.${start}.${(c % 96).toString(16).padStart(16, '0')}`;
        insert.run(keyPairId, token, `company-${c}`, `198.51.100.${c % 20}`, iso(start), partnerId, 1 + (c % 5), iso(start + 1000), iso(start + 60_000));
      }
      // Another partner's pair in the same hours: rows the report must skip.
      for (let c = 0; c < companies / 10; c++) {
        const start = (firstHour + day * 24) * HOUR_MS;
        insert.run(other.keyPairId, `${other.partnerId}.${other.keyPairId}.${start}.0`, `company-${c}`, '192.0.2.1', iso(start), other.partnerId, 1, iso(start), iso(start));
      }
    }
  })();
  const rows = sqlite.prepare('SELECT COUNT(*) AS n FROM exposure_hours').get().n;
  sqlite.close();
  const seedSeconds = (performance.now() - seeded) / 1000;

  const { resolveDatabase } = await import('../dist/config.js');
  const { openDatabase } = await import('../dist/db/client.js');
  const { exposureReport } = await import('../dist/domain/operations/exposure.js');
  const db = await openDatabase(resolveDatabase(`file:${file}`, {}));
  const times = [];
  let report;
  for (let i = 0; i < 5; i++) {
    const started = performance.now();
    report = await exposureReport(db, keyPairId, async () => null);
    times.push(performance.now() - started);
  }
  await db.close();
  const binary = [1, 2, 3].map(() => timeCommand([CLI, 'exposure', keyPairId, '--json'], cliEnv(file)));
  console.log(
    JSON.stringify(
      {
        rows,
        seed_seconds: round(seedSeconds, 1),
        companies: report.companies.length,
        addresses: report.addresses.length,
        requests: report.companies.reduce((sum, c) => sum + c.accepted, 0),
        in_process_ms: { median: round(median(times), 0), all: times.map((t) => round(t, 0)) },
        binary_ms: { median: round(median(binary), 0), all: binary.map((t) => round(t, 0)) },
      },
      null,
      2,
    ),
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
