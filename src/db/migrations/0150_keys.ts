import { sql, type Kysely } from 'kysely';

// SSH keys: users' keys (type null) and deploy keys (type 'DeployKey') share one table, so a
// fingerprint is unique across both, as GitLab has it. Deploy keys reach projects through
// deploy_keys_projects, which carries the per-project push right.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table keys (
      id serial primary key,
      user_id integer references users(id) on delete cascade,
      type text,
      title text not null,
      key text not null,
      fingerprint text,
      fingerprint_sha256 text not null,
      usage_type text not null default 'auth_and_signing',
      public boolean not null default false,
      expires_at timestamptz,
      last_used_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`create unique index keys_fingerprint_sha256 on keys (fingerprint_sha256)`.execute(db);
  await sql`create index keys_fingerprint on keys (fingerprint)`.execute(db);
  await sql`create index keys_user on keys (user_id)`.execute(db);
  await sql`create index keys_type on keys (type)`.execute(db);

  await sql`
    create table deploy_keys_projects (
      id serial primary key,
      deploy_key_id integer not null references keys(id) on delete cascade,
      project_id integer not null references projects(id) on delete cascade,
      can_push boolean not null default false,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (deploy_key_id, project_id)
    )`.execute(db);
  await sql`create index deploy_keys_projects_project on deploy_keys_projects (project_id)`.execute(db);

  // Rotation chains are walked from a token to its successors.
  await sql`create index personal_access_tokens_previous on personal_access_tokens (previous_personal_access_token_id)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible');
}
