import type { FastifyRequest } from 'fastify';
import type { User } from '../db/schema/core.js';
import { findProject, type ProjectWithNamespace } from '../finders/projects.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { AccessLevel, canSeeVisibility, projectAccessLevel } from './access.js';

export interface ProjectAccess {
  project: ProjectWithNamespace;
  /** The caller's effective level (admins count as owners; 0 for outsiders/anonymous). */
  accessLevel: number;
  user: User | null;
}

export async function projectAccessFor(request: FastifyRequest, project: ProjectWithNamespace): Promise<number> {
  const user = request.actor?.user ?? null;
  if (!user) return 0;
  const level = await projectAccessLevel(request.server.cairn.db, user.id, project);
  return user.admin ? Math.max(level, AccessLevel.OWNER) : level;
}

/**
 * Loads `:id` for the caller: 404 when it does not exist or the caller may not see it,
 * 403 when it is visible but the caller's level is below `minAccess`.
 */
export async function authorizeProject(request: FastifyRequest, idOrPath: string | number, minAccess = 0): Promise<ProjectAccess> {
  const project = await findProject(request.server.cairn.db, idOrPath);
  if (!project) throw notFound('Project');
  const user = request.actor?.user ?? null;
  const accessLevel = await projectAccessFor(request, project);
  if (!canSeeVisibility(user, project.visibility_level, accessLevel)) throw notFound('Project');
  if (accessLevel < minAccess) throw forbidden();
  return { project, accessLevel, user };
}
