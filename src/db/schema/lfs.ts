import type { ColumnType, Generated, Selectable } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

// Migration 0990: Git LFS objects, their links to projects, and file locks.
export interface LfsObjectsTable {
  id: Generated<number>;
  /** sha256 of the content, 64 lowercase hex digits. */
  oid: string;
  size: ColumnType<string | number, number, number>;
  created_at: Timestamp;
}
export type LfsObject = Selectable<LfsObjectsTable>;

export interface LfsObjectsProjectsTable {
  id: Generated<number>;
  lfs_object_id: number;
  project_id: number;
  created_at: Timestamp;
}

export interface LfsFileLocksTable {
  id: Generated<number>;
  project_id: number;
  user_id: number;
  path: string;
  created_at: Timestamp;
}
export type LfsFileLock = Selectable<LfsFileLocksTable>;

export interface LfsTables {
  lfs_objects: LfsObjectsTable;
  lfs_objects_projects: LfsObjectsProjectsTable;
  lfs_file_locks: LfsFileLocksTable;
}
