// The one cache of the server's hot path (the gate's snapshots, the verifier's verdicts, the partners'
// limits): a synchronous peek for the cheap case, an asynchronous load on a miss, and generations, so that a
// load begun before the cache was cleared (a revision moved) is never filed after it. A caller that can
// answer from `get` without a promise does; no check is written twice for the two cases.

/** A value known now, or the promise of it. */
export type Maybe<T> = T | Promise<T>;

export class SnapshotCache<K, V> {
  private readonly entries = new Map<K, V>();
  /** Moves on every `clear`: a load begun under an older generation is not filed. */
  private generationNow = 0;
  /** Loads under way, by the generation they began in. */
  private readonly loading = new Map<number, number>();
  /** Answers from memory, and loads: for the metrics. */
  hits = 0;
  misses = 0;

  constructor(
    private readonly maxEntries: number,
    /** Called when the last load of an older generation ends (see `settledSince`). */
    private readonly onLoadsSettled?: () => void,
  ) {}

  get generation(): number {
    return this.generationNow;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value held for `key`, without counting it; undefined when none is held. */
  peek(key: K): V | undefined {
    return this.entries.get(key);
  }

  /** The value held for `key` (at once), or `load`'s (a promise), filed when no `clear` came in between. */
  get(key: K, load: () => Promise<V>): Maybe<V> {
    const known = this.entries.get(key);
    if (known !== undefined) {
      this.hits++;
      return known;
    }
    return this.load(key, load);
  }

  private async load(key: K, load: () => Promise<V>): Promise<V> {
    this.misses++;
    const began = this.generationNow;
    this.loading.set(began, (this.loading.get(began) ?? 0) + 1);
    try {
      const value = await load();
      if (began === this.generationNow && this.maxEntries > 0) {
        // Full: start again rather than track recency on the hot path.
        if (this.entries.size >= this.maxEntries) this.entries.clear();
        this.entries.set(key, value);
      }
      return value;
    } finally {
      const left = this.loading.get(began)! - 1;
      if (left === 0) this.loading.delete(began);
      else this.loading.set(began, left);
      if (began !== this.generationNow) this.onLoadsSettled?.();
    }
  }

  /** True when no load begun before the current generation is still under way. */
  get settled(): boolean {
    for (const generation of this.loading.keys()) if (generation < this.generationNow) return false;
    return true;
  }

  /** Everything forgotten, under a new generation. */
  clear(): void {
    this.generationNow++;
    this.entries.clear();
  }

  /** Entries for which `drop` says so are forgotten (the generation stays: what is kept is still true). */
  sweep(drop: (value: V) => boolean): void {
    for (const [key, value] of this.entries) if (drop(value)) this.entries.delete(key);
  }
}
