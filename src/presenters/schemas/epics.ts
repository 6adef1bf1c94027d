import { Type } from 'typebox';
import { DateOnly, Nullable, Timestamp, strict } from './common.js';
import { LabelBasicSchema } from './labels.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of src/presenters/epics.ts: GitLab's Epic entity (group epics, premium). */

const EpicDate = Nullable(DateOnly);

export const EpicSchema = Type.Object(
  {
    id: Type.Integer(),
    iid: Type.Integer(),
    group_id: Type.Integer(),
    parent_id: Type.Null(),
    parent_iid: Type.Null(),
    title: Type.String(),
    description: Nullable(Type.String()),
    state: Type.Union([Type.Literal('opened'), Type.Literal('closed')]),
    confidential: Type.Boolean(),
    web_url: Type.String(),
    web_edit_url: Type.String(),
    reference: Type.String(),
    references: Type.Object({ short: Type.String(), relative: Type.String(), full: Type.String() }, strict),
    author: Nullable(UserBasicSchema),
    start_date: EpicDate,
    start_date_is_fixed: Type.Boolean(),
    start_date_fixed: EpicDate,
    start_date_from_milestones: Type.Null(),
    start_date_from_inherited_source: Type.Null(),
    end_date: EpicDate,
    due_date: EpicDate,
    due_date_is_fixed: Type.Boolean(),
    due_date_fixed: EpicDate,
    due_date_from_milestones: Type.Null(),
    due_date_from_inherited_source: Type.Null(),
    created_at: Timestamp,
    updated_at: Timestamp,
    closed_at: Nullable(Timestamp),
    labels: Type.Union([Type.Array(Type.String()), Type.Array(LabelBasicSchema)]),
    upvotes: Type.Integer(),
    downvotes: Type.Integer(),
    color: Type.String(),
    text_color: Type.String(),
    _links: Type.Object(
      { self: Type.String(), epic_issues: Type.String(), group: Type.String(), parent: Type.Null() },
      strict,
    ),
  },
  strict,
);
