import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Namespace } from '../db/schema/core.js';
import type { MemberSource } from '../finders/members.js';
import { can, type AbilityActor } from './abilities.js';
import { accessLevelName } from './access.js';

/**
 * Levels a membership may hold. Owner is for groups only and minimal access for groups only
 * (the spec's access-level table); a project's top member level is Maintainer.
 */
export function validMemberLevels(source: MemberSource): number[] {
  return source.type === 'Project' ? [10, 20, 30, 40] : [5, 10, 20, 30, 40, 50];
}

/** The levels the API accepts at all for access_level (others: "does not have a valid value"). */
export const ACCEPTED_ACCESS_LEVELS = [5, 10, 20, 30, 40, 50];

/** May the caller manage the source's members: admin_project_member on a project, admin_group_member on a group. */
export function canAdminMembers(actor: AbilityActor, source: MemberSource, callerLevel: number): boolean {
  return source.type === 'Project'
    ? can(actor, 'admin_project_member', { project: source.project, accessLevel: callerLevel })
    : can(actor, 'admin_group_member', { group: source.group, accessLevel: callerLevel });
}

/** The owner of a personal namespace can be neither changed nor removed on its projects. */
export function isPersonalProjectOwner(source: MemberSource, userId: number): boolean {
  return source.type === 'Project' && source.project.namespace.type === 'User' && source.project.namespace.owner_id === userId;
}

/**
 * Is this user's direct Owner membership the last one that keeps the group owned? Owners of
 * ancestor groups count too. A blocked owner only counts when the target is blocked as well.
 */
export async function isLastOwner(db: Database, group: Namespace, userId: number): Promise<boolean> {
  return (await lastOwnersAmong(db, group, [userId])).has(userId);
}

/** isLastOwner for several users at once (a page of a list), in one statement: those who are. */
export async function lastOwnersAmong(db: Database, group: Namespace, userIds: number[]): Promise<Set<number>> {
  if (userIds.length === 0) return new Set();
  const rows = await sql<{ user_id: number }>`
    select t.id as user_id from users t
     where t.id = any(${userIds}::int[])
       and exists (select 1 from members m where m.source_type = 'Namespace' and m.source_id = ${group.id}
                     and m.user_id = t.id and m.access_level = 50 and m.requested_at is null)
       and not exists (select 1 from members m join users u on u.id = m.user_id
                        where m.source_type = 'Namespace' and m.source_id = any(${group.traversal_ids}::int[])
                          and m.access_level = 50 and membership_active(m) and m.user_id <> t.id
                          and u.user_type = 'human' and (u.state = 'active' or t.state <> 'active'))`.execute(db);
  return new Set(rows.rows.map((r) => r.user_id));
}

function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/**
 * GitLab's member validations: the level must suit the source, the expiry may not be in the
 * past, and a direct level may not be below what the user already has from an ancestor group.
 * Returns {"field": ["message"]} (empty when valid).
 */
export async function validateMembership(
  db: Database,
  source: MemberSource,
  userId: number,
  accessLevel: number,
  expiresAt: string | null | undefined,
): Promise<Record<string, string[]>> {
  const errors: Record<string, string[]> = {};
  const add = (field: string, msg: string) => (errors[field] ??= []).push(msg);
  if (!validMemberLevels(source).includes(accessLevel)) add('access_level', 'is not included in the list');
  const ancestors =
    source.type === 'Project'
      ? source.project.namespace.type === 'Group' ? source.project.namespace.traversal_ids : []
      : source.group.traversal_ids.filter((id) => id !== source.group.id);
  if (ancestors.length) {
    const inherited = await sql<{ access_level: number; name: string }>`
      select m.access_level, n.name from members m join namespaces n on n.id = m.source_id
       where m.source_type = 'Namespace' and m.source_id = any(${ancestors}::int[]) and m.user_id = ${userId}
         and m.requested_at is null
       order by m.access_level desc limit 1`.execute(db);
    const top = inherited.rows[0];
    if (top && top.access_level > accessLevel) {
      add('access_level', `should be greater than or equal to ${accessLevelName(top.access_level)} inherited membership from group ${top.name}`);
    }
  }
  if (expiresAt && expiresAt < today()) add('expires_at', 'cannot be a date in the past');
  return errors;
}

/** Rails' full messages ("Access level is not included in the list"), for multi-user answers. */
export function fullMessages(errors: Record<string, string[]>): string[] {
  return Object.entries(errors).flatMap(([field, msgs]) => {
    const label = field.charAt(0).toUpperCase() + field.slice(1).replace(/_/g, ' ');
    return msgs.map((m) => `${label} ${m}`);
  });
}

/** Ruby's Array#to_sentence: "a", "a and b", "a, b, and c". */
export function toSentence(items: string[]): string {
  if (items.length <= 1) return items[0] ?? '';
  if (items.length === 2) return `${items[0]} and ${items[1]}`;
  return `${items.slice(0, -1).join(', ')}, and ${items[items.length - 1]}`;
}
