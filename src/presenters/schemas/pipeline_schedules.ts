import { Type } from 'typebox';
import { PipelineBasicSchema } from './ci.js';
import { Nullable, Timestamp, strict } from './common.js';
import { UserBasicSchema } from './users.js';

/** A pipeline schedule's variable. */
export const ScheduleVariableSchema = Type.Object(
  { variable_type: Type.String(), key: Type.String(), value: Type.String(), raw: Type.Boolean() },
  strict,
);

/** GET /projects/:id/pipeline_schedules (GitLab's Ci::PipelineSchedule). */
export const PipelineScheduleSchema = Type.Object(
  {
    id: Type.Integer(),
    description: Type.String(),
    ref: Type.String(),
    cron: Type.String(),
    cron_timezone: Type.String(),
    next_run_at: Nullable(Timestamp),
    active: Type.Boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
    owner: Nullable(UserBasicSchema),
  },
  strict,
);

/** GET /projects/:id/pipeline_schedules/:pipeline_schedule_id (GitLab's Ci::PipelineScheduleDetails). */
export const PipelineScheduleDetailsSchema = Type.Object(
  {
    ...PipelineScheduleSchema.properties,
    last_pipeline: Nullable(PipelineBasicSchema),
    variables: Type.Optional(Type.Array(ScheduleVariableSchema)),
  },
  strict,
);

/** GET /projects/:id/triggers (GitLab's Trigger). */
export const TriggerSchema = Type.Object(
  {
    id: Type.Integer(),
    token: Type.String(),
    description: Type.String(),
    created_at: Timestamp,
    updated_at: Timestamp,
    last_used: Nullable(Timestamp),
    owner: Nullable(UserBasicSchema),
  },
  strict,
);

/** POST /projects/:id/pipeline_schedules/:pipeline_schedule_id/play. */
export const CreatedMessageSchema = Type.Object({ message: Type.String() }, strict);
