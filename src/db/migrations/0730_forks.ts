import { sql, type Kysely } from 'kysely';

// Forks, as GitLab keeps them: a fork network per root project, and one member row per project in
// it (the root too, with no forked_from). "Is B a fork of A" is forked_from_project_id; "may a merge
// request go from B to A" is "same fork_network_id". Deleting a project drops its member row; its
// direct forks keep their network but lose their forked_from (GitLab's unlink); deleting the root
// keeps the network alive for the others (root_project_id becomes null, its name is remembered).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table fork_networks (
      id serial primary key,
      root_project_id integer unique references projects(id) on delete set null,
      deleted_root_project_name text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table fork_network_members (
      project_id integer primary key references projects(id) on delete cascade,
      fork_network_id integer not null references fork_networks(id) on delete cascade,
      forked_from_project_id integer references projects(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      check (forked_from_project_id is null or forked_from_project_id <> project_id)
    )`.execute(db);
  await sql`create index fork_network_members_network on fork_network_members (fork_network_id)`.execute(db);
  await sql`create index fork_network_members_forked_from on fork_network_members (forked_from_project_id) where forked_from_project_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists fork_network_members`.execute(db);
  await sql`drop table if exists fork_networks`.execute(db);
}
