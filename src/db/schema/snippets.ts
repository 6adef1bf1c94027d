import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

type Auto<T> = ColumnType<T, T | undefined, T>;

/** A snippet: personal (project_id null) or a project's; its files are in its own repository. */
export interface SnippetsTable {
  id: Generated<number>;
  title: string;
  description: string | null;
  author_id: number;
  project_id: number | null;
  /** 0 private, 10 internal, 20 public (policies/access.ts Visibility). */
  visibility_level: Auto<number>;
  repository_storage: Auto<string>;
  /** Hashed path inside the storage (`@snippets/ab/cd/<sha256>.git`); see services/snippets.ts snippetRepoPath. */
  disk_path: Auto<string>;
  /** Set while the repository is being moved between storages: no writes. */
  repository_read_only: Auto<boolean>;
  expires_at: NullableTimestamp;
  user_agent: string | null;
  ip_address: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Snippet = Selectable<SnippetsTable>;

export interface SnippetTables {
  snippets: SnippetsTable;
}
