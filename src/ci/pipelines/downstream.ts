import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiBuild, CiStatus } from '../../db/schema/ci.js';
import { findProjectRow } from '../../finders/projects.js';
import { readRef } from '../../git/refs.js';
import { defineJob } from '../../jobs/queue.js';
import { decryptSecret } from '../../lib/secrets.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { onPipelineSucceeded } from '../../services/merge.js';
import { mergeRequestNoteScope } from '../../services/merge_requests.js';
import { MR_STATE } from '../../db/work_item_states.js';
import { addSystemNote } from '../../services/notes.js';
import { projectRepoPath } from '../../services/projects.js';
import type { CompiledJob } from '../config/index.js';
import { expandAll } from '../config/variables.js';
import { advancePipeline, afterPipelineCommit, COMPLETED_STATUSES, CREATE_DOWNSTREAM_JOB, JOB_MACHINE, onPipelineStatusChange } from '../jobs/state.js';
import { transition } from '../../db/state_machine.js';
import { createPipeline } from './create.js';
import { findUserById } from '../../finders/users.js';

// Bridges (trigger:) and what a pipeline's end sets off: downstream pipelines are created by the
// durable queue once their bridge is pending; a downstream pipeline's status flows back into its
// bridge (strategy: depend) and the upstream pipeline moves on; merge requests waiting for a
// pipeline merge, or lose their auto-merge when it fails.

/** What a `depend` bridge shows for its downstream pipeline's status. */
function mirrored(status: CiStatus): CiStatus {
  if (status === 'success' || status === 'failed' || status === 'canceled' || status === 'skipped') return status;
  if (status === 'manual') return 'manual';
  return 'running';
}

async function settleBridge(cairn: Cairn, bridge: Pick<CiBuild, 'id' | 'pipeline_id'>, status: CiStatus, extra: { downstreamId?: number; failureReason?: string } = {}) {
  const moved = await cairn.db.transaction().execute(async (trx) => {
    await trx.selectFrom('ci_pipelines').select('id').where('id', '=', bridge.pipeline_id).forUpdate().execute();
    const done = COMPLETED_STATUSES.includes(status);
    await transition(trx, JOB_MACHINE, bridge.id, 'mirror', {
      set: {
        status,
        ...(extra.downstreamId ? { downstream_pipeline_id: extra.downstreamId } : {}),
        failure_reason: status === 'failed' ? (extra.failureReason ?? null) : null,
        started_at: sql`coalesce(started_at, now())` as any,
        finished_at: done ? (sql`now()` as any) : null,
        updated_at: sql`now()` as any,
      },
    });
    return advancePipeline(cairn, trx, bridge.pipeline_id);
  });
  await afterPipelineCommit(cairn, moved);
}

