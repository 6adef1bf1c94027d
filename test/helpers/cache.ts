import { startCache, type SharedCache } from '../../src/cache/index.js';
import { PostgresInvalidation } from '../../src/cache/postgres_invalidation.js';
import type { Database, OpenedDatabase } from '../../src/db/index.js';
import { NotificationHub } from '../../src/db/notifications.js';

type Log = { warn(obj: unknown, msg?: string): void };

/** A process's cache as buildApp starts it: its own listening connection, and the cache on it. */
export async function startProcessCache(cache: SharedCache, database: OpenedDatabase, log: Log): Promise<() => Promise<void>> {
  const hub = await NotificationHub.start(database, log);
  const stop = await startCache(cache, database, hub, log);
  return async () => {
    await stop();
    await hub.close();
  };
}

/** A PostgresInvalidation on its own listening connection (`(it as any).hub`), closed with it. */
export async function invalidationOnOwnHub(cache: SharedCache, db: Database, url: string, log: Log): Promise<PostgresInvalidation> {
  const hub = await NotificationHub.start({ url }, log);
  const invalidation = new PostgresInvalidation(cache, db, hub, log);
  const close = invalidation.close.bind(invalidation);
  invalidation.close = async () => {
    await close();
    await hub.close();
  };
  return invalidation;
}
