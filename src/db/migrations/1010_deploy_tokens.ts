import { sql, type Kysely } from 'kysely';

// Deploy tokens: credentials of a project or a group (and its subgroups' projects) for git over
// HTTP, without a user. Like personal access tokens only the token's digest is kept; the one
// token named `gitlab-deploy-token` also keeps its value encrypted with the instance's secret
// (lib/secrets encryptSecret), because CI jobs are given it as CI_DEPLOY_PASSWORD.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table deploy_tokens (
      id serial primary key,
      project_id integer references projects(id) on delete cascade,
      group_id integer references namespaces(id) on delete cascade,
      creator_id integer references users(id) on delete set null,
      name text not null,
      username text not null,
      token_digest text not null,
      token_encrypted text,
      scopes text[] not null,
      expires_at timestamptz,
      revoked boolean not null default false,
      created_at timestamptz not null default now(),
      check ((project_id is null) <> (group_id is null))
    )`.execute(db);
  await sql`create unique index deploy_tokens_digest on deploy_tokens (token_digest)`.execute(db);
  await sql`create index deploy_tokens_project on deploy_tokens (project_id) where project_id is not null`.execute(db);
  await sql`create index deploy_tokens_group on deploy_tokens (group_id) where group_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table deploy_tokens`.execute(db);
}
