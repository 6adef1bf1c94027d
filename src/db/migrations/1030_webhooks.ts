import { sql, type Kysely } from 'kysely';

// Webhooks: project hooks (group and system hooks share the table by `type`) and the log of
// their deliveries. The secret token, URL variables and custom headers are sent to the receiver,
// so they are kept encrypted (lib/secrets.ts encryptSecret), never as clear text and never shown.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table web_hooks (
      id serial primary key,
      type text not null default 'ProjectHook' check (type in ('ProjectHook', 'GroupHook', 'SystemHook')),
      project_id integer references projects(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      url text not null,
      name text not null default '',
      description text not null default '',
      token_encrypted text,
      url_variables_encrypted text,
      custom_headers_encrypted text,
      enable_ssl_verification boolean not null default true,
      push_events boolean not null default true,
      push_events_branch_filter text not null default '',
      branch_filter_strategy text not null default 'wildcard' check (branch_filter_strategy in ('wildcard', 'regex', 'all_branches')),
      tag_push_events boolean not null default false,
      issues_events boolean not null default false,
      confidential_issues_events boolean not null default false,
      merge_requests_events boolean not null default false,
      note_events boolean not null default false,
      confidential_note_events boolean not null default false,
      job_events boolean not null default false,
      pipeline_events boolean not null default false,
      wiki_page_events boolean not null default false,
      deployment_events boolean not null default false,
      releases_events boolean not null default false,
      milestone_events boolean not null default false,
      feature_flag_events boolean not null default false,
      emoji_events boolean not null default false,
      resource_access_token_events boolean not null default false,
      repository_update_events boolean not null default false,
      member_events boolean not null default false,
      -- GitLab's auto-disabling: consecutive failures, how often the hook was disabled for a while, until when.
      recent_failures integer not null default 0,
      backoff_count integer not null default 0,
      disabled_until timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((type = 'ProjectHook') = (project_id is not null)),
      check ((type = 'GroupHook') = (group_id is not null))
    )`.execute(db);
  await sql`create index web_hooks_project on web_hooks (project_id) where project_id is not null`.execute(db);
  await sql`create index web_hooks_group on web_hooks (group_id) where group_id is not null`.execute(db);
  await sql`
    create table web_hook_logs (
      id bigserial primary key,
      web_hook_id integer not null references web_hooks(id) on delete cascade,
      trigger text not null,
      url text not null,
      request_headers jsonb not null default '{}',
      request_data jsonb not null default '{}',
      response_headers jsonb not null default '{}',
      response_body text not null default '',
      response_status text not null,
      execution_duration double precision not null default 0,
      internal_error_message text,
      -- The event's delivery (X-Gitlab-Event-UUID and the hook): one log row per attempt.
      event_uuid text,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index web_hook_logs_hook on web_hook_logs (web_hook_id, created_at desc, id desc)`.execute(db);
}
