import { sql, type Kysely } from 'kysely';

// The runner protocol writes these tables on every trace append, job pick and job update; no
// cached read depends on them, so they get no cache invalidation trigger (UNWATCHED_TABLES in
// src/db/write_observer.ts) and their writes wait for no cache barrier.
const BUSY = ['ci_builds', 'ci_pending_builds', 'ci_build_trace_chunks', 'ci_job_artifacts'];

export async function up(db: Kysely<any>): Promise<void> {
  for (const t of BUSY) await sql`drop trigger if exists cairn_cache_notify on ${sql.table(t)}`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of BUSY) {
    await sql`create trigger cairn_cache_notify after insert or update or delete or truncate on ${sql.table(t)}
              for each statement execute function cairn_cache_notify()`.execute(db);
  }
}
