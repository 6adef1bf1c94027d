import { rowChanges } from '../hooks/changes.js';
import { queueHookEvent } from '../hooks/events.js';
import { assertRepositoryWritable } from '../policies/code.js';
import { withWriteLease } from './repository_writes.js';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { MergeRequest } from '../db/schema/work_items.js';
import { findProjectRow, projectFullPath, type ProjectWithNamespace } from '../finders/projects.js';
import { buildMerge, isAncestor, publish, rebaseOnto } from '../git/merge.js';
import { readRef } from '../git/refs.js';
import { fetchCommitFrom } from '../git/commits.js';
import { ZERO_OID } from '../git/validate.js';
import { compareAndSwapRef } from '../git/write.js';
import { beginInlineJob, defineJob, enqueue, finishInlineJob, updateInlineJob } from '../jobs/queue.js';
import { can, effectiveLevel, type ProjectSubject } from '../policies/abilities.js';
import { projectAccessLevel } from '../finders/access_levels.js';
import { canMergeToBranch, canPushToBranch } from '../policies/branches.js';
import { ApiError, apiError, forbidden, unauthorized } from '../plugins/errors.js';
import { isDraftTitle } from '../presenters/merge_requests.js';
import { mergeRefName, mergeRequestNoteScope, refreshMergeRequest } from './merge_requests.js';
import { MERGE_REQUEST_MACHINE, MR_STATE } from '../db/work_item_states.js';
import { transition } from '../db/state_machine.js';
import { addSystemNote } from './notes.js';
import { hasUnresolvedThreads } from '../finders/notes.js';
import { enqueueClosingIssues } from './closing_issues.js';
import { projectRepoPath, recordRefActivity } from './projects.js';
import { endRefJournal, journalRefUpdates, runPostReceiveHooks } from './post_receive.js';
import { notify } from './notify.js';
import { findUserById } from '../finders/users.js';

/**
 * Accepting a merge request, its merge ref, merge-when-pipeline-succeeds and rebase, as the spec's
 * state table and error table have them. A merge takes the request from opened to locked with one
 * guarded UPDATE (only one caller, in any process, gets it), builds the merge commit, publishes
 * it with a compare-and-swap on the target branch, then records merged. A crash after the
 * compare-and-swap leaves it locked with its commit in the target; `reconcileLocked` finishes it.
 */

export interface MergeOptions {
  sha?: string;
  squash?: boolean;
  squash_commit_message?: string;
  merge_commit_message?: string;
  should_remove_source_branch?: boolean;
  merge_when_pipeline_succeeds?: boolean;
}

/** May `user` accept (merge) this request: merge rights on the target branch, protected branches honoured. */
export async function canAccept(cairn: Cairn, subject: ProjectSubject & { project: ProjectWithNamespace }, user: User | null, mr: MergeRequest): Promise<boolean> {
  if (!user || !can(user, 'push_code', subject)) return false;
  return canMergeToBranch(cairn.db, subject.project, user, subject.accessLevel, mr.target_branch);
}

function settings(project: ProjectWithNamespace): Record<string, unknown> {
  return project.settings as Record<string, unknown>;
}

/** GitLab's default merge commit message. */
export function defaultMergeMessage(project: ProjectWithNamespace, mr: MergeRequest): string {
  const ref = `${projectFullPath(project)}!${mr.iid}`;
  return `Merge branch '${mr.source_branch}' into '${mr.target_branch}'\n\n${mr.title}\n\nSee merge request ${ref}`;
}

const isConflicted = (mr: MergeRequest) => mr.has_conflicts || mr.merge_status === 'cannot_be_merged';

