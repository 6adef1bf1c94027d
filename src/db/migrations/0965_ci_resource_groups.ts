import { sql, type Kysely } from 'kysely';

// resource_group (issue #28): jobs of a project that name the same resource group run one at a
// time. A group has one resource; a job holds it from the moment it leaves waiting_for_resource
// until it finishes (GitLab's Ci::ResourceGroup and Ci::Resource). Groups are made the first time
// a job of theirs is enqueued.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table ci_resource_groups (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      key text not null,
      -- unordered, oldest_first, newest_first, newest_ready_first
      process_mode text not null default 'unordered',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, key)
    )`.execute(db);
  await sql`
    create table ci_resources (
      id serial primary key,
      resource_group_id integer not null references ci_resource_groups(id) on delete cascade,
      -- the job holding it; null when free
      build_id integer unique references ci_builds(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_resources_group on ci_resources (resource_group_id)`.execute(db);
  await sql`alter table ci_builds add column resource_group_id integer references ci_resource_groups(id) on delete set null`.execute(db);
  await sql`create index ci_builds_waiting_for_resource on ci_builds (resource_group_id, id) where status = 'waiting_for_resource'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index ci_builds_waiting_for_resource`.execute(db);
  await sql`alter table ci_builds drop column resource_group_id`.execute(db);
  await sql`drop table ci_resources`.execute(db);
  await sql`drop table ci_resource_groups`.execute(db);
}
