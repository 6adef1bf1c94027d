// Auto-cancel redundant pipelines (GitLab's Ci::PipelineCreation::CancelRedundantPipelinesService):
// a new pipeline on a ref cancels the older, still running pipelines of that ref, as each one's
// `workflow:auto_cancel:on_new_commit` says —
//   conservative (default): the whole pipeline, unless a job that is not `interruptible` has started;
//   interruptible: only its `interruptible` jobs;
//   none: nothing.
// Skipped: child pipelines (their root decides), pipelines of the same sha or of the ref's
// current head, pipelines older than a week, sources that are not CI sources, and every pipeline
// of a project whose auto_cancel_pending_pipelines setting is disabled. The new pipeline's
// creation enqueues this in its transaction (CANCEL_REDUNDANT_PIPELINES_JOB), so it happens even
// if the process dies right after.

import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiStatus } from '../../db/schema/ci.js';
import { readRef } from '../../git/refs.js';
import { defineJob } from '../../jobs/queue.js';
import { projectSettings } from '../../presenters/projects.js';
import { projectRepoPath } from '../../services/projects.js';
import { findProjectRow } from '../../finders/projects.js';
import { cancelPipelineJobs } from '../jobs/state.js';

export const CANCEL_REDUNDANT_PIPELINES_JOB = 'ci.cancel_redundant_pipelines';
const CANCELABLE_PIPELINE_STATUSES: CiStatus[] = ['created', 'waiting_for_resource', 'preparing', 'pending', 'running', 'scheduled'];
/** Enums::Ci::Pipeline.ci_sources: the sources whose pipelines a newer one may cancel. */
const CI_SOURCES = new Set(['unknown', 'push', 'web', 'trigger', 'schedule', 'api', 'external', 'pipeline', 'chat', 'merge_request_event', 'external_pull_request_event']);
const MAX_CANCELLATIONS = 3000;
const MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** Job statuses of a job that has started (GitLab's STARTED_STATUSES). */
const STARTED: CiStatus[] = ['running', 'success', 'failed'];

type AutoCancelConfig = { workflow?: { autoCancel?: { onNewCommit?: string | null } | null } } | null;

export async function cancelRedundantPipelines(cairn: Cairn, pipelineId: number): Promise<number[]> {
  const db = cairn.db;
  const pipeline = await db.selectFrom('ci_pipelines').selectAll().where('id', '=', pipelineId).executeTakeFirst();
  if (!pipeline || pipeline.parent_pipeline_id) return [];
  const project = await findProjectRow(db, pipeline.project_id);
  if (!project || projectSettings(project).auto_cancel_pending_pipelines === 'disabled') return [];
  const candidates = (
    await db
      .selectFrom('ci_pipelines')
      .select(['id', 'source', 'sha', 'created_at', 'parent_pipeline_id', 'config'])
      .where('project_id', '=', pipeline.project_id)
      .where('ref', '=', pipeline.ref)
      .where('id', '<>', pipeline.id)
      .where('status', 'in', CANCELABLE_PIPELINE_STATUSES)
      .orderBy('id', 'desc')
      .limit(MAX_CANCELLATIONS)
      .execute()
  ).reverse();
  if (!candidates.length) return [];
  const gitDir = projectRepoPath(cairn, project);
  const headSha = (await readRef(cairn.catfile, gitDir, `refs/${pipeline.tag ? 'tags' : 'heads'}/${pipeline.ref}`)) ?? null;
  const createdAt = new Date(pipeline.created_at as any).getTime();
  const canceled: number[] = [];
  for (const c of candidates) {
    if (CI_SOURCES.has(c.source)) {
      if (new Date(c.created_at as any).getTime() >= createdAt) continue;
    } else if (c.source === 'parent_pipeline') {
      if ((await rootCreatedAt(cairn, c.id)) >= createdAt) continue;
    } else continue;
    if (c.sha === pipeline.sha || c.sha === headSha) continue;
    if (new Date(c.created_at as any).getTime() < Date.now() - MAX_AGE_MS) continue;
    const mode = (c.config as AutoCancelConfig)?.workflow?.autoCancel?.onNewCommit ?? 'conservative';
    if (mode === 'interruptible') {
      await cancelPipelineJobs(cairn, c.id, { onlyInterruptible: true });
      canceled.push(c.id);
    } else if (mode === 'conservative') {
      const blocking = await db
        .selectFrom('ci_builds')
        .select('id')
        .where('pipeline_id', '=', c.id)
        .where('type', '=', 'Ci::Build')
        .where('status', 'in', STARTED)
        .where(sql<boolean>`interruptible is not true`)
        .limit(1)
        .executeTakeFirst();
      if (blocking) continue;
      await cancelPipelineJobs(cairn, c.id);
      canceled.push(c.id);
    }
  }
  return canceled;
}

async function rootCreatedAt(cairn: Cairn, pipelineId: number): Promise<number> {
  let id: number | null = pipelineId;
  let created = Infinity;
  for (let depth = 0; id !== null && depth < 20; depth++) {
    const row: { parent_pipeline_id: number | null; created_at: unknown } | undefined = await cairn.db
      .selectFrom('ci_pipelines').select(['parent_pipeline_id', 'created_at']).where('id', '=', id).executeTakeFirst();
    if (!row) break;
    created = new Date(row.created_at as any).getTime();
    id = row.parent_pipeline_id;
  }
  return created;
}

defineJob(CANCEL_REDUNDANT_PIPELINES_JOB, async (cairn, payload) => {
  await cancelRedundantPipelines(cairn, Number(payload.pipelineId));
});
