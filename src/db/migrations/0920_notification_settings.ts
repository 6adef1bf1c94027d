import { sql, type Kysely } from 'kysely';

// Notification settings (GitLab's notification_settings): one row per user and source: the
// user's global setting (source_type 'Global', source_id 0), a group's ('Namespace') or a
// project's ('Project'). `events` holds the custom-level flags that were set ({"new_note": true});
// a flag never set reads false, except failed_pipeline and fixed_pipeline, which read true (as
// GitLab's model does). notification_email only on the global row.
//
// notification_deliveries remembers which user an event (its key) was already handed to, so
// that a notify job run again after a crash never mails anyone twice.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table notification_settings (
      id serial primary key,
      user_id integer not null references users(id) on delete cascade,
      source_type text not null check (source_type in ('Global', 'Namespace', 'Project')),
      source_id integer not null,
      level text not null check (level in ('disabled', 'participating', 'watch', 'global', 'mention', 'custom')),
      events jsonb not null default '{}'::jsonb,
      notification_email text,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (user_id, source_type, source_id)
    )`.execute(db);
  // Watchers and custom settings of one project or group.
  await sql`create index notification_settings_source on notification_settings (source_type, source_id, level)`.execute(db);
  await sql`
    create table notification_deliveries (
      event_key text not null,
      user_id integer not null,
      created_at timestamptz not null default now(),
      primary key (event_key, user_id)
    )`.execute(db);
  await sql`create index notification_deliveries_created_at on notification_deliveries (created_at)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table notification_deliveries`.execute(db);
  await sql`drop table notification_settings`.execute(db);
}
