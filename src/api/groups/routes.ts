import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Namespace } from '../../db/schema/core.js';
import { findGroup, groupTreeIds, listGroups, sharedWithGroups, type GroupFilters } from '../../finders/groups.js';
import { findProjectRow, listProjects } from '../../finders/projects.js';
import { registrationToken } from '../../ci/runners.js';
import { can } from '../../policies/abilities.js';
import { AccessLevel } from '../../policies/access.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { authorizeProject } from '../../finders/authorize.js';
import { requireUser } from '../../plugins/auth.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { presentGroup, presentGroupDetail } from '../../presenters/groups.js';
import { GroupDetailSchema, GroupDetailWithProjectsSchema, GroupSchema } from '../../presenters/schemas/groups.js';
import { AcceptedSchema, ProjectSchema, ProjectSimpleSchema, ProjectWithAccessSchema } from '../../presenters/schemas/projects.js';
import { createGroup, deleteGroup, transferGroup, updateGroup } from '../../services/groups.js';
import { transferProject } from '../../services/projects.js';
import { projectFilters } from '../projects/filters.js';
import { presentContext, presentProjects, renderProjects } from '../projects/present.js';
import { ACCESS_LEVEL, ProjectListQuery, VISIBILITY } from '../projects/schemas.js';
import { sendProjectList } from '../projects/routes.js';
import { IdParams } from '../params.js';
import { groupOf, route } from '../route.js';
import { capList } from '../list_filters.js';

const enumOf = (values: readonly string[]) => Type.Union(values.map((v) => Type.Literal(v)));

const GroupListQuery = Type.Object({
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
  const skip = capList(([] as unknown[]).concat(q.skip_groups ?? []).flatMap((v) => String(v).split(',')).filter((v) => /^\d+$/.test(v)).map(Number), 'skip_groups');
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
  const canAdmin = can(user, 'admin_group', { group, accessLevel });
  return presentGroupDetail(presentContext(request), group, {
    sharedWithGroups: await sharedWithGroups(db, user, group.id),
    canAdmin,
    runnersToken: canAdmin ? await registrationToken(request.server.cairn, { type: 'group_type', namespaceId: group.id }) : undefined,
    projects,
    sharedProjects,
  });
}

/** A group's project lists: the Project form, the simple form, or with keyset pagination the list forms of GET /projects. */
const GroupProjectsSchema = Type.Union([
  Type.Array(ProjectSchema),
  Type.Array(ProjectSimpleSchema),
  Type.Array(ProjectWithAccessSchema),
]);
const GroupTransferBody = Type.Object({
  /** The new parent; absent or empty moves the group to the top level. */
  group_id: Type.Optional(Type.Union([Type.Integer(), Type.String(), Type.Null()])),
});

export default async function groupRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  // The list routes answer from the page cache (sendCachedPage): their JSON is sent as rendered.
  app.get('/api/v4/groups', route({ matrix: 'public',
    access: { public: true },
    paginated: true,
    schema: { querystring: GroupListQuery, response: { 200: Type.Array(GroupSchema) } },
  }), async (request, reply) => {
    return sendGroupList(request, reply, groupFilters(request));
  });

  app.post('/api/v4/groups', route({ matrix: 'signedIn',
    access: { custom: 'create_subgroup on parent_id (a top-level group: the user\'s can_create_group, checked by the service)', signedIn: true },
    schema: { body: GroupCreateBody, response: { 201: GroupDetailSchema } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const params = request.body;
    let parent: Namespace | null = null;
    if (params.parent_id !== undefined && params.parent_id !== null) {
      parent = (await authorizeGroup(request, params.parent_id, 'create_subgroup')).group;
    }
    const group = await createGroup(app.cairn, user, parent, params);
    // The creator is the new group's owner.
    return reply.code(201).send(await renderGroupDetail(request, group, AccessLevel.OWNER, false));
  });

  app.get('/api/v4/groups/:id', route({ matrix: 'read',
    access: { group: 'read_group' },
    schema: {
      params: IdParams,
      querystring: Type.Object({ with_projects: Type.Optional(Type.Boolean()), with_custom_attributes: Type.Optional(Type.Boolean()) }),
      response: { 200: Type.Union([GroupDetailWithProjectsSchema, GroupDetailSchema]) },
    },
  }), async (request) => {
    const { group, accessLevel } = groupOf(request);
    return renderGroupDetail(request, group, accessLevel, request.query.with_projects ?? true);
  });

  app.put('/api/v4/groups/:id', route({ matrix: 'owner',
    access: { group: 'admin_group', signedIn: true },
    schema: { params: IdParams, body: GroupBody, response: { 200: GroupDetailWithProjectsSchema } },
  }), async (request) => {
    const { group, accessLevel, user } = groupOf(request);
    const updated = await updateGroup(app.cairn, user!, group, request.body);
    return renderGroupDetail(request, updated, accessLevel, true);
  });

  app.delete('/api/v4/groups/:id', route({ matrix: 'owner',
    access: { group: 'admin_group', signedIn: true },
    schema: { params: IdParams, response: { 202: AcceptedSchema } },
  }), async (request, reply) => {
    await deleteGroup(app.cairn, groupOf(request).group);
    return reply.code(202).send({ message: '202 Accepted' });
  });

  app.get('/api/v4/groups/:id/subgroups', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: GroupListQuery, response: { 200: Type.Array(GroupSchema) } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    return sendGroupList(request, reply, { ...groupFilters(request), topLevelOnly: false, parentId: group.id });
  });

  app.get('/api/v4/groups/:id/descendant_groups', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: GroupListQuery, response: { 200: Type.Array(GroupSchema) } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    return sendGroupList(request, reply, { ...groupFilters(request), topLevelOnly: false, descendantsOf: group.id });
  });

  app.get('/api/v4/groups/:id/projects', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: ProjectListQuery, response: { 200: GroupProjectsSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const namespaceIds = request.query.include_subgroups ? await groupTreeIds(db, group.id) : [group.id];
    const filters = {
      ...projectFilters(request),
      groupScope: { namespaceIds, sharedWithGroupId: request.query.with_shared === false ? undefined : group.id },
    };
    return sendGroupProjects(request, reply, filters);
  });

  app.get('/api/v4/groups/:id/projects/shared', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: ProjectListQuery, response: { 200: GroupProjectsSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    return sendGroupProjects(request, reply, { ...projectFilters(request), sharedWithGroupId: group.id });
  });

  app.post('/api/v4/groups/:id/transfer', route({ matrix: 'owner',
    access: { group: 'admin_group', signedIn: true },
    schema: { params: IdParams, body: GroupTransferBody, response: { 201: GroupDetailSchema } },
  }), async (request, reply) => {
    const { group, accessLevel, user } = groupOf(request);
    const target = request.body.group_id;
    let parent: Namespace | null = null;
    if (target !== undefined && target !== null && target !== '') {
      parent = (await findGroup(db, String(target))) ?? null;
      if (!parent) throw notFound('Group');
      parent = (await authorizeGroup(request, parent.id)).group;
    }
    const moved = await transferGroup(app.cairn, user!, group, parent);
    return reply.code(201).send(await renderGroupDetail(request, moved, accessLevel, false));
  });

  app.post('/api/v4/groups/:id/projects/:project_id', route({ matrix: 'admin',
    access: { admin: true },
    schema: { params: Type.Object({ id: Type.String(), project_id: Type.String() }), response: { 201: GroupDetailWithProjectsSchema } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const { group, accessLevel } = await authorizeGroup(request, request.params.id);
    const { project } = await authorizeProject(request, request.params.project_id);
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

