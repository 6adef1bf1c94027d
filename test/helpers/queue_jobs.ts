import { sql } from 'kysely';
import { defineJob } from '../../src/jobs/queue.js';

export const SLOW_JOB = 'test.slow';
export const SLOW_JOB_RAN = 'test.slow.ran';

/**
 * A job that records each run (a row of kind SLOW_JOB_RAN, which no worker claims: it is done),
 * then takes `payload.ms`. Defined the same in the test process and in test/helpers/queue_worker.ts.
 */
export function defineSlowJob() {
  defineJob(SLOW_JOB, async (cairn, payload, job) => {
    const run = { job: job.id, attempts: job.attempts, pid: process.pid };
    await sql`insert into background_jobs (kind, state, payload, run_at) values (${SLOW_JOB_RAN}, 'done', ${JSON.stringify(run)}, now())`.execute(cairn.db);
    await new Promise((r) => setTimeout(r, Number(payload.ms)));
  });
}
