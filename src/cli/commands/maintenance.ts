// Database and signing-key maintenance. `db migrate` and `db status` work on the database itself, below the
// domain (its schema and migration table), so they use src/db directly; they load it only when they run.
import { existsSync } from 'node:fs';
import { dialectOf } from '../../db/dialect.js';
import { EXIT } from '../../errors.js';
import { defineCommand } from '../definition.js';
import type { Output } from '../output.js';
import type { Session } from '../session.js';
import { say } from '../say.js';

export const dbCommand = defineCommand({
  name: 'db',
  group: 'Setup',
  summary: 'database maintenance: migrate, status, roles',
  description: 'database maintenance',
  subcommands: [
    defineCommand({
      name: 'migrate',
      changes: true,
      description: 'apply pending migrations (needed once per release on PostgreSQL; SQLite migrates itself)',
      options: [
        {
          flags: '--create',
          description: 'create the SQLite file (and its folders) when it does not exist; without it a path other than the default must exist (a typo creates nothing)',
        },
      ],
      run: (session, out, { options }) => runDbMigrate(session, out, options.create === true),
    }),
    defineCommand({
      name: 'status',
      description: 'show applied and pending migrations (exit 1 when not up to date)',
      run: (session, out) => runDbStatus(session, out),
    }),
    defineCommand({
      name: 'roles',
      changes: (options) => options.apply === true,
      description: 'print the SQL creating the four PostgreSQL roles (support, oncall, admin, server); --apply runs it',
      options: [{ flags: '--apply', description: 'run it (as the database owner or a role with CREATEROLE)' }],
      notes: 'Re-runnable: roles the cluster already has are reused. Run it again after db migrate. See docs/roles.md.',
      run: (session, out, { options }) => runDbRoles(session, out, options.apply === true),
    }),
  ],
});

export const signingKeyCommand = defineCommand({
  name: 'signing-key',
  group: 'Server',
  summary: 'the token signing keys',
  description: 'token signing keys',
  subcommands: [
    defineCommand({
      name: 'rotate',
      changes: true,
      description: 'add a new current signing key; the previous one verifies its tokens until they expire',
      options: [
        {
          flags: '--new-file',
          description:
            'the key file is lost: start a new one although keys recorded in the database have signed tokens (every token they signed is refused from then on)',
        },
      ],
      run: (session, out, { options }) => runSigningKeyRotate(session, out, options.newFile === true),
    }),
  ],
});

async function runDbMigrate(session: Session, out: Output, create: boolean): Promise<void> {
  // Like every other command, a path other than the default must exist, unless --create says to make it.
  const creating = create ? session.creatingDatabase() : session.requireDatabase();
  const config = session.databaseConfig;
  const { applyMigrations, chainAuditTrail } = await import('../../db/migrate.js');
  // Nothing pending is answered from the _prisma_migrations table with plain SQL, without the schema
  // engine: at once, even while servers hold the file. Only real work loads the engine.
  const pending = await pendingMigrations(config);
  // Nothing pending still finishes an audit chain an interrupted run left unchained.
  const applied = pending === 0 ? [] : await applyMigrations(config);
  if (pending === 0) await chainAuditTrail(config);
  if (out.json) {
    out.emitJson({ provider: config.provider, database: session.databaseName, created: creating, applied, changed: creating || applied.length > 0 });
    return;
  }
  if (creating) out.line(say`Created the database ${session.databaseName}.`);
  out.line(
    applied.length === 0
      ? say`Database ${session.databaseName} is up to date; nothing to apply.`
      : say`Applied ${applied.length} migration(s) to ${session.databaseName}: ${applied.join(', ')}`,
  );
}

