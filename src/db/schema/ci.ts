import type { ColumnType, Generated, Selectable } from 'kysely';
import type { NullableTimestamp, Timestamp } from './core.js';

/** CI/CD (migration 0800_ci): runners, variables, pipelines, stages, jobs, traces, artifacts. */

type Json<T> = ColumnType<T, string | undefined, string>;
type TextArray = ColumnType<string[], string[] | undefined, string[]>;

export type RunnerType = 'instance_type' | 'group_type' | 'project_type';
/** GitLab's job and pipeline statuses. */
export type CiStatus =
  | 'created' | 'waiting_for_resource' | 'preparing' | 'pending' | 'running'
  | 'success' | 'failed' | 'canceled' | 'skipped' | 'manual' | 'scheduled';

export interface CiRunnersTable {
  id: Generated<number>;
  token_digest: string;
  token_expires_at: NullableTimestamp;
  description: Generated<string>;
  runner_type: RunnerType;
  active: Generated<boolean>;
  locked: Generated<boolean>;
  run_untagged: Generated<boolean>;
  access_level: Generated<'not_protected' | 'ref_protected'>;
  maximum_timeout: number | null;
  tag_list: TextArray;
  maintenance_note: string | null;
  contacted_at: NullableTimestamp;
  version: string | null;
  revision: string | null;
  platform: string | null;
  architecture: string | null;
  ip_address: string | null;
  executor_type: string | null;
  /** What the runner calls itself (info.name; migration 0850). */
  name: ColumnType<string | null, string | null | undefined, string | null>;
  creator_id: number | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiRunner = Selectable<CiRunnersTable>;

export interface CiRunnerProjectsTable {
  id: Generated<number>;
  runner_id: number;
  project_id: number;
  created_at: Timestamp;
}

export interface CiRunnerNamespacesTable {
  runner_id: number;
  namespace_id: number;
}

export interface CiRegistrationTokensTable {
  id: Generated<number>;
  runner_type: RunnerType;
  namespace_id: number | null;
  project_id: number | null;
  token_digest: string;
  token_encrypted: string;
  created_at: Timestamp;
}

export interface CiVariablesTable {
  id: Generated<number>;
  project_id: number | null;
  namespace_id: number | null;
  key: string;
  value_encrypted: string;
  variable_type: Generated<'env_var' | 'file'>;
  protected: Generated<boolean>;
  masked: Generated<boolean>;
  raw: Generated<boolean>;
  environment_scope: Generated<string>;
  description: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiVariable = Selectable<CiVariablesTable>;

export interface CiPipelinesTable {
  id: Generated<number>;
  iid: number;
  project_id: number;
  ref: string;
  tag: Generated<boolean>;
  sha: string;
  before_sha: string | null;
  source: string;
  status: Generated<CiStatus>;
  name: string | null;
  yaml_errors: string | null;
  failure_reason: string | null;
  protected: Generated<boolean>;
  user_id: number | null;
  merge_request_id: number | null;
  parent_pipeline_id: number | null;
  source_job_id: number | null;
  /** The compiled configuration (src/ci/config), for retries. */
  config: Json<unknown> | null;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
  duration: number | null;
  queued_duration: number | null;
  committed_at: NullableTimestamp;
  lock_version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiPipeline = Selectable<CiPipelinesTable>;

export interface CiPipelineVariablesTable {
  id: Generated<number>;
  pipeline_id: number;
  key: string;
  value_encrypted: string;
  variable_type: Generated<'env_var' | 'file'>;
  raw: Generated<boolean>;
}

export interface CiStagesTable {
  id: Generated<number>;
  pipeline_id: number;
  project_id: number;
  name: string;
  position: number;
  status: Generated<CiStatus>;
}
export type CiStage = Selectable<CiStagesTable>;

export interface CiBuildsTable {
  id: Generated<number>;
  pipeline_id: number;
  project_id: number;
  stage_id: number | null;
  stage: string;
  stage_idx: number;
  name: string;
  type: Generated<'Ci::Build' | 'Ci::Bridge'>;
  status: Generated<CiStatus>;
  when: Generated<string>;
  allow_failure: Generated<boolean>;
  /** The compiled job (src/ci/config CompiledJob). */
  options: Json<Record<string, unknown>>;
  yaml_variables: Json<unknown[]>;
  ref: string;
  tag: Generated<boolean>;
  sha: string;
  protected: Generated<boolean>;
  tag_list: TextArray;
  user_id: number | null;
  runner_id: number | null;
  /** Digest of the job token (CI_JOB_TOKEN); valid while the job runs. */
  token_digest: string | null;
  failure_reason: string | null;
  exit_code: number | null;
  coverage: number | null;
  coverage_regex: string | null;
  timeout: number | null;
  retried: Generated<boolean>;
  scheduled_at: NullableTimestamp;
  queued_at: NullableTimestamp;
  started_at: NullableTimestamp;
  finished_at: NullableTimestamp;
  erased_at: NullableTimestamp;
  erased_by_id: number | null;
  artifacts_expire_at: NullableTimestamp;
  environment: string | null;
  interruptible: boolean | null;
  downstream_pipeline_id: number | null;
  /** Bytes of trace received so far: the offset the next PATCH must start at. */
  trace_size: Generated<number>;
  lock_version: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
}
export type CiBuild = Selectable<CiBuildsTable>;

export interface CiBuildNeedsTable {
  build_id: number;
  name: string;
  artifacts: Generated<boolean>;
  optional: Generated<boolean>;
}

export interface CiPendingBuildsTable {
  build_id: number;
  project_id: number;
  namespace_id: number;
  protected: Generated<boolean>;
  tag_list: TextArray;
  instance_runners_enabled: Generated<boolean>;
  group_runners_enabled: Generated<boolean>;
  created_at: Timestamp;
}

export interface CiBuildTraceChunksTable {
  build_id: number;
  chunk_index: number;
  data: Buffer;
}

export interface CiJobArtifactsTable {
  id: Generated<number>;
  job_id: number;
  project_id: number;
  file_type: string;
  file_format: string;
  file_name: string;
  size: number;
  file_sha256: string | null;
  store_key: string;
  locked: Generated<boolean>;
  expire_at: NullableTimestamp;
  created_at: Timestamp;
}
export type CiJobArtifact = Selectable<CiJobArtifactsTable>;

export interface CiTables {
  ci_runners: CiRunnersTable;
  ci_runner_projects: CiRunnerProjectsTable;
  ci_runner_namespaces: CiRunnerNamespacesTable;
  ci_registration_tokens: CiRegistrationTokensTable;
  ci_variables: CiVariablesTable;
  ci_pipelines: CiPipelinesTable;
  ci_pipeline_variables: CiPipelineVariablesTable;
  ci_stages: CiStagesTable;
  ci_builds: CiBuildsTable;
  ci_build_needs: CiBuildNeedsTable;
  ci_pending_builds: CiPendingBuildsTable;
  ci_build_trace_chunks: CiBuildTraceChunksTable;
  ci_job_artifacts: CiJobArtifactsTable;
}
