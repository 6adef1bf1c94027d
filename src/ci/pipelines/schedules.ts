import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiPipelineSchedule } from '../../db/schema/pipeline_schedules.js';
import { findProjectRow } from '../../finders/projects.js';
import { findUserById } from '../../finders/users.js';
import { defineJob, defineRecurring } from '../../jobs/queue.js';
import { decryptSecret } from '../../lib/secrets.js';
import { checkCron, nextRunAfter, parseCron, resolveTimeZone } from '../cron.js';
import { createPipeline, type PipelineVariableInput } from './create.js';
import { pipelineRefusal, resolvePipelineRef } from './run_as.js';

// Pipeline schedules at work: the durable queue's recurring job looks for schedules whose
// next_run_at has come, in any process; each due schedule's pipeline is created, as its owner,
// in the same transaction that moves next_run_at on, and that move is guarded by the next_run_at
// it read (`where next_run_at = <old>`). Two processes that find one schedule due both compile
// its pipeline, but only the first to commit keeps it: the other's guarded update matches no
// row, and its pipeline is rolled back. A due time missed while no process ran (a night without
// servers) is run once, not once per missed time, and the next run is the next one from now, as
// GitLab does.

export const RUN_DUE_SCHEDULES_JOB = 'ci_pipeline_schedules_run';
export const PLAY_SCHEDULE_JOB = 'ci_pipeline_schedule_play';
/** How often the queue looks for due schedules (GitLab's worker looks every ten minutes). */
export const SCHEDULE_SWEEP_SECONDS = 60;

/** When a schedule runs next after `after`; null when its cron or time zone is (no longer) valid. */
export function nextRunAt(schedule: Pick<CiPipelineSchedule, 'cron' | 'cron_timezone'>, after = new Date()): Date | null {
  const cron = parseCron(schedule.cron);
  const zone = resolveTimeZone(schedule.cron_timezone);
  if (!cron || !zone) return null;
  return nextRunAfter(cron, zone, after);
}

export { checkCron };

/** The schedule's variables as pipeline variables. */
async function scheduleVariables(cairn: Cairn, scheduleId: number): Promise<PipelineVariableInput[]> {
  const rows = await cairn.db.selectFrom('ci_pipeline_schedule_variables').selectAll().where('pipeline_schedule_id', '=', scheduleId).orderBy('id').execute();
  return rows.map((v) => ({ key: v.key, value: decryptSecret(cairn.config, v.value_encrypted) ?? '', variable_type: v.variable_type, raw: v.raw }));
}

/** Another process ran this due time first (its guarded update won). */
class AlreadyRun extends Error {}

export type ScheduleRunOutcome =
  /** The pipeline was created and next_run_at moved on. */
  | 'created'
  /** No pipeline (no CI file, workflow rules, no such ref...); next_run_at moved on. */
  | 'not_created'
  /** The owner may no longer run pipelines there: the schedule was deactivated. */
  | 'deactivated'
  /** Another process ran this due time. */
  | 'taken';

/**
 * Runs one due time of a schedule (as read, with its `next_run_at`): its pipeline as its owner,
 * and next_run_at moved to the next time after `now`, in one transaction guarded by the old value.
 */