/** GitLab's only_allow_merge_if_all_discussions_are_resolved: unresolved threads block the merge. */
async function discussionsBlock(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<boolean> {
  return settings(project).only_allow_merge_if_all_discussions_are_resolved === true && (await hasUnresolvedThreads(cairn.db, mr.id));
}

/** The head pipeline when it runs at the head commit (GitLab's diff_head_pipeline). */
async function headPipelineOf(cairn: Cairn, mr: MergeRequest): Promise<{ status: string; sha: string } | undefined> {
  if (mr.head_pipeline_id === null || !mr.head_sha) return undefined;
  const p = await cairn.db.selectFrom('ci_pipelines').select(['status', 'sha']).where('id', '=', mr.head_pipeline_id).executeTakeFirst();
  return p && p.sha === mr.head_sha ? p : undefined;
}

/**
 * GitLab's mergeable_ci_state?: with only_allow_merge_if_pipeline_succeeds, the head pipeline must
 * have succeeded (or been skipped, where allow_merge_on_skipped_pipeline says so); no pipeline blocks.
 */
async function pipelineBlocks(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<boolean> {
  if (settings(project).only_allow_merge_if_pipeline_succeeds !== true) return false;
  const p = await headPipelineOf(cairn, mr);
  if (!p) return true;
  if (p.status === 'skipped' && settings(project).allow_merge_on_skipped_pipeline === true) return false;
  return p.status !== 'success';
}

/** A fast-forward merge (merge methods ff and rebase_merge) needs the target in the source's history. */
async function needsRebase(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<boolean> {
  const method = String(settings(project).merge_method ?? 'merge');
  if ((method !== 'ff' && method !== 'rebase_merge') || !mr.head_sha) return false;
  const gitDir = projectRepoPath(cairn, project);
  const targetOid = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.target_branch}`);
  return !!targetOid && !(await isAncestor(gitDir, targetOid, mr.head_sha));
}

/** What keeps a merge request from being merged, in GitLab's detailed_merge_status words. */
export type MergeBlocker = 'not_open' | 'not_allowed' | 'draft_status' | 'checking' | 'conflict' | 'discussions_not_resolved' | 'ci_must_pass' | 'need_rebase';

/**
 * Every reason the merge of `mr` by `user` would be refused now, by the same checks as
 * acceptMergeRequest (the API's PUT .../merge) makes, for pages that show why a merge request
 * cannot be merged. Empty: the merge would go ahead. Pass the request as refreshMergeRequest
 * left it when its merge status is unchecked ('checking' otherwise).
 */
export async function mergeBlockers(cairn: Cairn, subject: ProjectSubject & { project: ProjectWithNamespace }, user: User | null, mr: MergeRequest): Promise<MergeBlocker[]> {
  if (mr.state_id !== MR_STATE.opened) return ['not_open'];
  const out: MergeBlocker[] = [];
  if (!(await canAccept(cairn, subject, user, mr))) out.push('not_allowed');
  if (isDraftTitle(mr.title)) out.push('draft_status');
  if (mr.merge_status === 'unchecked' || mr.merge_status === 'cannot_be_merged_recheck' || mr.merge_status === 'checking') out.push('checking');
  else if (isConflicted(mr)) out.push('conflict');
  const [threads, pipeline, rebase] = await Promise.all([
    discussionsBlock(cairn, subject.project, mr),
    pipelineBlocks(cairn, subject.project, mr),
    isConflicted(mr) ? false : needsRebase(cairn, subject.project, mr),
  ]);
  if (threads) out.push('discussions_not_resolved');
  if (pipeline) out.push('ci_must_pass');
  if (rebase) out.push('need_rebase');
  return out;
}

/** The spec's 405 cases; 406 for conflicts; 409 for a stale sha. */
function assertMergeable(mr: MergeRequest, opts: MergeOptions) {
  if (mr.state_id !== MR_STATE.opened) throw apiError(405, '405 Method Not Allowed');
  if (isDraftTitle(mr.title)) throw apiError(405, '405 Method Not Allowed');
  if (isConflicted(mr)) throw apiError(406, 'Branch cannot be merged');
  if (opts.sha !== undefined && opts.sha !== mr.head_sha) throw apiError(409, 'SHA does not match HEAD of source branch: ' + (mr.head_sha ?? ''));
}

/** PUT .../merge. Returns the merge request as it is afterwards. */
export async function acceptMergeRequest(
  cairn: Cairn,
  subject: ProjectSubject & { project: ProjectWithNamespace },
  user: User,
  initial: MergeRequest,
  opts: MergeOptions,
): Promise<MergeRequest> {
  if (initial.state_id === MR_STATE.merged || initial.state_id === MR_STATE.closed) throw apiError(405, '405 Method Not Allowed');
  if (!(await canAccept(cairn, subject, user, initial))) throw unauthorized();
  // Merge status is recomputed if the branches moved since it was last checked.
  const mr = initial.merge_status === 'can_be_merged' ? initial : await refreshMergeRequest(cairn, initial, subject.project);
  assertMergeable(mr, opts);
  const project = subject.project;
  // GitLab's mergeable_discussions_state?: with the project's setting on, unresolved threads block the merge (405).
  if (await discussionsBlock(cairn, project, mr)) throw apiError(405, '405 Method Not Allowed');
  if (opts.squash && settings(project).squash_option === 'never') throw apiError(400, 'Squashing not allowed: This project doesn\'t allow you to squash commits when merging.');
  const squash = settings(project).squash_option === 'always' ? true : opts.squash ?? mr.squash;

  if (opts.merge_when_pipeline_succeeds && ((await headPipelineActive(cairn, mr)) || (await awaitsFirstPipeline(cairn, project, mr)))) {
    // A pipeline is running for the head, or the project needs one that is yet to come: merge
    // when it succeeds (onPipelineSucceeded). With nothing to wait for, the merge happens now.
    const flagged = await cairn.db.transaction().execute(async (trx) => {
      const row = await transition(trx, MERGE_REQUEST_MACHINE, mr.id, 'autoMerge', {
        set: {
          merge_when_pipeline_succeeds: true,
          merge_user_id: user.id,
          merge_params: JSON.stringify({ ...(mr.merge_params as object), ...mergeParams(opts, squash) }),
          updated_at: sql`now()` as any,
        },
      });
      if (row && !mr.merge_when_pipeline_succeeds) {
        await notify(cairn, trx, { action: 'merge_when_pipeline_succeeds', target: { type: 'MergeRequest', id: mr.id }, actorId: user.id });
      }
      return row;
    });
    if (!flagged) throw apiError(405, '405 Method Not Allowed');
    return flagged;
  }
  // GitLab's mergeable_ci_state?: a pipeline that must succeed and has not blocks an immediate merge (405).
  if (await pipelineBlocks(cairn, project, mr)) throw apiError(405, '405 Method Not Allowed');
  // A merge writes the target repository: refused while it moves, and held against a move starting.
  assertRepositoryWritable(project);
  return withWriteLease(cairn.db, { type: 'Project', id: project.id }, (lease) =>
    performMerge(cairn, { ...project, repository_storage: lease.storage }, user, mr, { ...opts, squash }),
  );
}

/** Is the head pipeline (at the head commit) still to finish? Then merge-when-pipeline-succeeds waits for it; otherwise the merge happens now. */
async function headPipelineActive(cairn: Cairn, mr: MergeRequest): Promise<boolean> {
  const p = await headPipelineOf(cairn, mr);
  return !!p && !['success', 'failed', 'canceled', 'skipped'].includes(p.status);
}

/**
 * GitLab's auto-merge without a pipeline: where pipelines must succeed, a head with none yet
 * waits for its first one (a 405 would refuse a merge that is only early); elsewhere nothing
 * stops an immediate merge.
 */
async function awaitsFirstPipeline(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<boolean> {
  return settings(project).only_allow_merge_if_pipeline_succeeds === true && !(await headPipelineOf(cairn, mr));
}

function mergeParams(opts: MergeOptions, squash: boolean) {
  return {
    ...(opts.should_remove_source_branch !== undefined ? { should_remove_source_branch: opts.should_remove_source_branch } : {}),
    ...(opts.merge_commit_message ? { commit_message: opts.merge_commit_message } : {}),
    ...(opts.squash_commit_message ? { squash_commit_message: opts.squash_commit_message } : {}),
    squash,
  };
}

/** How many times a merge is built when other merges keep moving the target under it. */
const MERGE_ATTEMPTS = 5;

/** The merge itself: lock, build, compare-and-swap, record. */
async function performMerge(cairn: Cairn, project: ProjectWithNamespace, user: User, mr: MergeRequest, opts: MergeOptions & { squash: boolean }): Promise<MergeRequest> {
  const { db } = cairn;
  // If this process dies while the request is locked, the journal finishes the merge (when its
  // commit reached the target) or opens the request again. The lock and its journal commit
  // together: a crash between two separate writes left a request locked with no journal.
  const journalPayload: MergeJournal = { mergeRequestId: mr.id, userId: user.id, opts, built: null };
  const journal = await db.transaction().execute(async (trx) => {
    const locked = await transition(trx, MERGE_REQUEST_MACHINE, mr.id, 'lock', {
      set: { merge_error: null, updated_at: sql`now()` as any },
      where: (qb) => qb.where(sql<boolean>`head_sha is not distinct from ${mr.head_sha}`),
    });
    return locked ? beginInlineJob(db, MERGE_JOURNAL_JOB, { ...journalPayload }, { trx }) : null;
  });
  // Someone else is merging it, or it changed under us.
  if (journal === null) {
    const now = await db.selectFrom('merge_requests').selectAll().where('id', '=', mr.id).executeTakeFirstOrThrow();
    if (now.state_id === MR_STATE.merged || now.state_id === MR_STATE.locked) throw apiError(405, '405 Method Not Allowed');
    if (opts.sha !== undefined && opts.sha !== now.head_sha) throw apiError(409, 'SHA does not match HEAD of source branch: ' + (now.head_sha ?? ''));
    throw apiError(406, 'Branch cannot be merged');
  }
  const unlock = async (error: string | null) =>
    transition(db, MERGE_REQUEST_MACHINE, mr.id, 'unlock', { set: { merge_error: error, updated_at: sql`now()` as any } });

  const gitDir = projectRepoPath(cairn, project);
  try {
    const method = String(settings(project).merge_method ?? 'merge');
    const ffOnly = method === 'ff' || method === 'rebase_merge';
    const committer = { name: user.name, email: user.commit_email || user.email };
    // Built on the target as it is, published only if the target is still there (compare-and-swap).
    // When another merge moved the target in between, this one is built again on the new target:
    // the lock above keeps it this caller's, so it still lands at most once.
    let outcome: Awaited<ReturnType<typeof buildMerge>> | null = null;
    let base = ZERO_OID;
    for (let attempt = 0; ; attempt++) {
      const targetOid = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.target_branch}`);
      if (!targetOid || !mr.head_sha) {
        await unlock('Target branch does not exist');
        throw apiError(406, 'Branch cannot be merged');
      }
      if (ffOnly && !(await isAncestor(gitDir, targetOid, mr.head_sha))) {
        await unlock(null);
        throw apiError(406, 'Branch cannot be merged');
      }
      outcome = await buildMerge(gitDir, {
        targetOid,
        sourceOid: mr.head_sha,
        mergeMessage: method === 'ff' ? null : opts.merge_commit_message || defaultMergeMessage(project, mr),
        squash: opts.squash ? { message: opts.squash_commit_message || mr.title, author: committer } : null,
        committer,
      });
      if (outcome.status === 'conflict') {
        await db.updateTable('merge_requests').set({ has_conflicts: true, merge_status: 'cannot_be_merged' }).where('id', '=', mr.id).execute();
        await unlock(null);
        throw apiError(406, 'Branch cannot be merged');
      }
      if (outcome.status === 'empty') {
        await unlock('Merge request is empty');
        throw apiError(406, 'Branch cannot be merged');
      }
      journalPayload.built = { head: outcome.head, mergeCommit: outcome.mergeCommit, squashCommit: outcome.squashCommit, base: targetOid };
      await updateInlineJob(db, journal, { ...journalPayload });
      if (await publish(gitDir, `refs/heads/${mr.target_branch}`, outcome.head, targetOid)) {
        base = targetOid;
        break;
      }
      if (attempt + 1 >= MERGE_ATTEMPTS) {
        // The target kept moving: nothing was written; the caller may try again.
        await db.updateTable('merge_requests').set({ merge_status: 'unchecked' }).where('id', '=', mr.id).execute();
        await unlock(null);
        throw apiError(406, 'Branch cannot be merged');
      }
    }
    // The target branch moved: its post-receive work (its pipeline, the merge requests that
    // target it...) is journalled now, so a crash from here on still has it run.
    const targetMoved = { ref: `refs/heads/${mr.target_branch}`, oldSha: base, newSha: outcome.head };
    const refJournal = await journalRefUpdates(cairn, project.id, user.id, [targetMoved]);
    try {
      const merged = await recordMerged(cairn, mr, user, { mergeCommit: outcome.mergeCommit, squashCommit: outcome.squashCommit ?? null }, opts);
      if (!merged) throw new Error('the merge request was unlocked during its merge');
      await afterMerge(cairn, project, user, merged, opts);
      await recordRefActivity(db, project, { branchWritten: true });
      await runPostReceiveHooks(cairn, { projectId: project.id, userId: user.id, changes: [targetMoved], pushOptions: [] });
      return merged;
    } finally {
      await endRefJournal(cairn, refJournal).catch(() => undefined);
    }
  } catch (e) {
    if (!(e instanceof ApiError)) await unlock('Something went wrong during merge').catch(() => undefined);
    throw e;
  } finally {
    await finishInlineJob(db, journal).catch(() => undefined);
  }
}

