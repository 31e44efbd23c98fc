// Seeds a fresh SQLite file for the benchmarks: N partners, each with one active key pair and M company
// mappings, written with raw SQL through better-sqlite3 in large transactions (one Prisma call per row
// would take hours at 1.1 million rows). The file is created and migrated by partnerctl itself first.
//
//   node bench/seed.mjs --database /tmp/big.db [--partners 100000] [--mappings-per-partner 10]
//
// argon2id at OWASP's parameters costs ~30 ms a hash, so 100,000 distinct hashes would take most of an
// hour: pair i gets secret number i % SECRET_POOL from a pool of distinct secrets, each hashed once with its
// own salt. Every pair still has its own access key, id and row; the server's cost to verify a pair's secret
// does not depend on which secret it is.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SECRET_POOL = 32;
const ROWS_PER_TRANSACTION = 50_000;
// Enough companies that each one is reached by a handful of partners, as in life.
const COMPANIES_PER_MAPPING = 4;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

const dist = (path) => import(pathToFileURL(join(ROOT, 'dist', path)).href);

function accessKey() {
  // Same shape as the domain's keys (pctl_ak_ + 22 base62 characters); modulo bias is irrelevant here.
  const bytes = randomBytes(22);
  let out = 'pctl_ak_';
  for (let i = 0; i < 22; i++) out += BASE62[bytes[i] % 62];
  return out;
}

/** The company ids of partner `index`: distinct per partner, each shared by about COMPANIES_PER_MAPPING partners. */
export function companiesOf(index, mappingsPerPartner, companyCount) {
  const companies = [];
  for (let j = 0; j < mappingsPerPartner; j++) companies.push(`company-${((index * mappingsPerPartner + j) % companyCount).toString().padStart(7, '0')}`);
  return companies;
}

function migrate(file) {
  const result = spawnSync(process.execPath, [join(ROOT, 'bin/partnerctl'), 'db', 'migrate', '--create', '--json'], {
    env: { ...process.env, DATABASE_URL: `file:${file}`, PARTNERCTL_SIGNING_KEY_FILE: join(dirname(file), 'signing-keys.json') },
    encoding: 'utf8',
  });
  if (result.status !== 0) throw new Error(`partnerctl db migrate failed (${result.status}): ${result.stderr}`);
}

/**
 * Creates `file` (removed first if it exists), migrates it with `partnerctl db migrate`, and inserts the rows.
 * Returns what the benchmark needs to act as any partner: ids, access keys, secrets and companies.
 */
export async function seedDatabase({ file, partners, mappingsPerPartner = 10, log = () => {} }) {
  for (const suffix of ['', '-wal', '-shm']) rmSync(file + suffix, { force: true });
  const startedAt = performance.now();
  migrate(file);
  const migratedAt = performance.now();

  const [{ newId, SECRET_KEY_PREFIX }, { hashSecret }] = await Promise.all([dist('domain/rules/identifiers.js'), dist('domain/rules/secrets.js')]);
  const secrets = Array.from({ length: SECRET_POOL }, () => SECRET_KEY_PREFIX + randomBytes(32).toString('base64url').replace(/[-_]/g, 'x').slice(0, 43));
  const hashes = await Promise.all(secrets.map((secret) => hashSecret(secret)));
  const hashedAt = performance.now();

  const { default: BetterSqlite3 } = await import('better-sqlite3');
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  // A throwaway file: no fsync per transaction while seeding.
  db.pragma('synchronous = OFF');
  db.pragma('cache_size = -262144');

  const insertPartner = db.prepare('INSERT INTO partners (id, name, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)');
  const insertPair = db.prepare(
    "INSERT INTO key_pairs (id, partner_id, access_key, secret_hash, status, created_at) VALUES (?, ?, ?, ?, 'active', ?)",
  );
  const insertMapping = db.prepare('INSERT INTO company_mappings (partner_id, company_id, created_at) VALUES (?, ?, ?)');
  const companyCount = Math.max(mappingsPerPartner, Math.ceil((partners * mappingsPerPartner) / COMPANIES_PER_MAPPING));

  const partnerIds = new Array(partners);
  const pairIds = new Array(partners);
  const accessKeys = new Array(partners);
  // One millisecond apart, so ids (time-sortable) and created_at both follow the index.
  const firstAt = Date.now() - partners - 60_000;
  const rowsPerPartner = 2 + mappingsPerPartner;
  const batch = Math.max(1, Math.floor(ROWS_PER_TRANSACTION / rowsPerPartner));
  const insertBatch = db.transaction((from, to) => {
    for (let i = from; i < to; i++) {
      const at = firstAt + i;
      const stamp = new Date(at).toISOString().replace('Z', '+00:00');
      const partnerId = newId('ptn', at);
      const pairId = newId('kp', at);
      const key = accessKey();
      partnerIds[i] = partnerId;
      pairIds[i] = pairId;
      accessKeys[i] = key;
      insertPartner.run(partnerId, `bench-partner-${String(i).padStart(7, '0')}`, 'active', stamp, stamp);
      insertPair.run(pairId, partnerId, key, hashes[i % SECRET_POOL], stamp);
      for (const company of companiesOf(i, mappingsPerPartner, companyCount)) insertMapping.run(partnerId, company, stamp);
    }
  });
  for (let from = 0; from < partners; from += batch) insertBatch(from, Math.min(partners, from + batch));
  // Running servers learn of the change the way they learn of any other.
  db.prepare('UPDATE revision SET value = value + 1 WHERE id = 1').run();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.prepare('ANALYZE').run();
  db.close();
  const insertedAt = performance.now();

  const seconds = {
    migrate: (migratedAt - startedAt) / 1000,
    hash: (hashedAt - migratedAt) / 1000,
    insert: (insertedAt - hashedAt) / 1000,
    total: (insertedAt - startedAt) / 1000,
  };
  const rows = { partners, key_pairs: partners, company_mappings: partners * mappingsPerPartner };
  log(
    `seeded ${file}: ${rows.partners} partners, ${rows.key_pairs} key pairs, ${rows.company_mappings} mappings in ${seconds.total.toFixed(1)} s ` +
      `(migrate ${seconds.migrate.toFixed(1)}, ${SECRET_POOL} argon2 hashes ${seconds.hash.toFixed(1)}, inserts ${seconds.insert.toFixed(1)})`,
  );
  return {
    file,
    rows,
    seconds,
    partner: (index) => ({
      partnerId: partnerIds[index],
      keyPairId: pairIds[index],
      accessKey: accessKeys[index],
      secretKey: secrets[index % SECRET_POOL],
      companies: companiesOf(index, mappingsPerPartner, companyCount),
    }),
    partnerIds,
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      database: { type: 'string' },
      partners: { type: 'string', default: '100000' },
      'mappings-per-partner': { type: 'string', default: '10' },
    },
  });
  if (!values.database) {
    console.error('usage: node bench/seed.mjs --database <file.db> [--partners N] [--mappings-per-partner M]');
    process.exit(2);
  }
  if (!existsSync(join(ROOT, 'dist'))) {
    console.error('run `npm run build` first');
    process.exit(1);
  }
  await seedDatabase({
    file: resolve(values.database.replace(/^file:/, '')),
    partners: Number(values.partners),
    mappingsPerPartner: Number(values['mappings-per-partner']),
    log: (line) => console.log(line),
  });
}
