import type { User } from '../db/schema/core.js';
import type { MergeRequest } from '../db/schema/work_items.js';
import { renderMarkdown, renderMarkdownLine, taskCompletionStatus } from '../lib/markdown.js';
import type { presentLabelBasic } from './labels.js';
import { iso, presentUserBasic, type PresentContext } from './users.js';
import { MR_STATE, MR_STATE_NAMES } from '../db/work_item_states.js';


/** GitLab's draft title prefixes: "Draft:", "[Draft]", "(Draft)", any case. */
const DRAFT_PREFIX = /^\s*(\[draft\]|\(draft\)|draft:)\s*/i;
export const isDraftTitle = (title: string) => DRAFT_PREFIX.test(title);
export const draftlessTitle = (title: string) => title.replace(DRAFT_PREFIX, '');

/** A label as the merge request list shows it with `with_labels_details=true`. */
export type LabelDetail = ReturnType<typeof presentLabelBasic>;

/** Everything a merge request presenter shows beyond its row, preloaded for a whole page. */
export interface MergeRequestExtras {
  author: User | null;
  assignees: User[];
  reviewers: User[];
  mergeUser: User | null;
  closedBy: User | null;
  labels: LabelDetail[];
  /** The milestone in its API form (presented by the milestones presenter), or null. */
  milestone: unknown | null;
  userNotesCount: number;
  upvotes: number;
  downvotes: number;
  /** All resolvable threads resolved (true when there are none). */
  blockingDiscussionsResolved: boolean;
  targetProjectFullPath: string;
  /** The source project's full path when it differs (a fork). */
  sourceProjectFullPath: string | null;
}

/** Seconds as GitLab's ChronicDuration writes them for time_stats: "1w 2d 3h 4m 5s" with 8-hour days and 5-day weeks. */
export function humanDuration(seconds: number): string | null {
  if (!seconds) return null;
  const units: [string, number][] = [['mo', 4 * 5 * 8 * 3600], ['w', 5 * 8 * 3600], ['d', 8 * 3600], ['h', 3600], ['m', 60], ['s', 1]];
  let rest = Math.abs(seconds);
  const parts: string[] = [];
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n) parts.push(`${n}${name}`);
    rest -= n * size;
  }
  return (seconds < 0 ? '-' : '') + parts.join(' ');
}

export function timeStats(row: { time_estimate: number; total_time_spent: number }) {
  return {
    time_estimate: row.time_estimate,
    total_time_spent: row.total_time_spent,
    human_time_estimate: humanDuration(row.time_estimate),
    human_total_time_spent: humanDuration(row.total_time_spent),
  };
}

export function mergeRequestWebUrl(ctx: PresentContext, projectFullPath: string, iid: number): string {
  return `${ctx.baseUrl}/${projectFullPath}/-/merge_requests/${iid}`;
}

function mergeParam(mr: MergeRequest, name: string): boolean | null {
  const v = (mr.merge_params as Record<string, unknown>)[name];
  return typeof v === 'boolean' ? v : null;
}

/** GitLab's detailed_merge_status from what Cairn knows of the merge request. */
function detailedMergeStatus(mr: MergeRequest, x: MergeRequestExtras): string {
  if (mr.state_id !== MR_STATE.opened) return 'not_open';
  if (isDraftTitle(mr.title)) return 'draft_status';
  if (mr.merge_status === 'unchecked' || mr.merge_status === 'cannot_be_merged_recheck') return 'unchecked';
  if (mr.merge_status === 'checking') return 'checking';
  if (mr.has_conflicts || mr.merge_status === 'cannot_be_merged') return 'conflict';
  if (mr.discussion_locked === true) return 'discussions_not_resolved';
  if (!x.blockingDiscussionsResolved) return 'discussions_not_resolved';
  return 'mergeable';
}

