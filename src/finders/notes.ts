import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { Database } from '../db/index.js';
import type { NoteWithAuthor } from '../db/schema/notes.js';

/** `noteable_type` as GitLab writes it: the noteable's class name. */
export type NoteableType = 'Commit' | 'Issue' | 'MergeRequest' | 'Snippet' | 'Epic';

/**
 * The rows of `notes` that belong to one noteable. Commits are not rows, so their notes carry
 * the commit's SHA in `commit_id` (and the project, since forks share SHAs); every other
 * noteable is `noteable_id`.
 */
export interface NoteableScope {
  type: NoteableType;
  projectId: number | null;
  key: { column: 'commit_id'; value: string } | { column: 'noteable_id'; value: number };
}

/** The condition on `notes as n` that picks the noteable's notes. */
function inScope(scope: NoteableScope): RawBuilder<SqlBool> {
  const key = scope.key.column === 'commit_id' ? sql`n.commit_id = ${scope.key.value}` : sql`n.noteable_id = ${scope.key.value}`;
  const project = scope.projectId === null ? sql`` : sql` and n.project_id = ${scope.projectId}`;
  return sql<SqlBool>`(n.noteable_type = ${scope.type}${project} and ${key})`;
}

/** GitLab's activity_filter: all_notes, only_comments (no system notes), only_activity (system notes only). */
export type ActivityFilter = 'all_notes' | 'only_comments' | 'only_activity';

function activity(filter: ActivityFilter): RawBuilder<SqlBool> {
  if (filter === 'only_comments') return sql<SqlBool>`not n.system`;
  if (filter === 'only_activity') return sql<SqlBool>`n.system`;
  return sql<SqlBool>`true`;
}

function reviveUser(json: any) {
  return json ? { ...json, created_at: new Date(json.created_at), updated_at: new Date(json.updated_at) } : null;
}

/** Notes of the noteable with their authors and resolvers, one statement. */
function notesWithUsers(db: Database, scope: NoteableScope) {
  return db
    .selectFrom('notes as n')
    .leftJoin('users as u', 'u.id', 'n.author_id')
    .leftJoin('users as r', 'r.id', 'n.resolved_by_id')
    .selectAll('n')
    .select(sql<any>`case when u.id is null then null else to_jsonb(u) end`.as('author_json'))
    .select(sql<any>`case when r.id is null then null else to_jsonb(r) end`.as('resolver_json'))
    .where(inScope(scope));
}

function revive(rows: any[]): NoteWithAuthor[] {
  return rows.map(({ author_json, resolver_json, ...n }) => ({ ...n, author: reviveUser(author_json), resolved_by: reviveUser(resolver_json) }));
}

export interface Slice {
  offset: number;
  limit: number;
}

/**
 * One page of the noteable's threads (GitLab pages discussion ids, ordered by their first note)
 * and how many threads there are in all.
 */
export async function discussionPage(db: Database, scope: NoteableScope, page: Slice): Promise<{ ids: string[]; total: number }> {
  const base = db.selectFrom('notes as n').where(inScope(scope));
  const [rows, count] = await Promise.all([
    base
      .select('n.discussion_id')
      .groupBy('n.discussion_id')
      .orderBy(sql`min(n.created_at)`)
      .orderBy(sql`min(n.id)`)
      .offset(page.offset)
      .limit(page.limit)
      .execute(),
    base.select(sql<string>`count(distinct n.discussion_id)`.as('total')).executeTakeFirstOrThrow(),
  ]);
  return { ids: rows.map((r) => r.discussion_id), total: Number(count.total) };
}

/** The notes of these threads of the noteable, oldest first (`.fresh` in GitLab). */
export async function notesOfDiscussions(db: Database, scope: NoteableScope, discussionIds: string[]): Promise<NoteWithAuthor[]> {
  if (discussionIds.length === 0) return [];
  const rows = await notesWithUsers(db, scope).where('n.discussion_id', 'in', discussionIds).orderBy('n.created_at').orderBy('n.id').execute();
  return revive(rows);
}

/** The notes of one thread of the noteable, oldest first; empty when it is not one of its threads. */
export function discussionNotes(db: Database, scope: NoteableScope, discussionId: string): Promise<NoteWithAuthor[]> {
  return notesOfDiscussions(db, scope, [discussionId]);
}

/** The noteable's notes (the first `limit`), oldest first, with authors and resolvers: one statement, no count. */
export async function notesOfNoteable(db: Database, scope: NoteableScope, limit: number): Promise<NoteWithAuthor[]> {
  const rows = await notesWithUsers(db, scope).orderBy('n.created_at').orderBy('n.id').limit(limit).execute();
  return revive(rows);
}

/** One note of the noteable (undefined when the id names a note of something else). */
export async function findNote(db: Database, scope: NoteableScope, noteId: number): Promise<NoteWithAuthor | undefined> {
  const rows = await notesWithUsers(db, scope).where('n.id', '=', noteId).execute();
  return revive(rows)[0];
}

export interface NoteListOptions {
  orderBy: 'created_at' | 'updated_at';
  sort: 'asc' | 'desc';
  activity: ActivityFilter;
}

/** One page of the noteable's notes in the Notes API's order (id breaks ties), and their number. */
export async function listNotes(db: Database, scope: NoteableScope, opts: NoteListOptions, page: Slice): Promise<{ notes: NoteWithAuthor[]; total: number }> {
  const [rows, count] = await Promise.all([
    notesWithUsers(db, scope)
      .where(activity(opts.activity))
      .orderBy(opts.orderBy === 'updated_at' ? 'n.updated_at' : 'n.created_at', opts.sort)
      .orderBy('n.id', opts.sort)
      .offset(page.offset)
      .limit(page.limit)
      .execute(),
    db.selectFrom('notes as n').where(inScope(scope)).where(activity(opts.activity)).select(sql<string>`count(*)`.as('total')).executeTakeFirstOrThrow(),
  ]);
  return { notes: revive(rows), total: Number(count.total) };
}

/** Whether a merge request has a thread still to resolve (GitLab's unresolved_notes.any?(&:to_be_resolved?)). */
export async function hasUnresolvedThreads(db: Database, mergeRequestId: number): Promise<boolean> {
  const row = await db
    .selectFrom('notes')
    .select('id')
    .where('noteable_type', '=', 'MergeRequest')
    .where('noteable_id', '=', mergeRequestId)
    .where('system', '=', false)
    .where('type', 'in', ['DiscussionNote', 'DiffNote'])
    .where('resolved_at', 'is', null)
    .limit(1)
    .executeTakeFirst();
  return !!row;
}
