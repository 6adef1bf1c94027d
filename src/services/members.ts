import { sql } from 'kysely';
import type { Database } from '../db/index.js';
import type { Member, Namespace, User } from '../db/schema/core.js';
import { findDirectMemberRow, sourceId, type MemberSource } from '../finders/members.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { ApiError, apiError, conflict, forbidden, validationFailed } from '../plugins/errors.js';
import { fullMessages, isLastOwner, isPersonalProjectOwner, toSentence, validateMembership } from '../policies/members.js';

export interface MembershipAttrs {
  accessLevel: number;
  expiresAt: string | null;
  inviteSource?: string | null;
  tasksToBeDone?: string[];
  tasksProjectId?: number | null;
  createdById: number | null;
}

/**
 * Adds a user who is not a direct member yet (the members API's POST, the members page): 409
 * "Member already exists" for a member or the owner of a personal project, GitLab's validation
 * errors as a 400 (`memberValidationErrors` gives them back to a page).
 */
export async function addMember(db: Database, source: MemberSource, userId: number, attrs: MembershipAttrs): Promise<Member> {
  if (isPersonalProjectOwner(source, userId) || (await findDirectMemberRow(db, source, userId))) throw conflict('Member already exists');
  const errors = await validateMembership(db, source, userId, attrs.accessLevel, attrs.expiresAt);
  if (Object.keys(errors).length) throw validationFailed(errors);
  return upsertMember(db, source, userId, attrs);
}

/**
 * Adds several users at once, or updates their membership (the members API's POST with
 * user_id "1,2,3"). Returns what failed, one "username: why" each; the others are saved.
 */
export async function addOrUpdateMembers(db: Database, source: MemberSource, users: Pick<User, 'id' | 'username'>[], attrs: MembershipAttrs): Promise<string[]> {
  const errors: string[] = [];
  for (const user of users) {
    const existing = await findDirectMemberRow(db, source, user.id);
    const locked =
      isPersonalProjectOwner(source, user.id) ||
      (existing && source.type === 'Namespace' && attrs.accessLevel !== existing.access_level && (await isLastOwner(db, source.group, user.id)));
    if (locked) {
      errors.push(`${user.username}: not authorized to update member`);
      continue;
    }
    const invalid = await validateMembership(db, source, user.id, attrs.accessLevel, attrs.expiresAt);
    if (Object.keys(invalid).length) {
      errors.push(`${user.username}: ${toSentence(fullMessages(invalid))}`);
      continue;
    }
    await upsertMember(db, source, user.id, attrs);
  }
  return errors;
}

/** The validation errors `addMember` refused with, or null for any other error. */
export function memberValidationErrors(err: unknown): Record<string, string[]> | null {
  if (!(err instanceof ApiError) || err.status !== 400) return null;
  const message = err.body.message;
  return message && typeof message === 'object' ? (message as Record<string, string[]>) : null;
}

/**
 * Makes the user a direct member. A pending access request of the user becomes the
 * membership (as GitLab's creator does); an existing membership is updated.
 */
