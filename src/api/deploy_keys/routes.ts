import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { findAllDeployKeys, findProjectDeployKey, findProjectDeployKeys } from '../../finders/keys.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { mayRenameDeployKey } from '../../policies/deploy_keys.js';
import { presentDeployKey, presentDeployKeysProject, presentDeployKeyWithProjects } from '../../presenters/keys.js';
import {
  accessibleDeployKey,
  addDeployKeyToProject,
  insertPublicDeployKey,
  linkDeployKey,
  removeDeployKeyFromProject,
  updateDeployKeysProject,
} from '../../services/keys.js';
import {
  CreateDeployKeyBody,
  CreateProjectDeployKeyBody,
  DeployKeyListQuery,
  ProjectKeyParams,
  UpdateProjectDeployKeyBody,
} from '../keys/schemas.js';
import { timestampParam } from '../params.js';
import { IdParams } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';
import { DeployKeySchema, DeployKeysProjectSchema, DeployKeyWithProjectsSchema } from '../../presenters/schemas/keys.js';

export default async function deployKeyRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const ctx = () => ({ baseUrl: app.cairn.config.externalUrl });
  const admin = { admin: true } as const;
  // Managing a project's deploy keys is GitLab's admin_project (maintainers and up).
  const manage = { project: 'admin_project', signedIn: true } as const;

  app.get('/api/v4/deploy_keys', route({ matrix: 'admin',
    access: admin,
    paginated: true,
    schema: { querystring: DeployKeyListQuery, response: { 200: Type.Array(DeployKeyWithProjectsSchema) } },
  }), async (request, reply) => {
    const page = pageParams(request);
    const { rows, total } = await findAllDeployKeys(db(), request.query.public === true, page);
    setPaginationHeaders(request, reply, page, total);
    return rows.map((r) => presentDeployKeyWithProjects(ctx(), r.key, r.projects));
  });

  app.post('/api/v4/deploy_keys', route({ matrix: 'admin',
    access: admin,
    schema: { body: CreateDeployKeyBody, response: { 201: DeployKeySchema } },
  }), async (request, reply) => {
    const admin = requireUser(request);
    const body = request.body;
    const result = await insertPublicDeployKey(db(), admin.id, {
      title: body.title,
      key: body.key,
      expiresAt: timestampParam('expires_at', body.expires_at ?? undefined) ?? null,
    });
    if (!result.key) throw validationFailed(result.errors);
    return reply.code(201).send(presentDeployKey(ctx(), result.key));
  });

  app.get(
    '/api/v4/projects/:id/deploy_keys',
    route({ matrix: 'maintainer',
      access: manage,
      paginated: true,
      schema: { params: IdParams, querystring: DeployKeyListQuery, response: { 200: Type.Array(DeployKeysProjectSchema) } },
    }),
    async (request, reply) => {
      const { project } = projectOf(request);
      const page = pageParams(request);
      const { rows, total } = await findProjectDeployKeys(db(), project.id, page);
      setPaginationHeaders(request, reply, page, total);
      return rows.map((r) => presentDeployKeysProject(ctx(), r.link, r.key));
    },
  );

  app.get('/api/v4/projects/:id/deploy_keys/:key_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: ProjectKeyParams, response: { 200: DeployKeysProjectSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const found = await findProjectDeployKey(db(), project.id, request.params.key_id);
    if (!found) throw notFound();
    return presentDeployKeysProject(ctx(), found.link, found.key);
  });

  app.post(
    '/api/v4/projects/:id/deploy_keys',
    route({ matrix: 'maintainer',
      access: manage,
      schema: { params: IdParams, body: CreateProjectDeployKeyBody, response: { 201: DeployKeysProjectSchema } },
    }),
    async (request, reply) => {
      const { project, user } = projectOf(request);
      const body = request.body;
      const result = await addDeployKeyToProject(db(), user!, project.id, {
        title: body.title,
        key: body.key,
        canPush: body.can_push === true,
        expiresAt: timestampParam('expires_at', body.expires_at ?? undefined) ?? null,
      });
      if (!result.link) throw validationFailed(result.errors);
      return reply.code(201).send(presentDeployKeysProject(ctx(), result.link, result.key));
    },
  );

  app.put(
    '/api/v4/projects/:id/deploy_keys/:key_id',
    route({ matrix: 'maintainer',
      access: manage,
      schema: { params: ProjectKeyParams, body: UpdateProjectDeployKeyBody, response: { 200: DeployKeysProjectSchema } },
    }),
    async (request) => {
      const { project, user } = projectOf(request);
      const body = request.body;
      if (body.title === undefined && body.can_push === undefined) {
        throw new ApiError(400, { error: 'title, can_push are missing, at least one parameter must be provided' });
      }
      const found = await findProjectDeployKey(db(), project.id, request.params.key_id);
      if (!found) throw notFound();
      // The title is shared by every project using the key: only someone who manages all of them
      // (or an administrator) renames it; otherwise the title is left alone, as GitLab does.
      const mayRename = body.title !== undefined && (await mayRenameDeployKey(db(), user!, found.key));
      const result = await updateDeployKeysProject(db(), found.link, {
        title: mayRename ? body.title : undefined,
        canPush: body.can_push,
      });
      if (!result.link) throw validationFailed(result.errors);
      const refreshed = await findProjectDeployKey(db(), project.id, request.params.key_id);
      return presentDeployKeysProject(ctx(), result.link, refreshed!.key);
    },
  );

  app.post('/api/v4/projects/:id/deploy_keys/:key_id/enable', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: ProjectKeyParams, response: { 201: DeployKeySchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const key = await accessibleDeployKey(db(), user!, { id: request.params.key_id });
    if (!key) throw notFound('Deploy key');
    await linkDeployKey(db(), project.id, key.id, false);
    return reply.code(201).send(presentDeployKey(ctx(), key));
  });

  app.delete('/api/v4/projects/:id/deploy_keys/:key_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: ProjectKeyParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const found = await findProjectDeployKey(db(), project.id, request.params.key_id);
    if (!found) throw notFound('Deploy key');
    await removeDeployKeyFromProject(db(), found.link);
    return reply.code(204).send();
  });
}
