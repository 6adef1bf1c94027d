import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ApiError, notFound, validationFailed } from '../../plugins/errors.js';
import {
  deleteApplication,
  findInstanceApplication,
  insertApplication,
  listInstanceApplications,
  renewApplicationSecret,
  validateApplication,
} from '../../oauth/applications.js';
import { presentApplication, presentApplicationWithSecret } from '../../presenters/applications.js';
import { ApplicationSchema, ApplicationWithSecretSchema } from '../../presenters/schemas/applications.js';
import { NoContent, route } from '../route.js';
import { ApplicationIdParams, CreateApplicationBody } from './schemas.js';

/** Instance-wide OAuth applications (GitLab's Applications API); administrators only. */
export default async function applicationRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const admin = { admin: true } as const;

  app.post(
    '/api/v4/applications',
    route({ matrix: 'admin',  access: admin, schema: { body: CreateApplicationBody, response: { 201: ApplicationWithSecretSchema } } }),
    async (request, reply) => {
      const body = request.body;
      if (body.scopes.trim() === '') throw new ApiError(400, { error: 'scopes is empty' });
      const checked = validateApplication({ name: body.name, redirectUri: body.redirect_uri, scopes: body.scopes, confidential: body.confidential, ownerId: null });
      if ('errors' in checked) throw validationFailed(checked.errors);
      const { app: created, secret } = await insertApplication(db(), checked.value, null);
      return reply.code(201).send(presentApplicationWithSecret(created, secret));
    },
  );

  app.get('/api/v4/applications', route({ matrix: 'admin',  access: admin, schema: { response: { 200: Type.Array(ApplicationSchema) } } }), async () => {
    return (await listInstanceApplications(db())).map(presentApplication);
  });

  app.delete('/api/v4/applications/:id', route({ matrix: 'admin',  access: admin, schema: { params: ApplicationIdParams, response: { 204: NoContent } } }), async (request, reply) => {
    const found = await findInstanceApplication(db(), request.params.id);
    if (!found) throw notFound('Application');
    await deleteApplication(db(), found.id);
    return reply.code(204).send();
  });

  app.post(
    '/api/v4/applications/:id/renew-secret',
    route({ matrix: 'admin',  access: admin, schema: { params: ApplicationIdParams, response: { 201: ApplicationWithSecretSchema } } }),
    async (request, reply) => {
      const found = await findInstanceApplication(db(), request.params.id);
      if (!found) throw notFound('Application');
      const renewed = await renewApplicationSecret(db(), found.id);
      if (!renewed) throw notFound('Application');
      return reply.code(201).send(presentApplicationWithSecret(renewed.app, renewed.secret));
    },
  );
}
