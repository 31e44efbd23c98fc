import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { defaultDatabasePath, resolveDatabase, TUNING, type Config, type DatabaseConfig } from '../config.js';
import { resolveSigningKeyFile } from '../db/dialect.js';
import type { Database } from '../db/client.js';
import { dialectOf } from '../db/dialect.js';
import { AppError } from '../errors.js';
import type { Actor } from '../domain/operations/transactions.js';
import { chooseDatabase, type DatabaseChoice } from './contexts.js';
import type { GlobalOptions } from './global-options.js';
import { say, writeLine } from './say.js';
import type { Terminal } from './terminal.js';

/**
 * What a command runs with: parsed global options, whether a person is at the terminal, and the database
 * opened on demand (so that --help and bad usage never touch it).
 */
export class Session {
  private database: Promise<Database> | undefined;
  private choice: DatabaseChoice | undefined;

  constructor(
    readonly options: GlobalOptions,
    readonly config: Config,
    readonly terminal: Terminal,
  ) {}

  /**
   * An SQLite file that does not exist is created only at the embedded default path; any other path is
   * refused (a typo in a runbook must not provision into a new, empty database), `db migrate` included:
   * `db migrate --create` creates one. Returns whether the default is about to be created.
   */
  requireDatabase(): boolean {
    if (!this.creatingDatabase()) return false;
    const config = this.databaseConfig;
    if (config.url === defaultDatabasePath(this.config.env)) return true;
    const by = { flag: '--database-url', env: 'DATABASE_URL', context: `context '${this.databaseChoice.context?.name}'`, default: '' }[this.databaseChoice.source];
    throw new AppError('database_not_found', `no SQLite database at ${config.url} (named by ${by})`, {
      hint: `check ${by} for a typo; 'partnerctl db migrate --create' creates a new database there`,
    });
  }

  /** Whether opening the database creates it: an SQLite file that does not exist yet. */
  creatingDatabase(): boolean {
    const config = this.databaseConfig;
    return dialectOf(config.provider).isFile && !existsSync(config.url);
  }

  /** Which database, and which setting chose it (the one resolution order: src/cli/contexts.ts). */
  get databaseChoice(): DatabaseChoice {
    if (this.choice === undefined) {
      this.choice = chooseDatabase(this.options.databaseUrl, this.config.env, this.options.context);
      // A conflict between a flag and the environment is resolved for the flag, and said.
      if (this.choice.envOverridden) {
        writeLine(
          this.terminal.err,
          say`partnerctl: note: --context ${this.choice.context!.name} wins over DATABASE_URL (set in this environment): using the context's database`,
        );
      }
    }
    return this.choice;
  }

  /** The database as a person may read it: the SQLite path, or the URL without its password. */
  get databaseName(): string {
    const config = this.databaseConfig;
    return dialectOf(config.provider).describe(config.url);
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
    return resolveDatabase(this.databaseChoice.url, this.config.env, TUNING.commandPoolSize);
  }

  get signingKeyFile(): string {
    return resolveSigningKeyFile(this.databaseConfig, this.config.env);
  }

  get who(): Actor {
    const actor = (this.options.actor ?? this.config.defaultActor ?? this.contextActor ?? osUser()).trim();
    // biome-ignore lint/suspicious/noControlCharactersInRegex: an actor name may hold no C0 control character or DEL
    if (actor === '' || actor.length > 200 || /[\u0000-\u001f\u007f]/.test(actor)) {
      throw new AppError('invalid_argument', '--actor must be 1 to 200 characters without control characters');
    }
    return { actor };
  }

  /** The context's actor, when the context is the one that chose the database. */
  get contextActor(): string | undefined {
    const choice = this.databaseChoice;
    return choice.source === 'context' ? choice.context?.entry.actor : undefined;
  }

  /** The database, opened (and on SQLite migrated) on first use. */
  db(): Promise<Database> {
    this.database ??= (async () => {
      const creating = this.requireDatabase();
      const config = this.databaseConfig;
      const { connect } = await import('../db/connect.js');
      const db = await connect(config);
      if (creating) writeLine(this.terminal.err, say`partnerctl: created the database ${config.url} (the default; --database-url, DATABASE_URL or a context names another)`);
      return db;
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
