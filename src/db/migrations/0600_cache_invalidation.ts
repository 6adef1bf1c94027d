import { sql, type Kysely } from 'kysely';

// Process-local caches (src/cache/) stay true to the database through notifications: every write
// to a watched table notifies channel cairn_cache when its transaction commits, and every
// process listening there drops what it cached. `cairn_watch_tables(unwatched)` puts the trigger
// on every table but the busy ones no cache reads (UNWATCHED_TABLES in src/db/write_observer.ts);
// the migrator calls it after each run, so tables that later migrations add are watched too. `cache_listeners` lists the live processes, so a writer
// knows whose acknowledgement to wait for (src/cache/postgres_invalidation.ts).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table cache_listeners (
      id text primary key,
      -- The listening connection's server process: once it is gone, nobody waits for this listener.
      backend_pid integer not null,
      heartbeat_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create function cairn_cache_notify() returns trigger language plpgsql as $$
    begin
      perform pg_notify('cairn_cache', 't:' || TG_TABLE_NAME);
      return null;
    end $$`.execute(db);
  await sql`
    create function cairn_watch_tables(unwatched text[]) returns void language plpgsql as $$
    declare t record;
    begin
      -- Two processes starting together must not both create a trigger.
      perform pg_advisory_xact_lock(hashtext('cairn_watch_tables'));
      for t in
        select c.relname from pg_class c
        where c.relkind in ('r', 'p') and c.relnamespace = current_schema()::regnamespace
          and c.relname <> all (unwatched)
          and not exists (select 1 from pg_trigger g where g.tgrelid = c.oid and g.tgname = 'cairn_cache_notify')
      loop
        execute format('create trigger cairn_cache_notify after insert or update or delete or truncate on %I
                        for each statement execute function cairn_cache_notify()', t.relname);
      end loop;
    end $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists cairn_watch_tables(text[])`.execute(db);
  await sql`drop function cairn_cache_notify() cascade`.execute(db);
  await sql`drop table cache_listeners`.execute(db);
}
