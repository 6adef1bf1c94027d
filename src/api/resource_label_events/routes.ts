import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type TSchema } from 'typebox';
import { labelEventsOf } from '../../finders/labels.js';
import { NOTEABLES, type NoteableKind } from '../../noteables/index.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentResourceLabelEvent } from '../../presenters/labels.js';
import { ResourceLabelEventSchema } from '../../presenters/schemas/labels.js';
import type { PresentContext } from '../../presenters/users.js';
import { findNoteableFor, noteableGuard } from '../noteables.js';
import { readPreset } from '../permissions.js';
import { RowId } from '../params.js';
import { route } from '../route.js';

/**
 * GitLab's Resource label events API (label changes are their own records, not notes) for every
 * registered kind with `labelEvents` (src/noteables/): list and get, under the kind's prefix,
 * for whoever reads the thing.
 */

type LabelEventTarget = Parameters<typeof labelEventsOf>[1];

const ctxOf = (request: FastifyRequest): PresentContext => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

function registerLabelEvents(fastify: FastifyInstance, kind: NoteableKind) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const db = () => app.cairn.db;
  const type = kind.type as LabelEventTarget;
  const base = `/api/v4${kind.prefix}/resource_label_events`;
  const own: Record<string, TSchema> = { id: Type.String(), ...kind.params };
  const read = noteableGuard(kind, 'read');
  const matrix = readPreset(kind.abilities.read);

  app.get(base, route({ matrix,
    access: read,
    paginated: true,
    schema: { params: Type.Object(own), response: { 200: Type.Array(ResourceLabelEventSchema) } },
  }), async (request, reply) => {
    const { found } = await findNoteableFor(kind, request);
    const page = pageParams(request);
    const { rows, total } = await labelEventsOf(db(), type, found.id!, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    const ctx = ctxOf(request);
    return rows.map((r) => presentResourceLabelEvent(ctx, r));
  });

  app.get(`${base}/:resource_label_event_id`, route({ matrix,
    access: read,
    schema: { params: Type.Object({ ...own, resource_label_event_id: RowId }), response: { 200: ResourceLabelEventSchema } },
  }), async (request) => {
    const { found } = await findNoteableFor(kind, request);
    const { rows } = await labelEventsOf(db(), type, found.id!);
    const event = rows.find((r) => r.event.id === (request.params as { resource_label_event_id: number }).resource_label_event_id);
    if (!event) throw notFound();
    return presentResourceLabelEvent(ctxOf(request), event);
  });
}

export default async function resourceLabelEventRoutes(fastify: FastifyInstance) {
  for (const kind of NOTEABLES) if (kind.labelEvents) registerLabelEvents(fastify, kind);
}
