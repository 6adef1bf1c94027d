import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { missingParam } from '../../plugins/errors.js';
import { paginateArray } from '../../plugins/pagination.js';
import { presentTag } from '../../presenters/tags.js';
import { TagSchema } from '../../presenters/schemas/branches.js';
import { linkContext } from '../../services/repository.js';
import { createTag, deleteTag, findTag, listTags } from '../../services/tags.js';
import { can } from '../../policies/abilities.js';
import type { ProjectAccess } from '../../policies/projects.js';
import type { TagRelease } from '../../presenters/tags.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

const TagParams = Type.Object({ id: Type.String(), tag_name: Type.String() });

const ListQuery = Type.Object({
  search: Type.Optional(Type.String()),
  order_by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('updated'), Type.Literal('version')])),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});

const CreateBody = Type.Object({ tag_name: Type.String(), ref: Type.String(), message: Type.Optional(Type.String()) });

export default async function tagRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  /** The releases of these tags, by tag name, for a caller who may read releases (one statement). */
  async function releasesOf(access: ProjectAccess, names: string[]): Promise<Map<string, TagRelease>> {
    if (!names.length || !can(access.user, 'read_release', access)) return new Map();
    const rows = await cairn.db.selectFrom('releases').select(['tag', 'description']).where('project_id', '=', access.project.id).where('tag', 'in', names).execute();
    return new Map(rows.map((r) => [r.tag, { tag_name: r.tag, description: r.description }]));
  }
  const read = { project: 'download_code' } as const;

  app.get('/api/v4/projects/:id/repository/tags', route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(TagSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    const tags = await listTags(cairn, project, { search: q.search, orderBy: q.order_by, sort: q.sort });
    const ctx = linkContext(cairn, project);
    const page = paginateArray(request, reply, tags);
    const releases = await releasesOf(projectOf(request), page.map((t) => t.name));
    return page.map((t) => presentTag(t, ctx, releases.get(t.name) ?? null));
  });

  app.get('/api/v4/projects/:id/repository/tags/:tag_name', route({ matrix: 'readCode',
    access: read,
    schema: { params: TagParams, response: { 200: TagSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const tag = await findTag(cairn, project, request.params.tag_name);
    const releases = await releasesOf(projectOf(request), [tag.name]);
    return presentTag(tag, linkContext(cairn, project), releases.get(tag.name) ?? null);
  });

  app.post('/api/v4/projects/:id/repository/tags', route({ matrix: 'developer',
    access: { project: 'create_tag', writable: true, signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: TagSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const body = request.body;
    // The schema answers an absent parameter; an empty one gets the same words, by hand.
    if (!body.tag_name) throw missingParam('tag_name');
    if (!body.ref) throw missingParam('ref');
    const tag = await createTag(cairn, project, { user, accessLevel }, { name: body.tag_name, ref: body.ref, message: body.message });
    return reply.code(201).send(presentTag(tag, linkContext(cairn, project)));
  });

  app.delete('/api/v4/projects/:id/repository/tags/:tag_name', route({ matrix: 'developer',
    access: { project: 'delete_tag', writable: true, signedIn: true },
    schema: { params: TagParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    await deleteTag(cairn, project, { user, accessLevel }, request.params.tag_name);
    return reply.code(204).send();
  });
}
