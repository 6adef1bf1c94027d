import { sql, type Kysely } from 'kysely';

// Pipeline schedules, pipeline trigger tokens and instance CI/CD variables (issue #28).
//
// - A schedule runs its pipeline at `next_run_at`; whichever process's queue worker finds it due
//   creates the pipeline and moves `next_run_at` on in one transaction, the move guarded by the
//   old value, so two processes never both run one due time (src/ci/pipelines/schedules.ts).
// - A trigger token is kept as a SHA-256 digest (what a trigger request is looked up by) and,
//   encrypted, its value: GitLab shows a trigger's token in full to the user who owns it, as
//   registration tokens are shown to maintainers (migration 0800).
// - Instance variables are rows of ci_variables with neither a project nor a group: one table and
//   one implementation for the three levels; every query of project or group variables names its
//   owner's column, so instance rows never mix in.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table ci_pipeline_schedules (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      owner_id integer references users(id) on delete set null,
      description text not null,
      -- a full ref (refs/heads/x, refs/tags/x), or the short name given when neither existed
      ref text not null,
      cron text not null,
      cron_timezone text not null default 'UTC',
      next_run_at timestamptz,
      active boolean not null default true,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_pipeline_schedules_project on ci_pipeline_schedules (project_id, id)`.execute(db);
  await sql`create index ci_pipeline_schedules_due on ci_pipeline_schedules (next_run_at) where active`.execute(db);
  await sql`
    create table ci_pipeline_schedule_variables (
      id serial primary key,
      pipeline_schedule_id integer not null references ci_pipeline_schedules(id) on delete cascade,
      key text not null,
      value_encrypted text not null,
      variable_type text not null default 'env_var',
      raw boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (pipeline_schedule_id, key),
      check (variable_type in ('env_var', 'file'))
    )`.execute(db);
  await sql`
    create table ci_triggers (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      owner_id integer references users(id) on delete set null,
      description text not null default '',
      token_digest text not null unique,
      token_encrypted text not null,
      last_used_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_triggers_project on ci_triggers (project_id, id)`.execute(db);
  await sql`alter table ci_pipelines add column pipeline_schedule_id integer references ci_pipeline_schedules(id) on delete set null`.execute(db);
  await sql`alter table ci_pipelines add column trigger_id integer references ci_triggers(id) on delete set null`.execute(db);
  await sql`create index ci_pipelines_schedule on ci_pipelines (pipeline_schedule_id, id desc) where pipeline_schedule_id is not null`.execute(db);
  await sql`create index ci_pipelines_trigger on ci_pipelines (trigger_id) where trigger_id is not null`.execute(db);

  // Instance variables: neither a project nor a group (never both).
  await sql`alter table ci_variables drop constraint ci_variables_check`.execute(db);
  await sql`alter table ci_variables add constraint ci_variables_one_owner check (project_id is null or namespace_id is null)`.execute(db);
  await sql`create unique index ci_variables_instance_key on ci_variables (key) where project_id is null and namespace_id is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`delete from ci_variables where project_id is null and namespace_id is null`.execute(db);
  await sql`drop index if exists ci_variables_instance_key`.execute(db);
  await sql`alter table ci_variables drop constraint if exists ci_variables_one_owner`.execute(db);
  await sql`alter table ci_variables add constraint ci_variables_check check ((project_id is null) <> (namespace_id is null))`.execute(db);
  await sql`alter table ci_pipelines drop column if exists trigger_id`.execute(db);
  await sql`alter table ci_pipelines drop column if exists pipeline_schedule_id`.execute(db);
  await sql`drop table if exists ci_triggers`.execute(db);
  await sql`drop table if exists ci_pipeline_schedule_variables`.execute(db);
  await sql`drop table if exists ci_pipeline_schedules`.execute(db);
}
