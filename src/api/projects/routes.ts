import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { findNamespace } from '../../finders/namespaces.js';
import { findUserByIdOrUsername } from '../../finders/users.js';
import { personalNamespaceOf } from '../../services/users.js';
import { findProjectRow, listProjects, listProjectUsers, listStarrers, type ProjectFilters } from '../../finders/projects.js';
import { AccessLevel, canSeeVisibility, groupAccessLevel } from '../../policies/access.js';
import { authorizeProject } from '../../policies/projects.js';
import type { ProjectAbility } from '../../policies/abilities.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, apiError, notFound } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { pageParams, setKeysetNext, setPaginationHeaders } from '../../plugins/pagination.js';
import { sendCachedPage } from '../../plugins/page_cache.js';
import { iso, presentUserBasic } from '../../presenters/users.js';
import type { Namespace, User } from '../../db/schema/core.js';
import {
  createProject, deleteProject, setProjectArchived, starProject, transferProject, unstarProject, updateProject,
} from '../../services/projects.js';
import { projectFilters } from './filters.js';
import { cachedProjectJson, listForm, presentContext, presentProjects, renderProject } from './present.js';
import { ProjectCreateBody, ProjectHousekeepingBody, ProjectListQuery, ProjectUpdateBody } from './schemas.js';
import { IdParams } from '../params.js';
import { housekeepProject } from '../../services/housekeeping.js';

const accepted = (reply: FastifyReply) => reply.code(202).send({ message: '202 Accepted' });

/** Loads `:id` for the caller with the row form the presenters take. */
async function loadProject(request: FastifyRequest, id: string, ability: ProjectAbility = 'read_project') {
  const access = await authorizeProject(request, id, ability);
  return { ...access, row: access.project };
}

