import { Type } from 'typebox';
import { DateOnly, Nullable, strict, Timestamp } from './common.js';
import { UserBasicSchema } from './users.js';
import { LabelBasicSchema } from './labels.js';
import { MilestoneSchema } from './milestones.js';
import { TimeStatsSchema } from './merge_requests.js';

/** Response schemas of the issue forms in src/presenters/issues.ts. */

const basicProps = {
  id: Type.Integer(),
  iid: Type.Integer(),
  project_id: Type.Integer(),
  title: Type.String(),
  description: Nullable(Type.String()),
  state: Type.Union([Type.Literal('opened'), Type.Literal('closed')]),
  created_at: Timestamp,
  updated_at: Timestamp,
  closed_at: Nullable(Timestamp),
  closed_by: Nullable(UserBasicSchema),
  labels: Type.Union([Type.Array(Type.String()), Type.Array(LabelBasicSchema)]),
  milestone: Nullable(MilestoneSchema),
  assignees: Type.Array(UserBasicSchema),
  author: Nullable(UserBasicSchema),
  type: Type.String(),
  assignee: Nullable(UserBasicSchema),
  user_notes_count: Type.Integer(),
  merge_requests_count: Type.Integer(),
  upvotes: Type.Integer(),
  downvotes: Type.Integer(),
  due_date: Nullable(DateOnly),
  confidential: Type.Boolean(),
  discussion_locked: Nullable(Type.Boolean()),
  issue_type: Type.String(),
  web_url: Type.String(),
  time_stats: TimeStatsSchema,
  task_completion_status: Type.Object({ count: Type.Integer(), completed_count: Type.Integer() }, strict),
  references: Type.Object({ short: Type.String(), relative: Type.String(), full: Type.String() }, strict),
  imported: Type.Boolean(),
  imported_from: Type.String(),
};
export const IssueBasicSchema = Type.Object(basicProps, strict);

const listProps = {
  ...basicProps,
  has_tasks: Type.Boolean(),
  task_status: Type.Optional(Type.String()),
  _links: Type.Object(
    { self: Type.String(), notes: Type.String(), award_emoji: Type.String(), project: Type.String(), closed_as_duplicate_of: Nullable(Type.String()) },
    strict,
  ),
  moved_to_id: Nullable(Type.Integer()),
  service_desk_reply_to: Nullable(Type.String()),
};
export const IssueSchema = Type.Object(listProps, strict);
export const IssueSingleSchema = Type.Object({ ...listProps, subscribed: Type.Boolean() }, strict);
