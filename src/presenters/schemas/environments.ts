import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';
import { JobSchema } from './ci.js';
import { UserBasicSchema } from './users.js';
import { ProjectSimpleSchema } from './projects.js';

/** GitLab's Entities::EnvironmentBasic. */
export const EnvironmentBasicSchema = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    slug: Type.String(),
    external_url: Nullable(Type.String()),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  strict,
);

export const EnvironmentState = Type.Union([Type.Literal('available'), Type.Literal('stopping'), Type.Literal('stopped')]);
export const EnvironmentTierSchema = Type.Union(['production', 'staging', 'testing', 'development', 'other'].map((t) => Type.Literal(t)));

/** GitLab's Entities::Environment. */
export const EnvironmentSchema = Type.Object(
  {
    ...EnvironmentBasicSchema.properties,
    tier: EnvironmentTierSchema,
    project: ProjectSimpleSchema,
    state: EnvironmentState,
    auto_stop_at: Nullable(Timestamp),
    description: Nullable(Type.String()),
    auto_stop_setting: Type.String(),
  },
  strict,
);

export const DeploymentStatusSchema = Type.Union(['created', 'running', 'success', 'failed', 'canceled', 'skipped', 'blocked'].map((t) => Type.Literal(t)));

/** GitLab's Entities::Deployment. */
export const DeploymentSchema = Type.Object(
  {
    id: Type.Integer(),
    iid: Type.Integer(),
    ref: Type.String(),
    sha: Type.String(),
    status: DeploymentStatusSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
    finished_at: Nullable(Timestamp),
    user: Nullable(UserBasicSchema),
    environment: EnvironmentBasicSchema,
    deployable: Nullable(JobSchema),
  },
  strict,
);

/** The single environment (GET /environments/:id): with its last successful deployment. */
export const EnvironmentDetailSchema = Type.Object({ ...EnvironmentSchema.properties, last_deployment: Nullable(DeploymentSchema) }, strict);

/** A message answer (stop_stale). */
export const EnvironmentMessageSchema = Type.Object({ message: Type.String() }, strict);

/** Response schemas of protected environments and error tracking; contract tests check real responses against them. */
export const DeployAccessLevelSchema = Type.Object(
  {
    id: Type.Integer(),
    access_level: Type.Integer(),
    access_level_description: Type.String(),
    user_id: Nullable(Type.Integer()),
    group_id: Nullable(Type.Integer()),
    group_inheritance_type: Type.Integer(),
  },
  strict,
);

export const ProtectedEnvironmentSchema = Type.Object(
  {
    name: Type.String(),
    deploy_access_levels: Type.Array(DeployAccessLevelSchema),
    required_approval_count: Type.Integer(),
  },
  strict,
);

/** GitLab's ErrorTracking::ProjectSetting entity (the spec's tracker_* fields carry GitLab's sentry_* names). */
export const ErrorTrackingSettingSchema = Type.Object(
  {
    active: Type.Boolean(),
    project_name: Nullable(Type.String()),
    sentry_external_url: Nullable(Type.String()),
    api_url: Nullable(Type.String()),
    integrated: Type.Boolean(),
  },
  strict,
);

export const ErrorTrackingClientKeySchema = Type.Object(
  {
    id: Type.Integer(),
    active: Type.Boolean(),
    public_key: Type.String(),
    sentry_dsn: Type.String(),
  },
  strict,
);

export const ErrorStatus = Type.Union([Type.Literal('unresolved'), Type.Literal('resolved'), Type.Literal('ignored')]);

/** An error of the integrated tracker: events grouped by name, description, actor and platform. */
export const TrackedErrorSchema = Type.Object(
  {
    id: Type.Integer(),
    project_id: Type.Integer(),
    title: Type.String(),
    type: Type.String(),
    message: Nullable(Type.String()),
    culprit: Nullable(Type.String()),
    platform: Nullable(Type.String()),
    status: ErrorStatus,
    count: Type.Integer(),
    first_seen: Timestamp,
    last_seen: Timestamp,
    external_url: Type.String(),
  },
  strict,
);

export const ErrorEventSchema = Type.Object(
  {
    id: Type.Integer(),
    event_id: Nullable(Type.String()),
    environment: Nullable(Type.String()),
    level: Nullable(Type.String()),
    description: Nullable(Type.String()),
    occurred_at: Timestamp,
    payload: Type.Record(Type.String(), Type.Unknown()),
  },
  strict,
);

export const TrackedErrorDetailSchema = Type.Object(
  {
    ...TrackedErrorSchema.properties,
    latest_event: Nullable(ErrorEventSchema),
  },
  strict,
);
