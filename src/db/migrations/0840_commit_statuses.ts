import { sql, type Kysely } from 'kysely';

// External commit statuses (POST /projects/:id/statuses/:sha) are ci_builds rows of type
// 'GenericCommitStatus' with a link and a description of their own.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table ci_builds add column target_url text`.execute(db);
  await sql`alter table ci_builds add column description text`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table ci_builds drop column description`.execute(db);
  await sql`alter table ci_builds drop column target_url`.execute(db);
}
