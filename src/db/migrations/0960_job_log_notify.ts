import { sql, type Kysely } from 'kysely';

// Live job logs wait instead of polling (issue #26): a job's status or log length changing
// notifies `cairn_ci_job_log` with the job's id when its transaction commits, from whichever
// code path changes it (a runner's trace PATCH, its state PUT, a cancel, the stuck-job sweep,
// an erase). src/web/log_stream.ts waits on it through the process's listening connection.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function cairn_ci_job_log_notify() returns trigger language plpgsql as $$
    begin
      perform pg_notify('cairn_ci_job_log', new.id::text);
      return null;
    end $$`.execute(db);
  await sql`
    create trigger cairn_ci_job_log_notify after update of status, trace_size on ci_builds
      for each row when (old.status is distinct from new.status or old.trace_size is distinct from new.trace_size)
      execute function cairn_ci_job_log_notify()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger if exists cairn_ci_job_log_notify on ci_builds`.execute(db);
  await sql`drop function if exists cairn_ci_job_log_notify()`.execute(db);
}
