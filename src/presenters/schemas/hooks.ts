import { Type } from 'typebox';
import { Nullable, Timestamp, strict } from './common.js';

const flag = Type.Boolean();

/** GitLab's ProjectHook entity (GET /projects/:id/hooks): every event switch, secrets masked. */
export const ProjectHookSchema = Type.Object(
  {
    id: Type.Integer(),
    url: Type.String(),
    name: Type.String(),
    description: Type.String(),
    created_at: Timestamp,
    project_id: Type.Integer(),
    push_events: flag,
    push_events_branch_filter: Type.String(),
    branch_filter_strategy: Type.String(),
    tag_push_events: flag,
    issues_events: flag,
    confidential_issues_events: flag,
    merge_requests_events: flag,
    note_events: flag,
    confidential_note_events: flag,
    job_events: flag,
    pipeline_events: flag,
    wiki_page_events: flag,
    deployment_events: flag,
    releases_events: flag,
    milestone_events: flag,
    feature_flag_events: flag,
    emoji_events: flag,
    resource_access_token_events: flag,
    repository_update_events: flag,
    enable_ssl_verification: flag,
    alert_status: Type.Union([Type.Literal('executable'), Type.Literal('temporarily_disabled'), Type.Literal('disabled')]),
    disabled_until: Nullable(Timestamp),
    url_variables: Type.Array(Type.Object({ key: Type.String() }, strict)),
    custom_headers: Type.Array(Type.Object({ key: Type.String() }, strict)),
  },
  strict,
);

/** One delivery of a hook (GET /projects/:id/hooks/:hook_id/events, GitLab's WebHookLog). */
export const HookLogSchema = Type.Object(
  {
    id: Type.Integer(),
    url: Type.String(),
    trigger: Type.String(),
    request_headers: Type.Record(Type.String(), Type.String()),
    request_data: Type.Unknown(),
    response_headers: Type.Record(Type.String(), Type.String()),
    response_body: Type.String(),
    execution_duration: Type.Number(),
    response_status: Type.String(),
    internal_error_message: Nullable(Type.String()),
    created_at: Timestamp,
  },
  strict,
);