export async function upsertMember(db: Database, source: MemberSource, userId: number, attrs: MembershipAttrs): Promise<Member> {
  const values = {
    access_level: attrs.accessLevel,
    expires_at: attrs.expiresAt,
    requested_at: null,
    updated_at: sql`now()`,
  } as const;
  const existing = await db
    .selectFrom('members')
    .select(['id', 'requested_at'])
    .where('source_type', '=', source.type)
    .where('source_id', '=', sourceId(source))
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (existing) {
    return db
      .updateTable('members')
      .set({
        ...values,
        ...(existing.requested_at ? { created_by_id: attrs.createdById, created_at: sql`now()` as any, invite_source: attrs.inviteSource ?? null } : {}),
      } as any)
      .where('id', '=', existing.id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  return db
    .insertInto('members')
    .values({
      source_type: source.type,
      source_id: sourceId(source),
      user_id: userId,
      access_level: attrs.accessLevel,
      expires_at: attrs.expiresAt,
      invite_source: attrs.inviteSource ?? null,
      tasks_to_be_done: attrs.tasksToBeDone ?? [],
      tasks_project_id: attrs.tasksProjectId ?? null,
      created_by_id: attrs.createdById,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function updateMemberRow(db: Database, memberId: number, changes: { access_level?: number; expires_at?: string | null; override?: boolean }): Promise<Member> {
  return db
    .updateTable('members')
    .set({ ...changes, updated_at: sql`now()` as any })
    .where('id', '=', memberId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Removes a direct membership. For a group, the user's direct memberships of its subgroups
 * and of projects in its tree go too, unless `skipSubresources`.
 */
export async function destroyMember(db: Database, source: MemberSource, member: Pick<Member, 'id' | 'user_id'>, skipSubresources: boolean): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('members').where('id', '=', member.id).execute();
    if (source.type !== 'Namespace' || skipSubresources) return;
    const groupId = source.group.id;
    await sql`
      delete from members m
       where m.user_id = ${member.user_id} and m.requested_at is null
         and ((m.source_type = 'Namespace' and m.source_id in
                (select id from namespaces where traversal_ids @> array[${groupId}::int] and id <> ${groupId}))
           or (m.source_type = 'Project' and m.source_id in
                (select p.id from projects p join namespaces n on n.id = p.namespace_id where n.traversal_ids @> array[${groupId}::int])))`.execute(trx);
  });
}

/** Every membership row (requests included) of the tree under `root`, optionally of one user. */
function inHierarchy(root: Namespace) {
  return sql<boolean>`((m.source_type = 'Namespace' and m.source_id in (select id from namespaces where traversal_ids @> array[${root.id}::int]))
    or (m.source_type = 'Project' and m.source_id in
      (select p.id from projects p join namespaces n on n.id = p.namespace_id where n.traversal_ids @> array[${root.id}::int])))`;
}

/** Activates awaiting memberships in the tree under `root` (one user's, or everyone's); returns how many. */
export async function activateAwaiting(db: Database, root: Namespace, userId: number | null): Promise<number> {
  const byUser = userId === null ? sql`true` : sql`m.user_id = ${userId}`;
  const res = await sql`update members m set state = 0, updated_at = now() where m.state = 1 and ${byUser} and ${inHierarchy(root)}`.execute(db);
  return Number(res.numAffectedRows ?? 0);
}

/** Removes all of a user's memberships in the tree under `root`; returns how many. */
export async function destroyMembershipsInHierarchy(db: Database, root: Namespace, userId: number): Promise<number> {
  const res = await sql`delete from members m where m.user_id = ${userId} and m.requested_at is null and ${inHierarchy(root)}`.execute(db);
  return Number(res.numAffectedRows ?? 0);
}

/** Records an access request (GitLab requests Developer by default). */
export async function requestAccess(db: Database, source: MemberSource, userId: number): Promise<Member> {
  return db
    .insertInto('members')
    .values({
      source_type: source.type,
      source_id: sourceId(source),
      user_id: userId,
      access_level: 30,
      requested_at: sql`now()` as any,
      created_by_id: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function approveAccessRequest(db: Database, memberId: number, accessLevel: number, approverId: number): Promise<Member> {
  return db
    .updateTable('members')
    .set({ access_level: accessLevel, requested_at: null, created_by_id: approverId, updated_at: sql`now()` as any })
    .where('id', '=', memberId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function deleteMemberRow(db: Database, memberId: number): Promise<void> {
  await db.deleteFrom('members').where('id', '=', memberId).execute();
}

/** Shares a project with a group, under GitLab's rules (share lock, no link to its own group tree, no duplicates). */
export async function shareProjectWithGroup(db: Database, project: ProjectWithNamespace, group: Namespace, groupAccess: number, expiresAt: string | null) {
  if (project.namespace.settings?.share_with_group_lock === true) throw apiError(400, 'The project sharing with group is disabled');
  const existing = await db.selectFrom('project_group_links').select('id').where('project_id', '=', project.id).where('group_id', '=', group.id).executeTakeFirst();
  if (existing) throw conflict('Group already shared with this group');
  if (project.namespace.type === 'Group' && project.namespace.traversal_ids.includes(group.id)) {
    throw conflict('Project cannot be shared with the group it is in or one of its ancestors.');
  }
  return db
    .insertInto('project_group_links')
    .values({ project_id: project.id, group_id: group.id, group_access: groupAccess, expires_at: expiresAt })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Removes a project's share with a group; false when there was none. */
export async function unshareProject(db: Database, projectId: number, groupId: number): Promise<boolean> {
  const res = await db.deleteFrom('project_group_links').where('project_id', '=', projectId).where('group_id', '=', groupId).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** Shares group `shared` with group `sharedWith` (the hierarchy lock of the root group, no duplicates). */
export async function shareGroupWithGroup(db: Database, shared: Namespace, sharedWith: Namespace, groupAccess: number, expiresAt: string | null) {
  if (shared.traversal_ids[0] !== sharedWith.traversal_ids[0]) {
    const root = await db.selectFrom('namespaces').select('settings').where('id', '=', shared.traversal_ids[0]!).executeTakeFirst();
    if (root?.settings?.prevent_sharing_groups_outside_hierarchy === true) throw forbidden();
  }
  const existing = await db
    .selectFrom('group_group_links')
    .select('id')
    .where('shared_group_id', '=', shared.id)
    .where('shared_with_group_id', '=', sharedWith.id)
    .executeTakeFirst();
  if (existing) throw conflict('Shared group The group has already been shared with this group');
  return db
    .insertInto('group_group_links')
    .values({ shared_group_id: shared.id, shared_with_group_id: sharedWith.id, group_access: groupAccess, expires_at: expiresAt })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Removes a group's share with another group; false when there was none. */
export async function unshareGroup(db: Database, sharedGroupId: number, sharedWithGroupId: number): Promise<boolean> {
  const res = await db.deleteFrom('group_group_links').where('shared_group_id', '=', sharedGroupId).where('shared_with_group_id', '=', sharedWithGroupId).executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
