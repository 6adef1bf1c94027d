import { sql, type Kysely } from 'kysely';

// Recurring background work (artifact expiry, sweeps): at most one pending or running row per
// recurring kind, so any number of processes may ask for it at start without doubling it.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table background_jobs add column recurring boolean not null default false`.execute(db);
  await sql`create unique index background_jobs_recurring_kind on background_jobs (kind)
            where recurring and state in ('pending', 'running')`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index background_jobs_recurring_kind`.execute(db);
  await sql`alter table background_jobs drop column recurring`.execute(db);
}
