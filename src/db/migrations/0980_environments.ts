import { sql, type Kysely } from 'kysely';

// Environments and deployments (issue #28). An environment is created by the first job that
// names it (or through the API); a deployment records one deployment job (its `deployable`, a
// ci_builds row) or one deployment reported through the API, and follows its job's status.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table environments (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      name text not null,
      -- GitLab's environment slug: at most 24 characters, unique in the project
      slug text not null,
      external_url text,
      description text,
      state text not null default 'available' check (state in ('available', 'stopping', 'stopped')),
      tier text not null default 'other' check (tier in ('production', 'staging', 'testing', 'development', 'other')),
      auto_stop_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, name),
      unique (project_id, slug)
    )`.execute(db);
  // The auto-stop sweep looks only at available environments with a deadline.
  await sql`create index environments_auto_stop on environments (auto_stop_at) where state = 'available' and auto_stop_at is not null`.execute(db);
  await sql`
    create table deployments (
      id serial primary key,
      iid integer not null,
      project_id integer not null references projects(id) on delete cascade,
      environment_id integer not null references environments(id) on delete cascade,
      ref text not null,
      tag boolean not null default false,
      sha text not null,
      user_id integer references users(id) on delete set null,
      -- the deployment job; null for deployments reported through the API
      deployable_id integer references ci_builds(id) on delete set null,
      status text not null default 'created'
        check (status in ('created', 'running', 'success', 'failed', 'canceled', 'skipped', 'blocked')),
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      finished_at timestamptz,
      unique (project_id, iid)
    )`.execute(db);
  await sql`create index deployments_environment on deployments (environment_id, id)`.execute(db);
  await sql`create index deployments_deployable on deployments (deployable_id) where deployable_id is not null`.execute(db);
  await sql`create index deployments_project_updated on deployments (project_id, updated_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table deployments`.execute(db);
  await sql`drop table environments`.execute(db);
}
