import { sql, type Kysely } from 'kysely';

// A due job of a higher priority is claimed before older due jobs of a lower one: a storage
// move's cleanup (removing the source copy a few seconds after the switch) must not wait behind
// every other move of a bulk move of thousands of projects, keeping each source copy meanwhile.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table background_jobs add column priority smallint not null default 0`.execute(db);
  await sql`drop index if exists background_jobs_pending`.execute(db);
  await sql`create index background_jobs_pending on background_jobs (queue, priority desc, run_at, id) where state = 'pending'`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index if exists background_jobs_pending`.execute(db);
  await sql`alter table background_jobs drop column priority`.execute(db);
  await sql`create index background_jobs_pending on background_jobs (queue, run_at) where state = 'pending'`.execute(db);
}
