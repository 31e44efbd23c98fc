import { dirname, join, resolve } from 'node:path';
import type { DatabaseConfig, DatabaseEnvironment, Provider } from '../config.js';
import { redactUrl } from '../config/parsers.js';
import { AppError } from '../errors.js';


/**
 * Everything the code asks of a backend beyond plain SQL: what each spells its own way, and what each can
 * do. Only the drivers (src/db/sqlite*.ts, src/db/postgresql.ts, src/db/client.ts) know which provider
 * they are; everyone else asks the dialect of the handle they hold (`database.dialect`, `tx.dialect`).
 */
export interface Dialect {
  /** The scalar functions that pick the lesser and the greater of their arguments. */
  readonly least: string;
  readonly greatest: string;
  /** The start of the day (as the column holds it) that a timestamp column's value falls in, of the column's type. */
  startOfDaySql(column: string): string;
  /** Many texts as one parameter: no per-item placeholders to parse, and no engine's parameter limit to meet. */
  textList(items: readonly string[]): unknown;
  /** The rows of a `textList` parameter, one column named `value`, to select from. */
  textListRowsSql(placeholder: string): string;
  /** Whether `column` is one of a `textList` parameter's texts. */
  inTextListSql(column: string, placeholder: string): string;
  /** Counts (as `n`) the tables named $1 in the schema in use. */
  readonly tableCountSql: string;
  /**
   * A timestamp as the database stores it: SQLite keeps the ISO text the app writes; pg sends a Date as the
   * writer's local wall time, which PostgreSQL keeps in the TIMESTAMP(3) column (read back with atTextSql).
   */
  atText(at: Date): string;
  /** The SQL expression that reads a timestamp column back as `atText` wrote it. */
  atTextSql(column?: string): string;
  /**
   * Connections log in as roles the database vouches for (session_user): grants decide what each may do,
   * and the audit trail records the login as a verified principal. SQLite has none: the file permissions
   * decide, and the trail records the OS user, unverified.
   */
  readonly hasLogins: boolean;
  /** LISTEN/NOTIFY: a change is announced to the processes listening for it, which then need not poll. */
  readonly listens: boolean;
  /** Work that one instance must do alone (webhook delivery) goes to the holder of a lease; without, every instance does it. */
  readonly hasLeases: boolean;
  /**
   * Instants written by one process are compared by others on other hosts: every process reads the database
   * server's clock, through its own corrected by a measured offset. SQLite is one host, one clock.
   */
  readonly hasServerClock: boolean;
  /**
   * Across a network: the database can be unreachable while a server runs (an outage it rides out on what it
   * last confirmed, within its stale budget), and the hosts sharing it share no files. SQLite is a file on
   * this machine.
   */
  readonly isRemote: boolean;
  /** The database is a file, its URL the file's path, which may not exist yet. */
  readonly isFile: boolean;
  /** The column naming a row physically (SQLite's rowid, PostgreSQL's ctid): a bounded delete picks rows by it. */
  readonly rowLocator: string;
  /**
   * Rows one prune step deletes: SQLite's run on the server's event loop (better-sqlite3 is synchronous), so a
   * step stays well under 50 ms; PostgreSQL's run on its own server, so a 10 M backlog goes within an hour.
   */
  readonly pruneBatchRows: number;
  /**
   * Pending migrations are applied by the first command that finds them: the file is this host's own. A
   * database shared by several servers is migrated once, on purpose, by an operator.
   */
  readonly migratesItself: boolean;
  /** The database as a person may read it: the file's path, or the URL without its password. */
  describe(url: string): string;
}

export const sqliteDialect: Dialect = {
  least: 'MIN',
  greatest: 'MAX',
  startOfDaySql: (column) => `substr(${column}, 1, 10) || 'T00:00:00.000+00:00'`,
  textList: (items) => JSON.stringify(items),
  textListRowsSql: (placeholder) => `json_each(${placeholder})`,
  inTextListSql: (column, placeholder) => `${column} IN (SELECT value FROM json_each(${placeholder}))`,
  tableCountSql: "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = $1",
  atText: (at) => at.toISOString().replace('Z', '+00:00'),
  atTextSql: (column = 'at') => column,
  hasLogins: false,
  listens: false,
  hasLeases: false,
  hasServerClock: false,
  isRemote: false,
  isFile: true,
  rowLocator: 'rowid',
  pruneBatchRows: 250,
  migratesItself: true,
  describe: (url) => url,
};

export const postgresqlDialect: Dialect = {
  least: 'LEAST',
  greatest: 'GREATEST',
  startOfDaySql: (column) => `date_trunc('day', ${column})`,
  textList: (items) => items,
  textListRowsSql: (placeholder) => `unnest(${placeholder}::text[]) AS value`,
  inTextListSql: (column, placeholder) => `${column} = ANY(${placeholder}::text[])`,
  tableCountSql: 'SELECT COUNT(*) AS n FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1',
  atText: (at) => {
    const pad = (n: number, width = 2) => String(n).padStart(width, '0');
    return (
      `${pad(at.getFullYear(), 4)}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T` +
      `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`
    );
  },
  atTextSql: (column = 'at') => `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS')`,
  hasLogins: true,
  listens: true,
  hasLeases: true,
  hasServerClock: true,
  isRemote: true,
  isFile: false,
  rowLocator: 'ctid',
  pruneBatchRows: 20_000,
  migratesItself: false,
  describe: redactUrl,
};

const DIALECTS: Record<Provider, Dialect> = { sqlite: sqliteDialect, postgresql: postgresqlDialect };

/** The dialect of a configured database, before (or without) opening it. */
export function dialectOf(provider: Provider): Dialect {
  return DIALECTS[provider];
}

/**
 * The signing-key file: PARTNERCTL_SIGNING_KEY_FILE, else beside the SQLite file. On PostgreSQL it must be
 * named: several servers and the operators' CLI on different hosts must share one file, and a key file
 * made up silently on each host would give tokens that the other hosts refuse.
 */
export function resolveSigningKeyFile(database: DatabaseConfig, env: DatabaseEnvironment): string {
  if (env.PARTNERCTL_SIGNING_KEY_FILE) return resolve(env.PARTNERCTL_SIGNING_KEY_FILE);
  if (dialectOf(database.provider).isRemote) {
    throw new AppError('signing_key_unavailable', 'PARTNERCTL_SIGNING_KEY_FILE is not set', {
      hint: 'on PostgreSQL every serve instance and the CLI must name the same signing-key file',
    });
  }
  return join(dirname(database.url), 'signing-keys.json');
}
