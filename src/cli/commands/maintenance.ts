import { existsSync } from 'node:fs';
import { redactUrl } from '../../config.js';
import { openDatabase } from '../../db/client.js';
import { applyMigrations, migrationStatus } from '../../db/migrate.js';
import { recordSigningKeys } from '../../db/repositories/signing-keys.js';
import { openSigningKeys } from '../../domain/signing-key-guard.js';
import { rotateSigningKey, RETIRED_KEY_OVERLAP_SECONDS, SigningKeys } from '../../domain/signing-keys.js';
import { EXIT } from '../../errors.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';

function where(session: Session): string {
  const config = session.databaseConfig;
  return config.provider === 'sqlite' ? config.url : redactUrl(config.url);
}

export async function runDbMigrate(session: Session, out: Output): Promise<void> {
  const config = session.databaseConfig;
  // Nothing pending is answered from the _prisma_migrations table with plain SQL, without the schema
  // engine: at once, even while servers hold the file. Only real work loads the engine.
  const pending = await pendingMigrations(config);
  const applied = pending === 0 ? [] : await applyMigrations(config);
  if (out.json) {
    out.emitJson({ provider: config.provider, database: where(session), applied });
    return;
  }
  out.line(
    applied.length === 0
      ? `Database ${where(session)} is up to date; nothing to apply.`
      : `Applied ${applied.length} migration(s) to ${where(session)}: ${applied.join(', ')}`,
  );
}

/** How many migrations are pending or failed; -1 when that cannot be read (no file, no table yet). */
async function pendingMigrations(config: Session['databaseConfig']): Promise<number> {
  if (config.provider === 'sqlite' && !existsSync(config.url)) return -1;
  let db;
  try {
    db = await openDatabase(config);
  } catch {
    return -1;
  }
  try {
    const status = await migrationStatus(db);
    return status.pending.length + status.failed.length;
  } catch {
    return -1;
  } finally {
    await db.close().catch(() => {});
  }
}

/** Exit 0 when the schema is current, 1 when migrations are pending or failed (for runbooks to test). */
export async function runDbStatus(session: Session, out: Output): Promise<number> {
  const config = session.databaseConfig;
  session.refuseMissingDatabase();
  const db = await openDatabase(config);
  try {
    const status = await migrationStatus(db);
    const upToDate = status.pending.length === 0 && status.failed.length === 0;
    if (out.json) {
      out.emitJson({ provider: config.provider, database: where(session), up_to_date: upToDate, ...status });
    } else {
      out.line(`Database: ${config.provider} ${where(session)}`);
      out.line(`Applied:  ${status.applied.length ? status.applied.join(', ') : 'none'}`);
      out.line(`Pending:  ${status.pending.length ? status.pending.join(', ') : 'none'}`);
      if (status.failed.length) out.line(`Failed:   ${status.failed.join(', ')}`);
      if (status.unknown.length) out.line(`Unknown to this partnerctl (database is newer): ${status.unknown.join(', ')}`);
      out.line(upToDate ? 'Up to date.' : "Not up to date: run 'partnerctl db migrate'.");
    }
    return upToDate ? EXIT.ok : EXIT.error;
  } finally {
    await db.close();
  }
}

export async function runSigningKeyRotate(session: Session, out: Output, options: { newFile?: boolean } = {}): Promise<void> {
  const file = session.signingKeyFile;
  const db = await session.db();
  // A missing file where keys have already signed tokens is refused unless --new-file says it is lost.
  await openSigningKeys(db, file, { allowNew: options.newFile === true });
  const result = rotateSigningKey(file);
  await db.sql.transaction((tx) => recordSigningKeys(tx, SigningKeys.open(file).kids(), new Date()), { timeoutMs: 5_000 });
  if (out.json) {
    out.emitJson({ file, kid: result.kid, retired_kid: result.retiredKid, pruned: result.pruned });
    return;
  }
  out.line(`New signing key ${result.kid} is current in ${file}.`);
  out.line(
    `The previous key ${result.retiredKid} still verifies the tokens it signed for ${RETIRED_KEY_OVERLAP_SECONDS} s; running servers pick the change up within a second.`,
  );
}
