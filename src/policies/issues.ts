import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { Issue } from '../db/schema/work_items.js';
import { findIssue, issueAssigneeIds } from '../finders/issues.js';
import { apiError } from '../plugins/errors.js';
import { can, type ProjectSubject } from './abilities.js';
import { confidentialIssue } from './rules.js';

/**
 * One issue for a caller whose project access is loaded (the route guard checked read_issue):
 * 404 when it is not there or is confidential and the caller is not its author, an assignee,
 * a reporter or up, or an administrator. What the caller may do to it follows GitLab's IssuePolicy.
 */
export interface IssueAccess {
  issue: Issue;
  assigneeIds: number[];
}

export async function findIssueOrFail(db: Database, subject: ProjectSubject & { project: { id: number } }, user: User | null, iid: number): Promise<IssueAccess> {
  const issue = await findIssue(db, subject.project.id, iid);
  if (!issue) throw apiError(404, '404 Issue Not Found');
  const assigneeIds = await issueAssigneeIds(db, issue.id);
  if (!canSeeIssue(user, subject, issue, assigneeIds)) throw apiError(404, '404 Issue Not Found');
  return { issue, assigneeIds };
}

/** read_issue on the project, then the confidential rule. */
export function canSeeIssue(user: User | null, subject: ProjectSubject, issue: Issue, assigneeIds: number[]): boolean {
  if (!can(user, 'read_issue', subject)) return false;
  return confidentialIssue.allows(user, issue, assigneeIds, can(user, 'read_confidential_issues', subject));
}

/** Edit, close, reopen: reporters and up, and the issue's author and assignees (GitLab's update_issue). */
export function mayUpdateIssue(user: User | null, subject: ProjectSubject, access: IssueAccess): boolean {
  if (!user || !canSeeIssue(user, subject, access.issue, access.assigneeIds)) return false;
  if (can(user, 'update_issue', subject)) return true;
  return !subject.project.archived && (access.issue.author_id === user.id || access.assigneeIds.includes(user.id));
}
