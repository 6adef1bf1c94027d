import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { Issue, MergeRequest } from '../db/schema/work_items.js';
import { issueAssigneeIds } from '../finders/issues.js';
import { findProjectRow, projectFullPath, type ProjectWithNamespace } from '../finders/projects.js';
import { commitsBetween, readCommitsOnce } from '../git/compare.js';
import { defineJob, enqueue } from '../jobs/queue.js';
import { closingReferences, type ClosingReference } from '../lib/closing_pattern.js';
import { effectiveLevel } from '../policies/abilities.js';
import { mayUpdateIssue } from '../policies/issues.js';
import { changeIssueState } from './issues.js';
import { ISSUE_STATE } from '../db/work_item_states.js';
import { projectRepoPath } from './projects.js';
import { findUserById } from '../finders/users.js';

/**
 * Which issues a merge request closes (GitLab's closing pattern in its description and its
 * commits' messages), kept in merge_requests_closing_issues, and closing them once it is merged
 * into the default branch. Closing runs in the durable queue, enqueued in the same transaction
 * that records the merge, so a crash never loses it; closing an issue twice changes nothing.
 */

/** GitLab reads at most this many of a merge request's commits for closing references. */
const MAX_COMMITS = 1000;

/** The closing references of the merge request: its description, then its commits' messages. */
async function closingReferencesOf(cairn: Cairn, target: ProjectWithNamespace, mr: MergeRequest): Promise<ClosingReference[]> {
  const base = cairn.config.externalUrl;
  const refs = closingReferences(mr.description, base);
  if (mr.head_sha) {
    try {
      const gitDir = projectRepoPath(cairn, target);
      const oids = await commitsBetween(gitDir, mr.base_sha ?? mr.start_sha, mr.head_sha, { limit: MAX_COMMITS });
      for (const commit of await readCommitsOnce(gitDir, oids)) refs.push(...closingReferences(commit.message, base));
    } catch {
      // The commits are unreadable (a repository being moved): the description still counts.
    }
  }
  return refs;
}

/** The issues those references name, in order of first mention (references to nothing are dropped). */
async function resolveIssues(db: Database, target: ProjectWithNamespace, refs: ClosingReference[]): Promise<Issue[]> {
  if (!refs.length) return [];
  const ownPath = projectFullPath(target).toLowerCase();
  // "project#1" is a project of the same namespace; "group/project#1" a full path.
  const pathOf = (r: ClosingReference) =>
    (r.projectPath === null ? ownPath : r.projectPath.includes('/') ? r.projectPath : `${target.namespace.full_path}/${r.projectPath}`).toLowerCase();
  const paths = [...new Set(refs.map(pathOf))];
  const iids = refs.map((r) => r.iid);
  const rows = await sql<Issue & { full_path: string }>`
    select i.*, lower(n.full_path || '/' || p.path) as full_path
      from projects p join namespaces n on n.id = p.namespace_id join issues i on i.project_id = p.id
     where lower(n.full_path || '/' || p.path) = any(${paths}::text[]) and i.iid = any(${iids}::int[])`.execute(db);
  const byKey = new Map(rows.rows.map(({ full_path, ...issue }) => [`${full_path}#${issue.iid}`, issue as Issue]));
  const out: Issue[] = [];
  for (const r of refs) {
    const issue = byKey.get(`${pathOf(r)}#${r.iid}`);
    if (issue && !out.some((i) => i.id === issue.id)) out.push(issue);
  }
  return out;
}

/** The issues the merge request would close, recorded in merge_requests_closing_issues; returned in order of mention. */
export async function syncClosingIssues(cairn: Cairn, target: ProjectWithNamespace, mr: MergeRequest): Promise<Issue[]> {
  const issues = await resolveIssues(cairn.db, target, await closingReferencesOf(cairn, target, mr));
  const ids = issues.map((i) => i.id);
  await cairn.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('merge_requests_closing_issues').where('merge_request_id', '=', mr.id).where('issue_id', 'not in', ids.length ? ids : [0]).execute();
    if (ids.length) {
      await trx.insertInto('merge_requests_closing_issues').values(ids.map((issue_id) => ({ merge_request_id: mr.id, issue_id })))
        .onConflict((oc) => oc.doNothing()).execute();
    }
  });
  return issues;
}

export const CLOSE_ISSUES_JOB = 'merge_request.close_issues';

/** Enqueues the closing of a merged request's issues; pass the transaction that records the merge. */
export async function enqueueClosingIssues(db: Database, mr: Pick<MergeRequest, 'id'>, userId: number | null) {
  await enqueue(db, CLOSE_ISSUES_JOB, { mergeRequestId: mr.id, userId });
}

/**
 * Closes the issues a merged request names, as the user who merged it, where that user may
 * update them (GitLab's Issues::CloseService), each with the system note
 * "closed via merge request !iid" (the full reference from another project). Only a merge into
 * the project's default branch closes issues.
 */
export async function closeIssuesOfMergedRequest(cairn: Cairn, mergeRequestId: number, userId: number | null): Promise<void> {
  const { db } = cairn;
  const mr = await db.selectFrom('merge_requests').selectAll().where('id', '=', mergeRequestId).executeTakeFirst();
  if (!mr || mr.state_id !== 3) return;
  const target = await findProjectRow(db, mr.target_project_id);
  if (!target) return;
  const issues = await syncClosingIssues(cairn, target, mr);
  if (mr.target_branch !== target.default_branch || !issues.length) return;
  const user = userId !== null ? (await findUserById(db, userId)) : undefined;
  if (!user) return;
  for (const issue of issues) {
    if (issue.state_id !== ISSUE_STATE.opened) continue;
    const project = issue.project_id === target.id ? await findProjectRow(db, target.id, user.id) : await findProjectRow(db, issue.project_id, user.id);
    if (!project) continue;
    const subject = { project, accessLevel: effectiveLevel(user, project.callerAccessLevel ?? 0) };
    if (!mayUpdateIssue(user, subject, { issue, assigneeIds: await issueAssigneeIds(db, issue.id) })) continue;
    const reference = issue.project_id === target.id ? `!${mr.iid}` : `${projectFullPath(target)}!${mr.iid}`;
    await changeIssueState(cairn, issue, 'close', user, `closed via merge request ${reference}`);
  }
}

defineJob(CLOSE_ISSUES_JOB, async (cairn, payload) => {
  await closeIssuesOfMergedRequest(cairn, Number(payload.mergeRequestId), payload.userId ?? null);
});
