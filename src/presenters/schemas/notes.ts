import { Type } from 'typebox';
import { Nullable, Sha, Timestamp, strict } from './common.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of src/presenters/notes.ts (notes and discussions of every noteable, commit comments). */

/** `noteable_type` as GitLab writes it (the class name of the noteable). */
export const NoteableTypeSchema = Type.Union([
  Type.Literal('Commit'),
  Type.Literal('Issue'),
  Type.Literal('MergeRequest'),
  Type.Literal('Snippet'),
  Type.Literal('Epic'),
]);

const positionProps = {
  base_sha: Nullable(Sha),
  start_sha: Nullable(Sha),
  head_sha: Nullable(Sha),
  old_path: Nullable(Type.String()),
  new_path: Nullable(Type.String()),
};

/** A DiffNote's place on a diff: a line (text) or a point on an image, as GitLab's Position#to_h. */
export const NotePositionSchema = Type.Union([
  Type.Object(
    {
      ...positionProps,
      position_type: Type.Literal('text'),
      old_line: Nullable(Type.Integer()),
      new_line: Nullable(Type.Integer()),
      line_range: Type.Null(),
      ignore_whitespace_change: Type.Boolean(),
    },
    strict,
  ),
  Type.Object(
    {
      ...positionProps,
      position_type: Type.Literal('image'),
      width: Type.Integer(),
      height: Type.Integer(),
      x: Type.Integer(),
      y: Type.Integer(),
    },
    strict,
  ),
]);

/**
 * GitLab's Note entity. `position` only on DiffNotes; `resolved`, `resolved_by` and
 * `resolved_at` only on resolvable notes (merge request threads); `commit_id` only on merge
 * request diff notes. Commit notes have no noteable_id (commits are not rows).
 */
export const NoteSchema = Type.Object(
  {
    id: Type.Integer(),
    type: Nullable(Type.Union([Type.Literal('DiscussionNote'), Type.Literal('DiffNote'), Type.Literal('LegacyDiffNote')])),
    body: Type.String(),
    attachment: Nullable(Type.String()),
    author: Nullable(UserBasicSchema),
    created_at: Timestamp,
    updated_at: Timestamp,
    system: Type.Boolean(),
    noteable_id: Nullable(Type.Integer()),
    noteable_type: NoteableTypeSchema,
    project_id: Nullable(Type.Integer()),
    commit_id: Type.Optional(Sha),
    position: Type.Optional(NotePositionSchema),
    resolvable: Type.Boolean(),
    resolved: Type.Optional(Type.Boolean()),
    resolved_by: Type.Optional(Nullable(UserBasicSchema)),
    resolved_at: Type.Optional(Nullable(Timestamp)),
    confidential: Type.Boolean(),
    internal: Type.Boolean(),
    imported: Type.Boolean(),
    imported_from: Type.String(),
    noteable_iid: Nullable(Type.Integer()),
    // Free-form by nature: what quick actions changed.
    commands_changes: Type.Object({}),
  },
  strict,
);

/** GitLab's Discussion entity: a thread (or an individual note) and its notes, oldest first. */
export const DiscussionSchema = Type.Object(
  { id: Type.String({ pattern: '^[0-9a-f]{40}$' }), individual_note: Type.Boolean(), notes: Type.Array(NoteSchema) },
  strict,
);

/** CommitNote: a commit comment (GET/POST .../commits/:sha/comments). */
export const CommitNoteSchema = Type.Object(
  {
    note: Type.String(),
    path: Nullable(Type.String()),
    line: Nullable(Type.Integer()),
    line_type: Nullable(Type.Union([Type.Literal('new'), Type.Literal('old')])),
    author: Nullable(UserBasicSchema),
    created_at: Timestamp,
  },
  strict,
);
