/**
 * The process's one bounded LRU for content-addressed renderings (issue #26 item 5): highlighted
 * lines, diff tables, commit diffs, code tables, merge request diffs. What is kept here is keyed
 * by what fully determines it (blob and commit ids, the view), so it never goes stale and two
 * processes can never disagree about it; what it costs is memory, so every kind shares one
 * budget (CAIRN_RENDER_CACHE_BYTES) and the least recently used entry of any kind goes first.
 *
 * Sizes are what a caller says: a string's length (one byte a character for the ASCII HTML this
 * mostly holds), a Buffer's byte length.
 */
export const DEFAULT_RENDER_CACHE_BYTES = 64 * 1024 * 1024;

interface Entry {
  value: unknown;
  size: number;
}

export class BoundedLru {
  /** Insertion order is recency order: a hit is moved to the end, eviction takes from the start. */
  private readonly entries = new Map<string, Entry>();
  private used = 0;

  constructor(private budget: number) {}

  get bytes() {
    return this.used;
  }

  get size() {
    return this.entries.size;
  }

  get limit() {
    return this.budget;
  }

  /** Changes the budget (the setting, applied by buildApp), evicting down to it. */
  setBudget(bytes: number) {
    this.budget = Math.max(0, bytes);
    this.evict();
  }

  get(key: string): unknown {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.value;
  }

  /** Keeps `value` unless it alone would take more than `maxShare` of the budget. */
  set(key: string, value: unknown, size: number, maxShare: number) {
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.used -= old.size;
    }
    if (size > this.budget * maxShare) return;
    this.entries.set(key, { value, size });
    this.used += size;
    this.evict();
  }

  clear() {
    this.entries.clear();
    this.used = 0;
  }

  /** One kind of entry: its keys are apart from every other kind's, its entries share the budget. */
  partition<V>(name: string, opts: { maxShare?: number } = {}): LruPartition<V> {
    return new LruPartition<V>(this, name, opts.maxShare ?? 1 / 8);
  }

  private evict() {
    for (const [k, v] of this.entries) {
      if (this.used <= this.budget) break;
      this.entries.delete(k);
      this.used -= v.size;
    }
  }
}

export class LruPartition<V> {
  constructor(
    private readonly lru: BoundedLru,
    private readonly name: string,
    /** The largest share of the whole budget one entry may take (a bigger one is not kept). */
    private readonly maxShare: number,
  ) {}

  get(key: string): V | undefined {
    return this.lru.get(`${this.name}\0${key}`) as V | undefined;
  }

  set(key: string, value: V, size: number) {
    this.lru.set(`${this.name}\0${key}`, value, size + key.length, this.maxShare);
  }

  /** The kept value, or `compute()`'s, kept when `keep` allows. */
  async getOrCompute(key: string, compute: () => Promise<V>, sizeOf: (value: V) => number, keep: (value: V) => boolean = () => true): Promise<V> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const value = await compute();
    if (keep(value)) this.set(key, value, sizeOf(value));
    return value;
  }
}

/** The process's render cache; buildApp sets its budget from the configuration. */
export const renderCache = new BoundedLru(DEFAULT_RENDER_CACHE_BYTES);
