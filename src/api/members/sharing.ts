import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { apiError, conflict, forbidden, notFound } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { AccessLevel } from '../../policies/access.js';
import { authorizeGroup } from '../../policies/groups.js';
import { authorizeProject } from '../../policies/projects.js';
import { presentProjectGroupLink, presentSharedGroup, type GroupShareView } from '../../presenters/members.js';
import { insertGroupGroupLink, insertProjectGroupLink } from '../../services/members.js';
import type { Namespace } from '../../db/schema/core.js';
import { accessLevelParam, dateParam, intParam, pathInt, presentContext } from './params.js';

/** Sharing a project or a group with a group (project_group_links, group_group_links). */
export default async function sharingRoutes(app: FastifyInstance) {
  const db = () => app.cairn.db;
  const auth = { config: { auth: 'required' as const } };

  app.post<{ Params: { id: string } }>('/api/v4/projects/:id/share', auth, async (request, reply) => {
    const params = allParams(request);
    const groupId = intParam(params, 'group_id', true)!;
    const groupAccess = accessLevelParam(params, 'group_access', [10, 20, 30, 40], true)!;
    const expiresAt = dateParam(params, 'expires_at') ?? null;
    const { project } = await authorizeProject(request, request.params.id, AccessLevel.MAINTAINER);
    const { group } = await authorizeGroup(request, groupId);
    if (project.namespace.settings?.share_with_group_lock === true) throw apiError(400, 'The project sharing with group is disabled');
    const existing = await db().selectFrom('project_group_links').select('id').where('project_id', '=', project.id).where('group_id', '=', group.id).executeTakeFirst();
    if (existing) throw conflict('Group already shared with this group');
    if (project.namespace.type === 'Group' && project.namespace.traversal_ids.includes(group.id)) {
      throw conflict('Project cannot be shared with the group it is in or one of its ancestors.');
    }
    const link = await insertProjectGroupLink(db(), project.id, group.id, groupAccess, expiresAt);
    reply.code(201);
    return presentProjectGroupLink(link);
  });

  app.delete<{ Params: { id: string; group_id: string } }>('/api/v4/projects/:id/share/:group_id', auth, async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { project } = await authorizeProject(request, request.params.id, AccessLevel.MAINTAINER);
    const link = await db().selectFrom('project_group_links').select('id').where('project_id', '=', project.id).where('group_id', '=', groupId).executeTakeFirst();
    if (!link) throw notFound('Group Link');
    await db().deleteFrom('project_group_links').where('id', '=', link.id).execute();
    return reply.code(204).send();
  });

  app.post<{ Params: { id: string } }>('/api/v4/groups/:id/share', auth, async (request, reply) => {
    const params = allParams(request);
    const groupId = intParam(params, 'group_id', true)!;
    const groupAccess = accessLevelParam(params, 'group_access', [10, 20, 30, 40, 50], true)!;
    const expiresAt = dateParam(params, 'expires_at') ?? null;
    const { group: shared, accessLevel } = await authorizeGroup(request, request.params.id);
    const { group: sharedWith } = await authorizeGroup(request, groupId);
    if (accessLevel < AccessLevel.OWNER) throw forbidden();
    if (shared.traversal_ids[0] !== sharedWith.traversal_ids[0]) {
      const root = await db().selectFrom('namespaces').select('settings').where('id', '=', shared.traversal_ids[0]!).executeTakeFirst();
      if (root?.settings?.prevent_sharing_groups_outside_hierarchy === true) throw forbidden();
    }
    const existing = await db()
      .selectFrom('group_group_links')
      .select('id')
      .where('shared_group_id', '=', shared.id)
      .where('shared_with_group_id', '=', sharedWith.id)
      .executeTakeFirst();
    if (existing) throw conflict('Shared group The group has already been shared with this group');
    await insertGroupGroupLink(db(), shared.id, sharedWith.id, groupAccess, expiresAt);
    reply.code(201);
    return presentSharedGroup(presentContext(request), shared, await sharesOf(shared));
  });

  app.delete<{ Params: { id: string; group_id: string } }>('/api/v4/groups/:id/share/:group_id', auth, async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { group } = await authorizeGroup(request, request.params.id, AccessLevel.OWNER);
    const link = await db()
      .selectFrom('group_group_links')
      .select('id')
      .where('shared_group_id', '=', group.id)
      .where('shared_with_group_id', '=', groupId)
      .executeTakeFirst();
    if (!link) throw notFound();
    await db().deleteFrom('group_group_links').where('id', '=', link.id).execute();
    return reply.code(204).send();
  });

  async function sharesOf(group: Namespace): Promise<GroupShareView[]> {
    const rows = await sql<{ id: number; name: string; path: string; full_name: string; full_path: string; group_access: number; expires_at: string | null }>`
      select g.id, g.name, g.path, g.full_name, g.full_path, l.group_access, l.expires_at
        from group_group_links l join namespaces g on g.id = l.shared_with_group_id
       where l.shared_group_id = ${group.id} order by l.id`.execute(db());
    return rows.rows.map((r) => ({ group: r, group_access: r.group_access, expires_at: r.expires_at }));
  }
}
