import { Type } from 'typebox';
import { PipelineBasicSchema, PipelineSchema } from './ci.js';
import { Nullable, Sha, strict, Timestamp } from './common.js';
import { UserBasicSchema } from './users.js';
import { DiffSchema } from './commits.js';
import { LabelBasicSchema } from './labels.js';
import { MilestoneSchema } from './milestones.js';

/** Response schemas of the merge request forms in src/presenters/merge_requests.ts. */


export const TimeStatsSchema = Type.Object(
  { time_estimate: Type.Integer(), total_time_spent: Type.Integer(), human_time_estimate: Nullable(Type.String()), human_total_time_spent: Nullable(Type.String()) },
  strict,
);

const State = Type.Union([Type.Literal('opened'), Type.Literal('closed'), Type.Literal('merged'), Type.Literal('locked')]);

const basicProps = {
  id: Type.Integer(),
  iid: Type.Integer(),
  project_id: Type.Integer(),
  title: Type.String(),
  description: Nullable(Type.String()),
  state: State,
  created_at: Timestamp,
  updated_at: Timestamp,
  merged_by: Nullable(UserBasicSchema),
  merge_user: Nullable(UserBasicSchema),
  merged_at: Nullable(Timestamp),
  closed_by: Nullable(UserBasicSchema),
  closed_at: Nullable(Timestamp),
  target_branch: Type.String(),
  source_branch: Type.String(),
  user_notes_count: Type.Integer(),
  upvotes: Type.Integer(),
  downvotes: Type.Integer(),
  author: Nullable(UserBasicSchema),
  assignees: Type.Array(UserBasicSchema),
  assignee: Nullable(UserBasicSchema),
  reviewers: Type.Array(UserBasicSchema),
  source_project_id: Nullable(Type.Integer()),
  target_project_id: Type.Integer(),
  labels: Type.Union([Type.Array(Type.String()), Type.Array(LabelBasicSchema)]),
  draft: Type.Boolean(),
  work_in_progress: Type.Boolean(),
  milestone: Nullable(MilestoneSchema),
  merge_when_pipeline_succeeds: Type.Boolean(),
  merge_status: Type.String(),
  detailed_merge_status: Type.String(),
  sha: Nullable(Sha),
  merge_commit_sha: Nullable(Sha),
  squash_commit_sha: Nullable(Sha),
  discussion_locked: Nullable(Type.Boolean()),
  should_remove_source_branch: Nullable(Type.Boolean()),
  force_remove_source_branch: Nullable(Type.Boolean()),
  prepared_at: Nullable(Timestamp),
  allow_collaboration: Type.Boolean(),
  allow_maintainer_to_push: Type.Boolean(),
  reference: Type.String(),
  references: Type.Object({ short: Type.String(), relative: Type.String(), full: Type.String() }, strict),
  web_url: Type.String(),
  time_stats: TimeStatsSchema,
  squash: Type.Boolean(),
  squash_on_merge: Type.Boolean(),
  task_completion_status: Type.Object({ count: Type.Integer(), completed_count: Type.Integer() }, strict),
  has_conflicts: Type.Boolean(),
  blocking_discussions_resolved: Type.Boolean(),
  approvals_before_merge: Nullable(Type.Integer()),
  imported: Type.Boolean(),
  imported_from: Type.String(),
};
export const MergeRequestSchema = Type.Object(basicProps, strict);

const singleProps = {
    ...basicProps,
    subscribed: Type.Boolean(),
    changes_count: Nullable(Type.String()),
    latest_build_started_at: Nullable(Timestamp),
    latest_build_finished_at: Nullable(Timestamp),
    first_deployed_to_production_at: Nullable(Timestamp),
    /** The head pipeline, PipelineBasic form; head_pipeline is the detailed Pipeline form. Null without one or without read_pipeline. */
    pipeline: Nullable(PipelineBasicSchema),
    head_pipeline: Nullable(PipelineSchema),
    diff_refs: Nullable(Type.Object({ base_sha: Nullable(Sha), head_sha: Sha, start_sha: Nullable(Sha) }, strict)),
    merge_error: Nullable(Type.String()),
    rebase_in_progress: Type.Optional(Type.Boolean()),
    diverged_commits_count: Type.Optional(Type.Integer()),
    first_contribution: Type.Boolean(),
    user: Type.Object({ can_merge: Type.Boolean() }, strict),
    title_html: Type.Optional(Type.String()),
    description_html: Type.Optional(Type.String()),
};
export const MergeRequestSingleSchema = Type.Object(singleProps, strict);

/** GET .../merge_requests/:iid/changes: the single form with the diffs. */
export const MergeRequestChangesSchema = Type.Object({ ...singleProps, changes: Type.Array(DiffSchema), overflow: Type.Boolean() }, strict);

export const MergeRequestSimpleSchema = Type.Object(
  {
    id: Type.Integer(), iid: Type.Integer(), project_id: Type.Integer(), title: Type.String(), description: Nullable(Type.String()),
    state: State, created_at: Timestamp, updated_at: Timestamp, web_url: Type.String(),
  },
  strict,
);

/** GET .../approvals and the approve / unapprove answers (GitLab Free's approval state). */
export const ApprovalStateSchema = Type.Object(
  {
    id: Type.Integer(), iid: Type.Integer(), project_id: Type.Integer(), title: Type.String(), description: Nullable(Type.String()),
    state: State, created_at: Timestamp, updated_at: Timestamp, merge_status: Type.String(),
    approved: Type.Boolean(), approvals_required: Type.Integer(), approvals_left: Type.Integer(), require_password_to_approve: Type.Boolean(),
    approved_by: Type.Array(Type.Object({ user: UserBasicSchema }, strict)),
    suggested_approvers: Type.Array(UserBasicSchema), approvers: Type.Array(UserBasicSchema), approver_groups: Type.Array(Type.Unknown()),
    user_has_approved: Type.Boolean(), user_can_approve: Type.Boolean(),
    approval_rules_left: Type.Array(Type.Unknown()), has_approval_rules: Type.Boolean(), merge_request_approvers_available: Type.Boolean(),
    multiple_approval_rules_available: Type.Boolean(), invalid_approvers_rules: Type.Array(Type.Unknown()),
  },
  strict,
);
