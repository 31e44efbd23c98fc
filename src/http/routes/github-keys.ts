// GitHub's secret-scanning signing keys, from its key list (docs/leaked-credentials.md).
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { Clock } from '../../clock.js';
import { AppError } from '../../errors.js';

const KEYS_TIMEOUT_MS = 5_000;
/** After a fetch that worked, an unknown key id fetches the list again at most this often. */
export const REFETCH_MS = 60_000;
/** After a fetch that failed, the list is tried again this long later at the earliest. */
export const RETRY_FAILED_MS = 2_000;

/**
 * The keys of the list, fetched on first use and kept. A signature naming a key id not in it fetches the
 * list again, one fetch at a time: at most once a minute after a fetch that worked (the id is then not
 * GitHub's: null), a few seconds after one that failed. While the list cannot be fetched, an unknown id is
 * `key_list_unavailable` (503: GitHub retries the alert), never a refusal it would not retry.
 */
export class GitHubKeys {
  private keys = new Map<string, KeyObject>();
  private fetchedAt = Number.NEGATIVE_INFINITY;
  private failedAt: number | null = null;
  private fetching: Promise<void> | undefined;

  constructor(
    private readonly url: URL,
    private readonly clock: Clock,
  ) {}

  /** The key of this id; null when the list, fetched again if allowed, does not hold it. */
  async key(id: string): Promise<KeyObject | null> {
    const known = this.keys.get(id);
    if (known) return known;
    const now = this.clock.now();
    if (this.failedAt !== null) {
      if (now - this.failedAt < RETRY_FAILED_MS && !this.fetching) throw unavailable();
      await this.refresh();
    } else if (now - this.fetchedAt >= REFETCH_MS) {
      await this.refresh();
    }
    return this.keys.get(id) ?? null;
  }

  private refresh(): Promise<void> {
    this.fetching ??= this.load().finally(() => {
      this.fetching = undefined;
    });
    return this.fetching;
  }

  private async load(): Promise<void> {
    let keys: Map<string, KeyObject>;
    try {
      keys = await this.fetchList();
    } catch (error) {
      this.failedAt = this.clock.now();
      throw unavailable(error);
    }
    this.failedAt = null;
    this.fetchedAt = this.clock.now();
    this.keys = keys;
  }

  private async fetchList(): Promise<Map<string, KeyObject>> {
    const response = await fetch(this.url, { headers: { accept: 'application/json', 'user-agent': 'partnerctl' }, signal: AbortSignal.timeout(KEYS_TIMEOUT_MS) });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const entries = ((await response.json()) as { public_keys?: unknown })?.public_keys;
    if (!Array.isArray(entries)) throw new Error('the key list has no public_keys');
    const keys = new Map<string, KeyObject>();
    for (const entry of entries) {
      const { key_identifier: id, key: pem } = (entry ?? {}) as { key_identifier?: unknown; key?: unknown };
      if (typeof id !== 'string' || typeof pem !== 'string') continue;
      try {
        keys.set(id, createPublicKey(pem));
      } catch {
        // A key that does not parse verifies nothing.
      }
    }
    return keys;
  }
}

function unavailable(cause?: unknown): AppError {
  return new AppError('key_list_unavailable', "GitHub's secret-scanning key list could not be fetched", { cause });
}