/**
 * A locked merge request whose merge commit is in its target becomes merged, with the job that
 * closes the issues it names, so a crash cannot lose the closing. Undefined when it was not
 * locked any more.
 */
async function recordMerged(
  cairn: Cairn,
  mr: MergeRequest,
  user: User,
  built: { mergeCommit: string | null; squashCommit: string | null },
  opts: MergeOptions & { squash: boolean },
): Promise<MergeRequest | undefined> {
  return cairn.db.transaction().execute(async (trx) => {
    const row = await transition(trx, MERGE_REQUEST_MACHINE, mr.id, 'merge', {
      set: {
        merged_at: sql`now()` as any,
        merge_user_id: user.id,
        merge_commit_sha: built.mergeCommit,
        squash_commit_sha: built.squashCommit,
        squash: opts.squash,
        merge_when_pipeline_succeeds: false,
        merge_params: JSON.stringify({ ...(mr.merge_params as object), ...mergeParams(opts, opts.squash) }),
        updated_at: sql`now()` as any,
      },
    });
    if (!row) return undefined;
    await addSystemNote(trx, mergeRequestNoteScope(mr), user.id, 'merged');
    await enqueueClosingIssues(trx, row, user.id);
    await notify(cairn, trx, { action: 'merge_merge_request', target: { type: 'MergeRequest', id: mr.id }, actorId: user.id });
    await queueHookEvent(cairn, trx, { kind: 'merge_request', projectId: row.target_project_id, id: row.id, userId: user.id, action: 'merge', changes: rowChanges(mr, row, ['state_id', 'updated_at']) });
    return row;
  });
}

