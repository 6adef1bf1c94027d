import type { FastifyRequest } from 'fastify';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import { findProject, type FoundProject } from '../finders/projects.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { can, effectiveLevel, type ProjectAbility } from './abilities.js';
import { jobTokenMayAccess, jobTokenProjectId } from './job_token_scope.js';

export interface ProjectAccess {
  project: FoundProject;
  /** The caller's effective level (admins count as owners; 0 for outsiders/anonymous). */
  accessLevel: number;
  user: User | null;
}

/** The project (by id or full path) with the user's own level, in one statement, through the shared cache. */
export function loadProjectForUser(cairn: Cairn, userId: number | undefined, idOrPath: string | number): Promise<FoundProject | undefined> {
  return cairn.cache.load(`project:${userId ?? 0}:${idOrPath}`, () => findProject(cairn.db, idOrPath, userId));
}

/**
 * Loads `:id` for the caller: 404 when it does not exist or the caller may not read it, 403
 * when it is readable but the caller lacks `ability`.
 */
export async function authorizeProject(request: FastifyRequest, idOrPath: string | number, ability: ProjectAbility = 'read_project'): Promise<ProjectAccess> {
  const user = request.actor?.user ?? null;
  // One statement: the project, its namespace and the caller's level.
  const cached = await loadProjectForUser(request.server.cairn, user?.id, idOrPath);
  if (!cached) throw notFound('Project');
  // Cached rows are frozen and shared; services update the project's own fields as they write.
  const project = { ...cached };
  const subject = { project, accessLevel: effectiveLevel(user, project.callerAccessLevel ?? 0) };
  if (!can(user, 'read_project', subject)) throw notFound('Project');
  // A CI job token of another project sees this one only through its allowlist.
  const jobProject = jobTokenProjectId(request.actor);
  if (jobProject !== null && !(await jobTokenMayAccess(request.server.cairn.db, jobProject, project))) throw notFound('Project');
  if (!can(user, ability, subject)) throw forbidden();
  return { project, accessLevel: subject.accessLevel, user };
}
