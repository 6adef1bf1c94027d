import { performance } from 'node:perf_hooks';
import { cacheClears, cacheRequests } from '../metrics/index.js';
import { currentReads, isKnownTable, ReadSet, trackReads } from './read_tracking.js';

/**
 * A process-local cache of database reads that every Cairn process keeps true to PostgreSQL:
 *
 * - Every write to a watched table notifies channel `cairn_cache` when it commits (trigger from
 *   migration 0600); each process's listener then drops what it cached from that table
 *   (`invalidateTable`): each value keeps the tables its loader read (src/cache/read_tracking.ts),
 *   and a value that read a repository through git depends on every table, as before.
 * - The process that wrote waits, before the write call returns, until every live process has
 *   seen a barrier sent after the commit (`barrier`, src/cache/postgres_invalidation.ts). So once
 *   a request that wrote has answered, no process serves what the write replaced.
 * - A process serves from memory only under a lease (`servingUntil`) that its listener renews by
 *   receiving its own pings; a process that stops hearing notifications stops serving before any
 *   writer stops waiting for it.
 * - A value is kept only if none of the tables it read was written since its inputs were read,
 *   and, when the caller read inputs before (`since`), nothing at all was written since then.
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
  reads: ReadSet;
}

/** Near midnight UTC the database's current_date and this process's clock may disagree. */
const MIDNIGHT_MARGIN_MS = 60_000;

export class SharedCache {
  private readonly entries = new Map<string, Entry>();
  /** Loads under way whose inputs were read in `generation`. */
  private readonly loading = new Map<string, { generation: number; value: Promise<{ value: unknown; reads: ReadSet }> }>();
  /** Counts invalidations of any table (and clears). */
  private currentGeneration = 0;
  /** The generation of the last invalidation of each table; of the last clear. */
  private readonly tableGeneration = new Map<string, number>();
  private clearedAt = 0;
  /** Keys of the entries that read each table; of those that depend on every table. */
  private readonly byTable = new Map<string, Set<string>>();
  private readonly onAll = new Set<string>();
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private bytes = 0;
  private readonly ttlMs: number;
  private readonly off: boolean;
  /** performance.now() up to which this process may serve from memory; 0 when its listener is down. */
  servingUntil = 0;
  /** Waits until every process has applied the invalidations of writes committed so far (`unknown`: and dropped everything). */
  barrier: (write?: { unknown: boolean }) => Promise<void> = async () => {};

  constructor(opts: CacheOptions = {}) {
    this.maxEntries = opts.maxEntries ?? 10_000;
    this.maxBytes = opts.maxBytes ?? 64 * 1024 * 1024;
    this.ttlMs = opts.ttlMs ?? 5 * 60_000;
    this.off = opts.off ?? false;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Counts invalidations; pass it as `since` to keep only values whose inputs were read after it. */
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
        currentReads()?.merge(hit.reads);
        return hit.value as T;
      }
      this.delete(key);
    }
    const since = opts.since ?? this.currentGeneration;
    const running = this.loading.get(key);
    // Joining a load under way is a hit: the value is read once.
    if (running && running.generation === this.currentGeneration) {
      cacheRequests.inc({ result: 'hit' });
      const done = await running.value;
      currentReads()?.merge(done.reads);
      return done.value as T;
    }
    cacheRequests.inc({ result: 'miss' });
    if (since !== this.currentGeneration) {
      // Writes committed since the caller read its inputs: keep only if none touched what it read.
      const outer = currentReads();
      if (!outer || this.changedSince(outer, since)) return (await trackReads(load)).value;
    }
    const loaded = this.loadAndKeep(key, load, since, now, opts);
    const flight = { generation: since, value: loaded as Promise<{ value: unknown; reads: ReadSet }> };
    this.loading.set(key, flight);
    const done = () => {
      if (this.loading.get(key) === flight) this.loading.delete(key);
    };
    loaded.then(done, done);
    return (await loaded).value;
  }

  /** Whether a table `reads` names was invalidated after generation `since`. */
  private changedSince(reads: ReadSet, since: number): boolean {
    if (this.clearedAt > since) return true;
    if (reads.all) return this.currentGeneration > since;
    for (const t of reads.tables) if ((this.tableGeneration.get(t) ?? 0) > since) return true;
    return false;
  }

  private async loadAndKeep<T>(key: string, load: () => Promise<T>, since: number, now: number, opts: LoadOptions<T>): Promise<{ value: T; reads: ReadSet }> {
    // Inputs the caller read before (`since`): what the enclosing request or loader has read so
    // far (all of it when there is none to ask) counts as read by this value too.
    let earlier: ReadSet | undefined;
    if (opts.since !== undefined) {
      earlier = new ReadSet();
      const outer = currentReads();
      if (outer) earlier.merge(outer);
      else earlier.all = true;
    }
    const { value: raw, reads: own } = await trackReads(load);
    const reads = earlier ? (earlier.merge(own), earlier) : own;
    // Frozen whether kept or not: callers that joined this load share the value.
    const value = deepFreeze(raw);
    if (value !== undefined && !this.changedSince(reads, since) && this.serving && (!opts.keep || opts.keep(value))) {
      const midnight = nextUtcMidnight(now);
      const bytes = opts.size ? opts.size(value) : 0;
      if (midnight - now > MIDNIGHT_MARGIN_MS && now - (midnight - 86_400_000) > MIDNIGHT_MARGIN_MS && bytes <= this.maxBytes / 4) {
        this.delete(key);
        if (this.entries.size >= this.maxEntries) this.evictOldest();
        for (const oldest of this.entries.keys()) {
          if (this.bytes + bytes <= this.maxBytes) break;
          this.delete(oldest);
        }
        this.entries.set(key, { value, expiresAt: Math.min(now + this.ttlMs, midnight), bytes, reads });
        this.bytes += bytes;
        if (reads.all) this.onAll.add(key);
        else {
          for (const t of reads.tables) {
            let keys = this.byTable.get(t);
            if (!keys) this.byTable.set(t, (keys = new Set()));
            keys.add(key);
          }
        }
      }
    }
    return { value, reads };
  }

  /**
   * A write to `table` committed: drops the values that read it (and those that depend on
   * every table); loads in flight that read it will not be kept.
   */
  invalidateTable(table: string) {
    cacheClears.inc();
    this.tableGeneration.set(table, ++this.currentGeneration);
    for (const key of [...this.onAll]) this.delete(key);
    const keys = this.byTable.get(table);
    if (keys) for (const key of [...keys]) this.delete(key);
  }

  /**
   * A `cairn_cache` notification: `t:<table>` from a table's trigger; a name this process does
   * not know as a table (one a newer migration made) or `t:migration` drops everything.
   */
  invalidateFromNotification(payload: string) {
    const table = payload.slice(2);
    if (isKnownTable(table)) this.invalidateTable(table);
    else this.clear();
  }

  /** Drops every entry; loads in flight will not be kept. */
  clear() {
    cacheClears.inc();
    this.clearedAt = ++this.currentGeneration;
    this.entries.clear();
    this.loading.clear();
    this.byTable.clear();
    this.onAll.clear();
    this.bytes = 0;
  }

  private delete(key: string) {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.bytes -= entry.bytes;
    this.entries.delete(key);
    if (entry.reads.all) this.onAll.delete(key);
    else {
      for (const t of entry.reads.tables) {
        const keys = this.byTable.get(t);
        keys?.delete(key);
        if (keys && keys.size === 0) this.byTable.delete(t);
      }
    }
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
