import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp, User } from './core.js';

/** Position of a LegacyDiffNote (commit comments on a line): where on the commit's diff it sits. */
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

/** A DiffNote's position, as GitLab's Position#to_h: a line (text) or a point on an image of a diff. */
export interface DiffPosition {
  base_sha: string | null;
  start_sha: string | null;
  head_sha: string | null;
  old_path: string | null;
  new_path: string | null;
  position_type: 'text' | 'image';
  old_line?: number | null;
  new_line?: number | null;
  width?: number;
  height?: number;
  x?: number;
  y?: number;
}

/** A note with its author and resolver loaded (finders/notes.ts). */
export type NoteWithAuthor = Note & { author: User | null; resolved_by?: User | null };

export interface NoteTables {
  notes: NotesTable;
}
