import { sql, type Kysely } from 'kysely';

// Protected environments (premium): an environment name per project and who may deploy to it.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table protected_environments (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      name text not null,
      required_approval_count integer not null default 0,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, name)
    )`.execute(db);
  // Exactly one of access_level, user_id, group_id is set on each row.
  await sql`
    create table protected_environment_deploy_access_levels (
      id serial primary key,
      protected_environment_id integer not null references protected_environments(id) on delete cascade,
      access_level integer,
      user_id integer references users(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      group_inheritance_type integer not null default 0,
      created_at timestamptz not null default now(),
      check (num_nonnulls(access_level, user_id, group_id) = 1)
    )`.execute(db);
  await sql`create index protected_environment_deploy_access_levels_env on protected_environment_deploy_access_levels (protected_environment_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table protected_environment_deploy_access_levels`.execute(db);
  await sql`drop table protected_environments`.execute(db);
}
