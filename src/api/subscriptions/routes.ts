import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from 'typebox';
import { NOTEABLES, type ProjectNoteableKind } from '../../noteables/index.js';
import { setSubscription } from '../../services/subscriptions.js';
import { findNoteableFor, noteableGuard } from '../noteables.js';
import { readPreset } from '../permissions.js';
import { NoContent, projectOf, route } from '../route.js';

/**
 * GitLab's subscribe / unsubscribe (POST `<prefix>/subscribe`, `<prefix>/unsubscribe`) for every
 * registered kind that takes `subscriptions` (src/noteables/): one implementation. Signed-in
 * callers who read the thing; a change answers 201 with the kind's single form, no change 304.
 */
function registerSubscriptions(fastify: FastifyInstance, kind: ProjectNoteableKind) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const subscriptions = kind.subscriptions!;
  const Params = Type.Object({ id: Type.String(), ...kind.params } as Record<string, TSchema>);

  for (const [action, subscribed] of [['subscribe', true], ['unsubscribe', false]] as const) {
    app.post(`/api/v4${kind.prefix}/${action}`, route({ matrix: readPreset(kind.abilities.read),
      access: noteableGuard(kind, 'read', true),
      schema: { params: Params, response: { 201: subscriptions.response, 304: NoContent } },
    }), async (request, reply) => {
      const access = projectOf(request);
      const { found } = await findNoteableFor(kind, request);
      const user = access.user!;
      const participants = await subscriptions.participants({ cairn: app.cairn, found });
      const changed = await setSubscription(app.cairn.db, user.id, kind.type, found.id!, access.project.id, subscribed, participants.includes(user.id));
      // Nothing changed: 304 Not Modified, as GitLab answers.
      if (!changed) return reply.code(304).send();
      return reply.code(201).send(await subscriptions.present(request, access, found));
    });
  }
}

export default async function subscriptionRoutes(fastify: FastifyInstance) {
  for (const kind of NOTEABLES) {
    if (kind.subscriptions && kind.parent === 'project') registerSubscriptions(fastify, kind);
  }
}
