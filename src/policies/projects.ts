import type { FastifyRequest } from 'fastify';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import { findProject, type FoundProject, type ProjectWithNamespace } from '../finders/projects.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { AccessLevel, canSeeVisibility, projectAccessLevel } from './access.js';

export interface ProjectAccess {
  project: FoundProject;
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

/** The project (by id or full path) with the user's own level, in one statement, through the shared cache. */
export function loadProjectForUser(cairn: Cairn, userId: number | undefined, idOrPath: string | number): Promise<FoundProject | undefined> {
  return cairn.cache.load(`project:${userId ?? 0}:${idOrPath}`, () => findProject(cairn.db, idOrPath, userId));
}

/**
 * Loads `:id` for the caller: 404 when it does not exist or the caller may not see it,
 * 403 when it is visible but the caller's level is below `minAccess`.
 */
export async function authorizeProject(request: FastifyRequest, idOrPath: string | number, minAccess = 0): Promise<ProjectAccess> {
  const user = request.actor?.user ?? null;
  // One statement: the project, its namespace and the caller's level.
  const cached = await loadProjectForUser(request.server.cairn, user?.id, idOrPath);
  if (!cached) throw notFound('Project');
  // Cached rows are frozen and shared; services update the project's own fields as they write.
  const project = { ...cached };
  const level = project.callerAccessLevel ?? 0;
  const accessLevel = user?.admin ? Math.max(level, AccessLevel.OWNER) : level;
  if (!canSeeVisibility(user, project.visibility_level, accessLevel)) throw notFound('Project');
  if (accessLevel < minAccess) throw forbidden();
  return { project, accessLevel, user };
}
