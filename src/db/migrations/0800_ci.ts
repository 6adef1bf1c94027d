import { sql, type Kysely } from 'kysely';

// CI/CD: runners, CI variables, pipelines, stages, jobs (builds and bridges), their needs, traces
// and artifacts, and the queue of pending jobs that runners take from. Names and values follow
// GitLab's (ci_pipelines, ci_builds with type 'Ci::Build' / 'Ci::Bridge', statuses as strings),
// so that what the API shows maps one to one onto a row.
//
// Secrets (runner tokens, job tokens, registration tokens) are kept as SHA-256 digests
// (lib/secrets.ts tokenDigest); a registration token, which maintainers may read back, also
// keeps its value encrypted.
export async function up(db: Kysely<any>): Promise<void> {
  // ---- runners -------------------------------------------------------------------------------
  await sql`
    create table ci_runners (
      id serial primary key,
      token_digest text not null unique,
      token_expires_at timestamptz,
      description text not null default '',
      -- instance_type, group_type, project_type
      runner_type text not null,
      -- paused is "not active"
      active boolean not null default true,
      locked boolean not null default false,
      run_untagged boolean not null default true,
      -- not_protected or ref_protected
      access_level text not null default 'not_protected',
      maximum_timeout integer,
      tag_list text[] not null default '{}',
      maintenance_note text,
      contacted_at timestamptz,
      version text,
      revision text,
      platform text,
      architecture text,
      ip_address text,
      executor_type text,
      creator_id integer references users(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (runner_type in ('instance_type', 'group_type', 'project_type')),
      check (access_level in ('not_protected', 'ref_protected'))
    )`.execute(db);
  // The first row of a project runner is its owner project (GitLab refuses to unassign it).
  await sql`
    create table ci_runner_projects (
      id serial primary key,
      runner_id integer not null references ci_runners(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      created_at timestamptz not null default now(),
      unique (runner_id, project_id)
    )`.execute(db);
  await sql`create index ci_runner_projects_project on ci_runner_projects (project_id)`.execute(db);
  await sql`
    create table ci_runner_namespaces (
      runner_id integer not null references ci_runners(id) on delete cascade,
      namespace_id integer not null references namespaces(id) on delete cascade,
      primary key (runner_id, namespace_id)
    )`.execute(db);
  await sql`create index ci_runner_namespaces_namespace on ci_runner_namespaces (namespace_id)`.execute(db);
  // Registration tokens: one for the instance (no owner), one per group or project, resettable.
  await sql`
    create table ci_registration_tokens (
      id serial primary key,
      -- instance_type, group_type, project_type
      runner_type text not null,
      namespace_id integer references namespaces(id) on delete cascade,
      project_id integer references projects(id) on delete cascade,
      token_digest text not null unique,
      token_encrypted text not null,
      created_at timestamptz not null default now(),
      check ((runner_type = 'instance_type' and namespace_id is null and project_id is null)
          or (runner_type = 'group_type' and namespace_id is not null and project_id is null)
          or (runner_type = 'project_type' and project_id is not null and namespace_id is null))
    )`.execute(db);
  await sql`create unique index ci_registration_tokens_owner on ci_registration_tokens (runner_type, coalesce(namespace_id, 0), coalesce(project_id, 0))`.execute(db);

  // ---- CI variables ---------------------------------------------------------------------------
  // Project variables (project_id) and group variables (namespace_id); values encrypted.
  await sql`
    create table ci_variables (
      id serial primary key,
      project_id integer references projects(id) on delete cascade,
      namespace_id integer references namespaces(id) on delete cascade,
      key text not null,
      value_encrypted text not null,
      -- env_var or file
      variable_type text not null default 'env_var',
      protected boolean not null default false,
      masked boolean not null default false,
      raw boolean not null default false,
      environment_scope text not null default '*',
      description text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check ((project_id is null) <> (namespace_id is null))
    )`.execute(db);
  await sql`create unique index ci_variables_project_key on ci_variables (project_id, key, environment_scope) where project_id is not null`.execute(db);
  await sql`create unique index ci_variables_group_key on ci_variables (namespace_id, key, environment_scope) where namespace_id is not null`.execute(db);

  // ---- pipelines ------------------------------------------------------------------------------
  await sql`
    create table ci_pipelines (
      id serial primary key,
      iid integer not null,
      project_id integer not null references projects(id) on delete cascade,
      ref text not null,
      tag boolean not null default false,
      sha text not null,
      before_sha text,
      -- push, web, api, trigger, schedule, merge_request_event, parent_pipeline, pipeline, chat, ...
      source text not null,
      -- created, waiting_for_resource, preparing, pending, running, success, failed, canceled, skipped, manual, scheduled
      status text not null default 'created',
      name text,
      yaml_errors text,
      failure_reason text,
      protected boolean not null default false,
      user_id integer references users(id) on delete set null,
      merge_request_id integer references merge_requests(id) on delete set null,
      -- a child pipeline's parent, and the bridge job that made it (child or multi-project)
      parent_pipeline_id integer references ci_pipelines(id) on delete cascade,
      source_job_id integer,
      -- the compiled configuration (src/ci/config), kept so that retries need no recompilation
      config jsonb,
      started_at timestamptz,
      finished_at timestamptz,
      duration integer,
      queued_duration integer,
      committed_at timestamptz,
      lock_version integer not null default 0,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, iid)
    )`.execute(db);
  await sql`create index ci_pipelines_project_ref on ci_pipelines (project_id, ref, id desc)`.execute(db);
  await sql`create index ci_pipelines_project_sha on ci_pipelines (project_id, sha, id desc)`.execute(db);
  await sql`create index ci_pipelines_project_status on ci_pipelines (project_id, status, id desc)`.execute(db);
  await sql`create index ci_pipelines_merge_request on ci_pipelines (merge_request_id, id desc) where merge_request_id is not null`.execute(db);
  await sql`create index ci_pipelines_parent on ci_pipelines (parent_pipeline_id) where parent_pipeline_id is not null`.execute(db);
  await sql`
    create table ci_pipeline_variables (
      id serial primary key,
      pipeline_id integer not null references ci_pipelines(id) on delete cascade,
      key text not null,
      value_encrypted text not null,
      variable_type text not null default 'env_var',
      raw boolean not null default false,
      unique (pipeline_id, key)
    )`.execute(db);
  await sql`
    create table ci_stages (
      id serial primary key,
      pipeline_id integer not null references ci_pipelines(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      name text not null,
      position integer not null,
      status text not null default 'created',
      unique (pipeline_id, name)
    )`.execute(db);

  // ---- jobs -----------------------------------------------------------------------------------
  await sql`
    create table ci_builds (
      id serial primary key,
      pipeline_id integer not null references ci_pipelines(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      stage_id integer references ci_stages(id) on delete cascade,
      stage text not null,
      stage_idx integer not null,
      name text not null,
      -- Ci::Build or Ci::Bridge
      type text not null default 'Ci::Build',
      -- created, waiting_for_resource, preparing, pending, running, success, failed, canceled, skipped, manual, scheduled
      status text not null default 'created',
      -- on_success, on_failure, always, manual, delayed
      "when" text not null default 'on_success',
      allow_failure boolean not null default false,
      -- the compiled job (src/ci/config CompiledJob): script, image, services, artifacts, cache, rules' outcome...
      options jsonb not null default '{}',
      yaml_variables jsonb not null default '[]',
      ref text not null,
      tag boolean not null default false,
      sha text not null,
      protected boolean not null default false,
      tag_list text[] not null default '{}',
      user_id integer references users(id) on delete set null,
      runner_id integer references ci_runners(id) on delete set null,
      -- the job token (CI_JOB_TOKEN), valid while the job runs
      token_digest text unique,
      failure_reason text,
      exit_code integer,
      coverage double precision,
      coverage_regex text,
      timeout integer,
      -- retried jobs stay, hidden unless include_retried
      retried boolean not null default false,
      scheduled_at timestamptz,
      queued_at timestamptz,
      started_at timestamptz,
      finished_at timestamptz,
      erased_at timestamptz,
      erased_by_id integer references users(id) on delete set null,
      artifacts_expire_at timestamptz,
      environment text,
      interruptible boolean,
      -- a bridge's downstream pipeline
      downstream_pipeline_id integer references ci_pipelines(id) on delete set null,
      -- bytes of trace received so far (the offset a PATCH must continue from)
      trace_size bigint not null default 0,
      lock_version integer not null default 0,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_builds_pipeline on ci_builds (pipeline_id, id)`.execute(db);
  await sql`create index ci_builds_project on ci_builds (project_id, id desc)`.execute(db);
  await sql`create index ci_builds_project_status on ci_builds (project_id, status, id desc)`.execute(db);
  await sql`create index ci_builds_runner on ci_builds (runner_id, id desc) where runner_id is not null`.execute(db);
  await sql`create index ci_builds_scheduled on ci_builds (scheduled_at) where status = 'scheduled'`.execute(db);
  await sql`alter table ci_pipelines add foreign key (source_job_id) references ci_builds(id) on delete set null`.execute(db);
  await sql`
    create table ci_build_needs (
      build_id integer not null references ci_builds(id) on delete cascade,
      name text not null,
      artifacts boolean not null default true,
      optional boolean not null default false,
      primary key (build_id, name)
    )`.execute(db);
  // Jobs waiting for a runner, with what runner matching needs, so a runner's request is one
  // indexed query with FOR UPDATE SKIP LOCKED; the row goes when a runner takes the job.
  await sql`
    create table ci_pending_builds (
      build_id integer primary key references ci_builds(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      namespace_id integer not null,
      protected boolean not null default false,
      tag_list text[] not null default '{}',
      instance_runners_enabled boolean not null default true,
      group_runners_enabled boolean not null default true,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_pending_builds_project on ci_pending_builds (project_id, build_id)`.execute(db);
  // A job's log, in chunks appended in order (chunk_index from 0); the API joins them.
  await sql`
    create table ci_build_trace_chunks (
      build_id integer not null references ci_builds(id) on delete cascade,
      chunk_index integer not null,
      data bytea not null,
      primary key (build_id, chunk_index)
    )`.execute(db);
  // Artifact files; the bytes live in the object store (local disk or S3) under store_key.
  await sql`
    create table ci_job_artifacts (
      id serial primary key,
      job_id integer not null references ci_builds(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      -- archive, metadata, trace, junit, ...
      file_type text not null,
      -- zip, gzip, raw
      file_format text not null,
      file_name text not null,
      size bigint not null,
      file_sha256 text,
      store_key text not null,
      locked boolean not null default false,
      expire_at timestamptz,
      created_at timestamptz not null default now(),
      unique (job_id, file_type)
    )`.execute(db);
  await sql`create index ci_job_artifacts_project on ci_job_artifacts (project_id, id)`.execute(db);
  await sql`create index ci_job_artifacts_expire on ci_job_artifacts (expire_at) where expire_at is not null and locked = false`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['ci_job_artifacts', 'ci_build_trace_chunks', 'ci_pending_builds', 'ci_build_needs']) await sql`drop table ${sql.table(t)}`.execute(db);
  await sql`alter table ci_pipelines drop column source_job_id`.execute(db);
  for (const t of ['ci_builds', 'ci_stages', 'ci_pipeline_variables', 'ci_pipelines', 'ci_variables', 'ci_registration_tokens', 'ci_runner_namespaces', 'ci_runner_projects', 'ci_runners']) {
    await sql`drop table ${sql.table(t)}`.execute(db);
  }
}
