import { queueHookEvent } from '../hooks/events.js';
import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { DiffPosition, NotePosition, NoteWithAuthor } from '../db/schema/notes.js';
import { discussionNotes, findNote, type NoteableScope } from '../finders/notes.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import type { ParsedCommit } from '../git/catfile.js';
import { diffLines, diffTrees, type DiffFile } from '../git/commits.js';
import { badRequest, missingParam } from '../plugins/errors.js';
import { findCommit } from './commits.js';
import { projectRepoPath } from './projects.js';
import { mailsNotesOn } from './notifications.js';
import { notify } from './notify.js';

/**
 * Notes (comments) and discussions (threads) of every noteable, over the one `notes` table:
 * creating a thread or an individual note, replying (which turns an individual note into a
 * thread), editing, resolving and deleting. Who may do what is decided before these run
 * (api/notes/routes.ts with the noteable's registration); these only write.
 */

/** GitLab's limit on a note's text (Note validates `note` at most 1,000,000 characters). */
export const MAX_NOTE_LENGTH = 1_000_000;

export type NoteType = 'DiscussionNote' | 'DiffNote' | 'LegacyDiffNote' | null;

/**
 * A note's text (`body`, or `note` for commit comments). Route schemas require the parameter;
 * this also refuses a blank one in the same words (Grape's "body is missing") and holds
 * GitLab's length limit, reported as its model reports it.
 */
export function noteText(value: unknown, param = 'body'): string {
  if (typeof value !== 'string' || value.trim() === '') throw missingParam(param);
  if (value.length > MAX_NOTE_LENGTH && [...value].length > MAX_NOTE_LENGTH) {
    throw noteInvalid({ note: [`is too long (maximum is ${MAX_NOTE_LENGTH} characters)`] });
  }
  return value;
}

/** A thread's id, made as GitLab makes them: 40 hex digits. */
export function newDiscussionId(): string {
  return crypto.randomBytes(20).toString('hex');
}

/** A model validation failure as GitLab's API reports it: `400 Bad request - Note {:field=>["msg"]}`. */
export function noteInvalid(errors: Record<string, string[]>) {
  const fields = Object.entries(errors).map(([field, msgs]) => `:${field}=>[${msgs.map((m) => JSON.stringify(m)).join(', ')}]`);
  return badRequest(`Note {${fields.join(', ')}}`);
}

/** The note scope of a commit of a project: commits are not rows, so their notes name the SHA. */
export function commitScope(projectId: number, commitOid: string): NoteableScope {
  return { type: 'Commit', projectId, key: { column: 'commit_id', value: commitOid } };
}

export interface NewNote {
  author: User;
  body: string;
  /** Backdated creation (imports); the caller checked set_note_created_at. */
  createdAt?: Date | null;
  type: NoteType;
  position?: NotePosition | DiffPosition | null;
  lineCode?: string | null;
}

async function reload(cairn: Cairn, scope: NoteableScope, id: number): Promise<NoteWithAuthor> {
  const note = await findNote(cairn.db, scope, id);
  if (!note) throw new Error(`note ${id} vanished`);
  return note;
}

function insertValues(scope: NoteableScope, input: NewNote, discussionId: string) {
  return {
    project_id: scope.projectId,
    noteable_type: scope.type,
    noteable_id: scope.key.column === 'noteable_id' ? scope.key.value : null,
    commit_id: scope.key.column === 'commit_id' ? scope.key.value : null,
    discussion_id: discussionId,
    type: input.type,
    body: input.body,
    author_id: input.author.id,
    position: input.position ? JSON.stringify(input.position) : null,
    line_code: input.lineCode ?? null,
    ...(input.createdAt ? { created_at: input.createdAt, updated_at: input.createdAt } : {}),
  };
}

/** A new thread (type DiscussionNote or DiffNote) or individual note (type null) on the noteable. */
export async function createNote(cairn: Cairn, scope: NoteableScope, input: NewNote): Promise<NoteWithAuthor> {
  const id = await cairn.db.transaction().execute(async (trx) => {
    const row = await trx.insertInto('notes').values(insertValues(scope, input, newDiscussionId())).returning('id').executeTakeFirstOrThrow();
    await notifyNewNote(cairn, trx, scope, row.id, input.author.id);
    return row.id;
  });
  return reload(cairn, scope, id);
}

/** new_note mail for the noteables that have it (services/notifications.ts NOTEABLE_LOADERS), in the note's transaction. */
async function notifyNewNote(cairn: Cairn, trx: Database, scope: NoteableScope, noteId: number, authorId: number) {
  if (mailsNotesOn(scope.type)) await notify(cairn, trx, { action: 'new_note', target: { type: 'Note', id: noteId }, actorId: authorId });
  if (scope.projectId !== null && scope.projectId !== undefined) await queueHookEvent(cairn, trx, { kind: 'note', projectId: scope.projectId, id: noteId, userId: authorId, action: 'create' });
}

