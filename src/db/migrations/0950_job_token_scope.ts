import { sql, type Kysely } from 'kysely';

// The CI job token's inbound scope (GitLab 16's "limit access to this project"): a job token of
// another project reaches this project (git, API, artifacts) only when that project, or a group
// above it, is on this project's allowlist. On for projects created from now on (GitLab's
// default for new projects); projects that exist keep today's behaviour until a maintainer
// turns it on, as GitLab did for projects older than the setting.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table projects add column ci_inbound_job_token_scope_enabled boolean not null default false`.execute(db);
  await sql`alter table projects alter column ci_inbound_job_token_scope_enabled set default true`.execute(db);
  await sql`
    create table ci_job_token_project_scope_links (
      id bigserial primary key,
      -- the project whose allowlist this is, and the project whose job tokens it admits
      source_project_id integer not null references projects(id) on delete cascade,
      target_project_id integer not null references projects(id) on delete cascade,
      added_by_id integer references users(id) on delete set null,
      created_at timestamptz not null default now(),
      unique (source_project_id, target_project_id)
    )`.execute(db);
  await sql`create index ci_job_token_project_scope_links_target on ci_job_token_project_scope_links (target_project_id)`.execute(db);
  await sql`
    create table ci_job_token_group_scope_links (
      id bigserial primary key,
      source_project_id integer not null references projects(id) on delete cascade,
      target_group_id integer not null references namespaces(id) on delete cascade,
      added_by_id integer references users(id) on delete set null,
      created_at timestamptz not null default now(),
      unique (source_project_id, target_group_id)
    )`.execute(db);
  await sql`create index ci_job_token_group_scope_links_target on ci_job_token_group_scope_links (target_group_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists ci_job_token_group_scope_links`.execute(db);
  await sql`drop table if exists ci_job_token_project_scope_links`.execute(db);
  await sql`alter table projects drop column if exists ci_inbound_job_token_scope_enabled`.execute(db);
}
