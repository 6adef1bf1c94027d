import type { OpenedDatabase } from '../db/index.js';
import type { NotificationHub } from '../db/notifications.js';
import { PostgresInvalidation } from './postgres_invalidation.js';
import { SharedCache } from './shared_cache.js';

export { SharedCache } from './shared_cache.js';

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
  if (database.pglite) {
    const unlisten = await hub.subscribe('cairn_cache', { message: () => cache.clear() });
    // Writes no trigger announces (schema changes) clear too.
    const observer = async () => cache.clear();
    database.writeObservers.add(observer);
    cache.servingUntil = Infinity;
    return async () => {
      cache.servingUntil = 0;
      database.writeObservers.delete(observer);
      unlisten();
    };
  }
  // A database handed over without its address (tests sharing one): no listener, so no caching.
  if (!database.url) return async () => {};
  const invalidation = new PostgresInvalidation(cache, database.db, hub, log);
  const observer = () => cache.barrier();
  database.writeObservers.add(observer);
  await invalidation.start();
  return async () => {
    database.writeObservers.delete(observer);
    await invalidation.close();
  };
}
