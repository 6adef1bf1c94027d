import type { Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

export type HookType = 'ProjectHook' | 'GroupHook' | 'SystemHook';
export type BranchFilterStrategy = 'wildcard' | 'regex' | 'all_branches';

/** The event switches of a hook, as GitLab names them (migration 1030). */
export const HOOK_EVENT_FLAGS = [
  'push_events',
  'tag_push_events',
  'issues_events',
  'confidential_issues_events',
  'merge_requests_events',
  'note_events',
  'confidential_note_events',
  'job_events',
  'pipeline_events',
  'wiki_page_events',
  'deployment_events',
  'releases_events',
  'milestone_events',
  'feature_flag_events',
  'emoji_events',
  'resource_access_token_events',
  'repository_update_events',
  'member_events',
] as const;
export type HookEventFlag = (typeof HOOK_EVENT_FLAGS)[number];

export type WebHooksTable = {
  id: Generated<number>;
  type: Generated<HookType>;
  project_id: number | null;
  group_id: number | null;
  url: string;
  name: Generated<string>;
  description: Generated<string>;
  token_encrypted: string | null;
  /** JSON object of key to value, encrypted. */
  url_variables_encrypted: string | null;
  /** JSON object of header name to value, encrypted. */
  custom_headers_encrypted: string | null;
  enable_ssl_verification: Generated<boolean>;
  push_events_branch_filter: Generated<string>;
  branch_filter_strategy: Generated<BranchFilterStrategy>;
  recent_failures: Generated<number>;
  backoff_count: Generated<number>;
  disabled_until: NullableTimestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
} & { [K in HookEventFlag]: Generated<boolean> };
export type WebHook = Selectable<WebHooksTable>;

export interface WebHookLogsTable {
  id: Generated<number>;
  web_hook_id: number;
  trigger: string;
  url: string;
  request_headers: Record<string, string>;
  request_data: unknown;
  response_headers: Record<string, string>;
  response_body: Generated<string>;
  response_status: string;
  execution_duration: Generated<number>;
  internal_error_message: string | null;
  event_uuid: string | null;
  created_at: Timestamp;
}
export type WebHookLog = Selectable<WebHookLogsTable>;

export interface WebHookTables {
  web_hooks: WebHooksTable;
  web_hook_logs: WebHookLogsTable;
}
