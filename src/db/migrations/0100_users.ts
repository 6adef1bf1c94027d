import { sql, type Kysely } from 'kysely';

// Users area: external identities, admin-set custom attributes, statuses and follows.
export async function up(db: Kysely<any>): Promise<void> {
  // One identity per (user, provider); an external uid belongs to one user per provider.
  await sql`
    create table identities (
      id serial primary key,
      user_id integer not null references users(id) on delete cascade,
      provider text not null,
      extern_uid text not null,
      saml_provider_id integer,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index identities_user_provider on identities (user_id, provider)`.execute(db);
  await sql`create unique index identities_provider_uid on identities (provider, lower(extern_uid))`.execute(db);
  await sql`create index identities_saml_provider on identities (saml_provider_id) where saml_provider_id is not null`.execute(db);

  await sql`
    create table user_custom_attributes (
      id serial primary key,
      user_id integer not null references users(id) on delete cascade,
      key text not null,
      value text not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (user_id, key)
    )`.execute(db);
  await sql`create index user_custom_attributes_key_value on user_custom_attributes (key, value)`.execute(db);

  // clear_status_at is compared at read time: an expired row reads as no status.
  await sql`
    create table user_statuses (
      user_id integer primary key references users(id) on delete cascade,
      emoji text not null default 'speech_balloon',
      message text,
      availability text not null default 'not_set',
      clear_status_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);

  await sql`
    create table user_follow_users (
      follower_id integer not null references users(id) on delete cascade,
      followee_id integer not null references users(id) on delete cascade,
      created_at timestamptz not null default now(),
      primary key (follower_id, followee_id)
    )`.execute(db);
  await sql`create index user_follow_users_followee on user_follow_users (followee_id)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
