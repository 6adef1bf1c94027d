import type { ColumnType, Generated, Selectable } from 'kysely';
import type { DateString, NullableTimestamp, Timestamp } from './core.js';

/** Issue tracking and code review (migration 0700_work_items). */

type Json<T> = ColumnType<T, string | undefined, string>;

export interface InternalIdsTable {
  usage: string;
  parent_id: number;
  last_value: number;
}

export interface LabelsTable {
  id: Generated<number>;
  project_id: number | null;
  group_id: number | null;
  title: string;
  color: string;
  description: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Label = Selectable<LabelsTable>;

export interface LabelPrioritiesTable {
  project_id: number;
  label_id: number;
  priority: number;
}

export interface MilestonesTable {
  id: Generated<number>;
  iid: number;
  project_id: number | null;
  group_id: number | null;
  title: string;
  description: string | null;
  /** 'active' or 'closed'. */
  state: Generated<string>;
  due_date: DateString;
  start_date: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Milestone = Selectable<MilestonesTable>;

export interface IssuesTable {
  id: Generated<number>;
  iid: number;
  project_id: number;
  title: string;
  description: string | null;
  /** 1 opened, 2 closed. */
  state_id: Generated<number>;
  author_id: number | null;
  milestone_id: number | null;
  confidential: Generated<boolean>;
  discussion_locked: boolean | null;
  issue_type: Generated<string>;
  due_date: DateString;
  time_estimate: Generated<number>;
  total_time_spent: Generated<number>;
  closed_at: NullableTimestamp;
  closed_by_id: number | null;
  moved_to_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Issue = Selectable<IssuesTable>;

export interface IssueAssigneesTable {
  issue_id: number;
  user_id: number;
}

export interface MergeRequestsTable {
  id: Generated<number>;
  iid: number;
  target_project_id: number;
  source_project_id: number | null;
  source_branch: string;
  target_branch: string;
  title: string;
  description: string | null;
  /** 1 opened, 2 closed, 3 merged, 4 locked. */
  state_id: Generated<number>;
  author_id: number | null;
  milestone_id: number | null;
  /** unchecked, checking, can_be_merged, cannot_be_merged, cannot_be_merged_recheck. */
  merge_status: Generated<string>;
  merge_error: string | null;
  merge_when_pipeline_succeeds: Generated<boolean>;
  merge_user_id: number | null;
  /** should_remove_source_branch, force_remove_source_branch, commit messages kept for a later merge. */
  merge_params: Json<Record<string, unknown>>;
  merged_at: NullableTimestamp;
  closed_at: NullableTimestamp;
  closed_by_id: number | null;
  merge_commit_sha: string | null;
  squash_commit_sha: string | null;
  squash: Generated<boolean>;
  discussion_locked: boolean | null;
  allow_collaboration: Generated<boolean>;
  time_estimate: Generated<number>;
  total_time_spent: Generated<number>;
  head_sha: string | null;
  base_sha: string | null;
  start_sha: string | null;
  has_conflicts: Generated<boolean>;
  merge_ref_sha: string | null;
  rebase_in_progress: Generated<boolean>;
  head_pipeline_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type MergeRequest = Selectable<MergeRequestsTable>;

export interface MergeRequestUserLinkTable {
  merge_request_id: number;
  user_id: number;
  created_at: Timestamp;
}

export interface MergeRequestsClosingIssuesTable {
  merge_request_id: number;
  issue_id: number;
  created_at: Timestamp;
}

export interface LabelLinksTable {
  label_id: number;
  target_type: string;
  target_id: number;
  created_at: Timestamp;
}

export interface ResourceLabelEventsTable {
  id: Generated<number>;
  /** 'add' or 'remove'. */
  action: string;
  target_type: string;
  target_id: number;
  label_id: number | null;
  user_id: number | null;
  created_at: Timestamp;
}

export interface AwardEmojiTable {
  id: Generated<number>;
  name: string;
  user_id: number;
  awardable_type: string;
  awardable_id: number;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type AwardEmoji = Selectable<AwardEmojiTable>;

export interface SubscriptionsTable {
  user_id: number;
  subscribable_type: string;
  subscribable_id: number;
  project_id: number | null;
  subscribed: boolean;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface EpicsTable {
  id: Generated<number>;
  iid: number;
  group_id: number;
  title: string;
  description: string | null;
  state_id: Generated<number>;
  author_id: number | null;
  confidential: Generated<boolean>;
  start_date: DateString;
  due_date: DateString;
  closed_at: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Epic = Selectable<EpicsTable>;

export interface WorkItemTables {
  internal_ids: InternalIdsTable;
  labels: LabelsTable;
  label_priorities: LabelPrioritiesTable;
  milestones: MilestonesTable;
  issues: IssuesTable;
  issue_assignees: IssueAssigneesTable;
  merge_requests: MergeRequestsTable;
  merge_request_assignees: MergeRequestUserLinkTable;
  merge_request_reviewers: MergeRequestUserLinkTable;
  merge_request_approvals: MergeRequestUserLinkTable;
  label_links: LabelLinksTable;
  merge_requests_closing_issues: MergeRequestsClosingIssuesTable;
  resource_label_events: ResourceLabelEventsTable;
  award_emoji: AwardEmojiTable;
  subscriptions: SubscriptionsTable;
  epics: EpicsTable;
}