const MERGE_JOURNAL_JOB = 'merge_request.merge_journal';

interface MergeJournal {
  mergeRequestId: number;
  userId: number;
  opts: MergeOptions & { squash: boolean };
  /** The commits of the last attempt, written before it was published, and the target it was built on. */
  built: { head: string; mergeCommit: string | null; squashCommit: string | null; base?: string } | null;
}

/**
 * A merge whose process died while the request was locked: merged, with the commits of the
 * attempt that reached the target (and the source branch removed when asked), if its head is in
 * the target branch; opened again otherwise.
 */
defineJob(MERGE_JOURNAL_JOB, async (cairn, payload) => {
  const p = payload as MergeJournal;
  const { db } = cairn;
  const mr = await db.selectFrom('merge_requests').selectAll().where('id', '=', p.mergeRequestId).executeTakeFirst();
  if (!mr || mr.state_id !== MR_STATE.locked) return;
  const project = await findProjectRow(db, mr.target_project_id);
  const user = await findUserById(db, p.userId);
  let landed = false;
  if (project && p.built) {
    const target = await readRef(cairn.catfile, projectRepoPath(cairn, project), `refs/heads/${mr.target_branch}`);
    landed = !!target && (await isAncestor(projectRepoPath(cairn, project), p.built.head, target).catch(() => false));
  }
  if (landed && project && user && p.built) {
    const merged = await recordMerged(cairn, mr, user, p.built, p.opts);
    if (merged) await afterMerge(cairn, project, user, merged, p.opts);
    // The process died before it journalled the target's post-receive work (hooks that create
    // things skip what exists: `resumed`).
    const change = { ref: `refs/heads/${mr.target_branch}`, oldSha: p.built.base ?? ZERO_OID, newSha: p.built.head };
    await runPostReceiveHooks(cairn, { projectId: project.id, userId: user.id, changes: [change], pushOptions: [], resumed: true });
    return;
  }
  await transition(db, MERGE_REQUEST_MACHINE, mr.id, 'unlock', { set: { merge_error: null, updated_at: sql`now()` as any } });
});

