import { sql, type Kysely } from 'kysely';

// Releases (issue #32): one per tag of a project, with its notes, the milestones it closes and
// links to its assets. A release keeps the tag's commit at creation (`sha`) even if the tag moves.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table releases (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      tag text not null,
      name text not null,
      description text not null default '',
      sha text,
      author_id integer references users(id) on delete set null,
      released_at timestamptz not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, tag)
    )`.execute(db);
  // Lists are newest first by release date, then creation date.
  await sql`create index releases_project_released on releases (project_id, released_at desc, id desc)`.execute(db);
  await sql`
    create table release_links (
      id serial primary key,
      release_id integer not null references releases(id) on delete cascade,
      name text not null,
      url text not null,
      filepath text,
      link_type text not null default 'other' check (link_type in ('other', 'runbook', 'image', 'package')),
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (release_id, name),
      unique (release_id, url),
      unique (release_id, filepath)
    )`.execute(db);
  await sql`
    create table release_milestones (
      release_id integer not null references releases(id) on delete cascade,
      milestone_id integer not null references milestones(id) on delete cascade,
      primary key (release_id, milestone_id)
    )`.execute(db);
  await sql`create index release_milestones_milestone on release_milestones (milestone_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table release_milestones`.execute(db);
  await sql`drop table release_links`.execute(db);
  await sql`drop table releases`.execute(db);
}
