import fs from 'node:fs';
import path from 'node:path';
import { readPackedRefs } from './ref_files.js';

/**
 * Results computed from pinned object ids (rev-list pages and counts, the last commit touching a
 * path, blame, diff stats, comparisons, whether a branch is merged) kept in memory. A computation
 * over pinned commit ids gives the same answer for as long as the objects do not change, and
 * objects never change, with one exception: replace refs (`refs/replace/*`, which a push may
 * create) make git read other objects in their place (grafts and shallow files would too; Cairn
 * writes neither). So nothing is kept for a repository that may hold replace refs, and a result is
 * dropped when its replace refs may have changed while it was computed. No invalidation is needed
 * otherwise, across processes included; the least recently used entries go first, when there are
 * more than `maxEntries` or they weigh more than `maxWeight` together (see `remember`).
 */
export interface MemoOptions {
  maxEntries?: number;
  /** Bound on the summed weights of kept results (e.g. bytes); a result over a quarter of it is not kept. */
  maxWeight?: number;
}

/**
 * The state of `gitDir`'s replace refs as a token, or null when it may have some (nothing is
 * kept for it then). Loose replace refs live under refs/replace/ (the directory outlives them,
 * so its presence alone counts); packed ones in packed-refs, read again whenever it is rewritten.
 * Calls made in one synchronous run share one look (a page of twenty commits asks twenty times at
 * once); nothing can happen in between that the caller could have waited for.
 */
export function replaceRefsState(gitDir: string): Promise<string | null> {
  let state = sameRun.get(gitDir);
  if (!state) {
    state = lookAtReplaceRefs(gitDir);
    sameRun.set(gitDir, state);
    if (sameRun.size === 1) queueMicrotask(() => sameRun.clear());
  }
  return state;
}

const sameRun = new Map<string, Promise<string | null>>();

async function lookAtReplaceRefs(gitDir: string): Promise<string | null> {
  // A synchronous stat that does not throw: building the error of an asynchronous stat of a
  // missing directory costs more than the stat itself.
  let looseDir: fs.Stats | undefined;
  try {
    looseDir = fs.statSync(path.join(gitDir, 'refs', 'replace'), { throwIfNoEntry: false });
  } catch {
    return null;
  }
  if (looseDir) return null;
  const packed = await readPackedRefs(gitDir);
  if (!packed || packed.hasReplaceRefs) return null;
  return packed.identity;
}

interface Entry {
  value: Promise<unknown>;
  weight: number;
}

export class HistoryMemo {
  private readonly entries = new Map<string, Entry>();
  private totalWeight = 0;
  private readonly maxEntries: number;
  private readonly maxWeight: number;

  constructor(opts: MemoOptions | number = {}) {
    const o = typeof opts === 'number' ? { maxEntries: opts } : opts;
    this.maxEntries = o.maxEntries ?? 1000;
    this.maxWeight = o.maxWeight ?? Infinity;
  }

  replaceRefsState(gitDir: string): Promise<string | null> {
    return replaceRefsState(gitDir);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The kept (or loading) result for `key`, if any, without loading it. */
  peek<T>(gitDir: string, key: string): Promise<T> | undefined {
    const fullKey = `${gitDir}\0${key}`;
    const kept = this.entries.get(fullKey);
    if (!kept) return undefined;
    this.entries.delete(fullKey);
    this.entries.set(fullKey, kept);
    return kept.value as Promise<T>;
  }

  /**
   * The kept result for `key`, or the result of `load` (kept unless it failed, the replace refs
   * moved meanwhile, or `weigh` finds it too heavy). `state` is replaceRefsState(gitDir), taken
   * before the computation's revisions were pinned. Concurrent callers of one key share one load.
   */
  remember<T>(gitDir: string, state: string, key: string, load: () => Promise<T>, weigh?: (value: T) => number): Promise<T> {
    const kept = this.peek<T>(gitDir, key);
    if (kept) return kept;
    const fullKey = `${gitDir}\0${key}`;
    const loading = load();
    const entry: Entry = { value: loading, weight: 0 };
    this.entries.set(fullKey, entry);
    this.evict();
    const forget = () => {
      if (this.entries.get(fullKey) !== entry) return;
      this.entries.delete(fullKey);
      this.totalWeight -= entry.weight;
    };
    loading.then(async (value) => {
      if ((await replaceRefsState(gitDir)) !== state) return forget();
      if (!weigh || this.entries.get(fullKey) !== entry) return;
      const weight = weigh(value);
      if (weight > this.maxWeight / 4) return forget();
      entry.weight = weight;
      this.totalWeight += weight;
      this.evict();
    }, forget);
    return loading;
  }

  private evict() {
    while (this.entries.size > this.maxEntries || (this.totalWeight > this.maxWeight && this.entries.size > 1)) {
      const [oldestKey, oldest] = this.entries.entries().next().value!;
      this.entries.delete(oldestKey);
      this.totalWeight -= oldest.weight;
    }
  }
}