/** Removes the source branch when asked (should_remove_source_branch, or force_remove_source_branch set at creation). */
async function afterMerge(cairn: Cairn, project: ProjectWithNamespace, user: User, mr: MergeRequest, opts: MergeOptions) {
  const params = mr.merge_params as Record<string, unknown>;
  const remove = opts.should_remove_source_branch ?? (params.force_remove_source_branch === true);
  if (!remove || mr.source_project_id === null) return;
  const source = mr.source_project_id === project.id ? project : await findProjectRow(cairn.db, mr.source_project_id);
  if (!source) return;
  const gitDir = projectRepoPath(cairn, source);
  const oid = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.source_branch}`);
  // Only the head that was merged is removed; a branch that moved on since is kept.
  if (!oid || oid !== mr.head_sha || source.default_branch === mr.source_branch) return;
  const level = effectiveLevel(user, await projectAccessLevel(cairn.db, user.id, source));
  const decision = await canPushToBranch(cairn.db, source, user, level, mr.source_branch, { deletion: true });
  if (!decision.allowed) return;
  await compareAndSwapRef(gitDir, `refs/heads/${mr.source_branch}`, ZERO_OID, oid);
  // As a push deleting it: other merge requests from the branch see it gone.
  await runPostReceiveHooks(cairn, { projectId: source.id, userId: user.id, changes: [{ ref: `refs/heads/${mr.source_branch}`, oldSha: oid, newSha: ZERO_OID }], pushOptions: [] });
}

/** A merge left locked by a crash: merged if its head is in the target, opened again otherwise. */
export async function reconcileLocked(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<MergeRequest> {
  if (mr.state_id !== MR_STATE.locked || Date.now() - new Date(mr.updated_at).getTime() < 60_000) return mr;
  const gitDir = projectRepoPath(cairn, project);
  const target = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.target_branch}`);
  const merged = !!(target && mr.head_sha && (await isAncestor(gitDir, mr.head_sha, target)));
  const row = await cairn.db.transaction().execute(async (trx) => {
    const done = await transition(trx, MERGE_REQUEST_MACHINE, mr.id, merged ? 'merge' : 'unlock', { set: merged ? { merged_at: sql`now()` as any } : {} });
    if (done && merged) {
      await enqueueClosingIssues(trx, done, done.merge_user_id);
      await notify(cairn, trx, { action: 'merge_merge_request', target: { type: 'MergeRequest', id: done.id }, actorId: done.merge_user_id });
      await queueHookEvent(cairn, trx, { kind: 'merge_request', projectId: done.target_project_id, id: done.id, userId: done.merge_user_id, action: 'merge', changes: rowChanges(mr, done, ['state_id', 'updated_at']) });
    }
    return done;
  });
  return row ?? mr;
}

