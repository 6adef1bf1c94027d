import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Namespace } from '../../db/schema/core.js';
import { findGroup, groupTreeIds, listGroups, sharedWithGroups, type GroupFilters } from '../../finders/groups.js';
import { findProjectRow, listProjects } from '../../finders/projects.js';
import { AccessLevel } from '../../policies/access.js';
import { authorizeGroup } from '../../policies/groups.js';
import { authorizeProject } from '../../policies/projects.js';
import { requireUser } from '../../plugins/auth.js';
import { notFound } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { PaginationQuery, pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { presentGroup, presentGroupDetail } from '../../presenters/groups.js';
import { createGroup, deleteGroup, transferGroup, updateGroup } from '../../services/groups.js';
import { transferProject } from '../../services/projects.js';
import { projectFilters } from '../projects/filters.js';
import { presentContext, presentProjects, renderProjects } from '../projects/present.js';
import { ACCESS_LEVEL, ProjectListQuery, VISIBILITY } from '../projects/schemas.js';
import { sendProjectList } from '../projects/routes.js';
import { IdParams } from '../params.js';

const enumOf = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));

const GroupListQuery = Type.Object({
  ...PaginationQuery,
  skip_groups: Type.Optional(Type.Union([Type.Array(Type.Integer()), Type.String()])),
  all_available: Type.Optional(Type.Boolean()),
  search: Type.Optional(Type.String()),
  owned: Type.Optional(Type.Boolean()),
  order_by: Type.Optional(enumOf(['name', 'path', 'id', 'similarity'])),
  sort: Type.Optional(enumOf(['asc', 'desc'])),
  min_access_level: Type.Optional(ACCESS_LEVEL),
  top_level_only: Type.Optional(Type.Boolean()),
  visibility: Type.Optional(VISIBILITY),
  statistics: Type.Optional(Type.Boolean()),
  with_custom_attributes: Type.Optional(Type.Boolean()),
});
const GroupBody = Type.Object({
  name: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  parent_id: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
  visibility: Type.Optional(VISIBILITY),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
const GroupCreateBody = Type.Object({ ...GroupBody.properties, name: Type.String(), path: Type.String() }, { required: ['name', 'path'] });

/** GROUP PROJECTS list limit inside the detail form (GitLab's GroupProjectsFinder default). */
const DETAIL_PROJECTS_LIMIT = 100;

function groupFilters(request: FastifyRequest): GroupFilters {
  const q = request.query as Record<string, any>;
  const user = request.actor?.user ?? null;
  const skip = ([] as unknown[]).concat(q.skip_groups ?? []).flatMap((v) => String(v).split(',')).filter((v) => /^\d+$/.test(v)).map(Number);
  return {
    allAvailable: q.all_available ?? (user ? user.admin : true),
    owned: q.owned,
    minAccessLevel: q.min_access_level,
    topLevelOnly: q.top_level_only,
    skipGroups: skip,
    search: q.search || undefined,
    visibility: q.visibility,
    orderBy: q.order_by ?? 'name',
    sort: q.sort ?? 'asc',
  };
}

async function sendGroupList(request: FastifyRequest, reply: FastifyReply, filters: GroupFilters) {
  return sendCachedPage(request, reply, async (headers) => {
    const page = pageParams(request);
    const { rows, total } = await listGroups(request.server.cairn.db, request.actor?.user ?? null, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, headers, page, total);
    const ctx = presentContext(request);
    return { body: rows.map((g) => presentGroup(ctx, g)) };
  });
}

/** GroupDetail for the caller, with the group's own and shared projects when asked. */
async function renderGroupDetail(request: FastifyRequest, group: Namespace, accessLevel: number, withProjects: boolean) {
  const db = request.server.cairn.db;
  const user = request.actor?.user ?? null;
  let projects: unknown[] | undefined;
  let sharedProjects: unknown[] | undefined;
  if (withProjects) {
    const page = { limit: DETAIL_PROJECTS_LIMIT, offset: 0, withTotal: false };
    const own = await listProjects(db, user, { namespaceIds: [group.id], orderBy: 'created_at', sort: 'desc' }, page);
    const shared = await listProjects(db, user, { sharedWithGroupId: group.id, orderBy: 'created_at', sort: 'desc' }, page);
    projects = await renderProjects(request, own.rows, 'full');
    sharedProjects = await renderProjects(request, shared.rows, 'full');
  }
  return presentGroupDetail(presentContext(request), group, {
    sharedWithGroups: await sharedWithGroups(db, user, group.id),
    canAdmin: accessLevel >= AccessLevel.OWNER,
    projects,
    sharedProjects,
  });
}

export default async function groupRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  app.get('/api/v4/groups', { schema: { querystring: GroupListQuery } }, async (request, reply) => {
    return sendGroupList(request, reply, groupFilters(request));
  });

  app.post('/api/v4/groups', { config: { auth: 'required' }, schema: { body: GroupCreateBody } }, async (request, reply) => {
    const user = requireUser(request);
    const params = allParams(request);
    let parent: Namespace | null = null;
    if (params.parent_id !== undefined && params.parent_id !== null && params.parent_id !== '') {
      parent = (await authorizeGroup(request, String(params.parent_id))).group;
    }
    const group = await createGroup(app.cairn, user, parent, params);
    return reply.code(201).send(await renderGroupDetail(request, group, AccessLevel.OWNER, false));
  });

  app.get(
    '/api/v4/groups/:id',
    { schema: { params: IdParams, querystring: Type.Object({ with_projects: Type.Optional(Type.Boolean()), with_custom_attributes: Type.Optional(Type.Boolean()) }) } },
    async (request) => {
      const { group, accessLevel } = await authorizeGroup(request, request.params.id);
      return renderGroupDetail(request, group, accessLevel, request.query.with_projects ?? true);
    },
  );

  app.put('/api/v4/groups/:id', { config: { auth: 'required' }, schema: { params: IdParams, body: GroupBody } }, async (request) => {
    const user = requireUser(request);
    const { group, accessLevel } = await authorizeGroup(request, request.params.id, 'admin_group');
    const updated = await updateGroup(app.cairn, user, group, allParams(request));
    return renderGroupDetail(request, updated, accessLevel, true);
  });

  app.delete('/api/v4/groups/:id', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const { group } = await authorizeGroup(request, request.params.id, 'admin_group');
    await deleteGroup(app.cairn, group);
    return reply.code(202).send({ message: '202 Accepted' });
  });

  app.get('/api/v4/groups/:id/subgroups', { schema: { params: IdParams, querystring: GroupListQuery } }, async (request, reply) => {
    const { group } = await authorizeGroup(request, request.params.id);
    return sendGroupList(request, reply, { ...groupFilters(request), topLevelOnly: false, parentId: group.id });
  });

  app.get('/api/v4/groups/:id/descendant_groups', { schema: { params: IdParams, querystring: GroupListQuery } }, async (request, reply) => {
    const { group } = await authorizeGroup(request, request.params.id);
    return sendGroupList(request, reply, { ...groupFilters(request), topLevelOnly: false, descendantsOf: group.id });
  });

  app.get('/api/v4/groups/:id/projects', { schema: { params: IdParams, querystring: ProjectListQuery } }, async (request, reply) => {
    const { group } = await authorizeGroup(request, request.params.id);
    const namespaceIds = request.query.include_subgroups ? await groupTreeIds(db, group.id) : [group.id];
    const filters = {
      ...projectFilters(request),
      groupScope: { namespaceIds, sharedWithGroupId: request.query.with_shared === false ? undefined : group.id },
    };
    return sendGroupProjects(request, reply, filters);
  });

  app.get('/api/v4/groups/:id/projects/shared', { schema: { params: IdParams, querystring: ProjectListQuery } }, async (request, reply) => {
    const { group } = await authorizeGroup(request, request.params.id);
    return sendGroupProjects(request, reply, { ...projectFilters(request), sharedWithGroupId: group.id });
  });

  app.post('/api/v4/groups/:id/transfer', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const user = requireUser(request);
    const { group, accessLevel } = await authorizeGroup(request, request.params.id, 'admin_group');
    const target = allParams(request).group_id;
    let parent: Namespace | null = null;
    if (target !== undefined && target !== null && target !== '') {
      parent = (await findGroup(db, String(target))) ?? null;
      if (!parent) throw notFound('Group');
      parent = (await authorizeGroup(request, parent.id)).group;
    }
    const moved = await transferGroup(app.cairn, user, group, parent);
    return reply.code(201).send(await renderGroupDetail(request, moved, accessLevel, false));
  });

  app.post('/api/v4/groups/:id/projects/:project_id', { config: { admin: true } }, async (request, reply) => {
    const user = requireUser(request);
    const { id, project_id } = request.params as { id: string; project_id: string };
    const { group, accessLevel } = await authorizeGroup(request, id);
    const { project } = await authorizeProject(request, project_id);
    const row = (await findProjectRow(db, project.id))!;
    await transferProject(app.cairn, user, row, group);
    return reply.code(201).send(await renderGroupDetail(request, group, accessLevel, true));
  });
}

/** A group's project list: Project entities (no permissions), or the simple form. */
async function sendGroupProjects(request: FastifyRequest, reply: FastifyReply, filters: Parameters<typeof listProjects>[2]) {
  const q = request.query as Record<string, any>;
  if (q.pagination === 'keyset') return sendProjectList(request, reply, filters, q.simple);
  return sendCachedPage(request, reply, async (headers) => {
    const page = pageParams(request);
    const { rows, total } = await listProjects(request.server.cairn.db, request.actor?.user ?? null, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, headers, page, total);
    const { bodies, complete } = await presentProjects(request, rows, q.simple ? 'simple' : 'full');
    return { body: bodies, complete };
  });
}

