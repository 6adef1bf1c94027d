import type { FastifyRequest } from 'fastify';
import type { Cairn } from '../context.js';
import type { Namespace, User } from '../db/schema/core.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { can, effectiveLevel, type GroupAbility, type GroupSubject, type ProjectAbility } from '../policies/abilities.js';
import type { GroupAccess } from '../policies/groups.js';
import { jobTokenMayAccess, jobTokenProjectId } from '../policies/job_token_scope.js';
import type { ProjectAccess } from '../policies/projects.js';
import { groupAccessLevel, hasAccessBelowGroup } from './access_levels.js';
import { findGroup } from './groups.js';
import { findProject, type FoundProject } from './projects.js';

// The loaders of route guards and pages: a project or group with the caller's level on it (the
// subject policies answer over), 404 when unreadable, 403 without the ability.

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

/**
 * Loads a group for the caller: 404 when missing or unreadable, 403 without `ability`.
 * A private group is also readable by members of its projects and subgroups (GitLab's rule),
 * as in the finders' groupVisibleTo. Kept in the cache per caller, as project lookups are; the
 * answer depends on the caller's row read when the request began, hence `since`.
 */
export async function authorizeGroup(request: FastifyRequest, idOrPath: string | number, ability: GroupAbility = 'read_group'): Promise<GroupAccess> {
  const user = request.actor?.user ?? null;
  const found = await loadGroupFor(request.server.cairn, user, idOrPath, request.cacheGeneration);
  if (!found || !can(user, 'read_group', found)) throw notFound('Group');
  if (!can(user, ability, found)) throw forbidden();
  // Cached values are frozen and shared.
  return { group: { ...(found.group as Namespace) }, accessLevel: found.accessLevel, user };
}

/** A group (by id or full path) with the user's effective level on it, through the shared cache; undefined when missing. */
export function loadGroupFor(cairn: Cairn, user: User | null, idOrPath: string | number, since: number): Promise<GroupSubject | undefined> {
  const { db, cache } = cairn;
  return cache.load(
    `group:${user?.id ?? 0}:${idOrPath}`,
    async (): Promise<GroupSubject | undefined> => {
      const group = await findGroup(db, idOrPath);
      if (!group) return undefined;
      const accessLevel = effectiveLevel(user, user ? await groupAccessLevel(db, user.id, group) : 0);
      const subject: GroupSubject = { group, accessLevel };
      if (!can(user, 'read_group', subject) && user) subject.accessBelow = await hasAccessBelowGroup(db, user.id, group.id);
      return subject;
    },
    { since },
  );
}
