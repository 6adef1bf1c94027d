import { sql, type Kysely } from 'kysely';

// Projects and groups show their runner registration token (runners_token); a runner may register
// with it before its ci_registration_tokens row exists, so registration looks it up there.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index if not exists projects_runners_token on projects (runners_token) where runners_token is not null`.execute(db);
  await sql`create index if not exists namespaces_runners_token on namespaces (runners_token) where runners_token is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists projects_runners_token`.execute(db);
  await sql`drop index if exists namespaces_runners_token`.execute(db);
}
