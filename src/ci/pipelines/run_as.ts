import type { Cairn } from '../../context.js';
import type { User } from '../../db/schema/core.js';
import { projectAccessLevel } from '../../finders/access_levels.js';
import type { FoundProject } from '../../finders/projects.js';
import { readRef, resolveCommit } from '../../git/refs.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { canUpdateRef, protectedRefPipelineMessage } from '../../policies/branches.js';
import { projectRepoPath } from '../../services/projects.js';

// Pipelines created for someone who is not the caller of the request: a schedule's owner, a
// trigger token's owner, the user of the job whose CI_JOB_TOKEN triggers. The checks are GitLab's
// (Gitlab::Ci::Pipeline::Chain::Validate::Abilities), made as that user.

/** GitLab's message when the user a pipeline would run as may not run pipelines in the project. */
export const INSUFFICIENT_PERMISSIONS = 'Insufficient permissions to create a new pipeline';

export interface PipelineRef {
  /** The branch or tag name. */
  ref: string;
  tag: boolean;
  sha: string;
}

/**
 * A branch or tag (a short name, a branch first as GitLab does, or a full refs/heads/... or
 * refs/tags/... ref) and its commit; null when the project has no such ref.
 */
export async function resolvePipelineRef(cairn: Cairn, project: FoundProject, ref: string): Promise<PipelineRef | null> {
  const gitDir = projectRepoPath(cairn, project);
  const branch = async (name: string): Promise<PipelineRef | null> => {
    const sha = name ? await readRef(cairn.catfile, gitDir, `refs/heads/${name}`) : null;
    return sha ? { ref: name, tag: false, sha } : null;
  };
  const tag = async (name: string): Promise<PipelineRef | null> => {
    const target = name ? await readRef(cairn.catfile, gitDir, `refs/tags/${name}`) : null;
    // An annotated tag points at a tag object; the pipeline runs on its commit.
    const commit = target ? await resolveCommit(cairn.catfile, gitDir, target) : null;
    return commit ? { ref: name, tag: true, sha: commit.oid } : null;
  };
  if (ref.startsWith('refs/heads/')) return branch(ref.slice('refs/heads/'.length));
  if (ref.startsWith('refs/tags/')) return tag(ref.slice('refs/tags/'.length));
  return (await branch(ref)) ?? (await tag(ref));
}

/**
 * Why `user` may not run a pipeline on this ref of the project (GitLab's message), or null when
 * they may: an active user who may create pipelines there and, on a protected ref, update it.
 */
export async function pipelineRefusal(cairn: Cairn, project: FoundProject, user: User | null | undefined, target: Pick<PipelineRef, 'ref' | 'tag'>): Promise<string | null> {
  if (!user || user.state !== 'active') return INSUFFICIENT_PERMISSIONS;
  const accessLevel = effectiveLevel(user, await projectAccessLevel(cairn.db, user.id, project));
  if (!can(user, 'create_pipeline', { project, accessLevel })) return INSUFFICIENT_PERMISSIONS;
  if (!(await canUpdateRef(cairn.db, project, user, accessLevel, target.ref, target.tag))) return protectedRefPipelineMessage(target.ref);
  return null;
}
