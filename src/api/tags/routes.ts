import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { missingParam } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { paginateArray, PaginationQuery } from '../../plugins/pagination.js';
import { assertRepositoryWritable } from '../../policies/code.js';
import { authorizeProject } from '../../policies/projects.js';
import { presentTag } from '../../presenters/tags.js';
import { linkContext } from '../../services/repository.js';
import { createTag, deleteTag, findTag, listTags } from '../../services/tags.js';
import { IdParams } from '../params.js';

const TagParams = Type.Object({ id: Type.String(), tag_name: Type.String() });

export default async function tagRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  app.get(
    '/api/v4/projects/:id/repository/tags',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          search: Type.Optional(Type.String()),
          order_by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('updated'), Type.Literal('version')])),
          sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
          ...PaginationQuery,
        }),
      },
    },
    async (request, reply) => {
      const { project } = await authorizeProject(request, request.params.id, 'download_code');
      const q = request.query;
      const tags = await listTags(cairn, project, { search: q.search, orderBy: q.order_by, sort: q.sort });
      const ctx = linkContext(cairn, project);
      return paginateArray(request, reply, tags).map((t) => presentTag(t, ctx));
    },
  );

  app.get('/api/v4/projects/:id/repository/tags/:tag_name', { schema: { params: TagParams } }, async (request) => {
    const { project } = await authorizeProject(request, request.params.id, 'download_code');
    return presentTag(await findTag(cairn, project, request.params.tag_name), linkContext(cairn, project));
  });

  app.post(
    '/api/v4/projects/:id/repository/tags',
    {
      config: { auth: 'required' },
      schema: { params: IdParams },
    },
    async (request, reply) => {
      const body = allParams(request) as { tag_name?: string; ref?: string; message?: string };
      if (!body.tag_name) throw missingParam('tag_name');
      if (!body.ref) throw missingParam('ref');
      const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'push_code');
      assertRepositoryWritable(project);
      const tag = await createTag(cairn, project, { user, accessLevel }, { name: String(body.tag_name), ref: String(body.ref), message: body.message === undefined ? undefined : String(body.message) });
      return reply.code(201).send(presentTag(tag, linkContext(cairn, project)));
    },
  );

  app.delete('/api/v4/projects/:id/repository/tags/:tag_name', { config: { auth: 'required' }, schema: { params: TagParams } }, async (request, reply) => {
    const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'push_code');
      assertRepositoryWritable(project);
    await deleteTag(cairn, project, { user, accessLevel }, request.params.tag_name);
    return reply.code(204).send();
  });
}
