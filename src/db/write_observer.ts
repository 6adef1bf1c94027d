import type { CompiledQuery, DatabaseConnection, Dialect, Driver, QueryResult, TransactionSettings } from 'kysely';
import { recordStatement } from '../cache/read_tracking.js';

/**
 * Busy tables no cached read depends on: they get no invalidation trigger (the migrator passes
 * this list to cairn_watch_tables(), migration 0600) and writes to them need no barrier. A table
 * added here keeps a trigger it already has.
 */
export const UNWATCHED_TABLES = new Set(['background_jobs', 'rate_limit_counters', 'sessions', 'cache_listeners', 'kysely_migration', 'kysely_migration_lock',
  // The runner protocol's hot tables (migration 0820).
  'ci_builds', 'ci_pending_builds', 'ci_build_trace_chunks', 'ci_job_artifacts',
  // Git write leases (migration 0940): taken and dropped around every push; no cached read uses them.
  'repository_write_leases',
  // Deployments follow their jobs' statuses (migration 0980); no cached read uses them.
  'environments', 'deployments']);

/**
 * Called once a write to a watched table is committed; resolves when every cache has let go of
 * stale entries. `unknown`: the write was one no table trigger announces (DDL, say), so caches
 * must drop everything.
 */
export type WriteObserver = (write: { unknown: boolean }) => Promise<void>;

// `for update` / `do update set` are not updates of a table named after them.
const WRITE_TARGET = /(?<!\bfor\s+(?:no\s+key\s+)?)\b(?:insert\s+into|update|delete\s+from)\s+(?:only\s+)?"?([a-z_][a-z0-9_]*)"?/gi;
const TRUNCATE_LIST = /\btruncate\s+(?:table\s+)?(?:only\s+)?((?:"?[a-z_][a-z0-9_]*"?\s*,\s*)*"?[a-z_][a-z0-9_]*"?)/gi;
const NOT_TABLES = new Set(['set', 'skip', 'nowait', 'of']);

/**
 * What this statement changes: nothing, watched tables (each announced by its trigger), or
 * something no trigger announces (DDL, an unparsed write), which counts as everything.
 */
export function classifyWrite(query: CompiledQuery): 'none' | 'tables' | 'unknown' {
  const text = query.sql;
  const tables = [...text.matchAll(WRITE_TARGET)].map((m) => m[1].toLowerCase()).filter((t) => !NOT_TABLES.has(t));
  for (const m of text.matchAll(TRUNCATE_LIST)) tables.push(...m[1].split(',').map((t) => t.trim().replace(/"/g, '').toLowerCase()));
  if (tables.length === 0) {
    // Reads: selects (including `for update`) and CTEs that change nothing.
    return query.query.kind !== 'SelectQueryNode' && !/^\s*(select|with|show|explain|listen|unlisten)\b/i.test(text) ? 'unknown' : 'none';
  }
  return tables.some((t) => !UNWATCHED_TABLES.has(t)) ? 'tables' : 'none';
}

/** Does this statement change a watched table? Unknown writes (DDL, functions) count as yes. */
export function writesWatchedTable(query: CompiledQuery): boolean {
  return classifyWrite(query) !== 'none';
}

class ObservedConnection implements DatabaseConnection {
  inTransaction = false;
  /** A watched table was written inside the open transaction. */
  dirty = false;
  /** A write to a watched table has committed; the observers run once the connection is released. */
  committed = false;
  /** Some write of the open transaction, or of the committed one, was of the unknown kind. */
  unknownPending = false;
  unknownCommitted = false;
  constructor(readonly inner: DatabaseConnection, private readonly observers: Set<WriteObserver>) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    recordStatement(query.sql);
    const result = await this.inner.executeQuery<R>(query);
    if (this.observers.size) {
      const kind = classifyWrite(query);
      if (kind !== 'none') {
        if (this.inTransaction) {
          this.dirty = true;
          if (kind === 'unknown') this.unknownPending = true;
        } else {
          this.committed = true;
          if (kind === 'unknown') this.unknownCommitted = true;
        }
      }
    }
    return result;
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    recordStatement(query.sql);
    return this.inner.streamQuery<R>(query, chunkSize);
  }
}

async function notify(observers: Set<WriteObserver>, write: { unknown: boolean }) {
  for (const observe of observers) await observe(write);
}

class ObservingDriver implements Driver {
  constructor(private readonly inner: Driver, private readonly observers: Set<WriteObserver>) {}
  init() { return this.inner.init(); }
  async acquireConnection(): Promise<DatabaseConnection> {
    return new ObservedConnection(await this.inner.acquireConnection(), this.observers);
  }
  async beginTransaction(conn: DatabaseConnection, settings: TransactionSettings) {
    const c = conn as ObservedConnection;
    await this.inner.beginTransaction(c.inner, settings);
    c.inTransaction = true;
    c.dirty = false;
    c.unknownPending = false;
  }
  async commitTransaction(conn: DatabaseConnection) {
    const c = conn as ObservedConnection;
    await this.inner.commitTransaction(c.inner);
    if (c.dirty) c.committed = true;
    if (c.unknownPending) c.unknownCommitted = true;
    c.inTransaction = false;
    c.dirty = false;
    c.unknownPending = false;
  }
  async rollbackTransaction(conn: DatabaseConnection) {
    const c = conn as ObservedConnection;
    c.inTransaction = false;
    c.dirty = false;
    c.unknownPending = false;
    await this.inner.rollbackTransaction(c.inner);
  }
  async savepoint(conn: DatabaseConnection, name: string, compile: any) {
    await this.inner.savepoint!((conn as ObservedConnection).inner, name, compile);
  }
  async rollbackToSavepoint(conn: DatabaseConnection, name: string, compile: any) {
    await this.inner.rollbackToSavepoint!((conn as ObservedConnection).inner, name, compile);
  }
  async releaseSavepoint(conn: DatabaseConnection, name: string, compile: any) {
    await this.inner.releaseSavepoint!((conn as ObservedConnection).inner, name, compile);
  }
  // Kysely awaits the release before the query (or transaction) returns to its caller. The
  // observers run after it, so they can use a pooled connection without ever waiting for this one.
  async releaseConnection(conn: DatabaseConnection) {
    const c = conn as ObservedConnection;
    const committed = c.committed;
    const unknown = c.unknownCommitted;
    c.committed = false;
    c.unknownCommitted = false;
    await this.inner.releaseConnection(c.inner);
    if (committed && this.observers.size) await notify(this.observers, { unknown });
  }
  destroy() { return this.inner.destroy(); }
}

/**
 * Wraps a dialect so that every committed write to a watched table calls the observers before
 * the statement (or the transaction) returns to its caller. The cache uses this to make a write
 * visible to every process's cache before the request that made it answers.
 */
export function observeWrites(dialect: Dialect, observers: Set<WriteObserver>): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createDriver: () => new ObservingDriver(dialect.createDriver(), observers),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
  };
}