/** POST .../cancel_merge_when_pipeline_succeeds: 401 / 405 / 406 as the spec's error table. */
export async function cancelMergeWhenPipelineSucceeds(cairn: Cairn, subject: ProjectSubject & { project: ProjectWithNamespace }, user: User, mr: MergeRequest): Promise<MergeRequest> {
  if (mr.author_id !== user.id && !can(user, 'update_merge_request', subject)) throw unauthorized();
  if (mr.state_id === MR_STATE.merged || mr.state_id === MR_STATE.closed) throw apiError(405, '405 Method Not Allowed');
  if (!mr.merge_when_pipeline_succeeds) throw apiError(406, '406 Not Acceptable');
  const row = await cairn.db
    .updateTable('merge_requests')
    .set({ merge_when_pipeline_succeeds: false, merge_user_id: null, updated_at: sql`now()` as any })
    .where('id', '=', mr.id)
    .where('merge_when_pipeline_succeeds', '=', true)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw apiError(406, '406 Not Acceptable');
  return row;
}

/**
 * The hook CI calls when a pipeline finishes successfully: merge requests waiting on that head
 * merge now, as the user who asked, with the options they gave.
 */
export async function onPipelineSucceeded(cairn: Cairn, projectId: number, sha: string): Promise<void> {
  const waiting = await cairn.db
    .selectFrom('merge_requests').selectAll()
    .where('target_project_id', '=', projectId).where('head_sha', '=', sha)
    .where('state_id', '=', MR_STATE.opened).where('merge_when_pipeline_succeeds', '=', true)
    .execute();
  for (const mr of waiting) {
    const project = await findProjectRow(cairn.db, mr.target_project_id);
    const user = mr.merge_user_id ? await findUserById(cairn.db, mr.merge_user_id) : undefined;
    if (!project || !user) continue;
    const p = mr.merge_params as Record<string, any>;
    await performMerge(cairn, project, user, mr, {
      squash: !!p.squash,
      merge_commit_message: p.commit_message,
      squash_commit_message: p.squash_commit_message,
      should_remove_source_branch: p.should_remove_source_branch,
    }).catch(() => undefined);
  }
}