/** A namespace the caller may see, by id or full path (404 otherwise). */
async function visibleNamespace(request: FastifyRequest, key: string | number): Promise<Namespace | undefined> {
  const db = request.server.cairn.db;
  const ns = await findNamespace(db, key);
  if (!ns) return undefined;
  const user = request.actor?.user ?? null;
  if (ns.type === 'User') return user && (user.admin || ns.owner_id === user.id) ? ns : undefined;
  const level = user ? await groupAccessLevel(db, user.id, ns) : 0;
  return canSeeVisibility(user, ns.visibility_level, level) ? ns : undefined;
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

export default async function projectRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = app.cairn.db;

  app.get('/api/v4/projects', { schema: { querystring: ProjectListQuery } }, async (request, reply) => {
    return sendProjectList(request, reply, projectFilters(request), request.query.simple);
  });

  app.get('/api/v4/users/:user_id/projects', { schema: { querystring: ProjectListQuery } }, async (request, reply) => {
    const target = await findUser(request, (request.params as { user_id: string }).user_id);
    const ns = await personalNamespaceOf(db, target.id);
    return sendProjectList(request, reply, { ...projectFilters(request), namespaceIds: ns ? [ns.id] : [] }, request.query.simple);
  });

  app.get('/api/v4/users/:user_id/starred_projects', { schema: { querystring: ProjectListQuery } }, async (request, reply) => {
    const target = await findUser(request, (request.params as { user_id: string }).user_id);
    return sendProjectList(request, reply, { ...projectFilters(request), starredBy: target.id }, request.query.simple);
  });

  app.get('/api/v4/projects/:id', { schema: { params: IdParams } }, async (request, reply) => {
    const { row, accessLevel } = await loadProject(request, request.params.id);
    // The hottest read: its JSON is cached whole, per caller (the form depends on who asks).
    const json = await cachedProjectJson(request, row, request.actor ? 'with_access' : 'full', accessLevel);
    return reply.type('application/json').send(json);
  });

  app.post('/api/v4/projects', { config: { auth: 'required' }, schema: { body: ProjectCreateBody } }, async (request, reply) => {
    const user = requireUser(request);
    const params = allParams(request);
    const key = params.namespace_id ?? params.namespace_path;
    const namespace = key !== undefined && key !== null && key !== ''
      ? await visibleNamespace(request, key)
      : await personalNamespaceOf(db, user.id);
    if (!namespace) throw new ApiError(400, { message: { namespace: ['is not valid'] } });
    const project = await createProject(app.cairn, { user, namespace, params });
    const row = (await findProjectRow(db, project.id))!;
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.post('/api/v4/projects/user/:user_id', { config: { admin: true }, schema: { body: ProjectCreateBody } }, async (request, reply) => {
    const target = await findUser(request, (request.params as { user_id: string }).user_id);
    const params = allParams(request);
    const key = params.namespace_id ?? params.namespace_path;
    const namespace = key !== undefined && key !== null && key !== ''
      ? await findNamespace(db, key)
      : await personalNamespaceOf(db, target.id);
    if (!namespace) throw new ApiError(400, { message: { namespace: ['is not valid'] } });
    const project = await createProject(app.cairn, { user: target, namespace, params });
    const row = (await findProjectRow(db, project.id))!;
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.put('/api/v4/projects/:id', { config: { auth: 'required' }, schema: { params: IdParams, body: ProjectUpdateBody } }, async (request) => {
    const user = requireUser(request);
    const { row, accessLevel } = await loadProject(request, request.params.id, 'admin_project');
    await updateProject(app.cairn, { user, project: row, accessLevel, params: allParams(request) });
    return renderProject(request, (await findProjectRow(db, row.id))!, 'full');
  });

  app.delete('/api/v4/projects/:id', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const { row } = await loadProject(request, request.params.id, 'owner_project');
    await deleteProject(app.cairn, row);
    return accepted(reply);
  });

  app.put('/api/v4/projects/:id/transfer', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request) => {
    const user = requireUser(request);
    const { row } = await loadProject(request, request.params.id, 'owner_project');
    const key = allParams(request).namespace;
    if (key === undefined || key === null || key === '') throw new ApiError(400, { error: 'namespace is missing' });
    const target = await visibleNamespace(request, String(key));
    if (!target) throw notFound('Namespace');
    await transferProject(app.cairn, user, row, target);
    return renderProject(request, (await findProjectRow(db, row.id))!, 'full');
  });

  for (const [action, archived] of [['archive', true], ['unarchive', false]] as const) {
    app.post(`/api/v4/projects/:id/${action}`, { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
      const { row } = await loadProject(request, request.params.id, 'owner_project');
      await setProjectArchived(db, row.id, archived);
      return reply.code(201).send(await renderProject(request, (await findProjectRow(db, row.id))!, 'full'));
    });
  }

  // Runs now (a commit-graph write is quick); pushes also queue it in the background.
  app.post('/api/v4/projects/:id/housekeeping', { config: { auth: 'required' }, schema: { params: IdParams, body: ProjectHousekeepingBody } }, async (request, reply) => {
    const { row } = await loadProject(request, request.params.id, 'admin_project');
    await housekeepProject(app.cairn, row.id, request.body.task ?? 'incremental');
    return reply.code(201).send({});
  });

  app.post('/api/v4/projects/:id/star', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const user = requireUser(request);
    const { row } = await loadProject(request, request.params.id);
    if (!(await starProject(db, user.id, row.id))) return reply.code(304).send();
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.post('/api/v4/projects/:id/unstar', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const user = requireUser(request);
    const { row } = await loadProject(request, request.params.id);
    if (!(await unstarProject(db, user.id, row.id))) return reply.code(304).send();
    return reply.code(201).send(await renderProject(request, row, 'full'));
  });

  app.get('/api/v4/projects/:id/starrers', { schema: { params: IdParams } }, async (request, reply) => {
    const { row } = await loadProject(request, request.params.id);
    const q = request.query as Record<string, unknown>;
    const page = pageParams(request);
    const { rows, total } = await listStarrers(db, row.id, request.actor?.user ?? null, typeof q.search === 'string' ? q.search : undefined, page);
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((r) => ({ starred_since: iso(r.starredSince), user: presentUserBasic(ctx, r.user) }));
  });

  app.get('/api/v4/projects/:id/users', { schema: { params: IdParams } }, async (request, reply) => {
    const { row } = await loadProject(request, request.params.id);
    const q = request.query as Record<string, any>;
    const page = pageParams(request);
    const skip = ([] as unknown[]).concat(q.skip_users ?? []).flatMap((v) => String(v).split(',')).filter((v) => /^\d+$/.test(v)).map(Number);
    const { rows, total } = await listProjectUsers(db, row, { search: typeof q.search === 'string' ? q.search : undefined, skip }, page);
    setPaginationHeaders(request, reply, page, total);
    const ctx = presentContext(request);
    return rows.map((u) => presentUserBasic(ctx, u));
  });
}

