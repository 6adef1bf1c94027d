import type { Database } from '../../db/index.js';
import type { CiPipeline } from '../../db/schema/ci.js';

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
