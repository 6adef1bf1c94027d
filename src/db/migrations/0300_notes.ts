import { sql, type Kysely } from 'kysely';

// Notes (comments) on any noteable: commits now, issues / merge requests / snippets later.
// Commit notes have no noteable_id (commits are not rows); they carry commit_id instead.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table notes (
      id serial primary key,
      project_id integer references projects(id) on delete cascade,
      noteable_type text not null,
      noteable_id integer,
      commit_id text,
      discussion_id text not null,
      type text,
      body text not null,
      author_id integer references users(id) on delete set null,
      position jsonb,
      line_code text,
      system boolean not null default false,
      confidential boolean not null default false,
      internal boolean not null default false,
      resolved_at timestamptz,
      resolved_by_id integer references users(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index notes_project_commit on notes (project_id, commit_id, created_at) where commit_id is not null`.execute(db);
  await sql`create index notes_noteable on notes (noteable_type, noteable_id, created_at)`.execute(db);
  await sql`create index notes_discussion on notes (discussion_id)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
