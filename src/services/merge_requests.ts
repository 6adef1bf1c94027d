import { MERGE_REQUEST_HOOK_FIELDS, rowChanges } from '../hooks/changes.js';
import { queueHookEvent } from '../hooks/events.js';
import { sql } from 'kysely';
import type { Cairn, PostReceiveEvent } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { MergeRequest } from '../db/schema/work_items.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { findProjectRow, projectFullPath } from '../finders/projects.js';
import { inSameForkNetwork } from '../finders/forks.js';
import { deleteRef, fetchCommitFrom } from '../git/commits.js';
import { compareAndSwapRef } from '../git/write.js';
import { readRef } from '../git/refs.js';
import { changedPathCount, checkMerge, divergence, mergeBaseOf } from '../git/merge.js';
import { ApiError, apiError } from '../plugins/errors.js';
import { syncClosingIssues } from './closing_issues.js';
import { nextInternalId } from './internal_ids.js';
import { setLabels, type LabelChange } from './label_links.js';
import { deleteWorkItemDependents } from './work_items.js';
import type { Database } from '../db/index.js';
import { projectRepoPath } from './projects.js';
import type { NoteableScope } from '../finders/notes.js';
import { commitsBetween, readCommitsOnce } from '../git/compare.js';
import { draftlessTitle, isDraftTitle } from '../presenters/merge_requests.js';
import { addSystemNote } from './notes.js';
import { notify } from './notify.js';
import { MERGE_REQUEST_MACHINE, MR_STATE } from '../db/work_item_states.js';
import { transition } from '../db/state_machine.js';
import { beginInlineJob, finishInlineJob, runInlineJob } from '../jobs/queue.js';

/**
 * Merge requests: create, update, close and reopen, delete, and keeping each one's view of git
 * (source head, diff bases, mergeability) true after pushes. Merging and rebasing are in
 * services/merge.ts. States are GitLab's state_id (MERGE_REQUEST_MACHINE, db/work_item_states.ts);
 * every state change is one guarded UPDATE (`where state_id = any(from)`), so two processes
 * cannot both make it.
 */


/** The notes of a merge request: its threads and its system notes. */
export function mergeRequestNoteScope(mr: Pick<MergeRequest, 'id' | 'target_project_id'>): NoteableScope {
  return { type: 'MergeRequest', projectId: mr.target_project_id, key: { column: 'noteable_id', value: mr.id } };
}

/**
 * GitLab's title change note: the part of each title that changed, between the common start and
 * end, marked as its InlineDiffMarkdownMarker marks it ({-removed-}, {+added+}).
 */
export function titleChangeNote(oldTitle: string, newTitle: string): string {
  const a = [...oldTitle];
  const b = [...newTitle];
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let end = 0;
  while (end < a.length - start && end < b.length - start && a[a.length - 1 - end] === b[b.length - 1 - end]) end++;
  const mark = (chars: string[], sign: '-' | '+') => {
    const middle = chars.slice(start, chars.length - end).join('');
    if (!middle) return chars.join('');
    return `${chars.slice(0, start).join('')}{${sign}${middle}${sign}}${chars.slice(chars.length - end).join('')}`;
  };
  return `changed title from **${mark(a, '-')}** to **${mark(b, '+')}**`;
}

/** The system notes GitLab writes for an update of these fields (state changes write their own), in its order. */
function updateNotes(mr: MergeRequest, set: Record<string, unknown>): string[] {
  const notes: string[] = [];
  if (typeof set.title === 'string' && set.title !== mr.title) {
    if (isDraftTitle(mr.title) !== isDraftTitle(set.title)) notes.push(`marked this merge request as **${isDraftTitle(set.title) ? 'draft' : 'ready'}**`);
    if (draftlessTitle(mr.title) !== draftlessTitle(set.title)) notes.push(titleChangeNote(mr.title, set.title));
  }
  if (set.description !== undefined && (set.description ?? '') !== (mr.description ?? '')) notes.push('changed the description');
  if (typeof set.target_branch === 'string') notes.push(`changed target branch from \`${mr.target_branch}\` to \`${set.target_branch}\``);
  if (set.discussion_locked !== undefined && !!set.discussion_locked !== !!mr.discussion_locked) {
    notes.push(`${set.discussion_locked ? 'locked' : 'unlocked'} this merge request`);
  }
  return notes;
}

