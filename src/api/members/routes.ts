import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { billableUserIds } from '../../finders/billable_members.js';
import { projectInGroupTree } from '../../finders/projects.js';
import { findUserById, listUsersByIds } from '../../finders/users.js';
import { findDirectMemberRow, findMember, findMemberRowById, listMembers, memberViewOf, type MemberSource, type MemberViewer } from '../../finders/members.js';
import { apiError, forbidden, invalidParam, missingParam, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { can } from '../../policies/abilities.js';
import { authorizeGroup } from '../../finders/authorize.js';
import {
  canAdminMembers,
  isLastOwner,
  isPersonalProjectOwner,
  toSentence,
  validateMembership,
} from '../../policies/members.js';
import { presentMember } from '../../presenters/members.js';
import { MemberSchema, MembersAddedSchema, MemberWithOverrideSchema } from '../../presenters/schemas/members.js';
import { activateAwaiting, addMember, addOrUpdateMembers, destroyMember, updateMemberRow, type MembershipAttrs } from '../../services/members.js';
import { rowId } from '../../lib/ids.js';
import { IdParams } from '../params.js';
import { NoContent, route } from '../route.js';
import accessRequestRoutes from './access_requests.js';
import billableRoutes from './billable.js';
import sharingRoutes from './sharing.js';
import {
  dateParam,
  intArrayParam,
  loadSource,
  pathInt,
  presentContext,
  sourceAccess,
  sourceOf,
  stringArrayParam,
  type SourceKind,
} from './params.js';
import { MemberCreateBody, MemberDeleteQuery, MemberIdParams, MemberListQuery, MemberParams, MemberQuery, MemberUpdateBody } from './schemas.js';
import { capOptional } from '../list_filters.js';

const KINDS: SourceKind[] = ['groups', 'projects'];
const TASKS = ['ci', 'code', 'issues'];
/** GitLab adds at most this many users in one call. */
const USER_LIMIT = 100;

function viewerOf(request: FastifyRequest): MemberViewer {
  const user = request.actor?.user ?? null;
  return { userId: user?.id ?? null, admin: !!user?.admin };
}

function rootId(source: MemberSource): number {
  return source.type === 'Project' ? source.project.namespace.traversal_ids[0]! : source.group.traversal_ids[0]!;
}

/** `show_seat_info=true` asks which members take a seat in the root namespace. */
async function seatInfo(request: FastifyRequest, source: MemberSource, show: boolean | undefined) {
  if (!show) return undefined;
  return billableUserIds(request.server.cairn.db, rootId(source));
}

/** The direct membership a change applies to; the personal namespace owner cannot be changed. */
async function directRowForChange(request: FastifyRequest, source: MemberSource, userId: number) {
  if (isPersonalProjectOwner(source, userId)) throw forbidden();
  const row = await findDirectMemberRow(request.server.cairn.db, source, userId);
  if (!row) throw notFound();
  return row;
}

async function present(request: FastifyRequest, row: Parameters<typeof memberViewOf>[1], opts: { withOverride?: boolean } = {}) {
  const view = await memberViewOf(request.server.cairn.db, row);
  return presentMember(presentContext(request), view, opts);
}

export default async function memberRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;

  for (const kind of KINDS) {
    const base = `/api/v4/${kind}/:id/members`;
    const read = sourceAccess(kind, 'read_project_member', 'read_group_member');
    const manage = sourceAccess(kind, 'admin_project_member', 'admin_group_member');
    const manageAbility = kind === 'projects' ? 'admin_project_member' : 'admin_group_member';

    // Direct members, and with /all the inherited and invited ones too.
    for (const [suffix, deep] of [['', false], ['/all', true]] as const) {
      app.get(`${base}${suffix}`, route({ matrix: 'read',
        access: read,
        paginated: true,
        schema: { params: IdParams, querystring: MemberListQuery, response: { 200: Type.Array(MemberSchema) } },
      }), async (request, reply) => {
        const q = request.query;
        // Kept by hand: comma lists, and ids beyond the integer range left out rather than refused.
        const filters = {
          query: q.query || undefined,
          userIds: capOptional(intArrayParam(q, 'user_ids'), 'user_ids'),
          skipUserIds: capOptional(intArrayParam(q, 'skip_users'), 'skip_users'),
          state: q.state,
        };
        const { source } = sourceOf(request, kind);
        return sendCachedPage(request, reply, async (headers) => {
          const page = pageParams(request);
          const { members, total } = await listMembers(db(), source, { deep, viewer: viewerOf(request), filters, limit: page.perPage, offset: page.offset });
          const seats = await seatInfo(request, source, q.show_seat_info);
          setPaginationHeaders(request, headers, page, total);
          return { body: members.map((m) => presentMember(presentContext(request), m, { seatUserIds: seats })) };
        });
      });

      app.get(`${base}${suffix}/:user_id`, route({ matrix: 'read',
        access: read,
        schema: { params: MemberParams, querystring: MemberQuery, response: { 200: MemberSchema } },
      }), async (request) => {
        const userId = pathInt(request.params.user_id, 'user_id');
        const { source } = sourceOf(request, kind);
        const member = await findMember(db(), source, userId, deep, viewerOf(request));
        if (!member) throw notFound();
        const seats = await seatInfo(request, source, request.query.show_seat_info);
        return presentMember(presentContext(request), member, { seatUserIds: seats });
      });
    }

    app.post(base, route({ matrix: kind === 'projects' ? 'maintainer' : 'owner',
      access: manage,
      schema: { params: IdParams, body: MemberCreateBody, response: { 201: Type.Union([MemberSchema, MembersAddedSchema]) } },
    }), async (request, reply) => {
      const params = request.body;
      // Kept by hand: an empty user_id is "missing" (the schema takes any string, for "1,2,3").
      if (params.user_id === '') throw missingParam('user_id');
      const expiresAt = dateParam(params, 'expires_at') ?? null;
      const inviteSource = params.invite_source || 'members-api';
      // Kept by hand: an array or a comma list, whose items must be known tasks.
      const tasks = stringArrayParam(params, 'tasks_to_be_done');
      if (tasks?.some((t) => !TASKS.includes(t))) throw invalidParam('tasks_to_be_done', 'does not have a valid value');
      const tasksProjectId = params.tasks_project_id;
      if ((tasks?.length ? 1 : 0) + (tasksProjectId !== undefined ? 1 : 0) === 1) {
        throw invalidParam('tasks_to_be_done, tasks_project_id', 'provide all or none of parameters');
      }

      const { source, user: caller } = sourceOf(request, kind);
      if (tasksProjectId !== undefined) await checkTasksProject(request, source, tasksProjectId);
      const accessLevel = params.access_level;
      const attrs = {
        accessLevel,
        expiresAt,
        inviteSource,
        tasksToBeDone: tasks ?? [],
        tasksProjectId: tasksProjectId ?? null,
        createdById: caller!.id,
      };

      const idText = String(params.user_id);
      if (idText.includes(',')) {
        reply.code(201);
        return addMany(request, source, idText, attrs);
      }
      const target = await findUserById(db(), idText.trim());
      if (!target) throw notFound('User');
      const row = await addMember(db(), source, target.id, attrs);
      reply.code(201);
      return present(request, row);
    });

    app.put(`${base}/:user_id`, route({ matrix: kind === 'projects' ? 'maintainer' : 'owner',
      access: manage,
      schema: { params: MemberParams, body: MemberUpdateBody, response: { 200: MemberSchema } },
    }), async (request) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const accessLevel = request.body.access_level;
      const expiresAt = dateParam(request.body, 'expires_at');
      const { source } = sourceOf(request, kind);
      const row = await directRowForChange(request, source, userId);
      if (source.type === 'Namespace' && (await isLastOwner(db(), source.group, userId))) throw forbidden();
      const errors = await validateMembership(db(), source, userId, accessLevel, expiresAt === undefined ? null : expiresAt);
      if (Object.keys(errors).length) throw validationFailed(errors);
      const updated = await updateMemberRow(db(), row.id, { access_level: accessLevel, ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}) });
      return present(request, updated);
    });

    // A member may leave; removing someone else needs the ability. The membership is looked up
    // first (404 before 403), so the handler decides.
    app.delete(`${base}/:user_id`, route({ matrix: kind === 'projects' ? 'maintainer' : 'owner',
      access: { custom: `${manageAbility}, or the member themselves (leaving)`, signedIn: true },
      schema: { params: MemberParams, querystring: MemberDeleteQuery, response: { 204: NoContent } },
    }), async (request, reply) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const { source, level, user: caller } = await loadSource(request, kind, request.params.id);
      const row = await directRowForChange(request, source, userId);
      if (!canAdminMembers(caller, source, level) && caller!.id !== userId) throw forbidden();
      if (source.type === 'Namespace' && (await isLastOwner(db(), source.group, userId))) throw forbidden();
      await destroyMember(db(), source, row, request.query.skip_subresources ?? false);
      return reply.code(204).send();
    });
  }

  /** Adds several users at once (user_id "1,2,3"): GitLab's {"status": ...} answer. */
  async function addMany(request: FastifyRequest, source: MemberSource, idText: string, attrs: MembershipAttrs) {
    const ids = [...new Set(idText.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
    if (!ids.length) return { status: 'error', message: 'No users specified.' };
    if (ids.length > USER_LIMIT) return { status: 'error', message: `Too many users specified (limit is ${USER_LIMIT})` };
    const numeric = ids.map(rowId).filter((id): id is number => id !== undefined);
    const users = await listUsersByIds(db(), numeric);
    const errors = await addOrUpdateMembers(db(), source, users, attrs);
    return errors.length ? { status: 'error', message: toSentence(errors) } : { status: 'success' };
  }

  /** tasks_project_id must be the member's project, or a project in the member's group tree. */
  async function checkTasksProject(request: FastifyRequest, source: MemberSource, projectId: number) {
    if (source.type === 'Project') {
      if (projectId !== source.project.id) throw validationFailed({ tasks_project_id: ['is not the member project'] });
      return;
    }
    if (!(await projectInGroupTree(db(), projectId, source.group.id))) throw validationFailed({ tasks_project_id: ['is not in the member group'] });
  }

  // Group-only operations: LDAP override flag and approval of awaiting members.
  for (const [method, value] of [['POST', true], ['DELETE', false]] as const) {
    app.route({
      method,
      url: '/api/v4/groups/:id/members/:user_id/override',
      ...route({ matrix: 'owner',
        // The membership is looked up first (404 before 403, as GitLab's find_member! does).
        access: { custom: 'admin_group_member, once the membership is found', signedIn: true },
        schema: { params: MemberParams, response: value ? { 201: MemberWithOverrideSchema } : { 200: MemberWithOverrideSchema } },
      }),
      handler: async (request, reply) => {
        const userId = pathInt(request.params.user_id, 'user_id');
        const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
        const source: MemberSource = { type: 'Namespace', group };
        const row = await findDirectMemberRow(db(), source, userId);
        if (!row) throw notFound();
        if (!canAdminMembers(user, source, accessLevel)) throw forbidden();
        const updated = await updateMemberRow(db(), row.id, { override: value });
        reply.code(value ? 201 : 200);
        return present(request, updated, { withOverride: true });
      },
    });
  }

  // GitLab answers a plain 400 (not 403) to callers without the ability, and for subgroups.
  const approvalAccess = { custom: 'admin_group_member on a top-level group (400 otherwise)', signedIn: true } as const;

  app.put('/api/v4/groups/:id/members/:member_id/approve', route({
    // member_id is a membership row; callers without admin_group_member get GitLab's 400.
    matrix: { is: 'owner', fresh: ['member_id'], refused: 400 },
    access: approvalAccess,
    schema: { params: MemberIdParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const memberId = pathInt(request.params.member_id, 'member_id');
    const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
    const member = await findMemberRowById(db(), memberId);
    if (!member) throw notFound();
    if (group.parent_id !== null || !can(user, 'admin_group_member', { group, accessLevel })) throw apiError(400, '400 Bad request');
    const activated = await activateAwaiting(db(), group, member.user_id);
    if (!activated) throw apiError(400, '400 Bad request - No memberships found');
    return reply.code(204).send();
  });

  for (const method of ['POST', 'PUT'] as const) {
    app.route({
      method,
      url: '/api/v4/groups/:id/members/approve_all',
      ...route({ matrix: { is: 'owner', refused: 400 }, access: approvalAccess, schema: { params: IdParams, response: { 204: NoContent } } }),
      handler: async (request, reply) => {
        const { group, accessLevel, user } = await authorizeGroup(request, request.params.id);
        if (group.parent_id !== null || !can(user, 'admin_group_member', { group, accessLevel })) throw apiError(400, '400 Bad request');
        await activateAwaiting(db(), group, null);
        return reply.code(204).send();
      },
    });
  }

  await app.register(billableRoutes);
  await app.register(accessRequestRoutes);
  await app.register(sharingRoutes);
}

