import type { Database } from '../db/index.js';
import type { Project, User } from '../db/schema/core.js';
import { ApiError, forbidden } from '../plugins/errors.js';
import { canPushToBranch, type PushProject } from './branches.js';

/**
 * What keeps a repository from being written whatever the caller may do: a storage move in
 * progress (read-only) or an archived project. Every writer calls this.
 */
export function assertRepositoryWritable(project: Pick<Project, 'repository_read_only' | 'archived'>) {
  if (project.repository_read_only) {
    throw new ApiError(403, { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' });
  }
  if (project.archived) throw forbidden('You are not allowed to push into this branch');
}

/** Push rights on one branch, honouring protected branches; 403 as GitLab's authorize_push_to_branch!. */
export async function assertCanPushToBranch(db: Database, project: PushProject, user: User, accessLevel: number, branch: string, opts: { force?: boolean } = {}) {
  const decision = await canPushToBranch(db, project, user, accessLevel, branch, opts);
  if (!decision.allowed) throw forbidden('You are not allowed to push into this branch');
}
