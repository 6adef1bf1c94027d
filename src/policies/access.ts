import { sql } from 'kysely';
import type { User } from '../db/schema/core.js';

export const AccessLevel = {
  NO_ACCESS: 0,
  MINIMAL_ACCESS: 5,
  GUEST: 10,
  REPORTER: 20,
  DEVELOPER: 30,
  MAINTAINER: 40,
  OWNER: 50,
  ADMIN: 60,
} as const;

export const Visibility = { PRIVATE: 0, INTERNAL: 10, PUBLIC: 20 } as const;
export const VISIBILITY_NAMES: Record<number, 'private' | 'internal' | 'public'> = { 0: 'private', 10: 'internal', 20: 'public' };
export const VISIBILITY_LEVELS: Record<string, number> = { private: 0, internal: 10, public: 20 };

export function accessLevelName(level: number): string {
  return ({ 0: 'No access', 5: 'Minimal Access', 10: 'Guest', 20: 'Reporter', 30: 'Developer', 40: 'Maintainer', 50: 'Owner', 60: 'Admin' } as Record<number, string>)[level] ?? String(level);
}

// The access rules themselves (memberships, the group tree, shares and their caps, personal
// namespaces, expiry, pending requests, minimal access) are SQL, defined once in migration
// 0700_access_rules: the views group_access_grants / project_access_grants and the functions
// over them. What follows asks them; it holds no rule of its own. Reading a level for one user
// and one project or group is I/O: src/finders/access_levels.ts.

/** SQL condition: the membership aliased `m` counts (active, not a pending request, not expired). */
export const activeMembership = sql<boolean>`membership_active(m)`;

/** Can this (possibly anonymous) user see something of this visibility, given their access level? */
export function canSeeVisibility(user: User | null, visibilityLevel: number, accessLevel: number): boolean {
  if (visibilityLevel >= Visibility.PUBLIC) return true;
  if (!user) return false;
  if (user.admin) return true;
  if (visibilityLevel >= Visibility.INTERNAL && !user.external) return true;
  return accessLevel >= AccessLevel.GUEST;
}

/**
 * SQL condition: the project aliased `p` is visible to the user. Used by finders so that
 * lists filter by visibility in the query (no per-row checks).
 */
export function projectVisibleTo(user: User | null) {
  if (!user) return sql<boolean>`p.visibility_level = 20`;
  if (user.admin) return sql<boolean>`true`;
  const minLevel = user.external ? 20 : 10;
  return sql<boolean>`(p.visibility_level >= ${minLevel} or p.id in (select project_id from project_authorizations(${user.id})))`;
}

/** SQL condition: the group aliased `g` is visible to the user. */
export function groupVisibleTo(user: User | null) {
  if (!user) return sql<boolean>`g.visibility_level = 20`;
  if (user.admin) return sql<boolean>`true`;
  const minLevel = user.external ? 20 : 10;
  return sql<boolean>`(g.visibility_level >= ${minLevel} or g.id in (select group_id from group_authorizations(${user.id}))
    or g.id in (select unnest(n.traversal_ids) from namespaces n join projects p on p.namespace_id = n.id
                where p.id in (select project_id from project_authorizations(${user.id}))))`;
}
