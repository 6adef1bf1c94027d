import type { FastifyRequest } from 'fastify';
import type { Namespace, User } from '../db/schema/core.js';
import { findGroup } from '../finders/groups.js';
import { forbidden, notFound } from '../plugins/errors.js';
import { AccessLevel, canSeeVisibility, groupAccessLevel, hasAccessBelowGroup } from './access.js';

export interface GroupAccess {
  group: Namespace;
  accessLevel: number;
  user: User | null;
}

export async function groupAccessFor(request: FastifyRequest, group: Namespace): Promise<number> {
  const user = request.actor?.user ?? null;
  if (!user) return 0;
  const level = await groupAccessLevel(request.server.cairn.db, user.id, group);
  return user.admin ? Math.max(level, AccessLevel.OWNER) : level;
}

/**
 * Loads a group for the caller: 404 when missing or invisible, 403 below `minAccess`.
 * A private group is also visible to members of its projects and subgroups (GitLab's rule),
 * as in the finders' groupVisibleTo. Kept in the cache per caller, as project lookups are; the
 * answer depends on the caller's row read when the request began, hence `since`.
 */
export async function authorizeGroup(request: FastifyRequest, idOrPath: string | number, minAccess = 0): Promise<GroupAccess> {
  const user = request.actor?.user ?? null;
  const { db, cache } = request.server.cairn;
  const found = await cache.load(
    `group:${user?.id ?? 0}:${idOrPath}`,
    async () => {
      const group = await findGroup(db, idOrPath);
      if (!group) return undefined;
      const level = user ? await groupAccessLevel(db, user.id, group) : 0;
      const accessLevel = user?.admin ? Math.max(level, AccessLevel.OWNER) : level;
      const visible = canSeeVisibility(user, group.visibility_level, accessLevel) || (user ? await hasAccessBelowGroup(db, user.id, group.id) : false);
      return { group, accessLevel, visible };
    },
    { since: request.cacheGeneration },
  );
  if (!found?.visible) throw notFound('Group');
  if (found.accessLevel < minAccess) throw forbidden();
  // Cached values are frozen and shared.
  return { group: { ...found.group }, accessLevel: found.accessLevel, user };
}
