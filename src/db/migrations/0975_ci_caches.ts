import { sql, type Kysely } from 'kysely';

// CI caches (issue #27): `cache:` archives of jobs, kept in the artifacts' object storage so that
// every runner shares them. One row per (project, key) names the object that holds the key's
// archive now; an upload is written to a new object first (its row in ci_cache_uploads while it
// is under way, so that one a crash left behind can be removed) and becomes the key's archive
// in one statement, the replaced object being deleted afterwards. projects.jobs_cache_index is
// GitLab's: "Clear runner caches" increments it, and it suffixes every cache key after.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table projects add column jobs_cache_index integer`.execute(db);
  await sql`
    create table ci_caches (
      id bigserial primary key,
      -- no foreign key: the objects of a deleted project's caches are removed by the expiry
      -- sweep (src/services/ci_caches.ts), which finds their rows without a project
      project_id integer not null,
      -- the key as the runner computed it (variables expanded, GitLab's suffixes added)
      key text not null,
      -- the object in the artifacts store
      store_key text not null,
      size bigint not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      -- the last restore or upload: unused caches expire (CAIRN_CI_CACHE_EXPIRE_IN)
      last_used_at timestamptz not null default now(),
      unique (project_id, key)
    )`.execute(db);
  await sql`create index ci_caches_last_used on ci_caches (last_used_at)`.execute(db);
  await sql`
    create table ci_cache_uploads (
      id bigserial primary key,
      project_id integer not null,
      store_key text not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index ci_cache_uploads_created on ci_cache_uploads (created_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table if exists ci_cache_uploads`.execute(db);
  await sql`drop table if exists ci_caches`.execute(db);
  await sql`alter table projects drop column if exists jobs_cache_index`.execute(db);
}
