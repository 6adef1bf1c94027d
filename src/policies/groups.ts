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
 * as in the finders' groupVisibleTo.
 */
export async function authorizeGroup(request: FastifyRequest, idOrPath: string | number, minAccess = 0): Promise<GroupAccess> {
  const group = await findGroup(request.server.cairn.db, idOrPath);
  if (!group) throw notFound('Group');
  const user = request.actor?.user ?? null;
  const accessLevel = await groupAccessFor(request, group);
  if (!canSeeVisibility(user, group.visibility_level, accessLevel)) {
    const seenFromBelow = user ? await hasAccessBelowGroup(request.server.cairn.db, user.id, group.id) : false;
    if (!seenFromBelow) throw notFound('Group');
  }
  if (accessLevel < minAccess) throw forbidden();
  return { group, accessLevel, user };
}
