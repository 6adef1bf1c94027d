import type { FastifyInstance } from 'fastify';
import { findAccessRequestRow, findDirectMemberRow, listAccessRequests, memberViewOf } from '../../finders/members.js';
import { forbidden, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { allParams } from '../../plugins/params.js';
import { canAdminMembers, ACCEPTED_ACCESS_LEVELS, validateMembership } from '../../policies/members.js';
import { presentAccessRequester, presentMember } from '../../presenters/members.js';
import { approveAccessRequest, deleteMemberRow, requestAccess } from '../../services/members.js';
import { accessLevelParam, loadSource, pathInt, presentContext, type SourceKind } from './params.js';
import type { IdParams, MemberParams } from '../params.js';

/** Access requests: a user asks to join; maintainers (projects) or owners (groups) decide. */
export default async function accessRequestRoutes(app: FastifyInstance) {
  const db = () => app.cairn.db;
  const auth = { config: { auth: 'required' as const } };

  for (const kind of ['groups', 'projects'] as SourceKind[]) {
    const base = `/api/v4/${kind}/:id/access_requests`;

    app.get<{ Params: IdParams }>(base, auth, async (request, reply) => {
      const { source, level } = await loadSource(request, kind, request.params.id);
      if (!canAdminMembers(source, level)) throw forbidden();
      const page = pageParams(request);
      const { requests, total } = await listAccessRequests(db(), source, page.perPage, page.offset);
      setPaginationHeaders(request, reply, page, total);
      return requests.map((r) => presentAccessRequester(presentContext(request), r));
    });

    app.post<{ Params: IdParams }>(base, auth, async (request, reply) => {
      const { source, level, user } = await loadSource(request, kind, request.params.id);
      const settings = (source.type === 'Project' ? source.project.settings : source.group.settings) ?? {};
      const alreadyIn =
        level >= 10 ||
        (await findDirectMemberRow(db(), source, user!.id)) !== undefined ||
        (await findAccessRequestRow(db(), source, user!.id)) !== undefined;
      if (alreadyIn || settings.request_access_enabled === false) throw forbidden();
      const row = await requestAccess(db(), source, user!.id);
      reply.code(201);
      return presentAccessRequester(presentContext(request), await memberViewOf(db(), row));
    });

    app.put<{ Params: MemberParams }>(`${base}/:user_id/approve`, auth, async (request, reply) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const accessLevel = accessLevelParam(allParams(request), 'access_level', ACCEPTED_ACCESS_LEVELS, false) ?? 30;
      const { source, level, user } = await loadSource(request, kind, request.params.id);
      if (!canAdminMembers(source, level)) throw forbidden();
      const row = await findAccessRequestRow(db(), source, userId);
      if (!row) throw notFound();
      const errors = await validateMembership(db(), source, userId, accessLevel, row.expires_at);
      if (Object.keys(errors).length) throw validationFailed(errors);
      const approved = await approveAccessRequest(db(), row.id, accessLevel, user!.id);
      reply.code(201);
      return presentMember(presentContext(request), await memberViewOf(db(), approved));
    });

    app.delete<{ Params: MemberParams }>(`${base}/:user_id`, auth, async (request, reply) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const { source, level, user } = await loadSource(request, kind, request.params.id);
      const row = await findAccessRequestRow(db(), source, userId);
      if (!row) throw notFound();
      if (!canAdminMembers(source, level) && user!.id !== userId) throw forbidden();
      await deleteMemberRow(db(), row.id);
      return reply.code(204).send();
    });
  }
}
