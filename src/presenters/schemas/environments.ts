import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';

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
