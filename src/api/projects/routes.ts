import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findNamespace } from '../../finders/namespaces.js';
import { findUserByIdOrUsername } from '../../finders/users.js';
import { personalNamespaceOf } from '../../services/users.js';
import { findProjectRow, listProjects, listProjectUsers, listStarrers, type ProjectFilters } from '../../finders/projects.js';
import { groupAccessLevel } from '../../finders/access_levels.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, apiError, notFound } from '../../plugins/errors.js';
import { pageParams, setKeysetNext, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { iso, presentUserBasic } from '../../presenters/users.js';
import { AcceptedSchema, ProjectSchema, ProjectSimpleSchema, ProjectWithAccessSchema, StarrerSchema } from '../../presenters/schemas/projects.js';
import { UserBasicSchema } from '../../presenters/schemas/users.js';
import type { Namespace, User } from '../../db/schema/core.js';
import {
  createProject, deleteProject, setProjectArchived, starProject, transferProject, unstarProject, updateProject,
} from '../../services/projects.js';
import { projectFilters } from './filters.js';
import { cachedProjectJson, listForm, presentContext, presentProjects, renderProject } from './present.js';
import { ProjectCreateBody, ProjectHousekeepingBody, ProjectListQuery, ProjectTransferBody, ProjectUpdateBody, ProjectUsersQuery } from './schemas.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';
import { housekeepProject } from '../../services/housekeeping.js';
import { capList } from '../list_filters.js';

const accepted = (reply: FastifyReply) => reply.code(202).send({ message: '202 Accepted' });

/** A namespace the caller may see, by id or full path (404 otherwise). */
async function visibleNamespace(request: FastifyRequest, key: string | number): Promise<Namespace | undefined> {
  const db = request.server.cairn.db;
  const ns = await findNamespace(db, key);
  if (!ns) return undefined;
  const user = request.actor?.user ?? null;
  if (ns.type === 'User') return user && (user.admin || ns.owner_id === user.id) ? ns : undefined;
  const level = user ? await groupAccessLevel(db, user.id, ns) : 0;
  return can(user, 'read_group', { group: ns, accessLevel: effectiveLevel(user, level) }) ? ns : undefined;
}

/** Offset or keyset (order_by=id) page of projects, presented in the list form (and cached per caller and URL). */
export async function sendProjectList(request: FastifyRequest, reply: FastifyReply, filters: ProjectFilters, simple?: boolean) {
  const db = request.server.cairn.db;
  const user = request.actor?.user ?? null;
  const page = pageParams(request);
  const q = request.query as Record<string, any>;
  if (q.pagination === 'keyset' && filters.orderBy !== 'id') throw apiError(405, 'Keyset pagination is not yet available for this type of request');
  return sendCachedPage(request, reply, async (headers) => {
    if (q.pagination === 'keyset') {
      const { rows } = await listProjects(db, user, filters, { limit: page.perPage + 1, offset: 0, withTotal: false });
      const more = rows.length > page.perPage;
      const pageRows = rows.slice(0, page.perPage);
      const last = pageRows[pageRows.length - 1];
      setKeysetNext(request, headers, page.perPage, more && last ? { pagination: 'keyset', order_by: 'id', sort: filters.sort ?? 'desc', [filters.sort === 'asc' ? 'id_after' : 'id_before']: last.id } : null);
      const { bodies, complete } = await presentProjects(request, pageRows, listForm(request, simple));
      return { body: bodies, complete };
    }
    const { rows, total } = await listProjects(db, user, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, headers, page, total);
    const { bodies, complete } = await presentProjects(request, rows, listForm(request, simple));
    return { body: bodies, complete };
  });
}

async function findUser(request: FastifyRequest, key: string): Promise<User> {
  const user = await findUserByIdOrUsername(request.server.cairn.db, key);
  if (!user) throw notFound('User');
  return user;
}

/** The list forms: simple for anonymous callers and simple=true, with permissions for signed-in callers. */
const ProjectListSchema = Type.Union([Type.Array(ProjectWithAccessSchema), Type.Array(ProjectSimpleSchema)]);
const UserParams = Type.Object({ user_id: Type.String() });
const full = { 200: ProjectSchema } as const;

export default async function projectRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  // The list routes answer from the page cache (sendCachedPage): their JSON is sent as rendered.
  app.get('/api/v4/projects', route({ matrix: 'public',
    access: { public: true },
    paginated: true,
    schema: { querystring: ProjectListQuery, response: { 200: ProjectListSchema } },
  }), async (request, reply) => {
    return sendProjectList(request, reply, projectFilters(request), request.query.simple);
  });

  app.get('/api/v4/users/:user_id/projects', route({ matrix: 'public',
    access: { public: true },
    paginated: true,
    schema: { params: UserParams, querystring: ProjectListQuery, response: { 200: ProjectListSchema } },
  }), async (request, reply) => {
    const target = await findUser(request, request.params.user_id);
    const ns = await personalNamespaceOf(db, target.id);
    return sendProjectList(request, reply, { ...projectFilters(request), namespaceIds: ns ? [ns.id] : [] }, request.query.simple);
  });

  app.get('/api/v4/users/:user_id/starred_projects', route({ matrix: 'public',
    access: { public: true },
    paginated: true,
    schema: { params: UserParams, querystring: ProjectListQuery, response: { 200: ProjectListSchema } },
  }), async (request, reply) => {
    const target = await findUser(request, request.params.user_id);
    return sendProjectList(request, reply, { ...projectFilters(request), starredBy: target.id }, request.query.simple);
  });

  app.get('/api/v4/projects/:id', route({ matrix: 'read',
    access: { project: 'read_project' },
    schema: { params: IdParams, response: { 200: Type.Union([ProjectWithAccessSchema, ProjectSchema]) } },
  }), async (request, reply) => {
    const { project, accessLevel } = projectOf(request);
    // The hottest read: its JSON is cached whole, per caller (the form depends on who asks).
    const json = await cachedProjectJson(request, project, request.actor ? 'with_access' : 'full', accessLevel);
    return reply.type('application/json').send(json);
  });

  app.post('/api/v4/projects', route({ matrix: 'signedIn',
    access: { custom: 'create_projects in the namespace (the service answers 400 "namespace is not valid")', signedIn: true },
    schema: { body: ProjectCreateBody, response: { 201: ProjectSchema } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const params = request.body;
    const key = params.namespace_id ?? params.namespace_path;
    const namespace = key !== undefined && key !== null && key !== ''
      ? await visibleNamespace(request, key)
      : await personalNamespaceOf(db, user.id);
    if (!namespace) throw new ApiError(400, { message: { namespace: ['is not valid'] } });
    const project = await createProject(app.cairn, { user, namespace, params });
    const row = (await findProjectRow(db, project.id))!;
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.post('/api/v4/projects/user/:user_id', route({ matrix: 'admin',
    access: { admin: true },
    schema: { params: UserParams, body: ProjectCreateBody, response: { 201: ProjectSchema } },
  }), async (request, reply) => {
    const target = await findUser(request, request.params.user_id);
    const params = request.body;
    const key = params.namespace_id ?? params.namespace_path;
    const namespace = key !== undefined && key !== null && key !== ''
      ? await findNamespace(db, key)
      : await personalNamespaceOf(db, target.id);
    if (!namespace) throw new ApiError(400, { message: { namespace: ['is not valid'] } });
    const project = await createProject(app.cairn, { user: target, namespace, params });
    const row = (await findProjectRow(db, project.id))!;
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.put('/api/v4/projects/:id', route({ matrix: 'maintainer',
    access: { project: 'admin_project', signedIn: true },
    schema: { params: IdParams, body: ProjectUpdateBody, response: full },
  }), async (request) => {
    const { project, accessLevel, user } = projectOf(request);
    await updateProject(app.cairn, { user: user!, project, accessLevel, params: request.body });
    return renderProject(request, (await findProjectRow(db, project.id))!, 'full');
  });

  app.delete('/api/v4/projects/:id', route({ matrix: 'owner',
    access: { project: 'owner_project', signedIn: true },
    schema: { params: IdParams, response: { 202: AcceptedSchema } },
  }), async (request, reply) => {
    await deleteProject(app.cairn, projectOf(request).project);
    return accepted(reply);
  });

  app.put('/api/v4/projects/:id/transfer', route({ matrix: 'owner',
    access: { project: 'owner_project', signedIn: true },
    schema: { params: IdParams, body: ProjectTransferBody, response: full },
  }), async (request) => {
    const { project, user } = projectOf(request);
    // Kept by hand: an empty namespace is "missing" as well.
    if (request.body.namespace === '') throw new ApiError(400, { error: 'namespace is missing' });
    const target = await visibleNamespace(request, String(request.body.namespace));
    if (!target) throw notFound('Namespace');
    await transferProject(app.cairn, user!, project, target);
    return renderProject(request, (await findProjectRow(db, project.id))!, 'full');
  });

  for (const [action, archived] of [['archive', true], ['unarchive', false]] as const) {
    app.post(`/api/v4/projects/:id/${action}`, route({ matrix: 'owner',
      access: { project: 'owner_project', signedIn: true },
      schema: { params: IdParams, response: { 201: ProjectSchema } },
    }), async (request, reply) => {
      const { project } = projectOf(request);
      await setProjectArchived(db, project.id, archived);
      return reply.code(201).send(await renderProject(request, (await findProjectRow(db, project.id))!, 'full'));
    });
  }

  // Runs now (a commit-graph write is quick); pushes also queue it in the background.
  app.post('/api/v4/projects/:id/housekeeping', route({ matrix: 'maintainer',
    access: { project: 'admin_project', signedIn: true },
    schema: { params: IdParams, body: ProjectHousekeepingBody, response: { 201: Type.Object({}, { additionalProperties: false }) } },
  }), async (request, reply) => {
    await housekeepProject(app.cairn, projectOf(request).project.id, request.body.task ?? 'incremental');
    return reply.code(201).send({});
  });

  // 304 when the project already is (or is not) starred.
  for (const [action, change] of [['star', starProject], ['unstar', unstarProject]] as const) {
    app.post(`/api/v4/projects/:id/${action}`, route({ matrix: 'read',
      access: { project: 'read_project', signedIn: true },
      schema: { params: IdParams, response: { 201: ProjectSchema, 304: NoContent } },
    }), async (request, reply) => {
      const { project, user } = projectOf(request);
      if (!(await change(db, user!.id, project.id))) return reply.code(304).send();
      return reply.code(201).send(await renderProject(request, project, 'full'));
    });
  }

  app.get('/api/v4/projects/:id/starrers', route({ matrix: 'read',
    access: { project: 'read_project' },
    paginated: true,
    schema: { params: IdParams, querystring: Type.Object({ search: Type.Optional(Type.String()) }), response: { 200: Type.Array(StarrerSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const { rows, total } = await listStarrers(db, project.id, request.actor?.user ?? null, request.query.search, page);
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((r) => ({ starred_since: iso(r.starredSince), user: presentUserBasic(ctx, r.user) }));
  });

  app.get('/api/v4/projects/:id/users', route({ matrix: 'read',
    access: { project: 'read_project' },
    paginated: true,
    schema: { params: IdParams, querystring: ProjectUsersQuery, response: { 200: Type.Array(UserBasicSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    const page = pageParams(request);
    // Kept by hand: a comma list or an array, whose non-numeric entries are ignored.
    const skip = capList(([] as unknown[]).concat(q.skip_users ?? []).flatMap((v) => String(v).split(',')).filter((v) => /^\d+$/.test(v)).map(Number), 'skip_users');
    const { rows, total } = await listProjectUsers(db, project, { search: q.search, skip }, page);
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((u) => presentUserBasic(ctx, u));
  });
}