/** GET .../merge_ref: the merge of source into target at refs/merge-requests/:iid/merge; the target does not move. */
export async function writeMergeRef(cairn: Cairn, project: ProjectWithNamespace, mr: MergeRequest): Promise<string> {
  if (mr.state_id === MR_STATE.merged) throw apiError(400, 'Merge request is already merged');
  const gitDir = projectRepoPath(cairn, project);
  const targetOid = await readRef(cairn.catfile, gitDir, `refs/heads/${mr.target_branch}`);
  if (!targetOid || !mr.head_sha) throw apiError(400, 'Merge request is not mergeable');
  const ident = { name: 'Cairn', email: 'noreply@cairn.local' };
  const outcome = await buildMerge(gitDir, { targetOid, sourceOid: mr.head_sha, mergeMessage: defaultMergeMessage(project, mr), committer: ident });
  if (outcome.status === 'conflict') throw apiError(400, 'Merge request is not mergeable');
  if (outcome.status === 'empty') throw apiError(400, 'Merge request is empty');
  const ref = mergeRefName(mr.iid);
  const current = await readRef(cairn.catfile, gitDir, ref);
  if (current !== outcome.head) await publish(gitDir, ref, outcome.head, current ?? ZERO_OID);
  await cairn.db.updateTable('merge_requests').set({ merge_ref_sha: outcome.head }).where('id', '=', mr.id).execute();
  return outcome.head;
}

/** PUT .../rebase: 403 without push rights on the source branch; the rebase runs in the queue (202). */
export async function requestRebase(cairn: Cairn, user: User, mr: MergeRequest, opts: { skipCi?: boolean }): Promise<void> {
  if (mr.source_project_id === null) throw forbidden('Cannot push to source branch');
  const source = await findProjectRow(cairn.db, mr.source_project_id);
  if (!source) throw forbidden('Cannot push to source branch');
  const level = effectiveLevel(user, await projectAccessLevel(cairn.db, user.id, source));
  const decision = await canPushToBranch(cairn.db, source, user, level, mr.source_branch);
  if (!decision.allowed) throw forbidden('Cannot push to source branch');
  if (mr.state_id !== MR_STATE.opened) throw apiError(405, '405 Method Not Allowed');
  assertRepositoryWritable(source);
  await cairn.db.transaction().execute(async (trx) => {
    const started = await trx.updateTable('merge_requests').set({ rebase_in_progress: true, merge_error: null })
      .where('id', '=', mr.id).where('rebase_in_progress', '=', false).returning('id').executeTakeFirst();
    if (!started) throw new ApiError(409, { message: 'Rebase task is already in progress' });
    await enqueue(trx, 'merge_request.rebase', { mergeRequestId: mr.id, userId: user.id, skipCi: !!opts.skipCi });
  });
}

const REBASE_FAILED = 'Rebase failed: Rebase locally, resolve all conflicts, then push the branch.';