/** The ref that keeps a merge request's source head in the target repository (GitLab's refs/merge-requests/:iid/head). */
export const headRef = (iid: number) => `refs/merge-requests/${iid}/head`;
/** The ref merge_ref writes (GitLab's refs/merge-requests/:iid/merge). */
export const mergeRefName = (iid: number) => `refs/merge-requests/${iid}/merge`;

/**
 * The merge request pipeline of a new head (opened, or pushed to), journalled with the write that
 * made the head and done at once after it (its handler: ci/pipelines/merge_request_pipelines.ts).
 */
export const MERGE_REQUEST_PIPELINE_JOB = 'merge_request.pipeline';

async function journalMergeRequestPipeline(cairn: Cairn, mr: Pick<MergeRequest, 'id'>, sha: string, userId: number | null, trx?: Database) {
  const payload = { mergeRequestId: mr.id, sha, userId };
  return { id: await beginInlineJob(cairn.db, MERGE_REQUEST_PIPELINE_JOB, payload, { trx }), payload };
}

async function runMergeRequestPipeline(cairn: Cairn, journal: { id: number; payload: Record<string, unknown> }) {
  await runInlineJob(cairn, journal.id, MERGE_REQUEST_PIPELINE_JOB, journal.payload);
}

export interface MergeRequestParams {
  title?: string;
  description?: string | null;
  source_branch?: string;
  target_branch?: string;
  assignee_id?: number | null;
  assignee_ids?: number[];
  reviewer_ids?: number[];
  milestone_id?: number | null;
  remove_source_branch?: boolean;
  squash?: boolean;
  allow_collaboration?: boolean;
  allow_maintainer_to_push?: boolean;
  discussion_locked?: boolean;
  state_event?: 'close' | 'reopen';
  /** labels / add_labels / remove_labels; `createMissing` as the caller's admin_label allows. */
  labelChange?: LabelChange & { createMissing: boolean };
}

const TITLE_MAX = 255;
const DESCRIPTION_MAX = 1_048_576;

function validationError(messages: string[]): ApiError {
  return new ApiError(400, { message: messages });
}

function checkText(p: MergeRequestParams, creating: boolean) {
  const errors: string[] = [];
  if (creating || p.title !== undefined) {
    const title = p.title?.trim() ?? '';
    if (!title) errors.push("Title can't be blank");
    else if ([...title].length > TITLE_MAX) errors.push(`Title is too long (maximum is ${TITLE_MAX} characters)`);
  }
  if (p.description && p.description.length > DESCRIPTION_MAX) errors.push(`Description is too long (maximum is ${DESCRIPTION_MAX} characters)`);
  if (errors.length) throw validationError(errors);
}

/** Users that may be assigned or asked to review: they must exist (unknown ids are dropped, as GitLab does). */
async function existingUserIds(cairn: Cairn, ids: number[] | undefined): Promise<number[] | undefined> {
  if (ids === undefined) return undefined;
  const unique = [...new Set(ids.filter((id) => Number.isInteger(id) && id > 0))];
  if (!unique.length) return [];
  const rows = await cairn.db.selectFrom('users').select('id').where('id', 'in', unique).execute();
  const found = new Set(rows.map((r) => r.id));
  return unique.filter((id) => found.has(id));
}

async function checkMilestone(cairn: Cairn, project: ProjectWithNamespace, milestoneId: number | null | undefined) {
  if (milestoneId === undefined || milestoneId === null || milestoneId === 0) return;
  const groupIds = project.namespace.type === 'Group' ? project.namespace.traversal_ids : [];
  const row = await cairn.db
    .selectFrom('milestones')
    .select('id')
    .where('id', '=', milestoneId)
    .where((eb) => eb.or([eb('project_id', '=', project.id), ...(groupIds.length ? [eb('group_id', 'in', groupIds)] : [])]))
    .executeTakeFirst();
  if (!row) throw validationError(['Milestone does not exist']);
}

