import { sql, type Kysely } from 'kysely';

// Error tracking: per-project settings, the client keys the Sentry SDKs authenticate with (the
// public half of a DSN), and the integrated tracker's errors (events grouped by fingerprint).
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table error_tracking_settings (
      project_id integer primary key references projects(id) on delete cascade,
      active boolean not null default false,
      integrated boolean not null default true,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table error_tracking_client_keys (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      active boolean not null default true,
      public_key text not null unique,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index error_tracking_client_keys_project on error_tracking_client_keys (project_id, id)`.execute(db);
  // fingerprint: sha256 of (name, description, actor, platform), GitLab's grouping of events.
  await sql`
    create table error_tracking_errors (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      fingerprint text not null,
      name text not null,
      description text not null,
      actor text not null,
      platform text,
      status text not null default 'unresolved',
      events_count integer not null default 0,
      first_seen_at timestamptz not null,
      last_seen_at timestamptz not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, fingerprint)
    )`.execute(db);
  await sql`create index error_tracking_errors_project_last_seen on error_tracking_errors (project_id, last_seen_at desc, id desc)`.execute(db);
  await sql`
    create table error_tracking_error_events (
      id bigserial primary key,
      error_id integer not null references error_tracking_errors(id) on delete cascade,
      event_id text,
      description text,
      environment text,
      level text,
      occurred_at timestamptz not null,
      payload jsonb not null,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index error_tracking_error_events_error on error_tracking_error_events (error_id, occurred_at desc, id desc)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table error_tracking_error_events`.execute(db);
  await sql`drop table error_tracking_errors`.execute(db);
  await sql`drop table error_tracking_client_keys`.execute(db);
  await sql`drop table error_tracking_settings`.execute(db);
}
