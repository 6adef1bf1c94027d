import type { FastifyRequest } from 'fastify';
import type { Cairn } from '../context.js';
import type { Namespace, User } from '../db/schema/core.js';
import { findGroup } from '../finders/groups.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { can, effectiveLevel, type GroupAbility, type GroupSubject } from './abilities.js';
import { groupAccessLevel, hasAccessBelowGroup } from './access.js';

export interface GroupAccess {
  group: Namespace;
  accessLevel: number;
  user: User | null;
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
