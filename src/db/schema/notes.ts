import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

/** Position of a diff note: where on which diff the comment sits. */
export interface NotePosition {
  path: string | null;
  line: number | null;
  line_type: 'new' | 'old' | null;
  [key: string]: unknown;
}

export interface NotesTable {
  id: Generated<number>;
  project_id: number | null;
  /** 'Commit', 'Issue', 'MergeRequest', 'Snippet', ... */
  noteable_type: string;
  noteable_id: number | null;
  commit_id: string | null;
  discussion_id: string;
  /** null (plain comment), 'DiscussionNote', 'DiffNote', 'LegacyDiffNote'. */
  type: string | null;
  body: string;
  author_id: number | null;
  position: ColumnType<NotePosition | null, string | null | undefined, string | null>;
  line_code: string | null;
  system: Generated<boolean>;
  confidential: Generated<boolean>;
  internal: Generated<boolean>;
  resolved_at: NullableTimestamp;
  resolved_by_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Note = Selectable<NotesTable>;

export interface NoteTables {
  notes: NotesTable;
}
