import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { billableUserIds, listBillableMemberships, listBillableMembers, type BillableSort } from '../../finders/billable_members.js';
import { apiError, badRequest, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { can } from '../../policies/abilities.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { isLastOwner, lastOwnersAmong } from '../../policies/members.js';
import { presentBillableMember, presentBillableMembership } from '../../presenters/members.js';
import { BillableMemberSchema, BillableMembershipSchema } from '../../presenters/schemas/members.js';
import { destroyMembershipsInHierarchy } from '../../services/members.js';
import { IdParams } from '../params.js';
import { NoContent, route } from '../route.js';
import { pathInt, presentContext } from './params.js';
import { BillableMembersQuery, MemberParams } from './schemas.js';

/** Billable members of a top-level group (seat usage). Owners and administrators only. */
export default async function billableRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const plainBadRequest = () => apiError(400, '400 Bad request');
  // GitLab answers 400 rather than 403 to callers without admin_group_member here, and for subgroups.
  const access = { custom: 'admin_group_member on a top-level group (400 otherwise)', signedIn: true } as const;

  app.get('/api/v4/groups/:id/billable_members', route({ matrix: { is: 'owner', refused: 400 },
    access,
    paginated: true,
    schema: { params: IdParams, querystring: BillableMembersQuery, response: { 200: Type.Array(BillableMemberSchema) } },
  }), async (request, reply) => {
    const sort = request.query.sort;
    const search = request.query.search || undefined;
    const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
    if (group.parent_id !== null) throw plainBadRequest();
    if (!can(user, 'admin_group_member', { group, accessLevel })) throw plainBadRequest();
    const page = pageParams(request);
    const { rows, total } = await listBillableMembers(db(), group, { search, sort: (sort ?? 'id_asc') as BillableSort, limit: page.perPage, offset: page.offset });
    const lastOwners = await lastOwnersAmong(db(), group, rows.map((r) => r.user.id));
    setPaginationHeaders(request, reply, page, total);
    const admin = !!request.actor?.user.admin;
    return rows.map((r) => presentBillableMember(presentContext(request), { ...r, is_last_owner: lastOwners.has(r.user.id) }, admin));
  });

  app.get('/api/v4/groups/:id/billable_members/:user_id/memberships', route({ matrix: { is: 'owner', refused: 400 },
    access,
    paginated: true,
    schema: { params: MemberParams, response: { 200: Type.Array(BillableMembershipSchema) } },
  }), async (request, reply) => {
    const userId = pathInt(request.params.user_id, 'user_id');
    const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
    if (!can(user, 'admin_group_member', { group, accessLevel })) throw plainBadRequest();
    if (group.parent_id !== null) throw plainBadRequest();
    const billable = await billableUserIds(db(), group.id);
    if (!billable.has(userId)) throw notFound('User');
    const page = pageParams(request);
    const { memberships, total } = await listBillableMemberships(db(), group, userId, page.perPage, page.offset);
    setPaginationHeaders(request, reply, page, total);
    return memberships.map((m) => presentBillableMembership(presentContext(request), m));
  });

  app.delete('/api/v4/groups/:id/billable_members/:user_id', route({ matrix: { is: 'owner', refused: 400 },
    access,
    schema: { params: MemberParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const userId = pathInt(request.params.user_id, 'user_id');
    const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
    if (group.parent_id !== null) throw badRequest('Invalid group provided, must be top-level');
    if (!can(user, 'admin_group_member', { group, accessLevel })) throw badRequest('User unauthorized to remove member');
    if (await isLastOwner(db(), group, userId)) throw badRequest('Cannot remove the last owner of the group');
    const removed = await destroyMembershipsInHierarchy(db(), group, userId);
    if (!removed) throw badRequest('No member found for the given user_id');
    return reply.code(204).send();
  });
}
