import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { resolveDatabase, resolveSigningKeyFile, type Config, type DatabaseConfig } from '../config.js';
import type { Database } from '../db/client.js';
import { AppError } from '../errors.js';
import type { Actor } from '../domain/transactions.js';
import type { GlobalOptions } from './global-options.js';
import type { Terminal } from './terminal.js';

/**
 * What a command runs with: parsed global options, whether a person is at the terminal, and the database
 * opened on demand (so that --help and bad usage never touch it).
 */
export class Session {
  private database: Promise<Database> | undefined;

  constructor(
    readonly options: GlobalOptions,
    readonly config: Config,
    readonly terminal: Terminal,
    /** The command only reads: it never creates a database someone named by mistake. */
    readonly readOnly = false,
  ) {}

  /**
   * A read-only command given an SQLite path (DATABASE_URL / --database-url) where no file exists refuses
   * instead of creating an empty database there (a typo must not answer "no partners"). The embedded
   * default, and every command that writes, still create the file on first use.
   */
  refuseMissingDatabase(): void {
    if (!this.readOnly) return;
    const explicit = (this.options.databaseUrl ?? this.config.env.DATABASE_URL ?? '').trim() !== '';
    const config = this.databaseConfig;
    if (explicit && config.provider === 'sqlite' && !existsSync(config.url)) {
      throw new AppError('database_unavailable', `no SQLite database at ${config.url} (a read-only command never creates one)`, {
        hint: `check DATABASE_URL / --database-url, or create the database: 'partnerctl db migrate'`,
      });
    }
  }

  get json(): boolean {
    return this.options.json === true;
  }

  /** Prompts only where a person can answer: a terminal on both ends, and no --no-input. */
  get interactive(): boolean {
    return this.options.input !== false && this.terminal.inIsTTY && this.terminal.outIsTTY && !this.json;
  }

  get databaseConfig(): DatabaseConfig {
    // One command needs one or two connections; a server's pool is larger (PARTNERCTL_DB_POOL_SIZE).
    return resolveDatabase(this.options.databaseUrl, this.config.env, 2);
  }

  get signingKeyFile(): string {
    return resolveSigningKeyFile(this.databaseConfig, this.config.env);
  }

  get who(): Actor {
    const actor = (this.options.actor ?? this.config.defaultActor ?? osUser()).trim();
    // biome-ignore lint/suspicious/noControlCharactersInRegex: an actor name may hold no C0 control character or DEL
    if (actor === '' || actor.length > 200 || /[\u0000-\u001f\u007f]/.test(actor)) {
      throw new AppError('invalid_argument', '--actor must be 1 to 200 characters without control characters');
    }
    return { actor };
  }

  /** The database, opened (and on SQLite migrated) on first use. */
  db(): Promise<Database> {
    this.database ??= (async () => {
      this.refuseMissingDatabase();
      const config = this.databaseConfig;
      const { connect } = await import('../db/connect.js');
      return connect(config);
    })();
    return this.database;
  }

  async close(): Promise<void> {
    const db = await this.database?.catch(() => undefined);
    await db?.close().catch(() => {});
  }
}

function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
