import { Type } from 'typebox';
import { Nullable, strict, Timestamp } from './common.js';
import { UserBasicSchema } from './users.js';

/** Response schemas of the label forms in src/presenters/labels.ts. */

const basicProps = {
  id: Type.Integer(),
  name: Type.String(),
  color: Type.String({ pattern: '^#(?:[0-9A-Fa-f]{3}){1,2}$' }),
  description: Nullable(Type.String()),
  description_html: Nullable(Type.String()),
  text_color: Type.Union([Type.Literal('#FFFFFF'), Type.Literal('#333333')]),
};
export const LabelBasicSchema = Type.Object(basicProps, strict);

const labelProps = {
  ...basicProps,
  /** The counts appear with `with_counts=true` only. */
  open_issues_count: Type.Optional(Type.Integer()),
  closed_issues_count: Type.Optional(Type.Integer()),
  open_merge_requests_count: Type.Optional(Type.Integer()),
  subscribed: Type.Boolean(),
};
/** A group label (GitLab's GroupLabel, the same form as Label). */
export const GroupLabelSchema = Type.Object(labelProps, strict);

export const ProjectLabelSchema = Type.Object(
  {
    ...labelProps,
    priority: Nullable(Type.Integer()),
    is_project_label: Type.Boolean(),
  },
  strict,
);

export const ResourceLabelEventSchema = Type.Object(
  {
    id: Type.Integer(),
    user: Nullable(UserBasicSchema),
    created_at: Timestamp,
    resource_type: Type.Union([Type.Literal('Issue'), Type.Literal('MergeRequest'), Type.Literal('Epic')]),
    resource_id: Type.Integer(),
    label: Nullable(LabelBasicSchema),
    action: Type.Union([Type.Literal('add'), Type.Literal('remove')]),
  },
  strict,
);
