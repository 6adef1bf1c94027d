// Merge request pipelines (GitLab's merge_request_event): when a merge request is opened and on
// every push to its source branch, a pipeline runs on refs/merge-requests/:iid/head (from a fork:
// in the fork, on the source branch) with the CI_MERGE_REQUEST_* variables, if the configuration has jobs for it (rules on
// $CI_PIPELINE_SOURCE; jobs without rules or only/except run in branch pipelines only). The
// merge request service journals the work (services/merge_requests.ts, MERGE_REQUEST_PIPELINE_JOB)
// and this handler does it, at once in the request and again after a crash.
import type { Cairn } from '../../context.js';
import { findProjectRow } from '../../finders/projects.js';
import { defineJob } from '../../jobs/queue.js';
import { MR_STATE } from '../../db/work_item_states.js';
import { headRef, MERGE_REQUEST_PIPELINE_JOB } from '../../services/merge_requests.js';
import { createPipeline, type CreatePipelineResult } from './create.js';

export interface MergeRequestPipelineRequest {
  mergeRequestId: number;
  /** The head it is for: a merge request that moved on since gets its own request. */
  sha: string;
  /** Who opened the merge request or pushed to it: the pipeline's user. */
  userId: number | null;
}

/**
 * The merge request pipeline of an open merge request at `sha`, once per head (a replay or a push
 * that did not move the head creates nothing). A merge request from a fork gets it in the fork,
 * on its source branch, as GitLab runs them by default: the fork's jobs, variables and runners,
 * never the target's secrets (POST .../pipelines lets a member of the target run one there
 * instead). Null when nothing was created.
 */
export async function createMergeRequestPipeline(cairn: Cairn, req: MergeRequestPipelineRequest): Promise<CreatePipelineResult | null> {
  const mr = await cairn.db.selectFrom('merge_requests').selectAll().where('id', '=', req.mergeRequestId).executeTakeFirst();
  if (!mr || mr.state_id !== MR_STATE.opened || mr.head_sha !== req.sha || mr.source_project_id === null) return null;
  const fromFork = mr.source_project_id !== mr.target_project_id;
  const projectId = fromFork ? mr.source_project_id : mr.target_project_id;
  const existing = await cairn.db.selectFrom('ci_pipelines').select('id')
    .where('project_id', '=', projectId).where('merge_request_id', '=', mr.id)
    .where('sha', '=', req.sha).where('source', '=', 'merge_request_event')
    .limit(1).executeTakeFirst();
  if (existing) return null;
  const project = await findProjectRow(cairn.db, projectId);
  if (!project || project.archived) return null;
  return createPipeline(cairn, {
    project,
    ref: fromFork ? mr.source_branch : headRef(mr.iid),
    tag: false,
    sha: req.sha,
    source: 'merge_request_event',
    userId: req.userId,
    mergeRequestId: mr.id,
  });
}

defineJob(MERGE_REQUEST_PIPELINE_JOB, async (cairn, payload) => {
  await createMergeRequestPipeline(cairn, {
    mergeRequestId: Number(payload.mergeRequestId),
    sha: String(payload.sha),
    userId: payload.userId === null || payload.userId === undefined ? null : Number(payload.userId),
  });
});
