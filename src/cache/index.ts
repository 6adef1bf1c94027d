import { sql } from 'kysely';
import type { OpenedDatabase } from '../db/index.js';
import { UNWATCHED_TABLES } from '../db/write_observer.js';
import { onRepositoryWrite } from '../git/command.js';
import { REPOSITORIES, setSchema } from './read_tracking.js';
import type { NotificationHub } from '../db/notifications.js';
import { PostgresInvalidation } from './postgres_invalidation.js';
import { SharedCache } from './shared_cache.js';

export { SharedCache } from './shared_cache.js';

/** The schema's tables, views and functions, which read tracking looks for in statements (src/cache/read_tracking.ts). */
async function loadSchema(database: OpenedDatabase) {
  const tables = await sql<{ name: string }>`
    select c.relname as name from pg_class c where c.relkind in ('r', 'p') and c.relnamespace = current_schema()::regnamespace`.execute(database.db);
  const definitions = await sql<{ name: string; body: string }>`
    select c.relname as name, pg_get_viewdef(c.oid) as body from pg_class c
     where c.relkind in ('v', 'm') and c.relnamespace = current_schema()::regnamespace
    union all
    select p.proname, string_agg(p.prosrc, ' ') from pg_proc p where p.pronamespace = current_schema()::regnamespace group by p.proname`.execute(database.db);
  setSchema(tables.rows.map((r) => r.name), new Map(definitions.rows.map((r) => [r.name, r.body ?? ''])), UNWATCHED_TABLES);
}

interface Log {
  warn(obj: unknown, msg?: string): void;
}

/**
 * Starts the cache for one process, on the process's listening connection (`hub`): on PostgreSQL
 * leases and barriers for writes (also when this process keeps nothing, so that its writes still
 * reach the others' caches in time); on PGlite (one process, notifications delivered before the
 * statement returns) just a subscription. Returns the function that stops it.
 */
export async function startCache(cache: SharedCache, database: OpenedDatabase, hub: NotificationHub, log: Log): Promise<() => Promise<void>> {
  await loadSchema(database);
  if (database.pglite) {
    const unlisten = await hub.subscribe('cairn_cache', { message: (payload) => cache.invalidateFromNotification(payload) });
    // Writes no trigger announces (schema changes) clear everything.
    const observer = async (write: { unknown: boolean }) => {
      if (write.unknown) cache.clear();
    };
    database.writeObservers.add(observer);
    cache.servingUntil = Infinity;
    // One process: a repository write drops what was computed from repositories right here.
    const stopRepositories = onRepositoryWrite(async () => cache.invalidateTable(REPOSITORIES));
    return async () => {
      cache.servingUntil = 0;
      database.writeObservers.delete(observer);
      stopRepositories();
      unlisten();
    };
  }
  // A database handed over without its address (tests sharing one): no listener, so no caching.
  if (!database.url) return async () => {};
  const invalidation = new PostgresInvalidation(cache, database.db, hub, log);
  const observer = (write: { unknown: boolean }) => cache.barrier(write);
  database.writeObservers.add(observer);
  // Announced like a table write, on a pooled connection (a caller's open transaction may hold another).
  const stopRepositories = onRepositoryWrite(() => invalidation.announce(REPOSITORIES));
  await invalidation.start();
  return async () => {
    database.writeObservers.delete(observer);
    stopRepositories();
    await invalidation.close();
  };
}
