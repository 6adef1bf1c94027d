import type { Cairn } from '../context.js';
import type { Wakeup } from '../db/notifications.js';

/**
 * Wakes long-polling runners (POST /jobs/request) when a job becomes pending, in any process:
 * the job state machine's enqueueBuild runs `pg_notify('cairn_ci_jobs', project_id)` in its
 * transaction (runners.ts too, when a runner's or project's settings change what it may pick),
 * and every process listens on that channel through its one listening connection
 * (db/notifications.ts). Waiters then try to pick a job again; SKIP LOCKED in the pick decides who
 * gets it.
 */
export const JOBS_CHANNEL = 'cairn_ci_jobs';

/** A wakeup for one long poll (close it when the poll ends). */
export function jobWakeup(cairn: Cairn): Wakeup {
  return cairn.notifications.wakeup(JOBS_CHANNEL);
}
