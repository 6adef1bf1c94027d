import type { FastifyInstance } from 'fastify';
import { listGroupShares } from '../../finders/groups.js';
import { forbidden, notFound } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { AccessLevel } from '../../policies/access.js';
import { authorizeGroup } from '../../policies/groups.js';
import { authorizeProject } from '../../policies/projects.js';
import { presentProjectGroupLink, presentSharedGroup } from '../../presenters/members.js';
import { shareGroupWithGroup, shareProjectWithGroup, unshareGroup, unshareProject } from '../../services/members.js';
import { accessLevelParam, dateParam, intParam, pathInt, presentContext } from './params.js';
import type { IdParams } from '../params.js';

type ShareParams = IdParams & { group_id: string };

/** Sharing a project or a group with a group (project_group_links, group_group_links). */
export default async function sharingRoutes(app: FastifyInstance) {
  const db = () => app.cairn.db;
  const auth = { config: { auth: 'required' as const } };

  app.post<{ Params: IdParams }>('/api/v4/projects/:id/share', auth, async (request, reply) => {
    const params = allParams(request);
    const groupId = intParam(params, 'group_id', true)!;
    const groupAccess = accessLevelParam(params, 'group_access', [10, 20, 30, 40], true)!;
    const expiresAt = dateParam(params, 'expires_at') ?? null;
    const { project } = await authorizeProject(request, request.params.id, 'admin_project');
    const { group } = await authorizeGroup(request, groupId);
    const link = await shareProjectWithGroup(db(), project, group, groupAccess, expiresAt);
    reply.code(201);
    return presentProjectGroupLink(link);
  });

  app.delete<{ Params: ShareParams }>('/api/v4/projects/:id/share/:group_id', auth, async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { project } = await authorizeProject(request, request.params.id, 'admin_project');
    if (!(await unshareProject(db(), project.id, groupId))) throw notFound('Group Link');
    return reply.code(204).send();
  });

  app.post<{ Params: IdParams }>('/api/v4/groups/:id/share', auth, async (request, reply) => {
    const params = allParams(request);
    const groupId = intParam(params, 'group_id', true)!;
    const groupAccess = accessLevelParam(params, 'group_access', [10, 20, 30, 40, 50], true)!;
    const expiresAt = dateParam(params, 'expires_at') ?? null;
    const { group: shared, accessLevel } = await authorizeGroup(request, request.params.id);
    const { group: sharedWith } = await authorizeGroup(request, groupId);
    if (accessLevel < AccessLevel.OWNER) throw forbidden();
    await shareGroupWithGroup(db(), shared, sharedWith, groupAccess, expiresAt);
    reply.code(201);
    return presentSharedGroup(presentContext(request), shared, await listGroupShares(db(), shared.id));
  });

  app.delete<{ Params: ShareParams }>('/api/v4/groups/:id/share/:group_id', auth, async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { group } = await authorizeGroup(request, request.params.id, 'admin_group');
    if (!(await unshareGroup(db(), group.id, groupId))) throw notFound();
    return reply.code(204).send();
  });
}
