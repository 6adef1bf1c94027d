import type { ColumnType, Generated, Selectable } from 'kysely';

/** A column the database fills on insert (id, timestamps with defaults). */
type Auto<T> = ColumnType<T, T | undefined, T>;
export type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
export type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
/** A `date` column, read as 'YYYY-MM-DD'. */
export type DateString = ColumnType<string | null, string | null | undefined, string | null>;

export interface UsersTable {
  id: Generated<number>;
  username: string;
  name: string;
  email: string;
  encrypted_password: string | null;
  password_automatically_set: Auto<boolean>;
  password_expires_at: NullableTimestamp;
  state: Auto<string>;
  user_type: Auto<string>;
  admin: Auto<boolean>;
  external: Auto<boolean>;
  bio: Auto<string>;
  location: Auto<string>;
  public_email: string | null;
  commit_email: string | null;
  skype: Auto<string>;
  linkedin: Auto<string>;
  twitter: Auto<string>;
  discord: Auto<string>;
  website_url: Auto<string>;
  organization: Auto<string>;
  job_title: Auto<string>;
  pronouns: string | null;
  note: string | null;
  avatar_path: string | null;
  private_profile: Auto<boolean>;
  can_create_group: Auto<boolean>;
  projects_limit: Auto<number>;
  theme_id: Auto<number>;
  color_scheme_id: Auto<number>;
  view_diffs_file_by_file: Auto<boolean>;
  two_factor_enabled: Auto<boolean>;
  shared_runners_minutes_limit: number | null;
  extra_shared_runners_minutes_limit: number | null;
  provisioned_by_group_id: number | null;
  is_auditor: Auto<boolean>;
  confirmed_at: NullableTimestamp;
  last_sign_in_at: NullableTimestamp;
  current_sign_in_at: NullableTimestamp;
  last_sign_in_ip: string | null;
  current_sign_in_ip: string | null;
  sign_in_count: Auto<number>;
  last_activity_on: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type User = Selectable<UsersTable>;

export interface PersonalAccessTokensTable {
  id: Generated<number>;
  user_id: number;
  name: string;
  description: string | null;
  token_digest: string;
  scopes: string[];
  expires_at: DateString;
  revoked: Auto<boolean>;
  impersonation: Auto<boolean>;
  last_used_at: NullableTimestamp;
  previous_personal_access_token_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type PersonalAccessToken = Selectable<PersonalAccessTokensTable>;

export interface NamespacesTable {
  id: Generated<number>;
  type: 'User' | 'Group';
  name: string;
  path: string;
  full_path: string;
  full_name: string;
  parent_id: number | null;
  traversal_ids: Auto<number[]>;
  owner_id: number | null;
  visibility_level: Auto<number>;
  description: Auto<string>;
  avatar_path: string | null;
  settings: Auto<Record<string, unknown>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Namespace = Selectable<NamespacesTable>;

export interface ProjectsTable {
  id: Generated<number>;
  name: string;
  path: string;
  namespace_id: number;
  creator_id: number | null;
  description: string | null;
  visibility_level: Auto<number>;
  default_branch: string | null;
  archived: Auto<boolean>;
  repository_storage: Auto<string>;
  disk_path: Auto<string>;
  repository_read_only: Auto<boolean>;
  empty_repo: Auto<boolean>;
  settings: Auto<Record<string, unknown>>;
  pending_delete: Auto<boolean>;
  created_at: Timestamp;
  updated_at: Timestamp;
  last_activity_at: Timestamp;
}
export type Project = Selectable<ProjectsTable>;

export interface MembersTable {
  id: Generated<number>;
  source_type: 'Project' | 'Namespace';
  source_id: number;
  user_id: number;
  access_level: number;
  expires_at: DateString;
  state: Auto<number>;
  requested_at: NullableTimestamp;
  override: Auto<boolean>;
  invite_source: string | null;
  created_by_id: number | null;
  /** Onboarding tasks (ci, code, issues) the inviter attached, in tasks_project_id (migration 0250). */
  tasks_to_be_done: Auto<string[]>;
  tasks_project_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type Member = Selectable<MembersTable>;

export interface ProjectGroupLinksTable {
  id: Generated<number>;
  project_id: number;
  group_id: number;
  group_access: number;
  expires_at: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface GroupGroupLinksTable {
  id: Generated<number>;
  shared_group_id: number;
  shared_with_group_id: number;
  group_access: number;
  expires_at: DateString;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface RateLimitCountersTable {
  key: string;
  window_start: Date | string;
  count: number;
}

export interface BackgroundJobsTable {
  id: Generated<number>;
  queue: Auto<string>;
  kind: string;
  payload: Auto<Record<string, unknown>>;
  state: Auto<string>;
  attempts: Auto<number>;
  max_attempts: Auto<number>;
  run_at: Timestamp;
  locked_at: NullableTimestamp;
  locked_by: string | null;
  last_error: string | null;
  created_at: Timestamp;
  finished_at: NullableTimestamp;
  /** A recurring kind's row (src/jobs/queue.ts defineRecurring): at most one pending or running. */
  recurring: Auto<boolean>;
  /** Due jobs of a higher priority are claimed first (default 0). */
  priority: Auto<number>;
}

export interface CoreTables {
  users: UsersTable;
  personal_access_tokens: PersonalAccessTokensTable;
  namespaces: NamespacesTable;
  projects: ProjectsTable;
  members: MembersTable;
  project_group_links: ProjectGroupLinksTable;
  group_group_links: GroupGroupLinksTable;
  rate_limit_counters: RateLimitCountersTable;
  background_jobs: BackgroundJobsTable;
}