/** How many migrations are pending or failed; -1 when that cannot be read (no file, no table yet). */
async function pendingMigrations(config: Session['databaseConfig']): Promise<number> {
  if (dialectOf(config.provider).isFile && !existsSync(config.url)) return -1;
  const [{ openDatabase }, { migrationStatus }] = await Promise.all([import('../../db/client.js'), import('../../db/migrate.js')]);
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
async function runDbStatus(session: Session, out: Output): Promise<number> {
  const config = session.databaseConfig;
  session.requireDatabase();
  const [{ openDatabase }, { migrationStatus }] = await Promise.all([import('../../db/client.js'), import('../../db/migrate.js')]);
  const db = await openDatabase(config);
  try {
    const status = await migrationStatus(db);
    const upToDate = status.pending.length === 0 && status.failed.length === 0;
    if (out.json) {
      out.emitJson({ provider: config.provider, database: session.databaseName, up_to_date: upToDate, ...status });
    } else {
      out.line(say`Database: ${config.provider} ${session.databaseName}`);
      out.line(say`Applied:  ${status.applied.length ? status.applied.join(', ') : 'none'}`);
      out.line(say`Pending:  ${status.pending.length ? status.pending.join(', ') : 'none'}`);
      if (status.failed.length) out.line(say`Failed:   ${status.failed.join(', ')}`);
      if (status.unknown.length) out.line(say`Unknown to this partnerctl (database is newer): ${status.unknown.join(', ')}`);
      out.line(upToDate ? say`Up to date.` : say`Not up to date: run 'partnerctl db migrate'.`);
    }
    return upToDate ? EXIT.ok : EXIT.error;
  } finally {
    await db.close();
  }
}

async function runSigningKeyRotate(session: Session, out: Output, newFile: boolean): Promise<void> {
  const file = session.signingKeyFile;
  const [{ rotateSigningKeyFile }, { RETIRED_KEY_OVERLAP_SECONDS }, db] = await Promise.all([
    import('../../domain/runtime/signing-key-guard.js'),
    import('../../domain/operations/signing-keys.js'),
    session.db(),
  ]);
  // A missing file where keys have already signed tokens is refused unless --new-file says it is lost.
  const result = await rotateSigningKeyFile(db, file, { allowNew: newFile });
  if (out.json) {
    out.emitJson({ file, kid: result.kid, retired_kid: result.retiredKid, pruned: result.pruned, changed: true });
    return;
  }
  out.line(say`New signing key ${result.kid} is current in ${file}.`);
  out.line(
    say`The previous key ${result.retiredKid} still verifies the tokens it signed for ${RETIRED_KEY_OVERLAP_SECONDS} s; running servers pick the change up within a second.`,
  );
}

async function runDbRoles(session: Session, out: Output, apply: boolean): Promise<void> {
  const config = session.databaseConfig;
  const { AppError } = await import('../../errors.js');
  if (!dialectOf(config.provider).hasLogins) {
    throw new AppError('invalid_argument', 'roles exist on PostgreSQL only; SQLite has no logins (its audit trail records the OS user, unverified)');
  }
  const { rolesSql, ROLES } = await import('../../db/roles.js');
  const database = decodeURIComponent(new URL(config.url).pathname.replace(/^\//, '')) || 'postgres';
  const sql = rolesSql(database);
  if (!apply) {
    if (out.json) out.emitJson({ database, roles: ROLES, sql });
    // The script as written, a line at a time (the database's name in it escaped like any value).
    else for (const line of sql.trimEnd().split('\n')) out.line(say`${line}`);
    return;
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: config.url, connectionTimeoutMillis: 5_000 });
  // Changed: a role was created (the grants are applied again on every run, to the tables there are now).
  let created = false;
  try {
    await client.connect();
    const present = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_roles WHERE rolname = ANY($1::text[])', [[...ROLES]]);
    created = present.rows[0]!.n < ROLES.length;
    await client.query(`BEGIN; ${sql} COMMIT;`);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    const { isPermissionError } = await import('../../db/roles.js');
    if (isPermissionError(error)) {
      throw new AppError('permission_denied', `creating the roles needs the database's owner or CREATEROLE: ${(error as Error).message}`, {
        hint: 'run it as the database owner, or print the SQL and hand it to one',
        cause: error,
      });
    }
    throw new AppError('database_unavailable', `applying the roles failed: ${(error as Error).message}`, { cause: error });
  } finally {
    await client.end().catch(() => {});
  }
  if (out.json) out.emitJson({ database, roles: ROLES, applied: true, changed: created });
  else out.line(say`Roles ${ROLES.join(', ')} are set up in ${database}.`);
}
