import type { Cairn, Credential, TokenResolver } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { CiBuild } from '../db/schema/ci.js';
import { tokenDigest } from '../lib/secrets.js';

/**
 * CI job tokens (CI_JOB_TOKEN). A token is valid while its job runs: assignBuild stores its
 * digest, finishing or canceling the job clears it. As a credential it acts as the job's user,
 * read-only for git (api/git_http/auth.ts) and only on API routes that declare `jobToken: true`
 * (plugins/auth.ts refuses it elsewhere with 401).
 */
export async function findRunningJobByToken(cairn: Cairn, token: unknown): Promise<CiBuild | null> {
  if (typeof token !== 'string' || !token) return null;
  const build = await cairn.db
    .selectFrom('ci_builds')
    .selectAll()
    .where('token_digest', '=', tokenDigest(token))
    .where('status', '=', 'running')
    .executeTakeFirst();
  return build ?? null;
}

export const jobTokenResolver: TokenResolver = {
  // JOB-TOKEN / job_token, and Authorization: Bearer on the routes that accept job tokens.
  channels: ['job', 'bearer'],
  async resolve(cairn: Cairn, token: string): Promise<Credential | null> {
    const row = await cairn.db
      .selectFrom('ci_builds as b')
      .innerJoin('users as u', 'u.id', 'b.user_id')
      .select(['b.id as job_id', 'b.project_id as job_project_id', 'b.pipeline_id as job_pipeline_id'])
      .selectAll('u')
      .where('b.token_digest', '=', tokenDigest(token))
      .where('b.status', '=', 'running')
      .executeTakeFirst();
    if (!row) return null;
    const { job_id, job_project_id, job_pipeline_id, ...user } = row;
    return {
      kind: 'job_token',
      user: user as User,
      scopes: ['api'],
      tokenId: job_id,
      meta: { jobId: job_id, projectId: job_project_id, pipelineId: job_pipeline_id },
    };
  },
};
