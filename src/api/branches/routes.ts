import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ApiError, missingParam } from '../../plugins/errors.js';
import { allParams } from '../../plugins/params.js';
import { paginateArrayWithKeyset, sliceAfterKey, PaginationQuery } from '../../plugins/pagination.js';
import { AccessLevel } from '../../policies/access.js';
import { assertRepositoryWritable } from '../../policies/code.js';
import { authorizeProject } from '../../policies/projects.js';
import { presentBranch } from '../../presenters/branches.js';
import { createBranch, deleteBranch, deleteMergedBranches, findBranch, listBranches } from '../../services/branches.js';
import { linkContext } from '../../services/repository.js';
import { IdParams } from '../params.js';

const BranchParams = Type.Object({ id: Type.String(), branch: Type.String() });

export default async function branchRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  app.get(
    '/api/v4/projects/:id/repository/branches',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          search: Type.Optional(Type.String()),
          sort: Type.Optional(Type.Union([Type.Literal('name_asc'), Type.Literal('updated_asc'), Type.Literal('updated_desc')])),
          pagination: Type.Optional(Type.Union([Type.Literal('legacy'), Type.Literal('keyset'), Type.Literal('offset')])),
          page_token: Type.Optional(Type.String()),
          ...PaginationQuery,
        }),
      },
    },
    async (request, reply) => {
      const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'download_code');
      const q = request.query;
      const list = await listBranches(cairn, project, { user, accessLevel }, { search: q.search, sort: q.sort });
      const ctx = linkContext(cairn, project);
      return paginateArrayWithKeyset(request, reply, list, sliceAfterKey((b) => b.name)).map((b) => presentBranch(b, ctx));
    },
  );

  app.get('/api/v4/projects/:id/repository/branches/:branch', { schema: { params: BranchParams } }, async (request) => {
    const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'download_code');
    return presentBranch(await findBranch(cairn, project, { user, accessLevel }, request.params.branch), linkContext(cairn, project));
  });

  app.post(
    '/api/v4/projects/:id/repository/branches',
    {
      config: { auth: 'required' },
      schema: { params: IdParams },
    },
    async (request, reply) => {
      const body = allParams(request) as { branch?: string; ref?: string };
      if (!body.branch) throw missingParam('branch');
      if (!body.ref) throw missingParam('ref');
      const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'push_code');
      assertRepositoryWritable(project);
      const branch = await createBranch(cairn, project, { user, accessLevel }, String(body.branch), String(body.ref));
      return reply.code(201).send(presentBranch(branch, linkContext(cairn, project)));
    },
  );

  app.delete('/api/v4/projects/:id/repository/branches/:branch', { config: { auth: 'required' }, schema: { params: BranchParams } }, async (request, reply) => {
    const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'push_code');
      assertRepositoryWritable(project);
    await deleteBranch(cairn, project, { user, accessLevel }, request.params.branch);
    return reply.code(204).send();
  });

  app.delete('/api/v4/projects/:id/repository/merged_branches', { config: { auth: 'required' }, schema: { params: IdParams } }, async (request, reply) => {
    const { project, user, accessLevel } = await authorizeProject(request, request.params.id, 'push_code');
      assertRepositoryWritable(project);
    if (accessLevel < AccessLevel.DEVELOPER) throw new ApiError(403, { message: '403 Forbidden' });
    await deleteMergedBranches(cairn, project, { user, accessLevel });
    return reply.code(202).send({ message: '202 Accepted' });
  });
}
