import type { User } from '../db/schema/core.js';
import type { Issue } from '../db/schema/work_items.js';
import { taskCompletionStatus } from '../lib/markdown.js';
import type { LabelDetail } from './merge_requests.js';
import { timeStats } from './merge_requests.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';
import { ISSUE_STATE_NAMES } from '../db/work_item_states.js';


/** Everything the issue presenters show beyond the row, preloaded for a whole page (finders/issues.ts). */
export interface IssueExtras {
  author: User | null;
  assignees: User[];
  closedBy: User | null;
  labels: LabelDetail[];
  /** The milestone in its API form (presented by the milestones presenter), or null. */
  milestone: unknown | null;
  userNotesCount: number;
  upvotes: number;
  downvotes: number;
  mergeRequestsCount: number;
  projectFullPath: string;
  /** The project's namespace (for references relative to a group). */
  namespaceId: number;
  projectPath: string;
}

/**
 * Where a reference is written from: a project (its id and namespace; project lists and single
 * reads), a group (group lists), or nowhere (global lists).
 */
export type ReferenceFrom = { projectId?: number; namespaceId: number } | null;

export function issueWebUrl(ctx: PresentContext, projectFullPath: string, iid: number): string {
  return `${ctx.baseUrl}/${projectFullPath}/-/issues/${iid}`;
}

/** GitLab's Issue#to_reference(from): `#1` in its project, `path#1` from its own namespace, the full path otherwise. */
function references(issue: Issue, x: IssueExtras, from: ReferenceFrom) {
  const short = `#${issue.iid}`;
  const full = `${x.projectFullPath}${short}`;
  let relative = full;
  if (from?.projectId === issue.project_id) relative = short;
  else if (from && from.namespaceId === x.namespaceId) relative = `${x.projectPath}${short}`;
  return { short, relative, full };
}

/** GitLab's "3 of 5 checklist items completed". */
function taskStatus(done: number, count: number): string {
  return `${done} of ${count} checklist ${count === 1 ? 'item' : 'items'} completed`;
}

/** GitLab's IssueBasic: the form closes_issues (and related lists) show. */
export function presentIssueBasic(ctx: PresentContext, issue: Issue, x: IssueExtras, opts: { labelDetails?: boolean; from?: ReferenceFrom } = {}) {
  const user = (u: User | null) => (u ? presentUserBasic(ctx, u) : null);
  const type = issue.issue_type;
  return {
    id: issue.id,
    iid: issue.iid,
    project_id: issue.project_id,
    title: issue.title,
    description: issue.description,
    state: ISSUE_STATE_NAMES[issue.state_id] ?? 'opened',
    created_at: iso(issue.created_at)!,
    updated_at: iso(issue.updated_at)!,
    closed_at: iso(issue.closed_at),
    closed_by: user(x.closedBy),
    labels: opts.labelDetails ? x.labels : x.labels.map((l) => l.name),
    milestone: x.milestone,
    assignees: x.assignees.map((u) => presentUserBasic(ctx, u)),
    author: user(x.author),
    type: type.toUpperCase(),
    assignee: x.assignees[0] ? presentUserBasic(ctx, x.assignees[0]) : null,
    user_notes_count: x.userNotesCount,
    merge_requests_count: x.mergeRequestsCount,
    upvotes: x.upvotes,
    downvotes: x.downvotes,
    due_date: issue.due_date,
    confidential: issue.confidential,
    discussion_locked: issue.discussion_locked,
    issue_type: type,
    web_url: issueWebUrl(ctx, x.projectFullPath, issue.iid),
    time_stats: timeStats(issue),
    task_completion_status: taskCompletionStatus(issue.description),
    references: references(issue, x, opts.from ?? null),
    imported: false,
    imported_from: 'none',
  };
}

/** GitLab's Issue: the list form (project, group and global lists). */
export function presentIssue(ctx: PresentContext, issue: Issue, x: IssueExtras, opts: { labelDetails?: boolean; from?: ReferenceFrom } = {}) {
  const tasks = taskCompletionStatus(issue.description);
  const api = `${ctx.baseUrl}/api/v4/projects/${issue.project_id}`;
  return {
    ...presentIssueBasic(ctx, issue, x, opts),
    has_tasks: tasks.count > 0,
    ...(tasks.count > 0 ? { task_status: taskStatus(tasks.completed_count, tasks.count) } : {}),
    _links: {
      self: `${api}/issues/${issue.iid}`,
      notes: `${api}/issues/${issue.iid}/notes`,
      award_emoji: `${api}/issues/${issue.iid}/award_emoji`,
      project: api,
      closed_as_duplicate_of: null,
    },
    moved_to_id: issue.moved_to_id,
    service_desk_reply_to: null,
  };
}

/** The single form (get, create, update): the list form and the caller's subscription. */
export function presentIssueSingle(ctx: PresentContext, issue: Issue, x: IssueExtras, subscribed: boolean, opts: { labelDetails?: boolean; from?: ReferenceFrom } = {}) {
  return { ...presentIssue(ctx, issue, x, opts), subscribed };
}
