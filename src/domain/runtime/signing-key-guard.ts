import { existsSync } from 'node:fs';
import type { Database } from '../../db/client.js';
import { countSigningKeys, recordSigningKeys } from '../../db/repositories/signing-keys.js';
import type { Clock } from '../../clock.js';
import { AppError, isAppError } from '../../errors.js';
import type { Bookkeeping } from './bookkeeping.js';
import { rotateSigningKey, SigningKeys } from '../operations/signing-keys.js';
import type { TokenVerifier } from '../operations/tokens.js';

const POLL_INTERVAL_MS = 1_000;
/** While the file stays missing, the error is logged again this often. */
const MISSING_REMINDER_MS = 60_000;

function keyFileMissing(path: string, known: number): AppError {
  return new AppError(
    'signing_key_unavailable',
    `signing-key file ${path} is missing, but the database records ${known} signing key(s) that have signed tokens; a new file would make every token in flight invalid`,
    { field: 'signing_key_file' },
  );
}

/**
 * The signing keys, for a process that signs: the file is loaded, or created with a first key only when the
 * database has never recorded a key. A missing file where keys have existed is an operator's mistake (a
 * wrong path, a lost volume) that a fresh file would turn into every outstanding token being refused.
 */
export async function openSigningKeys(db: Database, path: string, options: { allowNew?: boolean } = {}): Promise<SigningKeys> {
  if (!options.allowNew && !existsSync(path)) {
    let known: number;
    try {
      known = await countSigningKeys(db.sql);
    } catch (error) {
      if (isAppError(error)) throw error;
      throw new AppError('database_unavailable', `cannot tell whether signing keys existed before: ${(error as Error).message}`, { cause: error });
    }
    if (known > 0) throw keyFileMissing(path, known);
  }
  return SigningKeys.open(path, db.clock);
}

/**
 * Adds a new current signing key to the file and records the file's keys in the database (so that a lost
 * file is noticed later). A missing file where keys have already signed tokens is refused unless `allowNew`
 * says it is lost.
 */
export async function rotateSigningKeyFile(
  db: Database,
  path: string,
  options: { allowNew?: boolean } = {},
): Promise<ReturnType<typeof rotateSigningKey>> {
  await openSigningKeys(db, path, options);
  const now = new Date(db.clock.now());
  const result = rotateSigningKey(path, now);
  await db.sql.transaction((tx) => recordSigningKeys(tx, SigningKeys.open(path, db.clock).kids(), now), { timeoutMs: 5_000 });
  return result;
}

export interface KeyFileLog {
  error(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/**
 * A running server's watch on the key file (once a second): a rotation is picked up, every key seen is
 * recorded in the database (off the request path), and the file disappearing or being replaced by one
 * without the keys in use is logged loudly. A missing file changes nothing in memory: the server keeps
 * signing and verifying with the keys it holds, and never creates a file.
 */
export class SigningKeyWatch {
  private timer: NodeJS.Timeout | undefined;
  private missingSince: number | null = null;
  private remindedAt = 0;

  constructor(
    private readonly keys: SigningKeys,
    private readonly verifier: TokenVerifier,
    private readonly bookkeeping: Bookkeeping,
    private readonly log: KeyFileLog | undefined,
    private readonly clock: Clock,
  ) {}

  start(): void {
    this.bookkeeping.signingKeysSeen(this.keys.kids());
    this.timer = setInterval(() => this.check(), POLL_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  check(now = this.clock.now()): void {
    const path = this.keys.path;
    let result: ReturnType<SigningKeys['poll']>;
    try {
      result = this.keys.poll(now);
    } catch (error) {
      this.log?.error({ path, err: { message: (error as Error).message } }, 'signing-key file could not be reloaded; keeping the keys in memory');
      return;
    }
    if (result.state === 'missing') {
      if (this.missingSince === null || now - this.remindedAt >= MISSING_REMINDER_MS) {
        this.missingSince ??= now;
        this.remindedAt = now;
        this.log?.error(
          { path, missing_since: new Date(this.missingSince).toISOString(), kids: this.keys.kids() },
          'SIGNING-KEY FILE MISSING: this server keeps signing and verifying with the keys in memory, but no other process can load them and the CLI refuses to create a new file; restore the file from a backup',
        );
      }
      return;
    }
    if (this.missingSince !== null) {
      this.missingSince = null;
      this.log?.warn({ path }, 'signing-key file is back');
    }
    if (result.state !== 'reloaded') return;
    this.verifier.keysChanged();
    this.bookkeeping.signingKeysSeen(this.keys.kids());
    if (result.lost.length > 0) {
      this.log?.error(
        { path, lost_kids: result.lost },
        'SIGNING KEYS DROPPED: the reloaded signing-key file lacks keys that still verified tokens; every token they signed is refused from now on',
      );
    } else {
      // Loud too: the file every instance and the CLI share was changed (a rotation, or a file put in its place).
      this.log?.warn({ path, kids: this.keys.kids() }, 'signing-key file changed on disk: reloaded');
    }
  }
}
