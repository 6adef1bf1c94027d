import { sql, type Kysely } from 'kysely';

// Review apps scheduled for deletion (DELETE /projects/:id/environments/review_apps): GitLab deletes
// them a week later, so a mistaken request can still be seen and undone by starting one again.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table environments add column auto_delete_at timestamptz`.execute(db);
  await sql`create index environments_auto_delete on environments (auto_delete_at) where auto_delete_at is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table environments drop column auto_delete_at`.execute(db);
}
