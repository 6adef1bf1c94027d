import type { Database } from '../../db/index.js';
import type { CiPipeline } from '../../db/schema/ci.js';
import { MR_STATE } from '../../db/work_item_states.js';

/** The project's latest pipeline for a commit (GitLab's Commit#latest_pipeline): highest id wins. */
export async function latestPipelineForSha(db: Database, projectId: number, sha: string): Promise<CiPipeline | null> {
  const row = await db
    .selectFrom('ci_pipelines')
    .selectAll()
    .where('project_id', '=', projectId)
    .where('sha', '=', sha)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ?? null;
}

/**
 * GitLab's CI_MERGE_REQUEST_* variables of a merge request pipeline (source merge_request_event,
 * detached: it runs on the source head, refs/merge-requests/:iid/head). Null for other pipelines.
 * CI_COMMIT_REF_NAME is the source branch there, and CI_COMMIT_BRANCH is absent.
 */
export async function mergeRequestVariables(
  db: Database,
  baseUrl: string,
  pipeline: { source: string; merge_request_id: number | null },
): Promise<Record<string, string> | null> {
  if (pipeline.source !== 'merge_request_event' || pipeline.merge_request_id === null) return null;
  const mr = await db.selectFrom('merge_requests').selectAll().where('id', '=', pipeline.merge_request_id).executeTakeFirst();
  if (!mr) return null;
  const pathOf = async (id: number | null) => {
    if (id === null) return null;
    const row = await db.selectFrom('projects as p').innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
      .select(['p.path', 'n.full_path']).where('p.id', '=', id).executeTakeFirst();
    return row ? `${row.full_path}/${row.path}` : null;
  };
  const [targetPath, sourcePath] = await Promise.all([pathOf(mr.target_project_id), pathOf(mr.source_project_id)]);
  const v: Record<string, string> = {
    CI_MERGE_REQUEST_ID: String(mr.id),
    CI_MERGE_REQUEST_IID: String(mr.iid),
    CI_MERGE_REQUEST_PROJECT_ID: String(mr.target_project_id),
    CI_MERGE_REQUEST_REF_PATH: `refs/merge-requests/${mr.iid}/head`,
    CI_MERGE_REQUEST_SOURCE_BRANCH_NAME: mr.source_branch,
    CI_MERGE_REQUEST_SOURCE_BRANCH_SHA: '',
    CI_MERGE_REQUEST_TARGET_BRANCH_NAME: mr.target_branch,
    CI_MERGE_REQUEST_TARGET_BRANCH_SHA: '',
    CI_MERGE_REQUEST_TITLE: mr.title,
    CI_MERGE_REQUEST_EVENT_TYPE: 'detached',
    CI_MERGE_REQUEST_DRAFT: String(/^\s*(\[draft\]|\(draft\)|draft:|draft\s-\s|\[wip\]|wip:)/i.test(mr.title)),
    CI_COMMIT_REF_NAME: mr.source_branch,
    CI_COMMIT_REF_SLUG: mr.source_branch.toLowerCase().replace(/[^a-z0-9]/g, '-').slice(0, 63).replace(/^-+|-+$/g, ''),
  };
  if (mr.base_sha) v.CI_MERGE_REQUEST_DIFF_BASE_SHA = mr.base_sha;
  if (targetPath) Object.assign(v, { CI_MERGE_REQUEST_PROJECT_PATH: targetPath, CI_MERGE_REQUEST_PROJECT_URL: `${baseUrl}/${targetPath}` });
  if (mr.source_project_id !== null) v.CI_MERGE_REQUEST_SOURCE_PROJECT_ID = String(mr.source_project_id);
  if (sourcePath) Object.assign(v, { CI_MERGE_REQUEST_SOURCE_PROJECT_PATH: sourcePath, CI_MERGE_REQUEST_SOURCE_PROJECT_URL: `${baseUrl}/${sourcePath}` });
  return v;
}

/**
 * GitLab's CI_OPEN_MERGE_REQUESTS: up to four open merge requests whose source is this branch of
 * this project, as `namespace/project!iid` (the target's path), in branch and merge request
 * pipelines. Null when there is none (the variable is then not set).
 */
export async function openMergeRequestsReference(db: Database, projectId: number, branch: string): Promise<string | null> {
  const rows = await db.selectFrom('merge_requests as mr')
    .innerJoin('projects as p', 'p.id', 'mr.target_project_id')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .select(['mr.iid', 'p.path', 'n.full_path'])
    .where('mr.source_project_id', '=', projectId).where('mr.source_branch', '=', branch).where('mr.state_id', '=', MR_STATE.opened)
    .orderBy('mr.id').limit(4).execute();
  return rows.length ? rows.map((r) => `${r.full_path}/${r.path}!${r.iid}`).join(',') : null;
}
