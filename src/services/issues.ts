import { ISSUE_HOOK_FIELDS, rowChanges } from '../hooks/changes.js';
import { queueHookEvent } from '../hooks/events.js';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Issue } from '../db/schema/work_items.js';
import type { NoteableScope } from '../finders/notes.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { ApiError, apiError, invalidParam } from '../plugins/errors.js';
import { checkIssuableText } from './issuable_text.js';
import { setLabels, type LabelChange } from './label_links.js';
import { deleteWorkItemDependents } from './work_items.js';
import { addSystemNote } from './notes.js';
import { notify } from './notify.js';
import { transition } from '../db/state_machine.js';
import { ISSUE_MACHINE } from '../db/work_item_states.js';

/**
 * Issues: create, update, close and reopen, delete. State is GitLab's state_id (1 opened,
 * 2 closed); a state change is one guarded UPDATE (`where state_id = from`), so two processes
 * never both make it, and only the one that did writes its system note ("closed", "reopened").
 * Who may set what was decided by the caller (api/issues): fields a caller may not set are not
 * passed in, as GitLab drops them silently.
 */

/** Issue types GitLab's API accepts. */
export const ISSUE_TYPES = ['issue', 'incident', 'test_case', 'task'] as const;

export interface IssueParams {
  title?: string;
  description?: string | null;
  confidential?: boolean;
  assignee_ids?: number[];
  milestone_id?: number | null;
  due_date?: string | null;
  discussion_locked?: boolean;
  issue_type?: string;
  state_event?: 'close' | 'reopen';
  /** Backdated creation or update (owners and administrators). */
  created_at?: Date;
  updated_at?: Date;
  /** An iid of one's choosing (owners and administrators). */
  iid?: number;
  labelChange?: LabelChange & { createMissing: boolean };
}

export const issueScope = (issue: Pick<Issue, 'id' | 'project_id'>): NoteableScope => ({ type: 'Issue', projectId: issue.project_id, key: { column: 'noteable_id', value: issue.id } });

function checkText(p: IssueParams, creating: boolean) {
  checkIssuableText(p, creating);
  if (p.issue_type !== undefined && !(ISSUE_TYPES as readonly string[]).includes(p.issue_type)) throw invalidParam('issue_type', 'does not have a valid value');
}

/** A milestone of the project or of one of its groups; anything else is dropped (null), as GitLab's filter_milestone does. */
async function milestoneOrNull(db: Database, project: ProjectWithNamespace, milestoneId: number | null | undefined): Promise<number | null | undefined> {
  if (milestoneId === undefined) return undefined;
  if (!milestoneId) return null;
  const groupIds = project.namespace.type === 'Group' ? project.namespace.traversal_ids : [];
  const row = await db
    .selectFrom('milestones')
    .select('id')
    .where('id', '=', milestoneId)
    .where((eb) => eb.or([eb('project_id', '=', project.id), ...(groupIds.length ? [eb('group_id', 'in', groupIds)] : [])]))
    .executeTakeFirst();
  return row ? row.id : null;
}

/** Assignees must be active users who may read the project's issues; others are dropped, as GitLab's filter_assignees does. */
async function assignableUserIds(db: Database, project: ProjectWithNamespace, ids: number[] | undefined): Promise<number[] | undefined> {
  if (ids === undefined) return undefined;
  const unique = [...new Set(ids.filter((id) => Number.isInteger(id) && id > 0 && id <= 2147483647))];
  if (!unique.length) return [];
  const rows = await sql<{ id: number }>`
    select u.id from users u
     where u.id = any(${unique}::int[]) and u.state = 'active'
       and (u.admin or project_access_level(u.id, ${project.id}) >= 10
            or (${project.visibility_level} >= (case when u.external then 20 else 10 end)))`.execute(db);
  const found = new Set(rows.rows.map((r) => r.id));
  return unique.filter((id) => found.has(id));
}

