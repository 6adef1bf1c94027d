import type { FastifyRequest } from 'fastify';
import type { Project } from '../db/schema/core.js';
import { ApiError, forbidden } from '../plugins/errors.js';
import { AccessLevel, Visibility } from './access.js';
import { authorizeProject, type ProjectAccess } from './projects.js';

/**
 * May the caller read the project's code? Public and internal projects: whoever can see
 * them (guests included); private projects: reporters and up.
 */
export async function authorizeReadCode(request: FastifyRequest, idOrPath: string | number): Promise<ProjectAccess> {
  const access = await authorizeProject(request, idOrPath);
  if (access.project.visibility_level === Visibility.PRIVATE && access.accessLevel < AccessLevel.REPORTER) throw forbidden();
  return access;
}

/** Developers and up may write code (branches, tags); honours the read-only flag. */
export async function authorizePushCode(request: FastifyRequest, idOrPath: string | number): Promise<ProjectAccess> {
  const access = await authorizeReadCode(request, idOrPath);
  if (access.accessLevel < AccessLevel.DEVELOPER) throw forbidden();
  assertRepositoryWritable(access.project);
  return access;
}

/** Every writer calls this: a repository being moved between storages is read-only. */
export function assertRepositoryWritable(project: Pick<Project, 'repository_read_only' | 'archived'>) {
  if (project.repository_read_only) {
    throw new ApiError(403, { message: '403 Forbidden - The repository is temporarily read-only. Please try again later.' });
  }
  if (project.archived) throw forbidden('You are not allowed to push into this branch');
}
