import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { missingParam } from '../../plugins/errors.js';
import { paginateArrayWithKeyset, sliceAfterKey } from '../../plugins/pagination.js';
import { presentBranch } from '../../presenters/branches.js';
import { BranchSchema, MergedBranchesAcceptedSchema } from '../../presenters/schemas/branches.js';
import { createBranch, deleteBranch, deleteMergedBranches, findBranch, listBranches } from '../../services/branches.js';
import { linkContext } from '../../services/repository.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

const BranchParams = Type.Object({ id: Type.String(), branch: Type.String() });

const ListQuery = Type.Object({
  search: Type.Optional(Type.String()),
  sort: Type.Optional(Type.Union([Type.Literal('name_asc'), Type.Literal('updated_asc'), Type.Literal('updated_desc')])),
  pagination: Type.Optional(Type.Union([Type.Literal('legacy'), Type.Literal('keyset'), Type.Literal('offset')])),
  page_token: Type.Optional(Type.String()),
});

const CreateBody = Type.Object({ branch: Type.String(), ref: Type.String() });

export default async function branchRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const read = { project: 'download_code' } as const;
  const write = { project: 'push_code', writable: true, signedIn: true } as const;

  app.get('/api/v4/projects/:id/repository/branches', route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(BranchSchema) } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const q = request.query;
    const list = await listBranches(cairn, project, { user, accessLevel }, { search: q.search, sort: q.sort });
    const ctx = linkContext(cairn, project);
    return paginateArrayWithKeyset(request, reply, list, sliceAfterKey((b) => b.name)).map((b) => presentBranch(b, ctx));
  });

  app.get('/api/v4/projects/:id/repository/branches/:branch', route({ matrix: 'readCode',
    access: read,
    schema: { params: BranchParams, response: { 200: BranchSchema } },
  }), async (request) => {
    const { project, user, accessLevel } = projectOf(request);
    return presentBranch(await findBranch(cairn, project, { user, accessLevel }, request.params.branch), linkContext(cairn, project));
  });

  app.post('/api/v4/projects/:id/repository/branches', route({ matrix: 'developer',
    access: write,
    schema: { params: IdParams, body: CreateBody, response: { 201: BranchSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const body = request.body;
    // The schema answers an absent parameter; an empty one gets the same words, by hand.
    if (!body.branch) throw missingParam('branch');
    if (!body.ref) throw missingParam('ref');
    const branch = await createBranch(cairn, project, { user, accessLevel }, body.branch, body.ref);
    return reply.code(201).send(presentBranch(branch, linkContext(cairn, project)));
  });

  app.delete('/api/v4/projects/:id/repository/branches/:branch', route({ matrix: 'developer',
    access: write,
    schema: { params: BranchParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    await deleteBranch(cairn, project, { user, accessLevel }, request.params.branch);
    return reply.code(204).send();
  });

  app.delete('/api/v4/projects/:id/repository/merged_branches', route({ matrix: 'developer',
    access: write,
    schema: { params: IdParams, response: { 202: MergedBranchesAcceptedSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    await deleteMergedBranches(cairn, project, { user, accessLevel });
    return reply.code(202).send({ message: '202 Accepted' });
  });
}
