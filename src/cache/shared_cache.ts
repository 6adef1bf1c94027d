/**
 * A process-local cache of database reads that every Cairn process keeps true to PostgreSQL:
 *
 * - Every write to a watched table notifies channel `cairn_cache` when it commits (trigger from
 *   migration 0600); each process's listener then drops everything it cached (`clear`).
 * - The process that wrote waits, before the write call returns, until every live process has
 *   seen that notification (`barrier`, src/cache/postgres_invalidation.ts). So once a request
 *   that wrote has answered, no process can serve what it replaced.
 * - A load that raced with a clear is returned to its caller but not kept (generation check).
 * - While the listener is down the cache is off (every call loads), so a process that could miss
 *   a notification never serves from memory.
 *
 * Entries also expire at the next UTC midnight at the latest, because memberships and tokens
 * expire by date without any write, and after `ttlMs` in any case.
 */
export interface CacheOptions {
  maxEntries?: number;
  ttlMs?: number;
  /** Never serve from memory (CAIRN_CACHE=0); the process still takes part in barriers. */
  off?: boolean;
}

interface Entry {
  value: unknown;
  expiresAt: number;
}

export class SharedCache {
  private readonly entries = new Map<string, Entry>();
  private generation = 0;
  private readonly maxEntries: number;
  private readonly ttlMs: number;
  private readonly off: boolean;
  /** True while invalidations are being received; false, every call goes to the database. */
  enabled = false;
  /** Waits until every process has applied the invalidations of writes committed so far. */
  barrier: () => Promise<void> = async () => {};

  constructor(opts: CacheOptions = {}) {
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.ttlMs = opts.ttlMs ?? 5 * 60_000;
    this.off = opts.off ?? false;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * The cached value of `key`, or what `load` returns (kept unless it is undefined or the cache
   * was cleared meanwhile). Values are frozen: callers share them and must copy to change.
   */
  async load<T>(key: string, load: () => Promise<T>): Promise<T> {
    if (!this.enabled || this.off) return load();
    const hit = this.entries.get(key);
    const now = Date.now();
    if (hit) {
      if (hit.expiresAt > now) return hit.value as T;
      this.entries.delete(key);
    }
    const generation = this.generation;
    const value = await load();
    if (value !== undefined && this.enabled && generation === this.generation) {
      if (this.entries.size >= this.maxEntries) this.evictOldest();
      this.entries.set(key, { value: deepFreeze(value), expiresAt: Math.min(now + this.ttlMs, nextUtcMidnight(now)) });
    }
    return value;
  }

  /** Drops every entry; loads in flight will not be kept. */
  clear() {
    this.generation++;
    this.entries.clear();
  }

  private evictOldest() {
    // Maps iterate in insertion order: the first tenth are the oldest.
    let n = Math.ceil(this.maxEntries / 10);
    for (const key of this.entries.keys()) {
      if (n-- <= 0) break;
      this.entries.delete(key);
    }
  }
}

function nextUtcMidnight(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    if (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
      for (const v of Object.values(value as object)) deepFreeze(v);
    }
  }
  return value;
}
