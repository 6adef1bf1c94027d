import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { resetRegistrationToken } from '../../ci/runners.js';
import { Nullable, Timestamp, strict } from '../../presenters/schemas/common.js';
import { IdParams } from '../params.js';
import { groupOf, projectOf, route } from '../route.js';

/** GitLab's answer to a registration token reset. */
const ResetTokenSchema = Type.Object({ token: Type.String(), token_expires_at: Nullable(Timestamp) }, strict);

/**
 * Runner registration tokens of projects and groups (the token shown as runners_token). The
 * runner-side protocol is in ../runners_protocol.
 */
export default async function runnerRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  // Maintainers of the project (GitLab's update_runners_registration_token).
  app.post('/api/v4/projects/:id/runners/reset_registration_token', route({
    access: { project: 'admin_project', signedIn: true },
    schema: { params: IdParams, response: { 201: ResetTokenSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const token = await resetRegistrationToken(cairn, { type: 'project_type', projectId: project.id });
    return reply.code(201).send({ token, token_expires_at: null });
  });

  // Owners of the group.
  app.post('/api/v4/groups/:id/runners/reset_registration_token', route({
    access: { group: 'admin_group', signedIn: true },
    schema: { params: IdParams, response: { 201: ResetTokenSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const token = await resetRegistrationToken(cairn, { type: 'group_type', namespaceId: group.id });
    return reply.code(201).send({ token, token_expires_at: null });
  });
}
