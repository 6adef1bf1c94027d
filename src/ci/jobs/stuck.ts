import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { Database } from '../../db/index.js';
import { defineRecurring } from '../../jobs/queue.js';
import { RUNNER_ONLINE_SECONDS } from '../../presenters/runners.js';
import { finishBuild } from './state.js';

/**
 * The stuck-job sweep (GitLab's StuckCiJobsWorker: Ci::StuckBuilds::DropPendingService and
 * DropRunningAndScheduledService). Every hour it fails, through the state machine:
 *  - pending jobs not updated for a day;
 *  - pending jobs not updated for an hour that no online runner could take;
 *  - running jobs whose runner has not updated them for an hour (no trace, no state update);
 *  - scheduled jobs whose time passed an hour ago and still did not start (stale_schedule).
 * Each is a guarded transition (`finishBuild` with `updatedBefore`), so a job a runner takes or
 * updates meanwhile stays, and two processes sweeping at once fail each job once.
 */
export const STUCK_JOBS_SWEEP = 'ci.stuck_jobs';
const SWEEP_EVERY_SECONDS = 3600;
const PENDING_OUTDATED_SECONDS = 24 * 3600;
const PENDING_STUCK_SECONDS = 3600;
const RUNNING_OUTDATED_SECONDS = 3600;
const SCHEDULED_OUTDATED_SECONDS = 3600;
const BATCH = 100;

const before = (now: Date, seconds: number) => new Date(now.getTime() - seconds * 1000);

/**
 * SQL: an active runner that called within the online window could take the pending job `b`
 * (the runner protocol's matching, src/ci/protocol/pick.ts).
 */
const anyOnlineRunnerFor = (now: Date) => sql<boolean>`exists (
  select 1 from ci_pending_builds pb, ci_runners r
   where pb.build_id = b.id
     and r.active and r.contacted_at > ${before(now, RUNNER_ONLINE_SECONDS)}
     and pb.tag_list <@ r.tag_list
     and (r.run_untagged or cardinality(pb.tag_list) > 0)
     and (r.access_level <> 'ref_protected' or pb.protected)
     and ((r.runner_type = 'instance_type' and pb.instance_runners_enabled)
       or (r.runner_type = 'group_type' and pb.group_runners_enabled and exists (
             select 1 from ci_runner_namespaces rn join namespaces n on n.id = pb.namespace_id
              where rn.runner_id = r.id and rn.namespace_id = any(n.traversal_ids)))
       or (r.runner_type = 'project_type' and exists (
             select 1 from ci_runner_projects rp where rp.runner_id = r.id and rp.project_id = pb.project_id))))`;

/**
 * Which of these jobs are stuck as GitLab's job page says it (`Ci::Build#stuck?`): pending, and
 * no online runner could take them now. The sweep below fails them after an hour.
 */
export async function stuckJobIds(db: Database, ids: number[], now = new Date()): Promise<Set<number>> {
  if (!ids.length) return new Set();
  const rows = await sql<{ id: number }>`
    select b.id from ci_builds b
     where b.id in (${sql.join(ids)}) and b.status = 'pending' and b.type = 'Ci::Build'
       and not ${anyOnlineRunnerFor(now)}`.execute(db);
  return new Set(rows.rows.map((r) => Number(r.id)));
}

/** What GitLab's job page says of a stuck job (its stuck block). */
export function stuckExplanation(tags: string[]): string {
  return tags.length
    ? `This job is stuck because you don't have any active runners online or available with any of these tags assigned to them: ${tags.join(', ')}`
    : "This job is stuck because the project doesn't have any runners online assigned to it.";
}

/** What to do about it, for Cairn: its built-in runner's needs, or another runner. */
export const RUNNER_INSTALL_HINT =
  "Cairn's built-in runner runs jobs once bubblewrap is installed (Debian/Ubuntu: apt-get install bubblewrap passt; for jobs with image: and services:, also skopeo and umoci) and the server is restarted; or register a runner of your own (cairn runner register, or gitlab-runner).";

export interface SweepResult {
  pending: number;
  running: number;
  scheduled: number;
}

/**
 * Walks the jobs `batch(afterId)` finds, in id order (keyset: each batch starts after the last id
 * seen, so a job left as it was is not found again), and counts those `fail` moved.
 */
async function sweep(batch: (afterId: number) => Promise<{ id: number }[]>, fail: (id: number) => Promise<boolean>): Promise<number> {
  let failed = 0;
  for (let after = 0; ; ) {
    const rows = await batch(after);
    if (!rows.length) return failed;
    for (const row of rows) if (await fail(row.id)) failed++;
    after = rows[rows.length - 1].id;
  }
}

/** One sweep; `now` is for tests. */
export async function dropStuckJobs(cairn: Cairn, now = new Date()): Promise<SweepResult> {
  const stuckCutoff = before(now, PENDING_STUCK_SECONDS);
  const outdatedCutoff = before(now, PENDING_OUTDATED_SECONDS);
  const runningCutoff = before(now, RUNNING_OUTDATED_SECONDS);
  const scheduledCutoff = before(now, SCHEDULED_OUTDATED_SECONDS);
  const stuck = { status: 'failed' as const, failureReason: 'stuck_or_timeout_failure' };

  // Pending: outdated, or stuck with no runner online for it.
  const pending = await sweep(
    async (after) =>
      (await sql<{ id: number }>`
        select b.id from ci_builds b
         where b.status = 'pending' and b.type = 'Ci::Build' and b.updated_at < ${stuckCutoff}
           and (b.updated_at < ${outdatedCutoff} or not ${anyOnlineRunnerFor(now)})
           and b.id > ${after}
         order by b.id limit ${BATCH}`.execute(cairn.db)).rows,
    (id) => finishBuild(cairn, id, { ...stuck, from: ['pending'], updatedBefore: stuckCutoff }),
  );
  // Running: no update from its runner for an hour.
  const running = await sweep(
    (after) =>
      cairn.db.selectFrom('ci_builds').select('id')
        .where('status', '=', 'running').where('type', '=', 'Ci::Build').where('updated_at', '<', runningCutoff)
        .where('id', '>', after).orderBy('id').limit(BATCH).execute(),
    (id) => finishBuild(cairn, id, { ...stuck, updatedBefore: runningCutoff }),
  );
  // Scheduled (delayed) jobs whose time passed an hour ago.
  const scheduled = await sweep(
    (after) =>
      cairn.db.selectFrom('ci_builds').select('id')
        .where('status', '=', 'scheduled').where('scheduled_at', '<', scheduledCutoff)
        .where('id', '>', after).orderBy('id').limit(BATCH).execute(),
    (id) => finishBuild(cairn, id, { status: 'failed', failureReason: 'stale_schedule', from: ['scheduled'] }),
  );
  return { pending, running, scheduled };
}

defineRecurring(STUCK_JOBS_SWEEP, SWEEP_EVERY_SECONDS, async (cairn) => {
  await dropStuckJobs(cairn);
});
