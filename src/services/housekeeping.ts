import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { runHousekeeping, type HousekeepingTask } from '../git/housekeeping.js';
import { defineJob, enqueue } from '../jobs/queue.js';
import { projectRepoPath } from './projects.js';

const JOB = 'repository.housekeeping';

export async function housekeepProject(cairn: Cairn, projectId: number, task: HousekeepingTask = 'incremental'): Promise<boolean> {
  const project = await cairn.db.selectFrom('projects').select(['repository_storage', 'disk_path']).where('id', '=', projectId).executeTakeFirst();
  if (!project) return false;
  await runHousekeeping(projectRepoPath(cairn, project), task);
  return true;
}

defineJob(JOB, async (cairn, payload) => {
  await housekeepProject(cairn, Number(payload.projectId), payload.task ?? 'incremental');
});

/** Queues housekeeping for a project unless a run is already waiting (pushes come in bursts). */
export async function scheduleHousekeeping(cairn: Cairn, projectId: number, delayMs = 5_000): Promise<void> {
  const waiting = await sql<{ n: number }>`
    select count(*)::int as n from background_jobs
     where kind = ${JOB} and state = 'pending' and (payload ->> 'projectId')::int = ${projectId}`.execute(cairn.db);
  if (waiting.rows[0]?.n) return;
  await enqueue(cairn.db, JOB, { projectId }, { runAt: new Date(Date.now() + delayMs) });
}

/** After every push or API commit, keep the repository's commit-graph current. */
export function registerHousekeeping(cairn: Cairn) {
  cairn.postReceiveHooks.push((event) => scheduleHousekeeping(cairn, event.projectId));
}
