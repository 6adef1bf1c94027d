import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { findAllDeployKeys, findProjectDeployKey, findProjectDeployKeys } from '../../finders/keys.js';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { AccessLevel } from '../../policies/access.js';
import { mayRenameDeployKey } from '../../policies/deploy_keys.js';
import { authorizeProject } from '../../policies/projects.js';
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
import { dateTimeParam } from '../personal_access_tokens/schemas.js';
import { IdParams } from '../params.js';

export default async function deployKeyRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const ctx = () => ({ baseUrl: app.cairn.config.externalUrl });
  const required = { auth: 'required' as const };
  // Managing deploy keys is a maintainer's job (GitLab's admin_project).
  const MAINTAINER = AccessLevel.MAINTAINER;

  app.get('/api/v4/deploy_keys', { config: { admin: true }, schema: { querystring: DeployKeyListQuery } }, async (request, reply) => {
    const page = pageParams(request);
    const { rows, total } = await findAllDeployKeys(db(), request.query.public === true, page);
    setPaginationHeaders(request, reply, page, total);
    return rows.map((r) => presentDeployKeyWithProjects(ctx(), r.key, r.projects));
  });

  app.post('/api/v4/deploy_keys', { config: { admin: true }, schema: { body: CreateDeployKeyBody } }, async (request, reply) => {
    const admin = requireUser(request);
    const body = request.body;
    const result = await insertPublicDeployKey(db(), admin.id, {
      title: body.title,
      key: body.key,
      expiresAt: dateTimeParam('expires_at', body.expires_at ?? undefined) ?? null,
    });
    if (!result.key) throw validationFailed(result.errors);
    return reply.code(201).send(presentDeployKey(ctx(), result.key));
  });

  app.get(
    '/api/v4/projects/:id/deploy_keys',
    { config: required, schema: { params: IdParams, querystring: DeployKeyListQuery } },
    async (request, reply) => {
      const { project } = await authorizeProject(request, request.params.id, 'admin_project');
      const page = pageParams(request);
      const { rows, total } = await findProjectDeployKeys(db(), project.id, page);
      setPaginationHeaders(request, reply, page, total);
      return rows.map((r) => presentDeployKeysProject(ctx(), r.link, r.key));
    },
  );

  app.get('/api/v4/projects/:id/deploy_keys/:key_id', { config: required, schema: { params: ProjectKeyParams } }, async (request) => {
    const { project } = await authorizeProject(request, request.params.id, 'admin_project');
    const found = await findProjectDeployKey(db(), project.id, request.params.key_id);
    if (!found) throw notFound();
    return presentDeployKeysProject(ctx(), found.link, found.key);
  });

  app.post(
    '/api/v4/projects/:id/deploy_keys',
    { config: required, schema: { params: IdParams, body: CreateProjectDeployKeyBody } },
    async (request, reply) => {
      const { project, user } = await authorizeProject(request, request.params.id, 'admin_project');
      const body = request.body;
      const result = await addDeployKeyToProject(db(), user!, project.id, {
        title: body.title,
        key: body.key,
        canPush: body.can_push === true,
        expiresAt: dateTimeParam('expires_at', body.expires_at ?? undefined) ?? null,
      });
      if (!result.link) throw validationFailed(result.errors);
      return reply.code(201).send(presentDeployKeysProject(ctx(), result.link, result.key));
    },
  );

  app.put(
    '/api/v4/projects/:id/deploy_keys/:key_id',
    { config: required, schema: { params: ProjectKeyParams, body: UpdateProjectDeployKeyBody } },
    async (request) => {
      const { project, user } = await authorizeProject(request, request.params.id, 'admin_project');
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

  app.post('/api/v4/projects/:id/deploy_keys/:key_id/enable', { config: required, schema: { params: ProjectKeyParams } }, async (request, reply) => {
    const { project, user } = await authorizeProject(request, request.params.id, 'admin_project');
    const key = await accessibleDeployKey(db(), user!, { id: request.params.key_id });
    if (!key) throw notFound('Deploy key');
    await linkDeployKey(db(), project.id, key.id, false);
    return reply.code(201).send(presentDeployKey(ctx(), key));
  });

  app.delete('/api/v4/projects/:id/deploy_keys/:key_id', { config: required, schema: { params: ProjectKeyParams } }, async (request, reply) => {
    const { project } = await authorizeProject(request, request.params.id, 'admin_project');
    const found = await findProjectDeployKey(db(), project.id, request.params.key_id);
    if (!found) throw notFound('Deploy key');
    await removeDeployKeyFromProject(db(), found.link);
    return reply.code(204).send();
  });
}
