import type { FastifyInstance, FastifyRequest } from 'fastify';
import { billableUserIds } from '../../finders/billable_members.js';
import { projectInGroupTree } from '../../finders/projects.js';
import { findUserById, listUsersByIds } from '../../finders/users.js';
import { findDirectMemberRow, findMember, findMemberRowById, listMembers, memberViewOf, type MemberListFilters, type MemberSource, type MemberViewer } from '../../finders/members.js';
import { apiError, conflict, forbidden, invalidParam, missingParam, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { allParams } from '../../plugins/params.js';
import { authorizeGroup } from '../../policies/groups.js';
import {
  ACCEPTED_ACCESS_LEVELS,
  canAdminMembers,
  fullMessages,
  isLastOwner,
  isPersonalProjectOwner,
  toSentence,
  validateMembership,
} from '../../policies/members.js';
import { presentMember } from '../../presenters/members.js';
import { activateAwaiting, destroyMember, updateMemberRow, upsertMember } from '../../services/members.js';
import { rowId } from '../../lib/ids.js';
import accessRequestRoutes from './access_requests.js';
import billableRoutes from './billable.js';
import sharingRoutes from './sharing.js';
import {
  accessLevelParam,
  boolParam,
  dateParam,
  intArrayParam,
  intParam,
  loadSource,
  pathInt,
  presentContext,
  stringArrayParam,
  stringParam,
  type SourceKind,
} from './params.js';
import type { IdParams, MemberParams } from '../params.js';

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
async function seatInfo(request: FastifyRequest, source: MemberSource, params: Record<string, unknown>) {
  if (!boolParam(params, 'show_seat_info', false)) return undefined;
  return billableUserIds(request.server.cairn.db, rootId(source));
}

function listFilters(params: Record<string, unknown>): MemberListFilters {
  const state = stringParam(params, 'state');
  if (state !== undefined && state !== 'active' && state !== 'awaiting') throw invalidParam('state', 'does not have a valid value');
  return {
    query: stringParam(params, 'query'),
    userIds: intArrayParam(params, 'user_ids'),
    skipUserIds: intArrayParam(params, 'skip_users'),
    state: state as MemberListFilters['state'],
  };
}

function requireMemberAdmin(source: MemberSource, level: number) {
  if (!canAdminMembers(source, level)) throw forbidden();
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

export default async function memberRoutes(app: FastifyInstance) {
  const db = () => app.cairn.db;
  const auth = { config: { auth: 'required' as const } };

  for (const kind of KINDS) {
    const base = `/api/v4/${kind}/:id/members`;

    const list = (deep: boolean) => async (request: FastifyRequest<{ Params: IdParams }>, reply: any) => {
      const params = allParams(request);
      const filters = listFilters(params);
      const { source } = await loadSource(request, kind, request.params.id);
      return sendCachedPage(request, reply, async (headers) => {
        const page = pageParams(request);
        const { members, total } = await listMembers(db(), source, { deep, viewer: viewerOf(request), filters, limit: page.perPage, offset: page.offset });
        const seats = await seatInfo(request, source, params);
        setPaginationHeaders(request, headers, page, total);
        return { body: members.map((m) => presentMember(presentContext(request), m, { seatUserIds: seats })) };
      });
    };
    app.get<{ Params: IdParams }>(base, auth, list(false));
    app.get<{ Params: IdParams }>(`${base}/all`, auth, list(true));

    const one = (deep: boolean) => async (request: FastifyRequest<{ Params: MemberParams }>) => {
      const userId = pathInt(request.params.user_id, 'user_id');
      const { source } = await loadSource(request, kind, request.params.id);
      const member = await findMember(db(), source, userId, deep, viewerOf(request));
      if (!member) throw notFound();
      const seats = await seatInfo(request, source, allParams(request));
      return presentMember(presentContext(request), member, { seatUserIds: seats });
    };
    app.get<{ Params: MemberParams }>(`${base}/:user_id`, auth, one(false));
    app.get<{ Params: MemberParams }>(`${base}/all/:user_id`, auth, one(true));

    app.post<{ Params: IdParams }>(base, auth, async (request, reply) => {
      const params = allParams(request);
      const accessLevel = accessLevelParam(params, 'access_level', ACCEPTED_ACCESS_LEVELS, true)!;
      const rawUserId = params.user_id;
      if (rawUserId === undefined || rawUserId === null || rawUserId === '') throw missingParam('user_id');
      if (typeof rawUserId !== 'string' && typeof rawUserId !== 'number') throw invalidParam('user_id');
      const expiresAt = dateParam(params, 'expires_at') ?? null;
      const inviteSource = stringParam(params, 'invite_source') ?? 'members-api';
      const tasks = stringArrayParam(params, 'tasks_to_be_done');
      if (tasks?.some((t) => !TASKS.includes(t))) throw invalidParam('tasks_to_be_done', 'does not have a valid value');
      const tasksProjectId = intParam(params, 'tasks_project_id', false);
      if ((tasks?.length ? 1 : 0) + (tasksProjectId !== undefined ? 1 : 0) === 1) {
        throw invalidParam('tasks_to_be_done, tasks_project_id', 'provide all or none of parameters');
      }

      const { source, level, user: caller } = await loadSource(request, kind, request.params.id);
      requireMemberAdmin(source, level);
      if (tasksProjectId !== undefined) await checkTasksProject(request, source, tasksProjectId);
      const attrs = {
        accessLevel,
        expiresAt,
        inviteSource,
        tasksToBeDone: tasks ?? [],
        tasksProjectId: tasksProjectId ?? null,
        createdById: caller!.id,
      };

      const idText = String(rawUserId);
      if (idText.includes(',')) {
        reply.code(201);
        return addMany(request, source, idText, attrs);
      }
      const target = await findUserById(db(), idText.trim());
      if (!target) throw notFound('User');
      const userId = target.id;
      if (isPersonalProjectOwner(source, userId) || (await findDirectMemberRow(db(), source, userId))) throw conflict('Member already exists');
      const errors = await validateMembership(db(), source, userId, accessLevel, expiresAt);
      if (Object.keys(errors).length) throw validationFailed(errors);
      const row = await upsertMember(db(), source, userId, attrs);
      reply.code(201);
      return present(request, row);
    });

    app.put<{ Params: MemberParams }>(`${base}/:user_id`, auth, async (request) => {
      const params = allParams(request);
      const userId = pathInt(request.params.user_id, 'user_id');
      const accessLevel = accessLevelParam(params, 'access_level', ACCEPTED_ACCESS_LEVELS, true)!;
      const expiresAt = dateParam(params, 'expires_at');
      const { source, level } = await loadSource(request, kind, request.params.id);
      requireMemberAdmin(source, level);
      const row = await directRowForChange(request, source, userId);
      if (source.type === 'Namespace' && (await isLastOwner(db(), source.group, userId))) throw forbidden();
      const errors = await validateMembership(db(), source, userId, accessLevel, expiresAt === undefined ? null : expiresAt);
      if (Object.keys(errors).length) throw validationFailed(errors);
      const updated = await updateMemberRow(db(), row.id, { access_level: accessLevel, ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}) });
      return present(request, updated);
    });

    app.delete<{ Params: MemberParams }>(`${base}/:user_id`, auth, async (request, reply) => {
      const params = allParams(request);
      const userId = pathInt(request.params.user_id, 'user_id');
      const skipSubresources = boolParam(params, 'skip_subresources', false);
      // Accepted as GitLab does; Cairn has no issuables of its own to unassign here.
      boolParam(params, 'unassign_issuables', false);
      const { source, level, user: caller } = await loadSource(request, kind, request.params.id);
      const row = await directRowForChange(request, source, userId);
      if (!canAdminMembers(source, level) && caller!.id !== userId) throw forbidden();
      if (source.type === 'Namespace' && (await isLastOwner(db(), source.group, userId))) throw forbidden();
      await destroyMember(db(), source, row, skipSubresources);
      return reply.code(204).send();
    });
  }

  /** Adds several users at once (user_id "1,2,3"): GitLab's {"status": ...} answer. */
  async function addMany(request: FastifyRequest, source: MemberSource, idText: string, attrs: Parameters<typeof upsertMember>[3]) {
    const ids = [...new Set(idText.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
    if (!ids.length) return { status: 'error', message: 'No users specified.' };
    if (ids.length > USER_LIMIT) return { status: 'error', message: `Too many users specified (limit is ${USER_LIMIT})` };
    const numeric = ids.map(rowId).filter((id): id is number => id !== undefined);
    const users = await listUsersByIds(db(), numeric);
    const errors: string[] = [];
    for (const user of users) {
      const existing = await findDirectMemberRow(db(), source, user.id);
      const locked =
        isPersonalProjectOwner(source, user.id) ||
        (existing && source.type === 'Namespace' && attrs.accessLevel !== existing.access_level && (await isLastOwner(db(), source.group, user.id)));
      if (locked) {
        errors.push(`${user.username}: not authorized to update member`);
        continue;
      }
      const invalid = await validateMembership(db(), source, user.id, attrs.accessLevel, attrs.expiresAt);
      if (Object.keys(invalid).length) {
        errors.push(`${user.username}: ${toSentence(fullMessages(invalid))}`);
        continue;
      }
      await upsertMember(db(), source, user.id, attrs);
    }
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
  const overrideRoute = (value: boolean) => async (request: FastifyRequest<{ Params: MemberParams }>, reply: any) => {
    const userId = pathInt(request.params.user_id, 'user_id');
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    const source: MemberSource = { type: 'Namespace', group };
    const row = await findDirectMemberRow(db(), source, userId);
    if (!row) throw notFound();
    requireMemberAdmin(source, accessLevel);
    const updated = await updateMemberRow(db(), row.id, { override: value });
    reply.code(value ? 201 : 200);
    return present(request, updated, { withOverride: true });
  };
  app.post<{ Params: MemberParams }>('/api/v4/groups/:id/members/:user_id/override', auth, overrideRoute(true));
  app.delete<{ Params: MemberParams }>('/api/v4/groups/:id/members/:user_id/override', auth, overrideRoute(false));

  app.put<{ Params: { id: string; member_id: string } }>('/api/v4/groups/:id/members/:member_id/approve', auth, async (request, reply) => {
    const memberId = pathInt(request.params.member_id, 'member_id');
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    const member = await findMemberRowById(db(), memberId);
    if (!member) throw notFound();
    if (group.parent_id !== null || accessLevel < 50) throw apiError(400, '400 Bad request');
    const activated = await activateAwaiting(db(), group, member.user_id);
    if (!activated) throw apiError(400, '400 Bad request - No memberships found');
    return reply.code(204).send();
  });

  const approveAll = async (request: FastifyRequest<{ Params: IdParams }>, reply: any) => {
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    if (group.parent_id !== null || accessLevel < 50) throw apiError(400, '400 Bad request');
    await activateAwaiting(db(), group, null);
    return reply.code(204).send();
  };
  app.post<{ Params: IdParams }>('/api/v4/groups/:id/members/approve_all', auth, approveAll);
  app.put<{ Params: IdParams }>('/api/v4/groups/:id/members/approve_all', auth, approveAll);

  await app.register(billableRoutes);
  await app.register(accessRequestRoutes);
  await app.register(sharingRoutes);
}

