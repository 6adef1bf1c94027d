import { sql, type Kysely } from 'kysely';

// Git LFS over HTTP (issue #31). Objects are content-addressed (oid = sha256 of the bytes) and
// stored once in the artifacts' object storage (`lfs/objects/<aa>/<bb>/<oid>`), whatever the
// number of projects that hold them; a project sees an object only through its link row, made
// when someone with push rights uploaded those bytes to it (or it was forked from a project
// that had it). A deleted project's links go with it (cascade); an object no project links any
// more is removed by the `lfs.prune` job. Locks are GitLab's LfsFileLock: one per (project, path).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table lfs_objects (
      id bigserial primary key,
      oid char(64) not null unique,
      size bigint not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table lfs_objects_projects (
      id bigserial primary key,
      lfs_object_id bigint not null references lfs_objects (id) on delete cascade,
      project_id integer not null references projects (id) on delete cascade,
      created_at timestamptz not null default now(),
      unique (project_id, lfs_object_id)
    )`.execute(db);
  await sql`create index lfs_objects_projects_object on lfs_objects_projects (lfs_object_id)`.execute(db);
  await sql`
    create table lfs_file_locks (
      id bigserial primary key,
      project_id integer not null references projects (id) on delete cascade,
      user_id integer not null references users (id) on delete cascade,
      path text not null,
      created_at timestamptz not null default now(),
      unique (project_id, path)
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists lfs_file_locks`.execute(db);
  await sql`drop table if exists lfs_objects_projects`.execute(db);
  await sql`drop table if exists lfs_objects`.execute(db);
}
