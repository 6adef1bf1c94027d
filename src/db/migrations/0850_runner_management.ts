import { sql, type Kysely } from 'kysely';

// Runner management (issue #11):
//  - a runner's name (what it says it is in `info.name`), shown by the Runners API;
//  - registration tokens live only in ci_registration_tokens (digest + encrypted value): the
//    clear copies projects.runners_token and namespaces.runners_token go. A clear token that has
//    no row yet keeps registering runners through its digest; its value cannot be encrypted here
//    (the key is the application's), so the row is marked with an empty token_encrypted and the
//    project or group is given a fresh token the first time its runners_token is shown;
//  - the stuck-job sweep looks up pending and running jobs by their last update.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table ci_runners add column name text`.execute(db);
  await sql`
    insert into ci_registration_tokens (runner_type, project_id, token_digest, token_encrypted)
    select 'project_type', p.id, encode(sha256(convert_to(p.runners_token, 'UTF8')), 'hex'), ''
      from projects p
     where p.runners_token is not null
       and not exists (select 1 from ci_registration_tokens t where t.runner_type = 'project_type' and t.project_id = p.id)
    on conflict do nothing`.execute(db);
  await sql`
    insert into ci_registration_tokens (runner_type, namespace_id, token_digest, token_encrypted)
    select 'group_type', n.id, encode(sha256(convert_to(n.runners_token, 'UTF8')), 'hex'), ''
      from namespaces n
     where n.type = 'Group' and n.runners_token is not null
       and not exists (select 1 from ci_registration_tokens t where t.runner_type = 'group_type' and t.namespace_id = n.id)
    on conflict do nothing`.execute(db);
  await sql`alter table projects drop column runners_token`.execute(db);
  await sql`alter table namespaces drop column runners_token`.execute(db);
  await sql`create index ci_builds_stuck on ci_builds (status, updated_at) where status in ('pending', 'running', 'scheduled')`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('irreversible: registration tokens are no longer kept in clear');
}