async function replaceUserLinks(cairn: Cairn, table: 'merge_request_assignees' | 'merge_request_reviewers', mrId: number, userIds: number[], actorId: number) {
  await cairn.db.transaction().execute(async (trx) => {
    const before = (await trx.selectFrom(table).select('user_id').where('merge_request_id', '=', mrId).execute()).map((r) => r.user_id);
    const changed = before.length !== userIds.length || before.some((id) => !userIds.includes(id));
    if (changed && table === 'merge_request_assignees') {
      await notify(cairn, trx, { action: 'reassign_merge_request', target: { type: 'MergeRequest', id: mrId }, actorId, previousAssigneeIds: before });
    }
    await trx.deleteFrom(table).where('merge_request_id', '=', mrId).where('user_id', 'not in', userIds.length ? userIds : [0]).execute();
    if (userIds.length) {
      await trx.insertInto(table).values(userIds.map((user_id) => ({ merge_request_id: mrId, user_id }))).onConflict((oc) => oc.doNothing()).execute();
    }
  });
}

/**
 * What git says about a merge request now: the source head (copied into the target repository
 * under refs/merge-requests/:iid/head, forks included), the diff bases and whether it merges
 * cleanly. Written with a guard on the head it was computed for, so a slower refresh never
 * overwrites a newer one.
 */
