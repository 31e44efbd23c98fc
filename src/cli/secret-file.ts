// New credentials handed over in a file of their own, never on stdout (`--secret-to`, `--issue-keys-to`):
// created new, never over an existing file, with mode 0600, and written inside the change's unit of work, so
// that a file that cannot be written issues nothing and a committed secret is always in it. When the
// commit's outcome is unknown (the connection failed at COMMIT) the file is kept: it may hold the only copy.
import { open, unlink, type FileHandle } from 'node:fs/promises';
import type { IssuedKeyPair } from '../domain/operations/key-pairs.js';
import { AppError, isAppError } from '../errors.js';
import { iso } from './output.js';

/** The file's one shape, whichever command wrote it: `{ keys: [...] }`, one entry per new pair. */
function secretsDocument(pairs: readonly IssuedKeyPair[]): string {
  const keys = pairs.map((pair) => ({
    partner_id: pair.partner.id,
    name: pair.partner.name,
    key_pair_id: pair.keyPairId,
    access_key: pair.accessKey,
    secret_key: pair.secretKey,
    expires_at: iso(pair.expiresAt),
  }));
  return `${JSON.stringify({ keys }, null, 2)}\n`;
}

export class SecretFile {
  private handle: FileHandle | null = null;
  private wrote = false;
  /** The pairs last written (partner and key-pair ids), to name them when the commit's outcome is unknown. */
  private pairs: readonly IssuedKeyPair[] = [];

  /** `flag` names the option that gave the path, for the error. */
  constructor(
    readonly path: string,
    private readonly flag: string,
  ) {}

  /** Writes the pairs as the whole file, creating it on the first call (a retried unit of work writes it again). */
  async write(pairs: readonly IssuedKeyPair[]): Promise<void> {
    const text = secretsDocument(pairs);
    if (!this.handle) {
      try {
        this.handle = await open(this.path, 'wx', 0o600);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        throw new AppError(
          'invalid_argument',
          `${this.flag} ${this.path}: ${code === 'EEXIST' ? 'the file exists; secrets are never written over a file' : `cannot be created (${code})`}; nothing was changed`,
          { hint: 'name a new file (it is created with mode 0600)', cause: error },
        );
      }
    }
    await this.handle.truncate(0);
    await this.handle.write(text, 0);
    await this.handle.sync();
    this.wrote = true;
    this.pairs = pairs;
  }

  /** Whether the new credentials were written (kept once the change committed). */
  get written(): boolean {
    return this.wrote;
  }

  /**
   * Closes the file; when the change did not commit it is removed: it would hold credentials that do not
   * exist. `maybe`: nobody knows whether it committed, and the file is kept.
   */
  async close(committed: boolean | 'maybe'): Promise<void> {
    const handle = this.handle;
    if (!handle) return;
    this.handle = null;
    await handle.close();
    if (committed === false) await unlink(this.path).catch(() => undefined);
  }

  /** The error for a change whose commit's outcome is unknown: the file is kept, and how to tell is named. */
  outcomeUnknown(error: AppError): AppError {
    const ids = this.pairs.map((pair) => pair.keyPairId).join(', ');
    const partners = [...new Set(this.pairs.map((pair) => pair.partner.id))];
    const check = partners.map((id) => `'partnerctl show-partner ${id}'`).join(', ');
    return new AppError(
      error.code,
      `${error.message}; ${this.path} is kept: if the change committed, it holds the only copy of the secret of ${ids}`,
      { hint: `${check} tells, changing nothing: if ${ids} is listed, hand the file over; if not, nothing was issued and the file can be deleted`, cause: error },
    );
  }
}

/**
 * Runs `change` with the file open for its hand-over, then closes it: removed unless the change committed,
 * kept when the commit's outcome is unknown (the error then names the file and the read-only check).
 */
export async function withSecretFile<T>(file: SecretFile | null, change: () => Promise<T>): Promise<T> {
  if (!file) return change();
  let committed: boolean | 'maybe' = false;
  try {
    const result = await change();
    committed = true;
    return result;
  } catch (error) {
    if (isAppError(error) && error.next === 'check_commit_outcome' && file.written) {
      committed = 'maybe';
      throw file.outcomeUnknown(error);
    }
    throw error;
  } finally {
    await file.close(committed);
  }
}
