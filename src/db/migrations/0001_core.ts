import { sql, type Kysely } from 'kysely';

// Core tables every feature rests on: users, their tokens, namespaces (users' and groups'),
// projects and memberships. Area-specific tables live in their own migrations.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table users (
      id serial primary key,
      username text not null,
      name text not null,
      email text not null,
      encrypted_password text,
      password_automatically_set boolean not null default false,
      password_expires_at timestamptz,
      state text not null default 'active',
      user_type text not null default 'human',
      admin boolean not null default false,
      external boolean not null default false,
      bio text not null default '',
      location text not null default '',
      public_email text,
      commit_email text,
      skype text not null default '',
      linkedin text not null default '',
      twitter text not null default '',
      discord text not null default '',
      website_url text not null default '',
      organization text not null default '',
      job_title text not null default '',
      pronouns text,
      note text,
      avatar_path text,
      private_profile boolean not null default false,
      can_create_group boolean not null default true,
      projects_limit integer not null default 100000,
      theme_id integer not null default 1,
      color_scheme_id integer not null default 1,
      view_diffs_file_by_file boolean not null default false,
      two_factor_enabled boolean not null default false,
      shared_runners_minutes_limit integer,
      extra_shared_runners_minutes_limit integer,
      provisioned_by_group_id integer,
      is_auditor boolean not null default false,
      confirmed_at timestamptz,
      last_sign_in_at timestamptz,
      current_sign_in_at timestamptz,
      last_sign_in_ip text,
      current_sign_in_ip text,
      sign_in_count integer not null default 0,
      last_activity_on date,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index users_username_lower on users (lower(username))`.execute(db);
  await sql`create unique index users_email_lower on users (lower(email))`.execute(db);
  await sql`create index users_state on users (state)`.execute(db);

  await sql`
    create table personal_access_tokens (
      id serial primary key,
      user_id integer not null references users(id) on delete cascade,
      name text not null,
      description text,
      token_digest text not null,
      scopes text[] not null,
      expires_at date,
      revoked boolean not null default false,
      impersonation boolean not null default false,
      last_used_at timestamptz,
      previous_personal_access_token_id integer,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index personal_access_tokens_digest on personal_access_tokens (token_digest)`.execute(db);
  await sql`create index personal_access_tokens_user on personal_access_tokens (user_id)`.execute(db);

  // type 'User' (a user's personal namespace) or 'Group'. traversal_ids lists the ids from
  // the root group down to this one, so ancestor checks are one array lookup.
  await sql`
    create table namespaces (
      id serial primary key,
      type text not null,
      name text not null,
      path text not null,
      full_path text not null,
      full_name text not null,
      parent_id integer references namespaces(id) on delete cascade,
      traversal_ids integer[] not null default '{}',
      owner_id integer references users(id) on delete cascade,
      visibility_level integer not null default 0,
      description text not null default '',
      avatar_path text,
      settings jsonb not null default '{}',
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index namespaces_full_path_lower on namespaces (lower(full_path))`.execute(db);
  await sql`create index namespaces_parent on namespaces (parent_id)`.execute(db);
  await sql`create index namespaces_owner on namespaces (owner_id)`.execute(db);
  await sql`create index namespaces_traversal on namespaces using gin (traversal_ids)`.execute(db);

  await sql`
    create table projects (
      id serial primary key,
      name text not null,
      path text not null,
      namespace_id integer not null references namespaces(id) on delete cascade,
      creator_id integer references users(id) on delete set null,
      description text,
      visibility_level integer not null default 0,
      default_branch text,
      archived boolean not null default false,
      repository_storage text not null default 'default',
      disk_path text not null default '',
      repository_read_only boolean not null default false,
      empty_repo boolean not null default true,
      runners_token text,
      settings jsonb not null default '{}',
      pending_delete boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      last_activity_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index projects_namespace_path_lower on projects (namespace_id, lower(path))`.execute(db);
  await sql`create index projects_storage on projects (repository_storage)`.execute(db);
  await sql`create index projects_visibility on projects (visibility_level)`.execute(db);

  // source_type 'Project' or 'Namespace' (a group). state 0 active, 1 awaiting.
  await sql`
    create table members (
      id serial primary key,
      source_type text not null,
      source_id integer not null,
      user_id integer not null references users(id) on delete cascade,
      access_level integer not null,
      expires_at date,
      state integer not null default 0,
      requested_at timestamptz,
      override boolean not null default false,
      invite_source text,
      created_by_id integer references users(id) on delete set null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index members_source_user on members (source_type, source_id, user_id)`.execute(db);
  await sql`create index members_user on members (user_id)`.execute(db);

  await sql`
    create table project_group_links (
      id serial primary key,
      project_id integer not null references projects(id) on delete cascade,
      group_id integer not null references namespaces(id) on delete cascade,
      group_access integer not null,
      expires_at date,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (project_id, group_id)
    )`.execute(db);
  await sql`create index project_group_links_group on project_group_links (group_id)`.execute(db);

  await sql`
    create table group_group_links (
      id serial primary key,
      shared_group_id integer not null references namespaces(id) on delete cascade,
      shared_with_group_id integer not null references namespaces(id) on delete cascade,
      group_access integer not null,
      expires_at date,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (shared_group_id, shared_with_group_id)
    )`.execute(db);
  await sql`create index group_group_links_with on group_group_links (shared_with_group_id)`.execute(db);

  // Fixed-window counters shared by every Cairn process (rate limits).
  await sql`
    create table rate_limit_counters (
      key text not null,
      window_start timestamptz not null,
      count integer not null,
      primary key (key, window_start)
    )`.execute(db);

  // Durable background queue: workers claim rows with FOR UPDATE SKIP LOCKED.
  await sql`
    create table background_jobs (
      id bigserial primary key,
      queue text not null default 'default',
      kind text not null,
      payload jsonb not null default '{}',
      state text not null default 'pending',
      attempts integer not null default 0,
      max_attempts integer not null default 5,
      run_at timestamptz not null default now(),
      locked_at timestamptz,
      locked_by text,
      last_error text,
      created_at timestamptz not null default now(),
      finished_at timestamptz
    )`.execute(db);
  await sql`create index background_jobs_pending on background_jobs (queue, run_at) where state = 'pending'`.execute(db);

  // Every (project, access level) a user reaches: personal namespace ownership, direct
  // membership, the group tree, and group shares. Lists filter visibility through it.
  await sql`
    create function project_authorizations(uid integer)
    returns table(project_id integer, access_level integer) language sql stable as $$
      select p.id, 50 from projects p join namespaces n on n.id = p.namespace_id
       where n.type = 'User' and n.owner_id = uid
      union all
      select m.source_id, m.access_level from members m
       where m.user_id = uid and m.source_type = 'Project'
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select p.id, m.access_level from members m
        join namespaces n on n.traversal_ids @> array[m.source_id]
        join projects p on p.namespace_id = n.id
       where m.user_id = uid and m.source_type = 'Namespace'
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select l.project_id, least(l.group_access, m.access_level) from members m
        join namespaces g on g.traversal_ids @> array[m.source_id]
        join project_group_links l on l.group_id = g.id
       where m.user_id = uid and m.source_type = 'Namespace' and (l.expires_at is null or l.expires_at > current_date)
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select p.id, least(l.group_access, m.access_level) from members m
        join namespaces g on g.traversal_ids @> array[m.source_id]
        join group_group_links l on l.shared_with_group_id = g.id
        join namespaces s on s.traversal_ids @> array[l.shared_group_id]
        join projects p on p.namespace_id = s.id
       where m.user_id = uid and m.source_type = 'Namespace' and (l.expires_at is null or l.expires_at > current_date)
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
    $$`.execute(db);

  // Every (group, access level) a user reaches: membership of the group or an ancestor, and group shares.
  await sql`
    create function group_authorizations(uid integer)
    returns table(group_id integer, access_level integer) language sql stable as $$
      select n.id, m.access_level from members m
        join namespaces n on n.traversal_ids @> array[m.source_id]
       where m.user_id = uid and m.source_type = 'Namespace' and n.type = 'Group'
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
      union all
      select s.id, least(l.group_access, m.access_level) from members m
        join namespaces g on g.traversal_ids @> array[m.source_id]
        join group_group_links l on l.shared_with_group_id = g.id
        join namespaces s on s.traversal_ids @> array[l.shared_group_id]
       where m.user_id = uid and m.source_type = 'Namespace' and (l.expires_at is null or l.expires_at > current_date)
         and m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date)
    $$`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
