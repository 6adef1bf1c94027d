import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Epic } from '../../db/schema/work_items.js';
import { findEpic, listEpics, loadEpicExtras } from '../../finders/epics.js';
import { can } from '../../policies/abilities.js';
import type { GroupAccess } from '../../policies/groups.js';
import { notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentEpic } from '../../presenters/epics.js';
import { EpicSchema } from '../../presenters/schemas/epics.js';
import type { PresentContext } from '../../presenters/users.js';
import { createEpic, deleteEpic, epicDates, updateEpic, type EpicParams } from '../../services/epics.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { labelListParam } from '../list_filters.js';
import { groupOf, NoContent, route } from '../route.js';

/**
 * Group epics (GitLab's Epics API, premium), minimal: list, get, create, update, delete.
 * Discussions, notes and resource label events of epics come from the noteable registration
 * (src/noteables/epic.ts), which names an epic by its id as GitLab's discussions API does.
 */

const EpicParamsSchema = Type.Object({ id: Type.String(), epic_iid: RowId });
const Labels = Type.Union([Type.String(), Type.Array(Type.String())]);
const DateInput = Type.Union([Type.String(), Type.Null()]);
const WriteProps = {
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  labels: Type.Optional(Labels),
  confidential: Type.Optional(Type.Boolean()),
  color: Type.Optional(Type.String()),
  start_date_is_fixed: Type.Optional(Type.Boolean()),
  start_date_fixed: Type.Optional(DateInput),
  due_date_is_fixed: Type.Optional(Type.Boolean()),
  due_date_fixed: Type.Optional(DateInput),
  // Deprecated names of the fixed dates.
  start_date: Type.Optional(DateInput),
  end_date: Type.Optional(DateInput),
};
const CreateBody = Type.Object({ ...WriteProps, title: Type.String(), created_at: Type.Optional(Type.String()) });
const UpdateBody = Type.Object({
  ...WriteProps,
  title: Type.Optional(Type.String()),
  add_labels: Type.Optional(Labels),
  remove_labels: Type.Optional(Labels),
  state_event: Type.Optional(Type.Union([Type.Literal('close'), Type.Literal('reopen')])),
});
const ListQuery = Type.Object({
  author_id: Type.Optional(RowId),
  labels: Type.Optional(Type.String()),
  with_labels_details: Type.Optional(Type.Boolean()),
  order_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('title')])),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  search: Type.Optional(Type.String()),
  state: Type.Optional(Type.Union([Type.Literal('opened'), Type.Literal('closed'), Type.Literal('all')])),
  confidential: Type.Optional(Type.Boolean()),
  created_after: Type.Optional(Type.String()),
  created_before: Type.Optional(Type.String()),
  updated_after: Type.Optional(Type.String()),
  updated_before: Type.Optional(Type.String()),
});

function dateFilter(value: string | undefined, name: string): Date | undefined {
  return timestampParam(name, value);
}

function writeParams(body: Record<string, any>): EpicParams {
  const { startDate, dueDate } = epicDates(body);
  const labelChange = body.labels !== undefined || body.add_labels !== undefined || body.remove_labels !== undefined
    ? { labels: body.labels, add_labels: body.add_labels, remove_labels: body.remove_labels }
    : undefined;
  return {
    title: body.title,
    description: body.description,
    confidential: body.confidential,
    startDate,
    dueDate,
    state_event: body.state_event,
    labelChange,
  };
}

const mayReadConfidential = (access: GroupAccess) => can(access.user, 'read_confidential_epic', { group: access.group, accessLevel: access.accessLevel });

export default async function epicRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const base = '/api/v4/groups/:id/epics';
  const ctxOf = (request: FastifyRequest): PresentContext => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });

  const present = async (request: FastifyRequest, epics: Epic[], labelDetails?: boolean) => {
    const extras = await loadEpicExtras(cairn.db, epics);
    return epics.map((e) => presentEpic(ctxOf(request), e, extras.get(e.id)!, { labelDetails }));
  };

  /** The epic `:epic_iid` of the guarded group, as the caller may see it (confidential: reporters and up), or 404. */
  const loadEpic = async (request: FastifyRequest) => {
    const access = groupOf(request);
    const epic = await findEpic(cairn.db, access.group.id, (request.params as { epic_iid: number }).epic_iid);
    if (!epic || (epic.confidential && !mayReadConfidential(access))) throw notFound();
    return { access, epic };
  };

  app.get(base, route({ matrix: 'read',
    access: { group: 'read_epic' },
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(EpicSchema) } },
  }), async (request, reply) => {
    const access = groupOf(request);
    const q = request.query;
    const page = pageParams(request);
    const { rows, total } = await listEpics(cairn.db, access.group.id, {
      includeConfidential: mayReadConfidential(access),
      state: q.state,
      authorId: q.author_id,
      labels: labelListParam(q.labels, 'labels'),
      search: q.search,
      confidential: q.confidential,
      createdAfter: dateFilter(q.created_after, 'created_after'),
      createdBefore: dateFilter(q.created_before, 'created_before'),
      updatedAfter: dateFilter(q.updated_after, 'updated_after'),
      updatedBefore: dateFilter(q.updated_before, 'updated_before'),
      orderBy: q.order_by,
      sort: q.sort,
    }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return present(request, rows, q.with_labels_details);
  });

  app.get(`${base}/:epic_iid`, route({ matrix: 'read',
    access: { group: 'read_epic' },
    schema: { params: EpicParamsSchema, response: { 200: EpicSchema } },
  }), async (request) => {
    const { epic } = await loadEpic(request);
    return (await present(request, [epic]))[0];
  });

  app.post(base, route({ matrix: 'reporter',
    access: { group: 'create_epic', signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: EpicSchema } },
  }), async (request, reply) => {
    const access = groupOf(request);
    // Checked as GitLab's DateTime parameter is, though Cairn keeps the time of creation.
    timestampParam('created_at', request.body.created_at);
    const epic = await createEpic(cairn, access.group.id, access.user!, writeParams(request.body));
    return reply.code(201).send((await present(request, [epic]))[0]);
  });

  app.put(`${base}/:epic_iid`, route({ matrix: 'reporter',
    access: { group: 'admin_epic', signedIn: true },
    schema: { params: EpicParamsSchema, body: UpdateBody, response: { 200: EpicSchema } },
  }), async (request) => {
    const { access, epic } = await loadEpic(request);
    const updated = await updateEpic(cairn, epic, access.user!, writeParams(request.body));
    return (await present(request, [updated]))[0];
  });

  app.delete(`${base}/:epic_iid`, route({ matrix: 'owner',
    access: { group: 'destroy_epic', signedIn: true },
    schema: { params: EpicParamsSchema, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { epic } = await loadEpic(request);
    await deleteEpic(cairn, epic);
    return reply.code(204).send();
  });
}
