import { sql, type Kysely } from 'kysely';

// Labels and milestones: indexes the foreign keys of 0700 lack on their referencing side, so that
// deleting a label (its priorities cascade, its label events are nullified) does not scan them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index label_priorities_label on label_priorities (label_id)`.execute(db);
  await sql`create index resource_label_events_label on resource_label_events (label_id) where label_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists resource_label_events_label`.execute(db);
  await sql`drop index if exists label_priorities_label`.execute(db);
}