/**
 * A reply in a thread of the noteable (`thread`: its notes, oldest first). An individual note
 * becomes a thread first (its note turns into a DiscussionNote, as GitLab's
 * convert_to_discussion! does); the reply takes the thread's type and, on a diff, its place.
 */
export async function replyToDiscussion(
  cairn: Cairn,
  scope: NoteableScope,
  thread: NoteWithAuthor[],
  input: Omit<NewNote, 'type' | 'position' | 'lineCode'>,
): Promise<NoteWithAuthor> {
  const first = thread[0];
  if (first.system) throw badRequest('Discussion can not be replied to.');
  const id = await cairn.db.transaction().execute(async (trx) => {
    if (first.type === null) {
      await trx.updateTable('notes').set({ type: 'DiscussionNote' }).where('discussion_id', '=', first.discussion_id).where('type', 'is', null).execute();
    }
    const values = insertValues(scope, { ...input, type: (first.type ?? 'DiscussionNote') as NoteType, position: first.position, lineCode: first.line_code }, first.discussion_id);
    const reply = await trx.insertInto('notes').values(values).returning('id').executeTakeFirstOrThrow();
    await notifyNewNote(cairn, trx, scope, reply.id, input.author.id);
    return reply.id;
  });
  return reload(cairn, scope, id);
}

export async function updateNoteBody(cairn: Cairn, scope: NoteableScope, note: NoteWithAuthor, body: string): Promise<NoteWithAuthor> {
  await cairn.db.transaction().execute(async (trx) => {
    await trx.updateTable('notes').set({ body, updated_at: sql<Date>`now()` }).where('id', '=', note.id).execute();
    if (note.project_id !== null) await queueHookEvent(cairn, trx, { kind: 'note', projectId: note.project_id, id: note.id, userId: note.author_id, action: 'update' });
  });
  return reload(cairn, scope, note.id);
}

/** Marks a (resolvable) note resolved by `user`, or unresolved. */
export async function setNoteResolved(cairn: Cairn, scope: NoteableScope, note: NoteWithAuthor, user: User, resolved: boolean): Promise<NoteWithAuthor> {
  await cairn.db
    .updateTable('notes')
    .set(resolved ? { resolved_at: sql<Date>`coalesce(resolved_at, now())`, resolved_by_id: sql<number>`coalesce(resolved_by_id, ${user.id})` } : { resolved_at: null, resolved_by_id: null })
    .where('id', '=', note.id)
    .execute();
  return reload(cairn, scope, note.id);
}

/** GitLab's Note#resolvable?: a thread's note (DiscussionNote or DiffNote) that is not a system note; whether its kind resolves is the caller's. */
export function isResolvableNote(note: Pick<NoteWithAuthor, 'system' | 'type'>): boolean {
  return !note.system && (note.type === 'DiscussionNote' || note.type === 'DiffNote');
}

/** Resolves (by `user`) or unresolves every resolvable note of a thread, in one statement; answers the thread's notes. */
export async function setDiscussionResolved(cairn: Cairn, scope: NoteableScope, discussionId: string, user: User, resolved: boolean): Promise<NoteWithAuthor[]> {
  await cairn.db
    .updateTable('notes')
    .set(resolved ? { resolved_at: sql<Date>`coalesce(resolved_at, now())`, resolved_by_id: sql<number>`coalesce(resolved_by_id, ${user.id})` } : { resolved_at: null, resolved_by_id: null })
    .where('discussion_id', '=', discussionId)
    .where('noteable_type', '=', scope.type)
    .where(scope.key.column, '=', scope.key.value as never)
    .where((eb) => (scope.projectId === null ? eb.val(true) : eb('project_id', '=', scope.projectId)))
    .where('system', '=', false)
    .where('type', 'in', ['DiscussionNote', 'DiffNote'])
    .execute();
  return discussionNotes(cairn.db, scope, discussionId);
}

/**
 * A system note (GitLab's SystemNoteService): one line saying what `authorId` changed on the
 * noteable ("closed", "changed target branch from `a` to `b`"...). Pass the transaction that
 * makes the change, so the note and the change commit together. System notes are individual
 * notes that nobody edits, deletes or replies to (api/notes/routes.ts).
 */
export async function addSystemNote(db: Database, scope: NoteableScope, authorId: number | null, body: string): Promise<void> {
  await db
    .insertInto('notes')
    .values({
      project_id: scope.projectId,
      noteable_type: scope.type,
      noteable_id: scope.key.column === 'noteable_id' ? scope.key.value : null,
      commit_id: scope.key.column === 'commit_id' ? scope.key.value : null,
      discussion_id: newDiscussionId(),
      type: null,
      body,
      author_id: authorId,
      system: true,
    })
    .execute();
}

/** Deletes a note and the emoji reactions on it, in one transaction. */
export async function deleteNote(cairn: Cairn, note: NoteWithAuthor): Promise<void> {
  await cairn.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('award_emoji').where('awardable_type', '=', 'Note').where('awardable_id', '=', note.id).execute();
    await trx.deleteFrom('notes').where('id', '=', note.id).execute();
  });
}

