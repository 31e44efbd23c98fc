import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type { Database as Connection } from 'better-sqlite3';

/** How often (at most) a query checks that the SQLite file at the configured path is still the one open. */
const CHECK_INTERVAL_MS = 200;
const SQLITE_HEADER = Buffer.from('SQLite format 3\u0000', 'latin1');

export type SqliteFileEvent = { kind: 'unavailable'; path: string; reason: string } | { kind: 'reopened'; path: string };

/** The SQLite file at `path` cannot be used: missing, replaced by something that is not a database, or unopenable. */
class DatabaseFileError extends Error {
  override readonly name = 'DatabaseFileError';
  readonly code = 'SQLITE_FILE_UNAVAILABLE';
}

/** The device and inode of the file at `path`, and whether it starts like a SQLite database. */
function inspectFile(path: string): { dev: number; ino: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new DatabaseFileError(code === 'ENOENT' ? `the database file ${path} is missing` : `the database file ${path} cannot be read (${code})`, {
      cause: error,
    });
  }
  try {
    const { dev, ino, size } = fstatSync(fd);
    const header = Buffer.alloc(SQLITE_HEADER.length);
    const read = size === 0 ? 0 : readSync(fd, header, 0, header.length, 0);
    // An empty file is what SQLite itself creates before its first write; anything else must be a database.
    if (size !== 0 && (read !== header.length || !header.equals(SQLITE_HEADER))) {
      throw new DatabaseFileError(`the database file ${path} is not a SQLite database (overwritten?)`);
    }
    return { dev, ino };
  } finally {
    closeSync(fd);
  }
}

export interface SqliteFileOptions {
  /** Watch the file at the path (see SqlDatabaseOptions.watchFile); otherwise the connection is kept as opened. */
  watch: boolean;
  onFileEvent?: ((event: SqliteFileEvent) => void) | undefined;
  /** Called when the connection is closed or replaced: whatever was prepared on it is gone. */
  onConnectionGone: () => void;
}

/**
 * The connection to the SQLite file at a path. Watched, it checks (at most every 200 ms, and on `verify`)
 * that the file at the path is still the one open and still a database: when it is not, the connection is
 * closed and the file at the path, if any, opened instead; until then every use fails.
 */
export class SqliteFile {
  private connection: Connection | null;
  private identity: { dev: number; ino: number } | null;
  private failure: Error | null = null;
  private checkedAt = Date.now();
  private reopenings = 0;

  constructor(
    private readonly path: string,
    /** Opens the file (`mustExist`: never create it), with the connection's settings applied. */
    private readonly open: (mustExist: boolean) => Connection,
    private readonly options: SqliteFileOptions,
  ) {
    this.connection = open(false);
    this.identity = options.watch ? inspectFile(path) : null;
  }

  /** Times the connection was reopened on a replaced file. */
  get epoch(): number {
    return this.reopenings;
  }

  /** The open connection, once the file at the path is known (within the check interval) to be it. */
  live(): Connection {
    this.check(false);
    if (!this.connection) throw this.failure ?? new DatabaseFileError(`the database file ${this.path} is not open`);
    return this.connection;
  }

  /** Checks the file now, reopening it when it was replaced; throws when it is not usable. */
  verify(): void {
    this.check(true);
  }

  close(): void {
    this.connection?.close();
    this.connection = null;
  }

  private check(force: boolean): void {
    if (!this.identity && !this.failure) return;
    const now = Date.now();
    if (!force && now - this.checkedAt < CHECK_INTERVAL_MS) {
      if (this.failure) throw this.failure;
      return;
    }
    // A transaction of this connection in progress finishes on the file it began on.
    if (this.connection?.inTransaction) return;
    this.checkedAt = now;
    try {
      const current = inspectFile(this.path);
      if (this.connection && !this.failure && this.identity && current.dev === this.identity.dev && current.ino === this.identity.ino) return;
      this.drop();
      try {
        this.connection = this.open(true);
      } catch (error) {
        throw new DatabaseFileError(`the database file ${this.path} cannot be opened: ${(error as Error).message}`, { cause: error });
      }
      this.identity = inspectFile(this.path);
      this.failure = null;
      this.reopenings++;
      this.tell({ kind: 'reopened', path: this.path });
    } catch (error) {
      // Never keep reading a file that is no longer the database at the path.
      this.drop();
      const reason = (error as Error).message;
      if (this.failure?.message !== reason) this.tell({ kind: 'unavailable', path: this.path, reason });
      this.failure = error as Error;
      throw this.failure;
    }
  }

  private drop(): void {
    this.connection?.close();
    this.connection = null;
    this.options.onConnectionGone();
  }

  private tell(event: SqliteFileEvent): void {
    try {
      this.options.onFileEvent?.(event);
    } catch {
      // A listener's failure is not the database's.
    }
  }
}
