import type { ColumnType, Generated } from 'kysely';

type Auto<T> = ColumnType<T, T | undefined, T>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

// Columns migration 0940 adds to groups (namespaces of type Group).
declare module './core.js' {
  interface NamespacesTable {
    repository_storage: Auto<string>;
    repository_read_only: Auto<boolean>;
  }
}

export type StorageMoveState = 'initial' | 'scheduled' | 'started' | 'replicated' | 'finished' | 'failed' | 'cleanup_failed';
export type StorageMoveContainerType = 'Project' | 'Snippet' | 'Group';

export interface RepositoryStorageMovesTable {
  id: Generated<number>;
  container_type: StorageMoveContainerType;
  container_id: number;
  state: Auto<StorageMoveState>;
  source_storage_name: string;
  destination_storage_name: string;
  error_message: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RepositoryWriteLeasesTable {
  id: Generated<number>;
  container_type: string;
  container_id: number;
  holder: string;
  created_at: Timestamp;
  expires_at: ColumnType<Date, Date | string, Date | string>;
}

export interface StorageMoveTables {
  repository_storage_moves: RepositoryStorageMovesTable;
  repository_write_leases: RepositoryWriteLeasesTable;
}
