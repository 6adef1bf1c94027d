import type { FastifyInstance } from 'fastify';
import { BILLABLE_SORTS, billableUserIds, listBillableMemberships, listBillableMembers, type BillableSort } from '../../finders/billable_members.js';
import { apiError, badRequest, invalidParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { allParams } from '../../plugins/params.js';
import { AccessLevel } from '../../policies/access.js';
import { authorizeGroup } from '../../policies/groups.js';
import { isLastOwner, lastOwnersAmong } from '../../policies/members.js';
import { presentBillableMember, presentBillableMembership } from '../../presenters/members.js';
import { destroyMembershipsInHierarchy } from '../../services/members.js';
import { pathInt, presentContext, stringParam } from './params.js';
import type { IdParams, MemberParams } from '../params.js';

/** Billable members of a top-level group (seat usage). Owners and administrators only. */
export default async function billableRoutes(app: FastifyInstance) {
  const db = () => app.cairn.db;
  const auth = { config: { auth: 'required' as const } };
  const plainBadRequest = () => apiError(400, '400 Bad request');

  app.get<{ Params: IdParams }>('/api/v4/groups/:id/billable_members', auth, async (request, reply) => {
    const params = allParams(request);
    const sort = stringParam(params, 'sort');
    if (sort !== undefined && !(BILLABLE_SORTS as readonly string[]).includes(sort)) throw invalidParam('sort', 'does not have a valid value');
    const search = stringParam(params, 'search');
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    if (group.parent_id !== null) throw plainBadRequest();
    if (accessLevel < AccessLevel.OWNER) throw plainBadRequest();
    const page = pageParams(request);
    const { rows, total } = await listBillableMembers(db(), group, { search, sort: (sort ?? 'id_asc') as BillableSort, limit: page.perPage, offset: page.offset });
    const lastOwners = await lastOwnersAmong(db(), group, rows.map((r) => r.user.id));
    setPaginationHeaders(request, reply, page, total);
    const admin = !!request.actor?.user.admin;
    return rows.map((r) => presentBillableMember(presentContext(request), { ...r, is_last_owner: lastOwners.has(r.user.id) }, admin));
  });

  app.get<{ Params: MemberParams }>('/api/v4/groups/:id/billable_members/:user_id/memberships', auth, async (request, reply) => {
    const userId = pathInt(request.params.user_id, 'user_id');
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    if (accessLevel < AccessLevel.OWNER) throw plainBadRequest();
    if (group.parent_id !== null) throw plainBadRequest();
    const billable = await billableUserIds(db(), group.id);
    if (!billable.has(userId)) throw notFound('User');
    const page = pageParams(request);
    const { memberships, total } = await listBillableMemberships(db(), group, userId, page.perPage, page.offset);
    setPaginationHeaders(request, reply, page, total);
    return memberships.map((m) => presentBillableMembership(presentContext(request), m));
  });

  app.delete<{ Params: MemberParams }>('/api/v4/groups/:id/billable_members/:user_id', auth, async (request, reply) => {
    const userId = pathInt(request.params.user_id, 'user_id');
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    if (group.parent_id !== null) throw badRequest('Invalid group provided, must be top-level');
    if (accessLevel < AccessLevel.OWNER) throw badRequest('User unauthorized to remove member');
    if (await isLastOwner(db(), group, userId)) throw badRequest('Cannot remove the last owner of the group');
    const removed = await destroyMembershipsInHierarchy(db(), group, userId);
    if (!removed) throw badRequest('No member found for the given user_id');
    return reply.code(204).send();
  });
}
