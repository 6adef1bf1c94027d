import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { Database } from './index.js';
import { migrations } from './migrations/index.js';
import { UNWATCHED_TABLES } from './write_observer.js';

class StaticProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> { return migrations; }
}

/** Applies every pending migration; safe to run from several processes at once (Kysely locks). */
export async function migrateToLatest(db: Database): Promise<string[]> {
  const migrator = new Migrator({ db, provider: new StaticProvider(), allowUnorderedMigrations: true });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  // Tables added by any migration get the cache-invalidation trigger (0600_cache_invalidation),
  // and running processes drop what they cached: a migration may change what a read returns.
  await sql`select cairn_watch_tables(${[...UNWATCHED_TABLES]}::text[])`.execute(db);
  await sql`select pg_notify('cairn_cache', 't:migration')`.execute(db);
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