/** Sets the assignees; answers those there were before when they changed, null when nothing changed. */
async function replaceAssignees(db: Database, issueId: number, userIds: number[]): Promise<number[] | null> {
  const before = (await db.selectFrom('issue_assignees').select('user_id').where('issue_id', '=', issueId).execute()).map((r) => r.user_id);
  if (before.length === userIds.length && before.every((id) => userIds.includes(id))) return null;
  await db.deleteFrom('issue_assignees').where('issue_id', '=', issueId).where('user_id', 'not in', userIds.length ? userIds : [0]).execute();
  if (userIds.length) await db.insertInto('issue_assignees').values(userIds.map((user_id) => ({ issue_id: issueId, user_id }))).onConflict((oc) => oc.doNothing()).execute();
  return before;
}

function duplicated(e: unknown): boolean {
  return (e as { code?: string }).code === '23505';
}

/** POST /projects/:id/issues. */
export async function createIssue(cairn: Cairn, project: ProjectWithNamespace, user: User, params: IssueParams): Promise<Issue> {
  checkText(params, true);
  const milestoneId = await milestoneOrNull(cairn.db, project, params.milestone_id);
  const assignees = await assignableUserIds(cairn.db, project, params.assignee_ids);
  try {
    return await cairn.db.transaction().execute(async (trx) => {
      let iid: number;
      if (params.iid !== undefined) {
        iid = params.iid;
        // Later issues number on from the highest iid given.
        await sql`insert into internal_ids (usage, parent_id, last_value) values ('issues', ${project.id}, ${iid})
                  on conflict (usage, parent_id) do update set last_value = greatest(internal_ids.last_value, excluded.last_value)`.execute(trx);
      } else {
        const row = await sql<{ last_value: number }>`
          insert into internal_ids (usage, parent_id, last_value) values ('issues', ${project.id}, 1)
          on conflict (usage, parent_id) do update set last_value = internal_ids.last_value + 1
          returning last_value`.execute(trx);
        iid = row.rows[0]!.last_value;
      }
      const at = params.created_at;
      const issue = await trx
        .insertInto('issues')
        .values({
          iid,
          project_id: project.id,
          title: params.title!.trim(),
          description: params.description ?? null,
          author_id: user.id,
          milestone_id: milestoneId ?? null,
          confidential: params.confidential ?? false,
          discussion_locked: params.discussion_locked ?? null,
          issue_type: params.issue_type ?? 'issue',
          due_date: params.due_date ?? null,
          ...(at ? { created_at: at, updated_at: at } : {}),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (assignees?.length) await trx.insertInto('issue_assignees').values(assignees.map((user_id) => ({ issue_id: issue.id, user_id }))).execute();
      if (params.labelChange) await applyLabels(trx, issue, user, params.labelChange);
      await notify(cairn, trx, { action: 'new_issue', target: { type: 'Issue', id: issue.id }, actorId: user.id });
      await queueHookEvent(cairn, trx, { kind: 'issue', projectId: project.id, id: issue.id, userId: user.id, action: 'open' });
      return issue;
    });
  } catch (e) {
    // An iid given twice (or taken meanwhile): GitLab's answer to RecordNotUnique.
    if (duplicated(e)) throw apiError(409, 'Duplicated issue');
    throw e;
  }
}

async function applyLabels(db: Database, issue: Issue, user: User, change: LabelChange & { createMissing: boolean }): Promise<boolean> {
  const { labels, add_labels, remove_labels, createMissing } = change;
  if (labels === undefined && add_labels === undefined && remove_labels === undefined) return false;
  const result = await setLabels(db, { targetType: 'Issue', targetId: issue.id, projectId: issue.project_id, userId: user.id, createMissing }, { labels, add_labels, remove_labels });
  return result.added.length > 0 || result.removed.length > 0;
}

/** PUT /projects/:id/issues/:iid: fields, people, labels, state_event. */
export async function updateIssue(cairn: Cairn, project: ProjectWithNamespace, issue: Issue, user: User, params: IssueParams): Promise<Issue> {
  checkText(params, false);
  const set: Record<string, unknown> = {};
  if (params.title !== undefined) set.title = params.title.trim();
  if (params.description !== undefined) set.description = params.description;
  if (params.confidential !== undefined) set.confidential = params.confidential;
  if (params.discussion_locked !== undefined) set.discussion_locked = params.discussion_locked;
  if (params.due_date !== undefined) set.due_date = params.due_date;
  if (params.issue_type !== undefined) set.issue_type = params.issue_type;
  const milestoneId = await milestoneOrNull(cairn.db, project, params.milestone_id);
  if (milestoneId !== undefined) set.milestone_id = milestoneId;
  const assignees = await assignableUserIds(cairn.db, project, params.assignee_ids);

  let current = issue;
  const changed = await cairn.db.transaction().execute(async (trx) => {
    const previousAssignees = assignees ? await replaceAssignees(trx, issue.id, assignees) : null;
    if (previousAssignees) await notify(cairn, trx, { action: 'reassign_issue', target: { type: 'Issue', id: issue.id }, actorId: user.id, previousAssigneeIds: previousAssignees });
    const labelsChanged = params.labelChange ? await applyLabels(trx, issue, user, params.labelChange) : false;
    if (Object.keys(set).length || assignees || labelsChanged) {
      current = await trx
        .updateTable('issues')
        .set({ ...set, updated_at: (params.updated_at ?? sql`now()`) as any })
        .where('id', '=', issue.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await queueHookEvent(cairn, trx, { kind: 'issue', projectId: project.id, id: issue.id, userId: user.id, action: 'update', changes: rowChanges(issue, current, ISSUE_HOOK_FIELDS) });
      return true;
    }
    return false;
  });
  if (params.state_event) current = await changeIssueState(cairn, current, params.state_event, user);
  if (!changed && !params.state_event && params.updated_at) {
    current = await cairn.db.updateTable('issues').set({ updated_at: params.updated_at }).where('id', '=', issue.id).returningAll().executeTakeFirstOrThrow();
  }
  return current;
}

/**
 * Close or reopen as one guarded update, with its system note in the same transaction; asking
 * for the state the issue is in changes nothing. `note` replaces the note's text (closing by a
 * merge request says which).
 */
export async function changeIssueState(cairn: Pick<Cairn, 'db' | 'config'>, issue: Issue, event: 'close' | 'reopen', user: Pick<User, 'id'>, note?: string): Promise<Issue> {
  const { db } = cairn;
  const run = async (trx: Database) => {
    const updated = await transition(trx, ISSUE_MACHINE, issue.id, event, {
      set: event === 'close'
        ? { closed_at: sql`now()` as any, closed_by_id: user.id, updated_at: sql`now()` as any }
        : { closed_at: null, closed_by_id: null, updated_at: sql`now()` as any },
    });
    if (updated) {
      await addSystemNote(trx, issueScope(updated), user.id, note ?? (event === 'close' ? 'closed' : 'reopened'));
      await notify(cairn, trx, { action: event === 'close' ? 'close_issue' : 'reopen_issue', target: { type: 'Issue', id: updated.id }, actorId: user.id });
      await queueHookEvent(cairn, trx, { kind: 'issue', projectId: updated.project_id, id: updated.id, userId: user.id, action: event, changes: rowChanges(issue, updated, ['state_id', 'closed_at', 'updated_at']) });
    }
    return updated;
  };
  const updated = db.isTransaction ? await run(db) : await db.transaction().execute(run);
  return updated ?? (await db.selectFrom('issues').selectAll().where('id', '=', issue.id).executeTakeFirstOrThrow());
}

/** DELETE: the row and what hangs off it (assignees and closing links cascade). */
export async function deleteIssue(cairn: Cairn, issue: Issue): Promise<void> {
  await cairn.db.transaction().execute(async (trx) => {
    await deleteWorkItemDependents(trx, 'Issue', issue.id);
    await trx.deleteFrom('issues').where('id', '=', issue.id).execute();
  });
}

/** GitLab's 404 for an issue that is not there, or that the caller may not see. */
export function issueNotFound(): ApiError {
  return apiError(404, '404 Issue Not Found');
}
