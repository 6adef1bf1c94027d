import { Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { Database } from './index.js';
import { migrations } from './migrations/index.js';
import { UNWATCHED_TABLES } from './write_observer.js';

class StaticProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> { return migrations; }
}

/**
 * True when every migration is recorded as applied: one small read, where Kysely's migrator
 * first introspects every column of every table (twice) and takes its lock, which cost each
 * start about 0.1-0.5 s of CPU on the embedded database. Any doubt (no table yet) says false.
 */
async function allApplied(db: Database): Promise<boolean> {
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    const applied = new Set(rows.map((r) => r.name));
    return Object.keys(migrations).every((name) => applied.has(name));
  } catch {
    return false;
  }
}

/** The migrations this code has that the database has not recorded (all of them on an empty one). */
export async function pendingMigrations(db: Database): Promise<string[]> {
  let applied = new Set<string>();
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    applied = new Set(rows.map((r) => r.name));
  } catch {
    /* no migration table yet */
  }
  return Object.keys(migrations).filter((name) => !applied.has(name));
}

/** Applies every pending migration; safe to run from several processes at once (Kysely locks). */
export async function migrateToLatest(db: Database): Promise<string[]> {
  let results: Awaited<ReturnType<Migrator['migrateToLatest']>>['results'] = [];
  if (!(await allApplied(db))) {
    const migrator = new Migrator({ db, provider: new StaticProvider(), allowUnorderedMigrations: true });
    const outcome = await migrator.migrateToLatest();
    if (outcome.error) throw outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error));
    results = outcome.results;
  }
  // Tables added by any migration get the cache-invalidation trigger (0600_cache_invalidation),
  // and running processes drop what they cached: a migration may change what a read returns.
  await sql`select cairn_watch_tables(${[...UNWATCHED_TABLES]}::text[])`.execute(db);
  await sql`select pg_notify('cairn_cache', 't:migration')`.execute(db);
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
