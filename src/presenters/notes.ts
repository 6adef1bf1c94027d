import type { User } from '../db/schema/core.js';
import type { DiffPosition, NoteWithAuthor } from '../db/schema/notes.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';

/** What a note's form needs from its noteable (the registration in src/noteables/). */
export interface NoteForm {
  /** The noteable's threads can be resolved (merge requests). */
  resolvable: boolean;
  /** Issues and merge requests show their iid on every note. */
  noteableIid: number | null;
}

function userOrNull(ctx: PresentContext, u: User | null | undefined) {
  return u ? presentUserBasic(ctx, u) : null;
}

function presentPosition(p: DiffPosition) {
  const base = { base_sha: p.base_sha, start_sha: p.start_sha, head_sha: p.head_sha, old_path: p.old_path, new_path: p.new_path };
  if (p.position_type === 'image') return { ...base, position_type: 'image' as const, width: p.width!, height: p.height!, x: p.x!, y: p.y! };
  return { ...base, position_type: 'text' as const, old_line: p.old_line ?? null, new_line: p.new_line ?? null, line_range: null, ignore_whitespace_change: false };
}

function isResolvable(n: NoteWithAuthor, form: NoteForm): boolean {
  return form.resolvable && !n.system && (n.type === 'DiscussionNote' || n.type === 'DiffNote');
}

/** Entities::Note. */
export function presentNote(ctx: PresentContext, n: NoteWithAuthor, form: NoteForm) {
  const resolvable = isResolvable(n, form);
  return {
    id: n.id,
    type: n.type as 'DiscussionNote' | 'DiffNote' | 'LegacyDiffNote' | null,
    body: n.body,
    attachment: null,
    author: userOrNull(ctx, n.author),
    created_at: iso(n.created_at)!,
    updated_at: iso(n.updated_at)!,
    system: n.system,
    noteable_id: n.noteable_id,
    noteable_type: n.noteable_type,
    project_id: n.project_id,
    ...(n.type === 'DiffNote' && n.noteable_type === 'MergeRequest' && n.commit_id ? { commit_id: n.commit_id } : {}),
    ...(n.type === 'DiffNote' && n.position ? { position: presentPosition(n.position as unknown as DiffPosition) } : {}),
    resolvable,
    ...(resolvable ? { resolved: n.resolved_at !== null, resolved_by: userOrNull(ctx, n.resolved_by), resolved_at: iso(n.resolved_at) } : {}),
    confidential: n.confidential,
    internal: n.internal,
    imported: false,
    imported_from: 'none',
    noteable_iid: form.noteableIid,
    commands_changes: {},
  };
}

/** Entities::Discussion for the notes of one thread, oldest first. */
export function presentDiscussion(ctx: PresentContext, notes: NoteWithAuthor[], form: NoteForm) {
  return {
    id: notes[0].discussion_id,
    // A plain note (type null) stands alone; a reply turns it into a DiscussionNote (services/notes.ts).
    individual_note: notes.length === 1 && notes[0].type === null,
    notes: notes.map((n) => presentNote(ctx, n, form)),
  };
}

/** Where a commit note sits, as the commit comments API shows it (path, line, line_type). */
function commentPlace(n: NoteWithAuthor): { path: string | null; line: number | null; line_type: 'new' | 'old' | null } {
  const none = { path: null, line: null, line_type: null };
  if (!n.position) return none;
  if (n.type === 'LegacyDiffNote') {
    if (!n.line_code) return none;
    const p = n.position;
    return { path: p.path ?? null, line: p.line ?? null, line_type: p.line_type ?? null };
  }
  if (n.type === 'DiffNote') {
    const p = n.position as unknown as DiffPosition;
    const path = p.new_path ?? p.old_path;
    if (p.position_type !== 'text') return { path, line: null, line_type: null };
    const oldLine = p.old_line ?? null;
    const newLine = p.new_line ?? null;
    const lineType = newLine !== null && oldLine === null ? 'new' : oldLine !== null && newLine === null ? 'old' : null;
    return { path, line: newLine ?? oldLine, line_type: lineType };
  }
  return none;
}

/** Entities::CommitNote: a commit comment, with its diff position when it sits on a line. */
export function presentCommitNote(ctx: PresentContext, n: NoteWithAuthor) {
  return {
    note: n.body,
    ...commentPlace(n),
    author: userOrNull(ctx, n.author),
    created_at: iso(n.created_at)!,
  };
}
