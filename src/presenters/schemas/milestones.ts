import { Type } from 'typebox';
import { DateOnly, Nullable, strict, Timestamp } from './common.js';

/** Response schemas of the milestone form in src/presenters/milestones.ts. */

const commonProps = {
  id: Type.Integer(),
  iid: Type.Integer(),
  title: Type.String(),
  description: Nullable(Type.String()),
  state: Type.Union([Type.Literal('active'), Type.Literal('closed')]),
  created_at: Timestamp,
  updated_at: Timestamp,
  due_date: Nullable(DateOnly),
  start_date: Nullable(DateOnly),
  expired: Type.Boolean(),
  web_url: Type.String(),
};

export const ProjectMilestoneSchema = Type.Object({ ...commonProps, project_id: Type.Integer() }, strict);
export const GroupMilestoneSchema = Type.Object({ ...commonProps, group_id: Type.Integer() }, strict);
/** A milestone of a project or of a group (lists with ancestors mix both). */
export const MilestoneSchema = Type.Union([ProjectMilestoneSchema, GroupMilestoneSchema]);
