import type { ColumnType, Generated, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

// Migration 0975: CI caches.
declare module './core.js' {
  interface ProjectsTable {
    /** GitLab's jobs_cache_index: null until "Clear runner caches", then incremented by each clear; suffixes cache keys. */
    jobs_cache_index: ColumnType<number | null, number | null | undefined, number | null>;
  }
}

export interface CiCachesTable {
  id: Generated<number>;
  project_id: number;
  key: string;
  store_key: string;
  size: ColumnType<string | number, number, number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  last_used_at: Timestamp;
}
export type CiCache = Selectable<CiCachesTable>;

export interface CiCacheUploadsTable {
  id: Generated<number>;
  project_id: number;
  store_key: string;
  created_at: Timestamp;
}

export interface CiCacheTables {
  ci_caches: CiCachesTable;
  ci_cache_uploads: CiCacheUploadsTable;
}
