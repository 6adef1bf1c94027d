import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace, Project, User } from '../db/schema/core.js';

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

/** A membership counts when it is active, not a pending request, and not expired. */
export const activeMembership = sql<boolean>`(m.state = 0 and m.requested_at is null and (m.expires_at is null or m.expires_at > current_date))`;

/** SQL condition: a group share (aliased `l`) has not expired. */
const linkActive = sql<boolean>`(l.expires_at is null or l.expires_at > current_date)`;


/**
 * The highest access level a user has on a group: membership of the group or an ancestor,
 * and direct membership of a group that this group (or an ancestor) is shared with, capped at
 * the share's level. As in GitLab, a share reaches only the invited group's direct members.
 * Same rules as the SQL function group_authorizations().
 */
export async function groupAccessLevel(db: Database, userId: number, group: Pick<Namespace, 'id' | 'traversal_ids'>): Promise<number> {
  const row = await sql<{ level: number | null }>`
    select max(level) as level from (
      select m.access_level as level from members m
       where m.user_id = ${userId} and m.source_type = 'Namespace'
         and m.source_id = any(${group.traversal_ids}::int[]) and ${activeMembership}
      union all
      select least(l.group_access, m.access_level) from group_group_links l
        join members m on m.source_type = 'Namespace' and m.source_id = l.shared_with_group_id
       where l.shared_group_id = any(${group.traversal_ids}::int[]) and ${linkActive}
         and m.user_id = ${userId} and m.access_level > 5 and ${activeMembership}
    ) levels`.execute(db);
  return row.rows[0]?.level ?? 0;
}

/**
 * The highest access level a user has on a project: direct membership, the namespace's
 * group tree (and groups shared into it), groups the project is shared with (unless its
 * namespace locks sharing), and 50 for the owner of a personal namespace. Minimal access
 * grants nothing on projects. Same rules as the SQL function project_authorizations().
 */
export async function projectAccessLevel(db: Database, userId: number, project: Pick<Project, 'id' | 'namespace_id'>): Promise<number> {
  const row = await sql<{ level: number }>`select project_access_level(${userId}, ${project.id}) as level`.execute(db);
  return row.rows[0]?.level ?? 0;
}

/**
 * GitLab lets a user see a private group when they have access to one of its subgroups or
 * projects (read_group through descendants); the same rule as groupVisibleTo below.
 */
export async function hasAccessBelowGroup(db: Database, userId: number, groupId: number): Promise<boolean> {
  const row = await sql<{ found: boolean }>`
    select exists (
      select 1 from group_authorizations(${userId}) ga join namespaces n on n.id = ga.group_id
       where n.traversal_ids @> array[${groupId}::int] and ga.access_level >= 10
      union all
      select 1 from project_authorizations(${userId}) pa
        join projects p on p.id = pa.project_id join namespaces n on n.id = p.namespace_id
       where n.traversal_ids @> array[${groupId}::int]
    ) as found`.execute(db);
  return row.rows[0]?.found ?? false;
}

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
