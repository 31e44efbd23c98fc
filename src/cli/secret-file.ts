// New credentials handed over in a file of their own, never on stdout (`--secret-to`, `--issue-keys-to`):
// created new, never over an existing file, with mode 0600, and written inside the change's unit of work, so
// that a file that cannot be written issues nothing and a committed secret is always in it.
import { open, unlink, type FileHandle } from 'node:fs/promises';
import type { IssuedKeyPair } from '../domain/operations/key-pairs.js';
import { AppError } from '../errors.js';
import { iso } from './output.js';

/** The file's one shape, whichever command wrote it: `{ keys: [...] }`, one entry per new pair. */
export function secretsDocument(pairs: readonly IssuedKeyPair[]): string {
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

  /** `flag` names the option that gave the path, for the error. */
  constructor(
    readonly path: string,
    private readonly flag: string,
  ) {}

  /** Writes `text` as the whole file, creating it on the first call (a retried unit of work writes it again). */
  async write(text: string): Promise<void> {
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
  }

  /** Whether the new credentials were written (kept once the change committed). */
  get written(): boolean {
    return this.wrote;
  }

  /** Closes the file; when the change did not commit it is removed: it would hold credentials that do not exist. */
  async close(committed: boolean): Promise<void> {
    const handle = this.handle;
    if (!handle) return;
    this.handle = null;
    await handle.close();
    if (!committed) await unlink(this.path).catch(() => undefined);
  }
}

/** Runs `change` with the file open for its hand-over, then closes it (removed unless the change committed). */
export async function withSecretFile<T>(file: SecretFile | null, change: () => Promise<T>): Promise<T> {
  if (!file) return change();
  let committed = false;
  try {
    const result = await change();
    committed = true;
    return result;
  } finally {
    await file.close(committed);
  }
}