/** Creates the downstream pipeline of a pending bridge (child or multi-project). */
export async function createDownstream(cairn: Cairn, bridgeId: number): Promise<void> {
  const bridge = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', bridgeId).executeTakeFirst();
  if (!bridge || bridge.status !== 'pending' || bridge.downstream_pipeline_id) return;
  const exists = await cairn.db.selectFrom('ci_pipelines').select(['id', 'status']).where('source_job_id', '=', bridge.id).executeTakeFirst();
  if (exists) return settleBridgeFor(cairn, bridge, exists.id, exists.status as CiStatus);
  const job = bridge.options as unknown as CompiledJob;
  const trigger = job.trigger;
  const fail = () => settleBridge(cairn, bridge, 'failed', { failureReason: 'downstream_pipeline_creation_failed' });
  if (!trigger) return fail();
  const parent = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', bridge.pipeline_id).executeTakeFirstOrThrow();
  const inherited: Record<string, string> = {};
  if (trigger.forward.yamlVariables) {
    // Expanded with the bridge's own variables first, as GitLab's downstream variables are: a
    // child gets `PARENT_PIPELINE_ID: $CI_PIPELINE_ID` as the parent's id (for needs:pipeline).
    const own: Record<string, string> = {
      CI_PIPELINE_ID: String(parent.id), CI_PIPELINE_IID: String(parent.iid), CI_PIPELINE_SOURCE: parent.source,
      CI_COMMIT_SHA: parent.sha, CI_COMMIT_REF_NAME: parent.ref, CI_PROJECT_ID: String(parent.project_id),
      CI_JOB_ID: String(bridge.id), CI_JOB_NAME: bridge.name, CI_JOB_STAGE: bridge.stage ?? '',
    };
    const raw = new Set<string>();
    for (const v of job.variables ?? []) {
      own[v.key] = v.value;
      if (v.raw) raw.add(v.key);
      else raw.delete(v.key);
    }
    const expanded = expandAll(own, raw);
    for (const v of job.variables ?? []) inherited[v.key] = expanded[v.key];
  }
  if (trigger.forward.pipelineVariables) {
    // Pipeline variables, and a scheduled pipeline's schedule variables (GitLab forwards both).
    const vars = await cairn.db.selectFrom('ci_pipeline_variables').selectAll().where('pipeline_id', '=', parent.id).execute();
    const scheduleVars = parent.pipeline_schedule_id === null ? [] : await cairn.db.selectFrom('ci_pipeline_schedule_variables').selectAll()
      .where('pipeline_schedule_id', '=', parent.pipeline_schedule_id).orderBy('id').execute();
    for (const v of [...vars, ...scheduleVars]) inherited[v.key] = decryptSecret(cairn.config, v.value_encrypted) ?? '';
  }
  if (trigger.kind === 'child') {
    if (trigger.include.some((i) => !('local' in i))) return fail();
    const project = await findProjectRow(cairn.db, bridge.project_id);
    if (!project) return fail();
    const result = await createPipeline(cairn, {
      project, ref: parent.ref, tag: parent.tag, sha: parent.sha, beforeSha: parent.before_sha, source: 'parent_pipeline',
      userId: bridge.user_id, api: true, yaml: JSON.stringify({ include: trigger.include }),
      parentPipelineId: parent.id, sourceJobId: bridge.id, inheritedVariables: inherited,
    });
    if (result.kind !== 'created') return fail();
    return settleBridgeFor(cairn, bridge, result.pipeline.id, result.pipeline.status as CiStatus);
  }
  // Multi-project: the user who runs the bridge must be allowed to run pipelines downstream.
  const target = await findProjectRow(cairn.db, trigger.project, bridge.user_id ?? undefined);
  const user = bridge.user_id ? await findUserById(cairn.db, bridge.user_id) : undefined;
  if (!target || !user || user.state !== 'active') return fail();
  const subject = { project: target, accessLevel: effectiveLevel(user, target.callerAccessLevel ?? 0) };
  if (!can(user, 'create_pipeline', subject)) return fail();
  const branch = trigger.branch ?? target.default_branch ?? 'main';
  const sha = await readRef(cairn.catfile, projectRepoPath(cairn, target), `refs/heads/${branch}`);
  if (!sha) return fail();
  const result = await createPipeline(cairn, {
    project: target, ref: branch, tag: false, sha, source: 'pipeline', userId: user.id, api: true,
    sourceJobId: bridge.id, inheritedVariables: inherited, inputs: trigger.inputs,
  });
  if (result.kind !== 'created') return fail();
  return settleBridgeFor(cairn, bridge, result.pipeline.id, result.pipeline.status as CiStatus);
}

async function settleBridgeFor(cairn: Cairn, bridge: CiBuild, downstreamId: number, downstreamStatus: CiStatus) {
  const depend = (bridge.options as unknown as CompiledJob).trigger?.strategy === 'depend';
  await settleBridge(cairn, bridge, depend ? mirrored(downstreamStatus) : 'success', { downstreamId });
}

defineJob(CREATE_DOWNSTREAM_JOB, async (cairn, payload) => {
  await createDownstream(cairn, Number(payload.bridgeId));
});

// A downstream pipeline changed: its `depend` bridge follows it.
onPipelineStatusChange(async (cairn, pipeline, _before, after) => {
  if (!pipeline.source_job_id) return;
  const bridge = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', pipeline.source_job_id).executeTakeFirst();
  if (!bridge || bridge.type !== 'Ci::Bridge' || bridge.retried) return;
  if ((bridge.options as unknown as CompiledJob).trigger?.strategy !== 'depend') return;
  if (!['pending', 'running', 'manual'].includes(bridge.status)) return;
  const status = mirrored(after);
  if (status === bridge.status) return;
  await settleBridge(cairn, bridge, status, { downstreamId: pipeline.id, failureReason: 'downstream_pipeline_failed' });
});

// Merge when pipeline succeeds: the head pipeline of a merge request succeeded, or failed.
onPipelineStatusChange(async (cairn, pipeline, _before, after) => {
  if (pipeline.parent_pipeline_id) return;
  if (after === 'success') {
    await onPipelineSucceeded(cairn, pipeline.project_id, pipeline.sha);
  } else if (after === 'failed') {
    const dropped = await cairn.db
      .updateTable('merge_requests')
      .set({ merge_when_pipeline_succeeds: false, updated_at: sql`now()` as any })
      .where('target_project_id', '=', pipeline.project_id).where('head_sha', '=', pipeline.sha)
      .where((eb) => eb.or([eb('source_branch', '=', pipeline.ref), eb('head_pipeline_id', '=', pipeline.id)]))
      .where('state_id', '=', MR_STATE.opened).where('merge_when_pipeline_succeeds', '=', true)
      .returningAll()
      .execute();
    for (const mr of dropped) {
      await addSystemNote(cairn.db, mergeRequestNoteScope(mr), mr.merge_user_id, 'aborted the automatic merge because the pipeline failed');
    }
  }
});
