import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findDeployToken, findDeployTokens, type DeployTokenOwner } from '../../finders/deploy_tokens.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentDeployToken, presentDeployTokenWithToken } from '../../presenters/deploy_tokens.js';
import { DeployTokenSchema, DeployTokenWithTokenSchema } from '../../presenters/schemas/deploy_tokens.js';
import { createDeployToken, deleteDeployToken, type DeployTokenOwnerRef } from '../../services/deploy_tokens.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';

const ListQuery = Type.Object({ active: Type.Optional(Type.Boolean()) });
const TokenParams = Type.Object({ id: Type.String(), token_id: RowId });
const CreateBody = Type.Object({
  name: Type.String(),
  // An array, or GitLab's comma-separated string.
  scopes: Type.Union([Type.Array(Type.String()), Type.String()]),
  expires_at: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  username: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});

/**
 * Deploy tokens (GitLab's API::DeployTokens): the instance's list for administrators, and each
 * project's (maintainers) and group's (maintainers and owners) list, one, create and delete.
 * A token is shown once, in the answer of its creation; git over HTTP takes it as a password
 * (api/git_http/auth.ts).
 */
export default async function deployTokenRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/api/v4/deploy_tokens', route({ matrix: 'admin',
    access: { admin: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(DeployTokenSchema) } },
  }), async (request, reply) => list(request, reply, { all: true }, request.query.active));

  const owners = [
    ['/api/v4/projects/:id/deploy_tokens', { project: 'admin_project', signedIn: true } as const, (r: FastifyRequest): DeployTokenOwnerRef => ({ projectId: projectOf(r).project.id })],
    ['/api/v4/groups/:id/deploy_tokens', { group: 'admin_deploy_token', signedIn: true } as const, (r: FastifyRequest): DeployTokenOwnerRef => ({ groupId: groupOf(r).group.id })],
  ] as const;
  for (const [base, access, ownerOf] of owners) {
    app.get(base, route({ matrix: 'maintainer',
      access,
      paginated: true,
      schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(DeployTokenSchema) } },
    }), async (request, reply) => list(request, reply, ownerOf(request), request.query.active));

    app.post(base, route({ matrix: 'maintainer',
      access,
      schema: { params: IdParams, body: CreateBody, response: { 201: DeployTokenWithTokenSchema } },
    }), async (request, reply) => {
      const body = request.body;
      const expiresAt = body.expires_at === null ? null : (timestampParam('expires_at', body.expires_at) ?? null);
      const creator = request.actor?.user.id ?? null;
      const { row, token } = await createDeployToken(app.cairn, ownerOf(request), creator, { name: body.name, scopes: body.scopes, expiresAt, username: body.username });
      return reply.code(201).send(presentDeployTokenWithToken(row, token));
    });

    app.get(`${base}/:token_id`, route({ matrix: 'maintainer',
      access,
      schema: { params: TokenParams, response: { 200: DeployTokenSchema } },
    }), async (request) => {
      const row = await findDeployToken(app.cairn.db, ownerOf(request), request.params.token_id);
      if (!row) throw notFound();
      return presentDeployToken(row);
    });

    app.delete(`${base}/:token_id`, route({ matrix: { is: 'maintainer', fresh: ['token_id'] },
      access,
      schema: { params: TokenParams, response: { 204: NoContent } },
    }), async (request, reply) => {
      if (!(await deleteDeployToken(app.cairn.db, ownerOf(request), request.params.token_id))) throw notFound();
      return reply.code(204).send();
    });
  }

  async function list(request: FastifyRequest, reply: FastifyReply, owner: DeployTokenOwner, active: boolean | undefined) {
    const page = pageParams(request);
    const { rows, total } = await findDeployTokens(app.cairn.db, owner, { active: active === true }, page);
    setPaginationHeaders(request, reply, page, total);
    const now = new Date();
    return rows.map((r) => presentDeployToken(r, now));
  }
}