// ---------------------------------------------------------------------------------------------
// Notes on diff lines

/** GitLab's line code: the SHA-1 of the file's path, then the line's old and new numbers. */
function lineCode(file: DiffFile, oldLine: number, newLine: number): string {
  const path = file.deletedFile ? file.oldPath : file.newPath;
  return `${crypto.createHash('sha1').update(path).digest('hex')}_${oldLine}_${newLine}`;
}

/**
 * A line of a diff by GitLab's rule: only new_line is an added line, only old_line a removed
 * one, both an unchanged line shown in the diff.
 */
function findLine(file: DiffFile, oldLine: number | null, newLine: number | null) {
  return diffLines(file.diff).find((l) =>
    oldLine !== null && newLine !== null
      ? l.type === null && l.oldLine === oldLine && l.newLine === newLine
      : newLine !== null
        ? l.type === 'new' && l.newLine === newLine
        : l.type === 'old' && l.oldLine === oldLine,
  );
}

/**
 * A DiffNote's position on a repository's diff (commits now, merge requests later), checked as
 * GitLab's DiffNote validations do: its commits exist, it is complete, and on text it names a
 * line that the diff of base_sha..head_sha shows. Answers the position with full SHAs and the
 * line's code, or 400 in GitLab's words.
 */
export async function checkDiffPosition(
  cairn: Cairn,
  project: ProjectWithNamespace,
  position: DiffPosition,
): Promise<{ position: DiffPosition; lineCode: string | null }> {
  const [base, start, head] = await Promise.all(
    [position.base_sha, position.start_sha, position.head_sha].map((sha) => (sha ? findCommit(cairn, project, sha) : Promise.resolve(null))),
  );
  const errors: Record<string, string[]> = {};
  const normalised: DiffPosition = { ...position, base_sha: base?.oid ?? null, start_sha: start?.oid ?? null, head_sha: head?.oid ?? null };
  if (position.position_type === 'image') {
    if (!base || !start || !head || [position.width, position.height, position.x, position.y].some((v) => v === undefined || v === null)) {
      throw noteInvalid({ position: ['is incomplete'] });
    }
    return { position: normalised, lineCode: null };
  }
  const oldLine = position.old_line ?? null;
  const newLine = position.new_line ?? null;
  let code: string | null = null;
  if ((oldLine !== null || newLine !== null) && base && start && head) {
    // The diff the position was made on: base_sha..head_sha (GitLab's DiffRefs#compare_in compares
    // start_sha...head_sha, whose merge base is base_sha), so a target that moved on since the
    // merge request's base does not shift its lines.
    const diffs = await diffTrees(projectRepoPath(cairn, project), base.oid, head.oid, { limits: false });
    const file = diffs.find((d) => (position.new_path ? d.newPath === position.new_path : d.oldPath === position.old_path));
    const line = file && findLine(file, oldLine, newLine);
    if (file && line) code = lineCode(file, line.oldLine, line.newLine);
  }
  if (code === null) errors.line_code = ["can't be blank", 'must be a valid line code'];
  if (oldLine === null && newLine === null) errors.position = ['is incomplete'];
  if (Object.keys(errors).length) throw noteInvalid(errors);
  return { position: normalised, lineCode: code };
}

// ---------------------------------------------------------------------------------------------
// Commit comments (the commits API's own form of commit notes)

export interface CommentInput {
  project: ProjectWithNamespace;
  user: User;
  commit: ParsedCommit;
  note: string;
  path?: string | null;
  line?: number | null;
  lineType?: 'new' | 'old' | null;
}

/**
 * A comment on a commit. When path, line and line_type name a changed line of the commit's
 * diff the note sits on that line (a LegacyDiffNote, as GitLab makes them); otherwise it is a
 * plain comment on the commit (GitLab's fallback), with path/line/line_type null.
 */
export async function createCommitComment(cairn: Cairn, input: CommentInput): Promise<NoteWithAuthor> {
  let position: NotePosition | null = null;
  let code: string | null = null;
  if (input.path && input.line && input.lineType) {
    const diffs = await diffTrees(projectRepoPath(cairn, input.project), input.commit.parents[0] ?? null, input.commit.oid, { limits: false });
    const file = diffs.find((d) => d.newPath === input.path);
    if (file) {
      const hit = diffLines(file.diff).find((l) => l.type === input.lineType && (input.lineType === 'new' ? l.newLine : l.oldLine) === input.line);
      if (hit) {
        code = lineCode(file, hit.oldLine, hit.newLine);
        position = { path: file.newPath, line: input.line, line_type: input.lineType };
      }
    }
  }
  return createNote(cairn, commitScope(input.project.id, input.commit.oid), {
    author: input.user,
    body: input.note,
    type: code ? 'LegacyDiffNote' : null,
    position,
    lineCode: code,
  });
}