defineJob('merge_request.rebase', async (cairn, payload) => {
  const { db } = cairn;
  const mr = await db.selectFrom('merge_requests').selectAll().where('id', '=', payload.mergeRequestId).executeTakeFirst();
  if (!mr) return;
  const finish = (error: string | null) =>
    db.updateTable('merge_requests').set({ rebase_in_progress: false, merge_error: error, updated_at: sql`now()` as any }).where('id', '=', mr.id).execute();
  try {
    const target = await findProjectRow(db, mr.target_project_id);
    const source = mr.source_project_id !== null ? await findProjectRow(db, mr.source_project_id) : undefined;
    const user = await findUserById(db, payload.userId);
    if (!target || !source || !user) return void (await finish(REBASE_FAILED));
    const targetDir = projectRepoPath(cairn, target);
    const sourceDir = projectRepoPath(cairn, source);
    const ontoOid = await readRef(cairn.catfile, targetDir, `refs/heads/${mr.target_branch}`);
    const headOid = await readRef(cairn.catfile, sourceDir, `refs/heads/${mr.source_branch}`);
    if (!ontoOid || !headOid) return void (await finish(REBASE_FAILED));
    if (sourceDir !== targetDir) {
      await fetchCommitFrom(sourceDir, targetDir, ontoOid, `refs/merge-requests/${mr.iid}/rebase-onto`);
    }
    const out = await rebaseOnto(cairn.catfile, sourceDir, ontoOid, headOid, { name: user.name, email: user.commit_email || user.email });
    if (out.status === 'conflict') return void (await finish(REBASE_FAILED));
    if (out.status === 'rebased' && !(await publish(sourceDir, `refs/heads/${mr.source_branch}`, out.head, headOid))) {
      return void (await finish('Rebase failed: the source branch moved while it was being rebased. Try again.'));
    }
    await finish(null);
    const fresh = await db.selectFrom('merge_requests').selectAll().where('id', '=', mr.id).executeTakeFirstOrThrow();
    await refreshMergeRequest(cairn, fresh, target);
    if (out.status === 'rebased') {
      const event = { projectId: source.id, userId: user.id, changes: [{ ref: `refs/heads/${mr.source_branch}`, oldSha: headOid, newSha: out.head }], pushOptions: payload.skipCi ? ['ci.skip'] : [] };
      await Promise.allSettled(cairn.postReceiveHooks.map((hook) => hook(event)));
    }
  } catch (e) {
    await finish(REBASE_FAILED);
    throw e;
  }
});

/**
 * Approvals (GitLab Free's optional approvals): developers and up approve once, authors only when
 * the project allows it (merge_requests_author_approval). Approving twice, or without the right,
 * is 401 as GitLab answers.
 */
export async function approve(cairn: Cairn, subject: ProjectSubject, user: User, mr: MergeRequest, sha: string | undefined): Promise<void> {
  const settings = (subject.project.settings ?? {}) as Record<string, unknown>;
  // GitLab's find_merge_request_with_access(:approve_merge_request): without the ability, 403;
  // the approval service's refusals (not open, the author, approved already) are 401.
  assertMayApprove(user, subject);
  if (mr.state_id !== MR_STATE.opened) throw unauthorized();
  if (mr.author_id === user.id && settings.merge_requests_author_approval !== true) throw unauthorized();
  if (sha !== undefined && sha !== mr.head_sha) throw apiError(409, 'SHA does not match HEAD of source branch: ' + (mr.head_sha ?? ''));
  const inserted = await cairn.db.transaction().execute(async (trx) => {
    const row = await trx.insertInto('merge_request_approvals').values({ merge_request_id: mr.id, user_id: user.id })
      .onConflict((oc) => oc.doNothing()).returning('user_id').executeTakeFirst();
    if (row) await addSystemNote(trx, mergeRequestNoteScope(mr), user.id, 'approved this merge request');
    return row;
  });
  if (!inserted) throw unauthorized();
}

/** GitLab's approve_merge_request (update_merge_request): 403 without it. */
function assertMayApprove(user: User, subject: ProjectSubject): void {
  if (!can(user, 'update_merge_request', subject)) throw forbidden();
}

export async function unapprove(cairn: Cairn, subject: ProjectSubject, user: User, mr: MergeRequest): Promise<void> {
  // As approving: 403 without the ability, then 404 when the caller had not approved it.
  assertMayApprove(user, subject);
  const removed = await cairn.db.transaction().execute(async (trx) => {
    const row = await trx.deleteFrom('merge_request_approvals').where('merge_request_id', '=', mr.id).where('user_id', '=', user.id).returning('user_id').executeTakeFirst();
    if (row) await addSystemNote(trx, mergeRequestNoteScope(mr), user.id, 'unapproved this merge request');
    return row;
  });
  if (!removed) throw apiError(404, '404 Not found');
}

export async function approvalsOf(cairn: Cairn, mr: MergeRequest): Promise<User[]> {
  return cairn.db.selectFrom('merge_request_approvals as a').innerJoin('users as u', 'u.id', 'a.user_id').selectAll('u')
    .where('a.merge_request_id', '=', mr.id).orderBy('a.created_at').execute();
}
