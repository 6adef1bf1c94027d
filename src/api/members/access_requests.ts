import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findAccessRequestRow, findDirectMemberRow, listAccessRequests, memberViewOf } from '../../finders/members.js';
import { forbidden, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { canAdminMembers, validateMembership } from '../../policies/members.js';
import { presentAccessRequester, presentMember } from '../../presenters/members.js';
import { AccessRequesterSchema, MemberSchema } from '../../presenters/schemas/members.js';
import { approveAccessRequest, deleteMemberRow, requestAccess } from '../../services/members.js';
import { IdParams } from '../params.js';
import { NoContent, route } from '../route.js';
import { loadSource, pathInt, presentContext, sourceAccess, sourceOf, type SourceKind } from './params.js';
import { AccessRequestApproveBody, MemberParams } from './schemas.js';

/** Access requests: a user asks to join; maintainers (projects) or owners (groups) decide. */
export default async function accessRequestRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;

  for (const kind of ['groups', 'projects'] as SourceKind[]) {
    const base = `/api/v4/${kind}/:id/access_requests`;
    const manage = sourceAccess(kind, 'admin_project_member', 'admin_group_member');

    app.get(base, route({ matrix: kind === 'projects' ? 'maintainer' : 'owner',
      access: manage,
      paginated: true,
      schema: { params: IdParams, response: { 200: Type.Array(AccessRequesterSchema) } },
    }), async (request, reply) => {
      const { source } = sourceOf(request, kind);
      const page = pageParams(request);
      const { requests, total } = await listAccessRequests(db(), source, page.perPage, page.offset);
      setPaginationHeaders(request, reply, page, total);
      return requests.map((r) => presentAccessRequester(presentContext(request), r));
    });

    app.post(base, route({
      // Who sees it and is not a member yet asks (GitLab's request_access: a private source is 404
      // to non-members, an internal one to external users); members and administrators 403.
      matrix: { is: 'contribute', cells: { guest: 403, reporter: 403, developer: 403, maintainer: 403, owner: 403, admin: 403 } },
      access: sourceAccess(kind, 'request_access', 'request_access'),
      schema: { params: IdParams, response: { 201: AccessRequesterSchema } },
    }), async (request, reply) => {
      const { source, user } = sourceOf(request, kind);
      const settings = (source.type === 'Project' ? source.project.settings : source.group.settings) ?? {};
      const alreadyIn =
        (await findDirectMemberRow(db(), source, user!.id)) !== undefined ||
        (await findAccessRequestRow(db(), source, user!.id)) !== undefined;
      if (alreadyIn || settings.request_access_enabled === false) throw forbidden();
      const row = await requestAccess(db(), source, user!.id);
      reply.code(201);
      return presentAccessRequester(presentContext(request), await memberViewOf(db(), row));
    });

    app.put(`${base}/:user_id/approve`, route({ matrix: { is: kind === 'projects' ? 'maintainer' : 'owner', fresh: ['user_id'] },
      access: manage,
      schema: { params: MemberParams, body: AccessRequestApproveBody, response: { 201: MemberSchema } },
    }), async (request, reply) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const accessLevel = request.body.access_level ?? 30;
      const { source, user } = sourceOf(request, kind);
      const row = await findAccessRequestRow(db(), source, userId);
      if (!row) throw notFound();
      const errors = await validateMembership(db(), source, userId, accessLevel, row.expires_at);
      if (Object.keys(errors).length) throw validationFailed(errors);
      const approved = await approveAccessRequest(db(), row.id, accessLevel, user!.id);
      reply.code(201);
      return presentMember(presentContext(request), await memberViewOf(db(), approved));
    });

    // The requester may withdraw their own request; the request is looked up first (404 before 403).
    app.delete(`${base}/:user_id`, route({ matrix: kind === 'projects' ? 'maintainer' : 'owner',
      access: { custom: `${kind === 'projects' ? 'admin_project_member' : 'admin_group_member'}, or the requester themselves`, signedIn: true },
      schema: { params: MemberParams, response: { 204: NoContent } },
    }), async (request, reply) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const { source, level, user } = await loadSource(request, kind, request.params.id);
      const row = await findAccessRequestRow(db(), source, userId);
      if (!row) throw notFound();
      if (!canAdminMembers(user, source, level) && user!.id !== userId) throw forbidden();
      await deleteMemberRow(db(), row.id);
      return reply.code(204).send();
    });
  }
}
