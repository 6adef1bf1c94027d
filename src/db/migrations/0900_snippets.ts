import { sql, type Kysely } from 'kysely';

// Snippets, personal (project_id null) and project ones, each backed by a bare repository on a
// named storage (repository_storage + disk_path, as projects are; disk_path is a hashed path
// under @snippets/). The files live only in the repository; the row holds what the API edits
// besides them. user_agent / ip_address are recorded at creation (GitLab's UserAgentDetail).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table snippets (
      id serial primary key,
      title text not null,
      description text,
      author_id integer not null references users(id) on delete cascade,
      project_id integer references projects(id) on delete cascade,
      visibility_level integer not null default 0,
      repository_storage text not null default 'default',
      disk_path text not null default '',
      repository_read_only boolean not null default false,
      expires_at timestamptz,
      user_agent text,
      ip_address text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index snippets_author on snippets (author_id, id)`.execute(db);
  await sql`create index snippets_project on snippets (project_id, id) where project_id is not null`.execute(db);
  await sql`create index snippets_personal_public on snippets (id) where project_id is null and visibility_level = 20`.execute(db);
  await sql`create index snippets_storage on snippets (repository_storage)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table snippets`.execute(db);
}
