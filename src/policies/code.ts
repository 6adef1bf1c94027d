import type { FastifyRequest } from 'fastify';
import type { Database } from '../db/index.js';
import type { User } from '../db/schema/core.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { ApiError, forbidden } from '../plugins/errors.js';
import { AccessLevel, Visibility } from './access.js';
import { canPushToBranch } from './branches.js';
import { authorizeProject, type ProjectAccess } from './projects.js';

/**
 * Reading code: anyone who can see a public or internal project; on a private project a
 * reporter or more (guests see the project but not its repository, as in GitLab).
 */
export async function authorizeReadCode(request: FastifyRequest, id: string | number): Promise<ProjectAccess> {
  const access = await authorizeProject(request, id);
  if (access.project.visibility_level === Visibility.PRIVATE && access.accessLevel < AccessLevel.REPORTER) throw forbidden();
  return access;
}

/** Writing code at all: a developer or more, on a project whose repository accepts writes. */
export async function authorizeWriteCode(request: FastifyRequest, id: string | number): Promise<ProjectAccess> {
  const access = await authorizeReadCode(request, id);
  if (!access.user || access.accessLevel < AccessLevel.DEVELOPER) throw forbidden('You are not allowed to push into this branch');
  assertRepositoryWritable(access.project);
  return access;
}

export function assertRepositoryWritable(project: ProjectWithNamespace) {
  if (project.repository_read_only) {
    throw new ApiError(403, { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' });
  }
  if (project.archived) throw forbidden('You are not allowed to push into this branch');
}

/** Push rights on one branch, honouring protected branches; 403 as GitLab's authorize_push_to_branch!. */
export async function assertCanPushToBranch(db: Database, project: ProjectWithNamespace, user: User, accessLevel: number, branch: string, opts: { force?: boolean } = {}) {
  const decision = await canPushToBranch(db, project.id, user, accessLevel, branch, opts);
  if (!decision.allowed) throw forbidden('You are not allowed to push into this branch');
}
