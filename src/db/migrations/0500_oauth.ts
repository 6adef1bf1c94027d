import { sql, type Kysely } from 'kysely';

// OAuth 2.0 provider: applications (instance-wide when owner_id is null, else a user's own),
// authorization codes (access grants), access/refresh tokens, and browser sessions for the
// sign-in and consent pages. Every secret is stored as a SHA-256 digest.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table oauth_applications (
      id serial primary key,
      name text not null,
      uid text not null,
      secret_digest text not null,
      redirect_uri text not null,
      scopes text[] not null default '{}',
      confidential boolean not null default true,
      owner_id integer references users(id) on delete cascade,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index oauth_applications_uid on oauth_applications (uid)`.execute(db);
  await sql`create index oauth_applications_owner on oauth_applications (owner_id)`.execute(db);

  await sql`
    create table oauth_access_grants (
      id serial primary key,
      resource_owner_id integer not null references users(id) on delete cascade,
      application_id integer not null references oauth_applications(id) on delete cascade,
      token_digest text not null,
      expires_in integer not null,
      redirect_uri text not null,
      scopes text[] not null default '{}',
      code_challenge text,
      code_challenge_method text,
      created_at timestamptz not null default now(),
      revoked_at timestamptz
    )`.execute(db);
  await sql`create unique index oauth_access_grants_digest on oauth_access_grants (token_digest)`.execute(db);

  await sql`
    create table oauth_access_tokens (
      id serial primary key,
      resource_owner_id integer references users(id) on delete cascade,
      application_id integer references oauth_applications(id) on delete cascade,
      access_grant_id integer references oauth_access_grants(id) on delete set null,
      token_digest text not null,
      refresh_token_digest text,
      expires_in integer,
      scopes text[] not null default '{}',
      created_at timestamptz not null default now(),
      revoked_at timestamptz,
      last_used_at timestamptz
    )`.execute(db);
  await sql`create unique index oauth_access_tokens_digest on oauth_access_tokens (token_digest)`.execute(db);
  await sql`create unique index oauth_access_tokens_refresh_digest on oauth_access_tokens (refresh_token_digest)`.execute(db);
  await sql`create index oauth_access_tokens_grant on oauth_access_tokens (access_grant_id)`.execute(db);
  await sql`create index oauth_access_tokens_owner on oauth_access_tokens (resource_owner_id)`.execute(db);

  // Browser sessions live here (not in process memory) so every Cairn process agrees.
  // user_id is null for an anonymous session that only carries the sign-in form's CSRF token.
  await sql`
    create table sessions (
      id serial primary key,
      session_digest text not null,
      user_id integer references users(id) on delete cascade,
      csrf_token text not null,
      expires_at timestamptz not null,
      created_at timestamptz not null default now(),
      ip_address text,
      user_agent text
    )`.execute(db);
  await sql`create unique index sessions_digest on sessions (session_digest)`.execute(db);
  await sql`create index sessions_expires on sessions (expires_at)`.execute(db);
  await sql`create index sessions_user on sessions (user_id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table sessions`.execute(db);
  await sql`drop table oauth_access_tokens`.execute(db);
  await sql`drop table oauth_access_grants`.execute(db);
  await sql`drop table oauth_applications`.execute(db);
}
