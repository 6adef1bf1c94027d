import { performance } from 'node:perf_hooks';
import { cacheClears, cacheRequests } from '../metrics/index.js';

/**
 * A process-local cache of database reads that every Cairn process keeps true to PostgreSQL:
 *
 * - Every write to a watched table notifies channel `cairn_cache` when it commits (trigger from
 *   migration 0600); each process's listener then drops everything it cached (`clear`).
 * - The process that wrote waits, before the write call returns, until every live process has
 *   seen a barrier sent after the commit (`barrier`, src/cache/postgres_invalidation.ts). So once
 *   a request that wrote has answered, no process serves what the write replaced.
 * - A process serves from memory only under a lease (`servingUntil`) that its listener renews by
 *   receiving its own pings; a process that stops hearing notifications stops serving before any
 *   writer stops waiting for it.
 * - A value is kept only if no clear happened since its inputs were read (`since`).
 *
 * Entries also expire at the next UTC midnight at the latest, because memberships and tokens
 * expire by date without any write, and after `ttlMs` in any case.
 */
export interface CacheOptions {
  maxEntries?: number;
  /** Most bytes the values that declare a size (LoadOptions.size) may take together. */
  maxBytes?: number;
  ttlMs?: number;
  /** Never serve from memory (CAIRN_CACHE=0); the process still takes part in barriers. */
  off?: boolean;
}

export interface LoadOptions<T> {
  /**
   * The generation when the loader's inputs were read, if some were read before `load` was
   * called (e.g. a row the request already holds). Default: now.
   */
  since?: number;
  /** Whether a loaded value may be kept (e.g. not when part of it could not be read). */
  keep?: (value: T) => boolean;
  /** About how many bytes the value takes (large values, such as rendered pages, count against maxBytes). */
  size?: (value: T) => number;
}

interface Entry {
  value: unknown;
  expiresAt: number;
  bytes: number;
}

/** Near midnight UTC the database's current_date and this process's clock may disagree. */
const MIDNIGHT_MARGIN_MS = 60_000;

export class SharedCache {
  private readonly entries = new Map<string, Entry>();
  /** Loads under way whose inputs were read in `generation`. */
  private readonly loading = new Map<string, { generation: number; value: Promise<unknown> }>();
  private currentGeneration = 0;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private bytes = 0;
  private readonly ttlMs: number;
  private readonly off: boolean;
  /** performance.now() up to which this process may serve from memory; 0 when its listener is down. */
  servingUntil = 0;
  /** Waits until every process has applied the invalidations of writes committed so far. */
  barrier: () => Promise<void> = async () => {};

  constructor(opts: CacheOptions = {}) {
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    this.ttlMs = opts.ttlMs ?? 5 * 60_000;
    this.off = opts.off ?? false;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Counts clears; pass it as `since` to keep only values whose inputs were read after it. */
  get generation(): number {
    return this.currentGeneration;
  }

  get serving(): boolean {
    return !this.off && performance.now() < this.servingUntil;
  }

  /**
   * The cached value of `key`, or what `load` returns (kept unless it is undefined or the cache
   * was cleared since its inputs were read). Values are frozen: callers share them. Callers that
   * ask for a key while it is being loaded from inputs read in the current generation wait for
   * that load instead of starting their own (as they would have been served its value had it
   * finished first); after a clear, callers start a new load.
   */
  async load<T>(key: string, load: () => Promise<T>, opts: LoadOptions<T> = {}): Promise<T> {
    if (!this.serving) {
      cacheRequests.inc({ result: 'bypass' });
      return load();
    }
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit) {
      if (hit.expiresAt > now) {
        cacheRequests.inc({ result: 'hit' });
        return hit.value as T;
      }
      this.delete(key);
    }
    const since = opts.since ?? this.currentGeneration;
    const running = this.loading.get(key);
    // Joining a load under way is a hit: the value is read once.
    if (running && running.generation === this.currentGeneration) {
      cacheRequests.inc({ result: 'hit' });
      return running.value as Promise<T>;
    }
    cacheRequests.inc({ result: 'miss' });
    if (since !== this.currentGeneration) return load();
    const value = this.loadAndKeep(key, load, since, now, opts);
    const flight = { generation: since, value };
    this.loading.set(key, flight);
    const done = () => {
      if (this.loading.get(key) === flight) this.loading.delete(key);
    };
    value.then(done, done);
    return value;
  }

  private async loadAndKeep<T>(key: string, load: () => Promise<T>, since: number, now: number, opts: LoadOptions<T>): Promise<T> {
    // Frozen whether kept or not: callers that joined this load share the value.
    const value = deepFreeze(await load());
    if (value !== undefined && since === this.currentGeneration && this.serving && (!opts.keep || opts.keep(value))) {
      const midnight = nextUtcMidnight(now);
      const bytes = opts.size ? opts.size(value) : 0;
      if (midnight - now > MIDNIGHT_MARGIN_MS && now - (midnight - 86_400_000) > MIDNIGHT_MARGIN_MS && bytes <= this.maxBytes / 4) {
        this.delete(key);
        if (this.entries.size >= this.maxEntries) this.evictOldest();
        for (const oldest of this.entries.keys()) {
          if (this.bytes + bytes <= this.maxBytes) break;
          this.delete(oldest);
        }
        this.entries.set(key, { value, expiresAt: Math.min(now + this.ttlMs, midnight), bytes });
        this.bytes += bytes;
      }
    }
    return value;
  }

  /** Drops every entry; loads in flight will not be kept. */
  clear() {
    cacheClears.inc();
    this.currentGeneration++;
    this.entries.clear();
    this.loading.clear();
    this.bytes = 0;
  }

  private delete(key: string) {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.bytes -= entry.bytes;
    this.entries.delete(key);
  }

  private evictOldest() {
    // Maps iterate in insertion order: the first tenth are the oldest.
    let n = Math.ceil(this.maxEntries / 10);
    for (const key of this.entries.keys()) {
      if (n-- <= 0) break;
      this.delete(key);
    }
  }
}

function nextUtcMidnight(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
}

/** Bytes (Buffers) cannot be frozen: whoever caches them must never write into them. */
function deepFreeze<T>(value: T): T {
  if (ArrayBuffer.isView(value)) return value;
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    if (Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) {
      for (const v of Object.values(value as object)) deepFreeze(v);
    }
  }
  return value;
}
