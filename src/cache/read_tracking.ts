import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What a cached value was computed from, so that a write drops only the values it could have
 * changed (src/cache/shared_cache.ts). Collected while a cache loader runs:
 *  - every statement the loader sends to the database is scanned for the names of the schema's
 *    tables (src/db/write_observer.ts calls `recordStatement`); a name that only looks like a
 *    table (a column called like one) adds a needless dependency, never a missing one;
 *  - a repository read through git counts as a read of `repositories`, a name no table has: every
 *    git command that can change what readers see announces it afterwards, like a table write
 *    (src/git/command.ts `onRepositoryWrite`, src/cache/index.ts), so a push drops what was
 *    computed from repositories and keeps the rest;
 *  - a value served from the cache inside another loader passes its own dependencies up.
 * Views and functions of the schema count as the tables their definitions name; a table without
 * an invalidation trigger (a busy one no cached read should use) counts as every table. Until the schema
 * is known (`setSchema`, at cache start), every statement counts as a read of everything.
 */
export class ReadSet {
  readonly tables = new Set<string>();
  all = false;

  merge(other: ReadSet) {
    if (this.all) return;
    if (other.all) {
      this.all = true;
      this.tables.clear();
      return;
    }
    for (const t of other.tables) this.tables.add(t);
  }
}

const storage = new AsyncLocalStorage<ReadSet>();
/** Each name a statement may use (a table, a view, a function of the schema) and the tables it reads. */
let readsOf: Map<string, Set<string>> | null = null;

/**
 * The schema: its tables, and the views and functions with the text of their definitions, which
 * may name tables, views and functions in turn (a function such as project_access_level reads
 * the membership tables a statement calling it never names).
 */
export function setSchema(tables: Iterable<string>, definitions: Map<string, string>, unwatched: ReadonlySet<string> = new Set()) {
  const map = new Map<string, Set<string>>();
  for (const t of tables) map.set(t, new Set([unwatched.has(t) ? EVERYTHING : t]));
  // Not a table: statements never name it (a table of that name would share its invalidations).
  map.set(REPOSITORIES, new Set([REPOSITORIES]));
  const resolving = new Set<string>();
  const resolve = (name: string): Set<string> => {
    const known = map.get(name);
    if (known) return known;
    const out = new Set<string>();
    if (resolving.has(name)) return out;
    resolving.add(name);
    for (const word of definitions.get(name)!.toLowerCase().match(WORD) ?? []) {
      if (word !== name && (map.has(word) || definitions.has(word))) for (const t of resolve(word)) out.add(t);
    }
    resolving.delete(name);
    map.set(name, out);
    return out;
  };
  for (const name of definitions.keys()) resolve(name);
  readsOf = map;
}

export function isKnownTable(name: string): boolean {
  return readsOf?.get(name)?.has(name) ?? false;
}

const WORD = /[a-z_][a-z0-9_]*/g;

/** Called for each statement sent to the database. */
export function recordStatement(sqlText: string) {
  const reads = storage.getStore();
  if (!reads || reads.all) return;
  if (!readsOf) {
    reads.all = true;
    return;
  }
  for (const word of sqlText.toLowerCase().match(WORD) ?? []) {
    const tables = readsOf.get(word);
    if (!tables) continue;
    if (tables.has(EVERYTHING)) {
      // A table whose writes announce nothing (src/db/write_observer.ts UNWATCHED_TABLES): only
      // a drop of everything can reach what was read from it.
      reads.all = true;
      reads.tables.clear();
      return;
    }
    for (const t of tables) reads.tables.add(t);
  }
}

/** Called for reads of a repository through git. */
export function recordRepositoryRead() {
  const reads = storage.getStore();
  if (!reads || reads.all) return;
  if (readsOf) reads.tables.add(REPOSITORIES);
  else reads.all = true;
}

/** Stands for "every table": what a read of a table no trigger watches depends on. */
const EVERYTHING = '*';

/** What cached values read from repositories depend on (announced as `t:repositories`). */
export const REPOSITORIES = 'repositories';

/** The reads of the loader under way, if any (a cached value served inside it adds its own). */
export function currentReads(): ReadSet | undefined {
  return storage.getStore();
}

/**
 * Starts collecting the reads of the rest of this execution (a request, from its first hook):
 * values cached later in it from inputs it read earlier (a row loaded by the route's guard, say)
 * then depend on those reads too.
 */
export function startRequestReads(): ReadSet {
  const reads = new ReadSet();
  storage.enterWith(reads);
  return reads;
}

/** Runs `fn`, collecting what it reads; what it read is also added to the enclosing collection. */
export async function trackReads<T>(fn: () => Promise<T>): Promise<{ value: T; reads: ReadSet }> {
  const reads = new ReadSet();
  const outer = storage.getStore();
  try {
    const value = await storage.run(reads, fn);
    return { value, reads };
  } finally {
    outer?.merge(reads);
  }
}
