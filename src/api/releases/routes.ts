import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import type { Release, ReleaseLink } from '../../db/schema/releases.js';
import { findProjectRowsByIds } from '../../finders/projects.js';
import { findRelease, loadReleaseExtras, releasesQuery, type ReleaseOrder } from '../../finders/releases.js';
import { invalidParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { projectVisibleTo } from '../../policies/access.js';
import type { ProjectAccess } from '../../policies/projects.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { presentRelease, presentReleaseLink } from '../../presenters/releases.js';
import { ReleaseLinkSchema, ReleaseSchema } from '../../presenters/schemas/releases.js';
import { createRelease, createReleaseLink, deleteRelease, updateRelease, updateReleaseLink, type ReleaseLinkInput } from '../../services/releases.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { groupOf, projectOf, route } from '../route.js';

// Releases and Release links APIs (GitLab's): whoever sees a project's releases reads them (its
// code, commit and source archives only who may download it); developers create, edit and
// delete them. A CI job token works on all of them (release-cli uses it), as in GitLab 15.1+.

const TagParams = Type.Object({ id: Type.String(), tag_name: Type.String() });
const LinkParams = Type.Object({ id: Type.String(), tag_name: Type.String(), link_id: RowId });
const Bool = Type.Optional(Type.Union([Type.Boolean(), Type.String()]));
const Str = Type.Optional(Type.String());
const ListQuery = Type.Object({ order_by: Str, sort: Str, include_html_description: Bool, updated_before: Str, updated_after: Str });
const LinkInput = Type.Object({ name: Str, url: Str, direct_asset_path: Str, filepath: Str, link_type: Str });
const CreateBody = Type.Object({
  tag_name: Type.String(),
  name: Str,
  description: Str,
  ref: Str,
  tag_message: Str,
  milestones: Type.Optional(Type.Array(Type.String())),
  released_at: Str,
  assets: Type.Optional(Type.Object({ links: Type.Optional(Type.Array(LinkInput)) })),
});
const UpdateBody = Type.Object({ name: Str, description: Str, milestones: Type.Optional(Type.Array(Type.String())), released_at: Str });

const truthy = (v: boolean | string | undefined) => v === true || v === 'true' || v === '1';
const job = { jobToken: true };

export default async function releaseRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const ctxOf = (request: FastifyRequest) => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });
  const base = '/api/v4/projects/:id/releases';
  const read = { project: 'read_release' } as const;

  const viewerOf = (access: Pick<ProjectAccess, 'user' | 'project' | 'accessLevel'>, html = false) => ({
    downloadCode: can(access.user, 'download_code', access),
    update: can(access.user, 'update_release', access),
    html,
  });

  async function render(request: FastifyRequest, access: ProjectAccess, rows: Release[], html = false) {
    const viewer = viewerOf(access, html);
    const extras = await loadReleaseExtras(cairn, rows, () => (viewer.downloadCode ? access.project : null));
    return rows.map((r) => presentRelease(ctxOf(request), access.project, r, extras, viewer));
  }

  async function loadRelease(projectId: number, tag: string): Promise<Release> {
    const release = await findRelease(cairn.db, projectId, tag);
    if (!release) throw notFound();
    return release;
  }

  async function loadLink(release: Release, id: number): Promise<ReleaseLink> {
    const link = await cairn.db.selectFrom('release_links').selectAll().where('release_id', '=', release.id).where('id', '=', id).executeTakeFirst();
    if (!link) throw notFound();
    return link;
  }

  function orderOf(q: { order_by?: string; sort?: string }): { orderBy: ReleaseOrder; sort: 'asc' | 'desc' } {
    const orderBy = q.order_by ?? 'released_at';
    if (orderBy !== 'released_at' && orderBy !== 'created_at') throw invalidParam('order_by', 'does not have a valid value');
    const sort = q.sort ?? 'desc';
    if (sort !== 'asc' && sort !== 'desc') throw invalidParam('sort', 'does not have a valid value');
    return { orderBy, sort };
  }

  async function page(request: FastifyRequest, reply: FastifyReply, projectIds: number[], q: { order_by?: string; sort?: string; updated_before?: string; updated_after?: string }) {
    const { orderBy, sort } = orderOf(q);
    const filters = { updatedBefore: timestampParam('updated_before', q.updated_before), updatedAfter: timestampParam('updated_after', q.updated_after) };
    const p = pageParams(request);
    const query = releasesQuery(cairn.db, projectIds, filters);
    const [rows, total] = await Promise.all([
      query.selectAll().orderBy(orderBy, sort).orderBy('id', sort).limit(p.perPage).offset(p.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, p, Number(total.n));
    return rows;
  }

  app.get(base, route({ matrix: 'read',
    access: read,
    config: job,
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(ReleaseSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const rows = await page(request, reply, [access.project.id], request.query);
    return render(request, access, rows, truthy(request.query.include_html_description));
  });

  // The latest release (by released_at), and any path below it: a redirect to that release's URL.
  const latest = async (request: FastifyRequest, reply: FastifyReply, suffix: string) => {
    const { project } = projectOf(request);
    const row = await cairn.db.selectFrom('releases').select('tag').where('project_id', '=', project.id).orderBy('released_at', 'desc').orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (!row) throw notFound();
    const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
    return reply.redirect(`/api/v4/projects/${project.id}/releases/${encodeURIComponent(row.tag)}${suffix}${query}`, 302);
  };
  app.get(`${base}/permalink/latest`, route({ matrix: 'read',
    access: read,
    config: job,
    schema: { params: IdParams, response: { 302: Type.Null() } },
  }), async (request, reply) => latest(request, reply, ''));
  app.get(`${base}/permalink/latest/*`, route({ matrix: 'read',
    access: read,
    config: job,
    schema: { params: Type.Object({ id: Type.String(), '*': Type.String() }), response: { 302: Type.Null() } },
  }), async (request, reply) => {
    const rest = request.params['*'];
    if (rest.split('/').some((s) => s === '..' || s === '.')) throw notFound();
    return latest(request, reply, `/${rest.split('/').map(encodeURIComponent).join('/')}`);
  });

  app.get(`${base}/:tag_name`, route({ matrix: 'read',
    access: read,
    config: job,
    schema: { params: TagParams, querystring: Type.Object({ include_html_description: Bool }), response: { 200: ReleaseSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const release = await loadRelease(access.project.id, request.params.tag_name);
    return (await render(request, access, [release], truthy(request.query.include_html_description)))[0];
  });

  app.post(base, route({ matrix: 'developer',
    access: { project: 'create_release', signedIn: true },
    config: job,
    schema: { params: IdParams, body: CreateBody, response: { 201: ReleaseSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const body = request.body;
    if (!body.tag_name) throw invalidParam('tag_name', 'is empty');
    const release = await createRelease(cairn, access.project, access, body);
    return reply.code(201).send((await render(request, access, [release]))[0]);
  });

  app.put(`${base}/:tag_name`, route({ matrix: 'developer',
    access: { project: 'update_release', signedIn: true },
    config: job,
    schema: { params: TagParams, body: UpdateBody, response: { 200: ReleaseSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const release = await updateRelease(cairn, access.project, access, request.params.tag_name, request.body ?? {});
    return (await render(request, access, [release]))[0];
  });

  app.delete(`${base}/:tag_name`, route({ matrix: 'developer',
    access: { project: 'destroy_release', signedIn: true },
    config: job,
    schema: { params: TagParams, response: { 200: ReleaseSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const current = await loadRelease(access.project.id, request.params.tag_name);
    // Rendered before it goes (GitLab answers with the deleted release).
    const [body] = await render(request, access, [current]);
    await deleteRelease(cairn, access.project, access, current.tag);
    return body;
  });

  // A link's permanent URL: /releases/:tag/downloads/<its direct_asset_path> redirects to it.
  app.get(`${base}/:tag_name/downloads/*`, route({ matrix: 'read',
    access: read,
    config: job,
    schema: { params: Type.Object({ id: Type.String(), tag_name: Type.String(), '*': Type.String() }), response: { 302: Type.Null() } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    const link = await cairn.db.selectFrom('release_links').selectAll().where('release_id', '=', release.id).where('filepath', '=', `/${request.params['*']}`).executeTakeFirst();
    if (!link) throw notFound();
    return reply.redirect(link.url, 302);
  });

  // ---- links ------------------------------------------------------------------------------------

  app.get(`${base}/:tag_name/assets/links`, route({ matrix: 'read',
    access: read,
    config: job,
    paginated: true,
    schema: { params: TagParams, response: { 200: Type.Array(ReleaseLinkSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    const p = pageParams(request);
    const q = cairn.db.selectFrom('release_links').where('release_id', '=', release.id);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id', 'desc').limit(p.perPage).offset(p.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, p, Number(total.n));
    return rows.map((l) => presentReleaseLink(ctxOf(request), project, release.tag, l));
  });

  app.get(`${base}/:tag_name/assets/links/:link_id`, route({ matrix: 'read',
    access: read,
    config: job,
    schema: { params: LinkParams, response: { 200: ReleaseLinkSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    return presentReleaseLink(ctxOf(request), project, release.tag, await loadLink(release, request.params.link_id));
  });

  app.post(`${base}/:tag_name/assets/links`, route({ matrix: 'developer',
    access: { project: 'update_release', signedIn: true },
    config: job,
    schema: { params: TagParams, body: LinkInput, response: { 201: ReleaseLinkSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    const link = await createReleaseLink(cairn, release, request.body as ReleaseLinkInput);
    return reply.code(201).send(presentReleaseLink(ctxOf(request), project, release.tag, link));
  });

  app.put(`${base}/:tag_name/assets/links/:link_id`, route({ matrix: 'developer',
    access: { project: 'update_release', signedIn: true },
    config: job,
    schema: { params: LinkParams, body: LinkInput, response: { 200: ReleaseLinkSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    const link = await updateReleaseLink(cairn, await loadLink(release, request.params.link_id), (request.body ?? {}) as ReleaseLinkInput);
    return presentReleaseLink(ctxOf(request), project, release.tag, link);
  });

  app.delete(`${base}/:tag_name/assets/links/:link_id`, route({ matrix: 'developer',
    access: { project: 'update_release', signedIn: true },
    config: job,
    schema: { params: LinkParams, response: { 200: ReleaseLinkSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const release = await loadRelease(project.id, request.params.tag_name);
    const link = await loadLink(release, request.params.link_id);
    await cairn.db.deleteFrom('release_links').where('id', '=', link.id).execute();
    return presentReleaseLink(ctxOf(request), project, release.tag, link);
  });

  // ---- a group's releases -------------------------------------------------------------------------

  app.get('/api/v4/groups/:id/releases', route({ matrix: 'read',
    access: { group: 'read_group' },
    paginated: true,
    schema: { params: IdParams, querystring: Type.Object({ sort: Str, simple: Bool }), response: { 200: Type.Array(ReleaseSchema) } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    // The projects of the group and its subgroups that have releases and that the caller may see;
    // the release feature's own access level is checked per project below.
    const visible = await sql<{ id: number }>`
      select p.id from projects p join namespaces pn on pn.id = p.namespace_id
       where pn.traversal_ids @> array[${group.id}::int] and not p.pending_delete and ${projectVisibleTo(user)}
         and exists (select 1 from releases r where r.project_id = p.id)`.execute(cairn.db);
    const projects = await findProjectRowsByIds(cairn.db, visible.rows.map((r) => Number(r.id)), user?.id);
    const accessOf = (p: ProjectRow & { callerAccessLevel?: number | null }) => ({ user, project: p, accessLevel: effectiveLevel(user, p.callerAccessLevel ?? 0) }) as ProjectAccess;
    const readable = [...projects.values()].filter((p) => can(user, 'read_release', accessOf(p)));
    const rows = await page(request, reply, readable.map((p) => p.id), { order_by: 'released_at', sort: request.query.sort });
    const viewers = new Map(readable.map((p) => [p.id, viewerOf(accessOf(p))]));
    const extras = await loadReleaseExtras(cairn, rows, (id) => (viewers.get(id)?.downloadCode ? projects.get(id)! : null));
    return rows.map((r) => presentRelease(ctxOf(request), projects.get(r.project_id)!, r, extras, viewers.get(r.project_id)!));
  });
}