/** The list form (GitLab's MergeRequestBasic): project lists, global lists, group lists. */
export function presentMergeRequest(ctx: PresentContext, mr: MergeRequest, x: MergeRequestExtras, opts: { labelDetails?: boolean } = {}) {
  const user = (u: User | null) => (u ? presentUserBasic(ctx, u) : null);
  const draft = isDraftTitle(mr.title);
  const reference = `!${mr.iid}`;
  // Every field is written out: V8 builds `{ ...simple, <fifty more> }` one property at a time,
  // about 100 µs a row, which was most of a 100-row page's time.
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.target_project_id,
    title: mr.title,
    description: mr.description,
    state: MR_STATE_NAMES[mr.state_id] ?? 'opened',
    created_at: iso(mr.created_at),
    updated_at: iso(mr.updated_at),
    merged_by: user(mr.state_id === MR_STATE.merged ? x.mergeUser : null),
    merge_user: user(x.mergeUser),
    merged_at: iso(mr.merged_at),
    closed_by: user(x.closedBy),
    closed_at: iso(mr.closed_at),
    target_branch: mr.target_branch,
    source_branch: mr.source_branch,
    user_notes_count: x.userNotesCount,
    upvotes: x.upvotes,
    downvotes: x.downvotes,
    author: user(x.author),
    assignees: x.assignees.map((u) => presentUserBasic(ctx, u)),
    assignee: x.assignees[0] ? presentUserBasic(ctx, x.assignees[0]) : null,
    reviewers: x.reviewers.map((u) => presentUserBasic(ctx, u)),
    source_project_id: mr.source_project_id,
    target_project_id: mr.target_project_id,
    labels: opts.labelDetails ? x.labels : x.labels.map((l) => l.name),
    draft,
    work_in_progress: draft,
    milestone: x.milestone,
    merge_when_pipeline_succeeds: mr.merge_when_pipeline_succeeds,
    merge_status: mr.merge_status,
    detailed_merge_status: detailedMergeStatus(mr, x),
    sha: mr.head_sha,
    merge_commit_sha: mr.merge_commit_sha,
    squash_commit_sha: mr.squash_commit_sha,
    discussion_locked: mr.discussion_locked,
    should_remove_source_branch: mergeParam(mr, 'should_remove_source_branch'),
    force_remove_source_branch: mergeParam(mr, 'force_remove_source_branch'),
    prepared_at: iso(mr.created_at),
    allow_collaboration: mr.allow_collaboration,
    allow_maintainer_to_push: mr.allow_collaboration,
    reference,
    references: { short: reference, relative: reference, full: `${x.targetProjectFullPath}${reference}` },
    web_url: mergeRequestWebUrl(ctx, x.targetProjectFullPath, mr.iid),
    time_stats: timeStats(mr),
    squash: mr.squash,
    squash_on_merge: mr.squash,
    task_completion_status: taskCompletionStatus(mr.description),
    has_conflicts: mr.has_conflicts,
    blocking_discussions_resolved: x.blockingDiscussionsResolved,
    approvals_before_merge: null,
    imported: false,
    imported_from: 'none',
  };
}

/** What only the single read shows, computed by the caller from git and the pipelines. */
export interface MergeRequestDetails {
  subscribed: boolean;
  changesCount: string | null;
  divergedCommitsCount?: number;
  rebaseInProgress?: boolean;
  /** The head pipeline in both forms (PipelineBasic, Pipeline). */
  pipeline: { basic: unknown; detailed: unknown } | null;
  canMerge: boolean;
  firstContribution: boolean;
  /** `render_html=true`: title_html and description_html. */
  renderHtml?: boolean;
}

/** The single form (GitLab's MergeRequest entity): get, create, update, merge. */
export function presentMergeRequestSingle(ctx: PresentContext, mr: MergeRequest, x: MergeRequestExtras, d: MergeRequestDetails, opts: { labelDetails?: boolean } = {}) {
  // Object.assign, not a spread followed by more fields (see presentMergeRequest).
  return Object.assign(presentMergeRequest(ctx, mr, x, opts), {
    subscribed: d.subscribed,
    changes_count: d.changesCount,
    latest_build_started_at: null,
    latest_build_finished_at: null,
    first_deployed_to_production_at: null,
    pipeline: d.pipeline?.basic ?? null,
    head_pipeline: d.pipeline?.detailed ?? null,
    diff_refs: mr.head_sha ? { base_sha: mr.base_sha, head_sha: mr.head_sha, start_sha: mr.start_sha } : null,
    merge_error: mr.merge_error,
    ...(d.rebaseInProgress !== undefined ? { rebase_in_progress: d.rebaseInProgress } : {}),
    ...(d.divergedCommitsCount !== undefined ? { diverged_commits_count: d.divergedCommitsCount } : {}),
    first_contribution: d.firstContribution,
    user: { can_merge: d.canMerge },
    ...(d.renderHtml ? { title_html: renderMarkdownLine(mr.title), description_html: renderMarkdown(mr.description ?? '') } : {}),
  });
}

/** GitLab's approval state of a merge request (GET .../approvals, approve, unapprove), without approval rules. */
export function presentApprovalState(ctx: PresentContext, mr: MergeRequest, approvers: User[], viewer: { userId: number | null; mayApprove: boolean }) {
  const userHasApproved = viewer.userId !== null && approvers.some((u) => u.id === viewer.userId);
  return {
    ...mergeRequestIdentity(mr),
    merge_status: mr.merge_status,
    approved: approvers.length > 0,
    approvals_required: 0,
    approvals_left: 0,
    require_password_to_approve: false,
    approved_by: approvers.map((u) => ({ user: presentUserBasic(ctx, u) })),
    suggested_approvers: [],
    approvers: [],
    approver_groups: [],
    user_has_approved: userHasApproved,
    user_can_approve: viewer.mayApprove && !userHasApproved,
    approval_rules_left: [],
    has_approval_rules: false,
    merge_request_approvers_available: false,
    multiple_approval_rules_available: false,
    invalid_approvers_rules: [],
  };
}

/** The fields every form starts with: who it is and its basic state. */
function mergeRequestIdentity(mr: MergeRequest) {
  return {
    id: mr.id,
    iid: mr.iid,
    project_id: mr.target_project_id,
    title: mr.title,
    description: mr.description,
    state: MR_STATE_NAMES[mr.state_id] ?? 'opened',
    created_at: iso(mr.created_at),
    updated_at: iso(mr.updated_at),
  };
}

/** `view=simple`: iid, URL, title, description and the basic state. */
export function presentMergeRequestSimple(ctx: PresentContext, mr: MergeRequest, x: Pick<MergeRequestExtras, 'targetProjectFullPath'>) {
  return { ...mergeRequestIdentity(mr), web_url: mergeRequestWebUrl(ctx, x.targetProjectFullPath, mr.iid) };
}
