import { sql, type Kysely } from 'kysely';

// Groups and projects: the group settings that carry behaviour get columns (the long tail
// stays in namespaces.settings / projects.settings), project topics, and stars.
export async function up(db: Kysely<any>): Promise<void> {
  // subgroup_creation_level: 0 owners, 1 maintainers (GitLab's default).
  // project_creation_level: 0 no one, 1 maintainers, 2 developers and maintainers (default).
  await sql`
    alter table namespaces
      add column runners_token text,
      add column subgroup_creation_level integer not null default 1,
      add column project_creation_level integer not null default 2,
      add column default_branch_name text,
      add column request_access_enabled boolean not null default true`.execute(db);
  await sql`alter table projects add column topics text[] not null default '{}'`.execute(db);
  await sql`create index projects_topics on projects using gin (topics)`.execute(db);
  await sql`create index projects_created_at on projects (created_at, id)`.execute(db);
  await sql`create index projects_last_activity on projects (last_activity_at, id)`.execute(db);

  await sql`
    create table users_star_projects (
      id serial primary key,
      user_id integer not null references users(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      created_at timestamptz not null default now(),
      unique (user_id, project_id)
    )`.execute(db);
  await sql`create index users_star_projects_project on users_star_projects (project_id)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
