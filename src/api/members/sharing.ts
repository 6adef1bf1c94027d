import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { listGroupShares } from '../../finders/groups.js';
import { apiError, notFound } from '../../plugins/errors.js';
import { can } from '../../policies/abilities.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { presentProjectGroupLink, presentSharedGroup } from '../../presenters/members.js';
import { GroupSharesSchema, ProjectGroupLinkSchema } from '../../presenters/schemas/members.js';
import { shareGroupWithGroup, shareProjectWithGroup, unshareGroup, unshareProject } from '../../services/members.js';
import { IdParams } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';
import { dateParam, pathInt, presentContext } from './params.js';
import { GroupShareBody, ProjectShareBody, ShareParams } from './schemas.js';

/** Sharing a project or a group with a group (project_group_links, group_group_links). */
export default async function sharingRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;

  app.post('/api/v4/projects/:id/share', route({ matrix: 'maintainer',
    access: { project: 'admin_project', signedIn: true },
    schema: { params: IdParams, body: ProjectShareBody, response: { 201: ProjectGroupLinkSchema } },
  }), async (request, reply) => {
    const expiresAt = dateParam(request.body, 'expires_at') ?? null;
    const { project } = projectOf(request);
    const { group } = await authorizeGroup(request, request.body.group_id);
    const link = await shareProjectWithGroup(db(), project, group, request.body.group_access, expiresAt);
    reply.code(201);
    return presentProjectGroupLink(link);
  });

  app.delete('/api/v4/projects/:id/share/:group_id', route({ matrix: 'maintainer',
    access: { project: 'admin_project', signedIn: true },
    schema: { params: ShareParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { project } = projectOf(request);
    if (!(await unshareProject(db(), project.id, groupId))) throw notFound('Group Link');
    return reply.code(204).send();
  });

  // Both groups are looked up first (find_group!), then GitLab's GroupLinks::CreateService answers
  // "Not Found" (404) to a caller without admin_group_member, not 403.
  app.post('/api/v4/groups/:id/share', route({
    matrix: { is: 'owner', refused: 404 },
    access: { custom: 'admin_group_member on :id, once both groups are found', signedIn: true },
    schema: { params: IdParams, body: GroupShareBody, response: { 201: GroupSharesSchema } },
  }), async (request, reply) => {
    const expiresAt = dateParam(request.body, 'expires_at') ?? null;
    const { group: shared, accessLevel, user } = await authorizeGroup(request, request.params.id);
    const { group: sharedWith } = await authorizeGroup(request, request.body.group_id);
    if (!can(user, 'admin_group_member', { group: shared, accessLevel })) throw apiError(404, 'Not Found');
    await shareGroupWithGroup(db(), shared, sharedWith, request.body.group_access, expiresAt);
    reply.code(201);
    return presentSharedGroup(presentContext(request), shared, await listGroupShares(db(), shared.id));
  });

  app.delete('/api/v4/groups/:id/share/:group_id', route({ matrix: 'owner',
    access: { group: 'admin_group', signedIn: true },
    schema: { params: ShareParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const groupId = pathInt(request.params.group_id, 'group_id');
    const { group } = groupOf(request);
    if (!(await unshareGroup(db(), group.id, groupId))) throw notFound();
    return reply.code(204).send();
  });
}
