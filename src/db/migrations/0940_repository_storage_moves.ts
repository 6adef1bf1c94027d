import { sql, type Kysely } from 'kysely';

// Repository storage moves (GitLab's project_, snippet_ and group_repository_storage_moves, in one
// table with the container's type). At most one unfinished move per container, enforced here so
// two processes scheduling at once cannot both win. Groups get the storage and read-only columns
// projects have (Cairn has no group wikis; see src/services/storage_moves/kinds.ts).
// repository_write_leases: one row per git write in progress (a push, an API commit), taken only
// while the container is writable; a move waits for them to end after making the container
// read-only, so no write lands in the source after the copy (GitLab's reference counter).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table repository_storage_moves (
      id bigserial primary key,
      container_type text not null check (container_type in ('Project', 'Snippet', 'Group')),
      container_id bigint not null,
      state text not null default 'initial'
        check (state in ('initial', 'scheduled', 'started', 'replicated', 'finished', 'failed', 'cleanup_failed')),
      source_storage_name text not null,
      destination_storage_name text not null,
      error_message text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index repository_storage_moves_container on repository_storage_moves (container_type, container_id, created_at desc)`.execute(db);
  await sql`create index repository_storage_moves_type on repository_storage_moves (container_type, created_at desc)`.execute(db);
  await sql`create unique index repository_storage_moves_one_active on repository_storage_moves (container_type, container_id)
            where state in ('initial', 'scheduled', 'started')`.execute(db);

  await sql`alter table namespaces add column repository_storage text not null default 'default'`.execute(db);
  await sql`alter table namespaces add column repository_read_only boolean not null default false`.execute(db);

  await sql`
    create table repository_write_leases (
      id bigserial primary key,
      container_type text not null,
      container_id bigint not null,
      -- hostname:pid of the process writing, so a dead holder on this host is recognised at once.
      holder text not null,
      created_at timestamptz not null default now(),
      expires_at timestamptz not null
    )`.execute(db);
  await sql`create index repository_write_leases_container on repository_write_leases (container_type, container_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table repository_write_leases`.execute(db);
  await sql`alter table namespaces drop column repository_read_only`.execute(db);
  await sql`alter table namespaces drop column repository_storage`.execute(db);
  await sql`drop table repository_storage_moves`.execute(db);
}
