import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { CiBuild } from '../db/schema/ci.js';
import type { User } from '../db/schema/core.js';
import type { FoundProject } from '../finders/projects.js';
import { refsContaining } from '../git/commits.js';
import { apiError, notFound, validationFailed } from '../plugins/errors.js';
import { nextInternalId } from '../services/internal_ids.js';
import { projectRepoPath } from '../services/projects.js';
import { defineMachine, transition, type EventOf } from '../db/state_machine.js';
import { advancePipeline, afterPipelineCommit } from './jobs/state.js';
import { isProtectedRef } from '../policies/branches.js';

/**
 * External commit statuses (POST /projects/:id/statuses/:sha), as GitLab's GenericCommitStatus:
 * a ci_builds row of type 'GenericCommitStatus' in the stage "external" of the commit's latest
 * pipeline for the ref, or of a new pipeline with source "external". They never reach a runner
 * (no pending-queue row); the pipeline's status follows them like any job's.
 */

export const GENERIC_TYPE = 'GenericCommitStatus';
const EXTERNAL_STAGE = 'external';
const EXTERNAL_STAGE_IDX = 1000000;
const ZERO_OID = '0000000000000000000000000000000000000000';

export const COMMIT_STATUS_STATES = ['pending', 'running', 'success', 'failed', 'canceled', 'skipped'] as const;
export type CommitStatusState = (typeof COMMIT_STATUS_STATES)[number];

export interface CommitStatusInput {
  project: FoundProject;
  user: User;
  sha: string;
  state: CommitStatusState;
  ref?: string;
  name?: string;
  targetUrl?: string;
  description?: string;
  coverage?: number;
  pipelineId?: number;
}

/** GitLab's CommitStatus transitions, by event name (the name its refusals show). */
export const COMMIT_STATUS_MACHINE = defineMachine('ci_builds', 'status', {
  enqueue: { from: ['created'], to: 'pending' },
  run: { from: ['created', 'pending'], to: 'running' },
  success: { from: ['created', 'pending', 'running'], to: 'success' },
  drop: { from: ['created', 'pending', 'running'], to: 'failed' },
  cancel: { from: ['created', 'pending', 'running'], to: 'canceled' },
  skip: { from: ['created'], to: 'skipped' },
});
/** The event for each state a caller may post. */
const EVENTS = { pending: 'enqueue', running: 'run', success: 'success', failed: 'drop', canceled: 'cancel', skipped: 'skip' } as const satisfies Record<CommitStatusState, EventOf<typeof COMMIT_STATUS_MACHINE>>;

function validTargetUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Creates or moves the caller's external status; returns the row. */
export async function createCommitStatus(cairn: Cairn, input: CommitStatusInput): Promise<CiBuild> {
  const { project, user, sha } = input;
  const name = input.name || 'default';
  if (input.targetUrl !== undefined && input.targetUrl !== '' && !validTargetUrl(input.targetUrl)) {
    throw validationFailed({ target_url: ['must be a valid URL'] });
  }
  const matching = () => {
    let q = cairn.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).where('sha', '=', sha);
    if (input.ref) q = q.where('ref', '=', input.ref);
    if (input.pipelineId !== undefined) q = q.where('id', '=', input.pipelineId);
    return q.orderBy('id', 'desc').limit(1).executeTakeFirst();
  };
  const first = await matching();
  if (input.pipelineId !== undefined && !first) throw notFound('Pipeline for pipeline_id, sha and ref');
  const ref = input.ref || first?.ref || (await refsContaining(projectRepoPath(cairn, project), sha, 'branch'))[0]?.name;
  if (!ref) throw notFound('References for commit');
  const protectedRef = await isProtectedRef(cairn, project.id, ref, false);

  const { build, moved } = await cairn.db.transaction().execute(async (trx) => {
    // One writer per commit at a time (GitLab's exclusive lease): two first statuses make one pipeline.
    await sql`select pg_advisory_xact_lock(${project.id}, hashtext(${'commit_status:' + sha}))`.execute(trx);
    let pipeline = first ? await trx.selectFrom('ci_pipelines').selectAll().where('id', '=', first.id).forUpdate().executeTakeFirst() : undefined;
    if (!pipeline && input.pipelineId === undefined) {
      // Another request may have made it while this one waited for the lock.
      const again = await matchingIn(trx, project.id, sha, input.ref);
      pipeline = again ?? (await trx.insertInto('ci_pipelines').values({
        iid: await nextInternalId(trx, 'ci_pipelines', project.id),
        project_id: project.id, ref, tag: false, sha, before_sha: ZERO_OID, source: 'external', protected: protectedRef,
        user_id: user.id, status: 'created',
      }).returningAll().executeTakeFirstOrThrow());
    }
    if (!pipeline) throw notFound('Pipeline for pipeline_id, sha and ref');
    let stage = await trx.selectFrom('ci_stages').select(['id', 'position']).where('pipeline_id', '=', pipeline.id).where('name', '=', EXTERNAL_STAGE).executeTakeFirst();
    if (!stage) {
      stage = await trx.insertInto('ci_stages').values({ pipeline_id: pipeline.id, project_id: project.id, name: EXTERNAL_STAGE, position: EXTERNAL_STAGE_IDX })
        .returning(['id', 'position']).executeTakeFirstOrThrow();
    }
    let status = await trx.selectFrom('ci_builds').selectAll()
      .where('pipeline_id', '=', pipeline.id).where('type', '=', GENERIC_TYPE as any).where('name', '=', name)
      .where('ref', '=', ref).where('user_id', '=', user.id).where('status', 'in', ['pending', 'running']).where('retried', '=', false)
      .orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (!status) {
      status = await trx.insertInto('ci_builds').values({
        pipeline_id: pipeline.id, project_id: project.id, stage_id: stage.id, stage: EXTERNAL_STAGE, stage_idx: stage.position, name,
        type: GENERIC_TYPE as any, status: 'created', ref, tag: false, sha, protected: protectedRef, user_id: user.id,
        created_at: sql`now()` as any, updated_at: sql`now()` as any,
      }).returningAll().executeTakeFirstOrThrow();
      // Older jobs of that name in the pipeline are superseded (GitLab's AddJobService).
      await trx.updateTable('ci_builds').set({ retried: true })
        .where('pipeline_id', '=', pipeline.id).where('name', '=', name).where('id', '!=', status.id).where('retried', '=', false).execute();
    }
    const event = EVENTS[input.state];
    const now = sql`now()` as any;
    const done = ['success', 'failed', 'canceled', 'skipped'].includes(input.state);
    const updated = await transition(trx, COMMIT_STATUS_MACHINE, status.id, event, { set: {
      ...(input.state === 'pending' || (input.state === 'running' && !status.queued_at) ? { queued_at: now } : {}),
      ...(input.state === 'running' ? { started_at: now } : {}),
      ...(done ? { finished_at: now } : {}),
      ...(input.state === 'failed' ? { failure_reason: 'api_failure' } : {}),
      ...(input.targetUrl !== undefined ? { target_url: input.targetUrl || null } : {}),
      ...(input.description !== undefined ? { description: input.description } : {}),
      ...(input.coverage !== undefined ? { coverage: input.coverage } : {}),
      updated_at: now,
    } });
    if (!updated) {
      const current = await trx.selectFrom('ci_builds').select('status').where('id', '=', status.id).executeTakeFirstOrThrow();
      throw apiError(400, `Cannot transition status via :${event} from :${current.status} (Reason(s): Status cannot transition via "${event}")`);
    }
    // Stage and pipeline statuses follow in the same transaction (and merge-when-pipeline-succeeds after it).
    return { build: updated, moved: await advancePipeline(cairn, trx, pipeline.id) };
  });
  await afterPipelineCommit(cairn, moved);
  return build;
}

function matchingIn(db: Database, projectId: number, sha: string, ref: string | undefined) {
  let q = db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', projectId).where('sha', '=', sha);
  if (ref) q = q.where('ref', '=', ref);
  return q.orderBy('id', 'desc').limit(1).forUpdate().executeTakeFirst();
}