export async function runDueSchedule(cairn: Cairn, schedule: CiPipelineSchedule, now = new Date()): Promise<ScheduleRunOutcome> {
  const due = schedule.next_run_at;
  if (!due) return 'taken';
  const next = nextRunAt(schedule, now);
  /** The guarded move of next_run_at (and deactivation): false when another process moved it first. */
  const advance = async (db: typeof cairn.db, deactivate = false): Promise<boolean> => {
    const res = await db
      .updateTable('ci_pipeline_schedules')
      .set({ next_run_at: next, ...(deactivate || !next ? { active: false } : {}), updated_at: sql`now()` as any })
      .where('id', '=', schedule.id)
      .where('active', '=', true)
      .where('next_run_at', '=', due)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) === 1;
  };

  const project = await findProjectRow(cairn.db, schedule.project_id);
  // An archived project's schedules wait (GitLab runs none there).
  if (!project || project.archived) return (await advance(cairn.db)) ? 'not_created' : 'taken';
  const owner = schedule.owner_id === null ? undefined : await findUserById(cairn.db, schedule.owner_id);
  const target = await resolvePipelineRef(cairn, project, schedule.ref);
  if (!target) return (await advance(cairn.db)) ? 'not_created' : 'taken';
  // An owner who was removed, blocked, or lost the right to run pipelines on the ref: the
  // schedule is deactivated until someone takes it over (GitLab's behaviour since 18.3).
  if (await pipelineRefusal(cairn, project, owner, target)) return (await advance(cairn.db, true)) ? 'deactivated' : 'taken';

  // Skip the work when another process already moved this due time on.
  const fresh = await cairn.db.selectFrom('ci_pipeline_schedules').select(['next_run_at', 'active']).where('id', '=', schedule.id).executeTakeFirst();
  if (!fresh || !fresh.active || fresh.next_run_at?.getTime() !== due.getTime()) return 'taken';

  try {
    const result = await createPipeline(cairn, {
      project, ref: target.ref, tag: target.tag, sha: target.sha, source: 'schedule', userId: owner!.id,
      scheduleVariables: await scheduleVariables(cairn, schedule.id), pipelineScheduleId: schedule.id, api: true,
      beforeCommit: async (trx) => {
        if (!(await advance(trx))) throw new AlreadyRun();
      },
    });
    if (result.kind === 'created') return 'created';
    return (await advance(cairn.db)) ? 'not_created' : 'taken';
  } catch (err) {
    if (err instanceof AlreadyRun) return 'taken';
    throw err;
  }
}

/**
 * Runs every schedule due at `now`, each due time once whichever processes call this at the
 * same time. Returns what became of each.
 */
export async function runDueSchedules(cairn: Cairn, now = new Date()): Promise<ScheduleRunOutcome[]> {
  const outcomes: ScheduleRunOutcome[] = [];
  const BATCH = 100;
  let afterId = 0;
  for (;;) {
    const due = await cairn.db
      .selectFrom('ci_pipeline_schedules')
      .selectAll()
      .where('active', '=', true)
      .where('next_run_at', '<=', now)
      .where('id', '>', afterId)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    for (const schedule of due) {
      afterId = schedule.id;
      try {
        outcomes.push(await runDueSchedule(cairn, schedule, now));
      } catch (err) {
        // One schedule's failure (a git error) does not hold up the others; it is tried again next sweep.
        console.error(`pipeline schedule ${schedule.id} failed to run`, err);
      }
    }
    if (due.length < BATCH) return outcomes;
  }
}

/**
 * "Run now" (POST .../play): a pipeline of the schedule as `userId`, next_run_at left alone.
 * Refusals found by then (the ref gone, the user's rights) mean no pipeline, as GitLab's worker.
 */
export async function playSchedule(cairn: Cairn, scheduleId: number, userId: number): Promise<boolean> {
  const schedule = await cairn.db.selectFrom('ci_pipeline_schedules').selectAll().where('id', '=', scheduleId).executeTakeFirst();
  if (!schedule) return false;
  const project = await findProjectRow(cairn.db, schedule.project_id);
  if (!project || project.archived) return false;
  const user = await findUserById(cairn.db, userId);
  const target = await resolvePipelineRef(cairn, project, schedule.ref);
  if (!target || (await pipelineRefusal(cairn, project, user, target))) return false;
  const result = await createPipeline(cairn, {
    project, ref: target.ref, tag: target.tag, sha: target.sha, source: 'schedule', userId,
    scheduleVariables: await scheduleVariables(cairn, schedule.id), pipelineScheduleId: schedule.id, api: true,
  });
  return result.kind === 'created';
}

defineRecurring(RUN_DUE_SCHEDULES_JOB, SCHEDULE_SWEEP_SECONDS, async (cairn) => {
  await runDueSchedules(cairn);
});

defineJob(PLAY_SCHEDULE_JOB, async (cairn, payload) => {
  await playSchedule(cairn, Number(payload.scheduleId), Number(payload.userId));
});