export async function refreshMergeRequest(cairn: Cairn, mr: MergeRequest, target?: ProjectWithNamespace): Promise<MergeRequest> {
  const targetProject = target ?? (await findProjectRow(cairn.db, mr.target_project_id));
  if (!targetProject) return mr;
  const targetDir = projectRepoPath(cairn, targetProject);
  let headSha: string | null = null;
  if (mr.source_project_id === mr.target_project_id) {
    headSha = await readRef(cairn.catfile, targetDir, `refs/heads/${mr.source_branch}`);
    if (headSha) await fetchHeadRef(cairn, targetDir, headSha, mr.iid);
  } else if (mr.source_project_id !== null) {
    const source = await findProjectRow(cairn.db, mr.source_project_id);
    if (source) {
      const sourceDir = projectRepoPath(cairn, source);
      headSha = await readRef(cairn.catfile, sourceDir, `refs/heads/${mr.source_branch}`);
      if (headSha) await fetchCommitFrom(targetDir, sourceDir, headSha, headRef(mr.iid));
    }
  }
  const targetSha = await readRef(cairn.catfile, targetDir, `refs/heads/${mr.target_branch}`);
  const set: Record<string, unknown> = {};
  if (headSha && targetSha) {
    const base = await mergeBaseOf(targetDir, targetSha, headSha);
    const check = mr.state_id === MR_STATE.opened ? await checkMerge(targetDir, targetSha, headSha) : null;
    Object.assign(set, {
      head_sha: headSha,
      base_sha: base,
      start_sha: targetSha,
      ...(check ? { merge_status: check.status === 'clean' ? 'can_be_merged' : 'cannot_be_merged', has_conflicts: check.status === 'conflict' } : {}),
    });
  } else if (mr.state_id === MR_STATE.opened) {
    // A branch is gone: nothing can be merged until it is back.
    Object.assign(set, { head_sha: headSha ?? mr.head_sha, merge_status: 'cannot_be_merged', has_conflicts: false });
  }
  if (headSha && mr.source_project_id !== null && mr.state_id === MR_STATE.opened) {
    // GitLab's head pipeline: the latest at the head commit of the source branch's pipelines and
    // the merge request's own, when one exists already.
    const sourceProjectId = mr.source_project_id;
    const pipeline = await cairn.db.selectFrom('ci_pipelines').select('id')
      .where('sha', '=', headSha).where('parent_pipeline_id', 'is', null)
      .where((eb) => eb.or([
        eb.and([eb('project_id', '=', sourceProjectId), eb('ref', '=', mr.source_branch), eb('tag', '=', false)]),
        // In the target, or in the fork for a merge request from one.
        eb.and([eb('merge_request_id', '=', mr.id), eb('source', '=', 'merge_request_event')]),
      ]))
      .orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (pipeline && pipeline.id !== mr.head_pipeline_id) set.head_pipeline_id = pipeline.id;
  }
  if (!Object.keys(set).length) return mr;
  const updated = await cairn.db
    .updateTable('merge_requests')
    .set(set)
    .where('id', '=', mr.id)
    .where(sql<boolean>`head_sha is not distinct from ${mr.head_sha}`)
    .where('state_id', '=', mr.state_id)
    .returningAll()
    .executeTakeFirst();
  return updated ?? (await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', mr.id).executeTakeFirstOrThrow());
}

async function fetchHeadRef(cairn: Cairn, gitDir: string, oid: string, iid: number) {
  const current = await readRef(cairn.catfile, gitDir, headRef(iid));
  if (current !== oid) await compareAndSwapRef(gitDir, headRef(iid), oid, current);
}

export interface CreateInput {
  /** The project the request was made on: the source project. */
  sourceProject: ProjectWithNamespace;
  /** The target project (the source project unless target_project_id names an upstream). */
  targetProject: ProjectWithNamespace;
  user: User;
  params: MergeRequestParams;
}

/** POST /projects/:id/merge_requests: validations as GitLab's, one open request per branch pair. */
export async function createMergeRequest(cairn: Cairn, input: CreateInput): Promise<MergeRequest> {
  const { sourceProject, targetProject, user, params } = input;
  checkText(params, true);
  // Across projects only inside one fork network (GitLab's validate_fork, answered 422).
  if (sourceProject.id !== targetProject.id && !(await inSameForkNetwork(cairn.db, sourceProject.id, targetProject.id))) {
    throw new ApiError(422, { message: ['Source project is not a fork of the target project'] });
  }
  const sourceBranch = params.source_branch!;
  const targetBranch = params.target_branch!;
  const errors: string[] = [];
  if (sourceProject.id === targetProject.id && sourceBranch === targetBranch) errors.push('You can\'t use same project/branch for source and target');
  const sourceHead = await readRef(cairn.catfile, projectRepoPath(cairn, sourceProject), `refs/heads/${sourceBranch}`);
  if (!sourceHead) errors.push('Source branch does not exist');
  const targetHead = await readRef(cairn.catfile, projectRepoPath(cairn, targetProject), `refs/heads/${targetBranch}`);
  if (!targetHead) errors.push('Target branch does not exist');
  if (errors.length) throw validationError(errors);
  await checkMilestone(cairn, targetProject, params.milestone_id);
  const assignees = await existingUserIds(cairn, params.assignee_ids ?? (params.assignee_id ? [params.assignee_id] : undefined));
  const reviewers = await existingUserIds(cairn, params.reviewer_ids);

  const existing = await cairn.db
    .selectFrom('merge_requests')
    .select('iid')
    .where('target_project_id', '=', targetProject.id)
    .where('source_project_id', '=', sourceProject.id)
    .where('source_branch', '=', sourceBranch)
    .where('target_branch', '=', targetBranch)
    .where('state_id', '=', MR_STATE.opened)
    .executeTakeFirst();
  if (existing) throw conflictMessage(existing.iid);

  let mr: MergeRequest;
  let pipelineJournal: Awaited<ReturnType<typeof journalMergeRequestPipeline>> | null = null;
  try {
    mr = await cairn.db.transaction().execute(async (trx) => {
      const iid = await nextInternalId(trx, 'merge_requests', targetProject.id);
      const row = await trx
        .insertInto('merge_requests')
        .values({
          iid,
          target_project_id: targetProject.id,
          source_project_id: sourceProject.id,
          source_branch: sourceBranch,
          target_branch: targetBranch,
          title: params.title!.trim(),
          description: params.description ?? null,
          author_id: user.id,
          milestone_id: params.milestone_id || null,
          squash: params.squash ?? squashDefault(targetProject),
          allow_collaboration: params.allow_collaboration ?? params.allow_maintainer_to_push ?? false,
          merge_params: JSON.stringify(params.remove_source_branch === undefined ? {} : { force_remove_source_branch: params.remove_source_branch }),
          head_sha: sourceHead,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      if (assignees?.length) await trx.insertInto('merge_request_assignees').values(assignees.map((user_id) => ({ merge_request_id: row.id, user_id }))).execute();
      if (reviewers?.length) await trx.insertInto('merge_request_reviewers').values(reviewers.map((user_id) => ({ merge_request_id: row.id, user_id }))).execute();
      if (params.labelChange) await applyLabels(trx, row, user, params.labelChange);
      await notify(cairn, trx, { action: 'new_merge_request', target: { type: 'MergeRequest', id: row.id }, actorId: user.id });
      await queueHookEvent(cairn, trx, { kind: 'merge_request', projectId: row.target_project_id, id: row.id, userId: user.id, action: 'open' });
      if (sourceHead) pipelineJournal = await journalMergeRequestPipeline(cairn, row, sourceHead, user.id, trx);
      return row;
    });
  } catch (e) {
    // The journal went with the transaction; its lock keeper goes too.
    const lost = pipelineJournal as { id: number } | null;
    if (lost) await finishInlineJob(cairn.db, lost.id).catch(() => undefined);
    // Two requests for the same branches at once: the partial unique index lets one through.
    if ((e as { code?: string }).code === '23505') {
      const other = await cairn.db.selectFrom('merge_requests').select('iid')
        .where('target_project_id', '=', targetProject.id).where('source_project_id', '=', sourceProject.id)
        .where('source_branch', '=', sourceBranch).where('target_branch', '=', targetBranch).where('state_id', '=', MR_STATE.opened)
        .executeTakeFirst();
      throw conflictMessage(other?.iid ?? 0);
    }
    throw e;
  }
  const refreshed = await refreshMergeRequest(cairn, mr, targetProject);
  await syncClosingIssues(cairn, targetProject, refreshed);
  if (!pipelineJournal) return refreshed;
  // After the refresh: the head ref the pipeline runs on is in place.
  await runMergeRequestPipeline(cairn, pipelineJournal);
  return (await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', mr.id).executeTakeFirst()) ?? refreshed;
}

function conflictMessage(iid: number): ApiError {
  return new ApiError(409, { message: [`Another open merge request already exists for this source branch: !${iid}`] });
}

function squashDefault(project: ProjectWithNamespace): boolean {
  const option = (project.settings as Record<string, unknown>).squash_option;
  return option === 'always' || option === 'default_on';
}

/** PUT /projects/:id/merge_requests/:iid: fields, people, state_event; a merged request takes no state change. */
export async function updateMergeRequest(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest, user: User, params: MergeRequestParams): Promise<MergeRequest> {
  checkText(params, false);
  const set: Record<string, unknown> = {};
  if (params.title !== undefined) set.title = params.title.trim();
  if (params.description !== undefined) set.description = params.description;
  if (params.target_branch !== undefined && params.target_branch !== mr.target_branch) {
    const exists = await readRef(cairn.catfile, projectRepoPath(cairn, project), `refs/heads/${params.target_branch}`);
    if (!exists) throw validationError(['Target branch does not exist']);
    if (params.target_branch === mr.source_branch && mr.source_project_id === mr.target_project_id) {
      throw validationError(["You can't use same project/branch for source and target"]);
    }
    set.target_branch = params.target_branch;
    set.merge_status = 'unchecked';
  }
  if (params.milestone_id !== undefined) {
    await checkMilestone(cairn, project, params.milestone_id);
    set.milestone_id = params.milestone_id || null;
  }
  if (params.squash !== undefined) set.squash = params.squash;
  if (params.discussion_locked !== undefined) set.discussion_locked = params.discussion_locked;
  if (params.allow_collaboration !== undefined || params.allow_maintainer_to_push !== undefined) {
    set.allow_collaboration = params.allow_collaboration ?? params.allow_maintainer_to_push;
  }
  if (params.remove_source_branch !== undefined) {
    set.merge_params = JSON.stringify({ ...(mr.merge_params as object), force_remove_source_branch: params.remove_source_branch });
  }
  const assignees = await existingUserIds(cairn, params.assignee_ids ?? (params.assignee_id !== undefined ? (params.assignee_id ? [params.assignee_id] : []) : undefined));
  const reviewers = await existingUserIds(cairn, params.reviewer_ids);
  if (assignees) await replaceUserLinks(cairn, 'merge_request_assignees', mr.id, assignees, user.id);
  if (reviewers) await replaceUserLinks(cairn, 'merge_request_reviewers', mr.id, reviewers, user.id);

  const labelsChanged = params.labelChange ? (await applyLabels(cairn.db, mr, user, params.labelChange)) : false;
  let current = mr;
  if (params.state_event) {
    current = await changeState(cairn, mr, params.state_event, user);
  }
  if (Object.keys(set).length || assignees || reviewers || labelsChanged) {
    const notes = updateNotes(mr, set);
    current = await cairn.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('merge_requests')
        .set({ ...set, updated_at: sql`now()` as any })
        .where('id', '=', mr.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      for (const body of notes) await addSystemNote(trx, mergeRequestNoteScope(mr), user.id, body);
      await queueHookEvent(cairn, trx, { kind: 'merge_request', projectId: row.target_project_id, id: row.id, userId: user.id, action: 'update', changes: rowChanges(mr, row, MERGE_REQUEST_HOOK_FIELDS) });
      return row;
    });
  }
  if (set.target_branch !== undefined || params.state_event === 'reopen') current = await refreshMergeRequest(cairn, current, project);
  if (set.description !== undefined || set.target_branch !== undefined) await syncClosingIssues(cairn, project, current);
  return current;
}

async function applyLabels(db: Database, mr: MergeRequest, user: User, change: LabelChange & { createMissing: boolean }): Promise<boolean> {
  const { labels, add_labels, remove_labels, createMissing } = change;
  if (labels === undefined && add_labels === undefined && remove_labels === undefined) return false;
  const result = await setLabels(db, { targetType: 'MergeRequest', targetId: mr.id, projectId: mr.target_project_id, userId: user.id, createMissing }, { labels, add_labels, remove_labels });
  return result.added.length > 0 || result.removed.length > 0;
}

/** close / reopen as one guarded update; asking for a change the state does not allow changes nothing. */
export async function changeState(cairn: Cairn, mr: MergeRequest, event: 'close' | 'reopen', user: User): Promise<MergeRequest> {
  if (!MERGE_REQUEST_MACHINE.can(event, mr.state_id)) return mr;
  if (event === 'reopen') {
    // Reopening would make a second open request for the same branches.
    const other = await cairn.db.selectFrom('merge_requests').select('iid')
      .where('target_project_id', '=', mr.target_project_id).where('source_project_id', '=', mr.source_project_id)
      .where('source_branch', '=', mr.source_branch).where('target_branch', '=', mr.target_branch)
      .where('state_id', '=', MR_STATE.opened).where('id', '<>', mr.id)
      .executeTakeFirst();
    if (other) throw conflictMessage(other.iid);
  }
  const updated = await cairn.db.transaction().execute(async (trx) => {
    const row = await transition(trx, MERGE_REQUEST_MACHINE, mr.id, event, {
      set: event === 'close'
        ? { closed_at: sql`now()` as any, closed_by_id: user.id, updated_at: sql`now()` as any }
        : { closed_at: null, closed_by_id: null, merge_status: 'unchecked', updated_at: sql`now()` as any },
    });
    // GitLab's change_status note, only by whoever made the change.
    if (row) {
      await addSystemNote(trx, mergeRequestNoteScope(mr), user.id, event === 'close' ? 'closed' : 'reopened');
      await notify(cairn, trx, { action: event === 'close' ? 'close_merge_request' : 'reopen_merge_request', target: { type: 'MergeRequest', id: mr.id }, actorId: user.id });
      await queueHookEvent(cairn, trx, { kind: 'merge_request', projectId: row.target_project_id, id: row.id, userId: user.id, action: event, changes: rowChanges(mr, row, ['state_id', 'closed_at', 'updated_at']) });
    }
    return row;
  });
  return updated ?? (await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', mr.id).executeTakeFirstOrThrow());
}

/** DELETE: the row and what hangs off it; the refs it kept in the repository go with it. */
export async function deleteMergeRequest(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<void> {
  await cairn.db.transaction().execute(async (trx) => {
    await deleteWorkItemDependents(trx, 'MergeRequest', mr.id);
    await trx.deleteFrom('merge_requests').where('id', '=', mr.id).execute();
  });
  const gitDir = projectRepoPath(cairn, project);
  await deleteRef(gitDir, headRef(mr.iid));
  await deleteRef(gitDir, mergeRefName(mr.iid));
}

/** The single form's computed parts: changes_count (GitLab caps the count shown at 1000 as "1000+"), diverged commits. */
export async function mergeRequestGitFacts(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest, opts: { diverged?: boolean }) {
  const gitDir = projectRepoPath(cairn, project);
  let changesCount: string | null = null;
  if (mr.head_sha && mr.base_sha) {
    const n = await changedPathCount(gitDir, mr.base_sha, mr.head_sha);
    changesCount = n > 1000 ? '1000+' : String(n);
  }
  let divergedCommitsCount: number | undefined;
  if (opts.diverged) {
    const target = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.target_branch}`);
    divergedCommitsCount = target && mr.head_sha ? (await divergence(gitDir, target, mr.head_sha)).behind : 0;
  }
  return { changesCount, divergedCommitsCount };
}

/** After a push: open requests whose source or target branch moved are refreshed. */
export async function refreshAfterPush(cairn: Cairn, event: PostReceiveEvent): Promise<void> {
  const branches = event.changes.filter((c) => c.ref.startsWith('refs/heads/')).map((c) => c.ref.slice('refs/heads/'.length));
  if (!branches.length) return;
  const rows = await cairn.db
    .selectFrom('merge_requests')
    .selectAll()
    .where('state_id', '=', MR_STATE.opened)
    .where((eb) =>
      eb.or([
        eb.and([eb('source_project_id', '=', event.projectId), eb('source_branch', 'in', branches)]),
        eb.and([eb('target_project_id', '=', event.projectId), eb('target_branch', 'in', branches)]),
      ]),
    )
    .execute();
  for (const mr of rows) {
    const refreshed = await refreshMergeRequest(cairn, mr);
    const pushedSource = mr.source_project_id === event.projectId && branches.includes(mr.source_branch);
    if (pushedSource && mr.head_sha && refreshed.head_sha && refreshed.head_sha !== mr.head_sha) {
      await noteAddedCommits(cairn, refreshed, mr.head_sha, event.userId);
    }
    // The pushed head gets its merge request pipeline (the push's own journal covers a crash).
    const pushed = pushedSource ? event.changes.find((c) => c.ref === `refs/heads/${mr.source_branch}`)?.newSha : undefined;
    if (pushed && refreshed.state_id === MR_STATE.opened && refreshed.head_sha === pushed) {
      await runMergeRequestPipeline(cairn, await journalMergeRequestPipeline(cairn, refreshed, pushed, event.userId));
    }
  }
}

/**
 * GitLab's "added N commits" note after a push to the source branch: the commits the merge
 * request has now that it did not have at `oldHead`, oldest first, with a link to compare with
 * the previous version.
 */
async function noteAddedCommits(cairn: Cairn, mr: MergeRequest, oldHead: string, userId: number | null): Promise<void> {
  const project = await findProjectRow(cairn.db, mr.target_project_id);
  if (!project || !mr.head_sha) return;
  const gitDir = projectRepoPath(cairn, project);
  // New since oldHead, and in the merge request (not already in the target branch).
  const [sincePush, ofMergeRequest] = await Promise.all([
    commitsBetween(gitDir, oldHead, mr.head_sha).catch(() => [] as string[]),
    commitsBetween(gitDir, mr.base_sha, mr.head_sha).catch(() => [] as string[]),
  ]);
  const inMergeRequest = new Set(ofMergeRequest);
  const oids = sincePush.filter((oid) => inMergeRequest.has(oid));
  if (!oids.length) return;
  const commits = await readCommitsOnce(gitDir, oids);
  const escape = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  const items = commits.map((c) => `<li>${c.oid.slice(0, 8)} - ${escape(c.message.split('\n')[0] ?? '')}</li>`).join('');
  const count = commits.length;
  const path = `/${projectFullPath(project)}/-/merge_requests/${mr.iid}/diffs?start_sha=${oldHead}`;
  const body = [`added ${count} commit${count === 1 ? '' : 's'}`, `<ul>${items}</ul>`, `[Compare with previous version](${path})`].join('\n\n');
  await cairn.db.transaction().execute(async (trx) => {
    await addSystemNote(trx, mergeRequestNoteScope(mr), userId, body);
    await notify(cairn, trx, {
      action: 'push_to_merge_request',
      target: { type: 'MergeRequest', id: mr.id },
      actorId: userId,
      commits: commits.map((c) => ({ id: c.oid, title: c.message.split('\n')[0] ?? '' })),
    });
  });
}

/** Throws GitLab's 404 for a merge request that does not exist in the project. */
export function mergeRequestNotFound(): ApiError {
  return apiError(404, '404 Merge Request Not Found');
}

/** Pushes (git over HTTP, the commits and files APIs) refresh the merge requests whose branches moved. */
export function registerMergeRequestHooks(cairn: Cairn) {
  cairn.postReceiveHooks.push((event) => refreshAfterPush(cairn, event));
}
