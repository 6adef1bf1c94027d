import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Namespace } from '../../db/schema/core.js';
import type { Label } from '../../db/schema/work_items.js';
import {
  findGroupLabel,
  findProjectLabel,
  labelCounts,
  listGroupLabels,
  listProjectLabels,
  subscribedLabelIds,
  type GroupLabelScope,
  type LabelRow,
} from '../../finders/labels.js';
import { authorizeGroup } from '../../finders/authorize.js';
import { apiError, invalidParam, missingParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentLabel, presentProjectLabel, type LabelCounts } from '../../presenters/labels.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { GroupLabelSchema, ProjectLabelSchema } from '../../presenters/schemas/labels.js';
import {
  createLabel,
  deleteLabel,
  promoteLabel,
  setLabelPriority,
  subscribeToLabel,
  unsubscribeFromLabel,
  updateLabel,
  type UpdateLabelInput,
} from '../../services/labels.js';
import { IdParams } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';

const LabelParams = Type.Object({ id: Type.String(), label_id: Type.String() });

/**
 * `priority` is read by hand: an integer, or null / '' to remove it (Grape's allow_blank). A
 * schema type would let ajv's coercion turn null into 0.
 */
const Priority = Type.Unknown({ description: 'integer; null or empty removes the priority' });

const ProjectListQuery = Type.Object({
  with_counts: Type.Optional(Type.Boolean()),
  include_ancestor_groups: Type.Optional(Type.Boolean()),
  search: Type.Optional(Type.String()),
});
const GroupScopeQuery = {
  include_ancestor_groups: Type.Optional(Type.Boolean()),
  include_descendant_groups: Type.Optional(Type.Boolean()),
  only_group_labels: Type.Optional(Type.Boolean()),
};
const GroupListQuery = Type.Object({ with_counts: Type.Optional(Type.Boolean()), search: Type.Optional(Type.String()), ...GroupScopeQuery });

const CreateBody = Type.Object({
  name: Type.String(),
  color: Type.String(),
  description: Type.Optional(Type.String()),
});
const ProjectCreateBody = Type.Object({ ...CreateBody.properties, priority: Type.Optional(Priority) });
const UpdateFields = {
  new_name: Type.Optional(Type.String()),
  color: Type.Optional(Type.String()),
  description: Type.Optional(Type.String()),
};
const GroupUpdateBody = Type.Object(UpdateFields);
const ProjectUpdateBody = Type.Object({ ...UpdateFields, priority: Type.Optional(Priority) });
/** The deprecated forms without `:label_id` in the path name the label in the body. */
const LegacyTarget = { label_id: Type.Optional(Type.Integer()), name: Type.Optional(Type.String()) };

const NO_COUNTS: LabelCounts = { open_issues_count: 0, closed_issues_count: 0, open_merge_requests_count: 0 };

/** A priority parameter: undefined when absent, null to remove, else a whole number. */
function priorityParam(body: Record<string, unknown>): number | null | undefined {
  if (!('priority' in body)) return undefined;
  const v = body.priority;
  if (v === null || v === '') return null;
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^\s*-?\d+\s*$/.test(v) && Math.abs(Number(v)) <= 2147483647) return Number(v);
  throw invalidParam('priority');
}

/** Grape's at_least_one_of. */
function atLeastOneOf(body: Record<string, unknown>, names: string[]) {
  if (!names.some((n) => n in body)) throw invalidParam(names.join(', '), 'are missing, at least one parameter must be provided');
}

/** Grape's exactly_one_of for the deprecated forms: the label named by `label_id` or `name`. */
function legacyLabelKey(body: { label_id?: number; name?: string }): string {
  if (body.label_id !== undefined && body.name !== undefined) throw invalidParam('label_id, name', 'are mutually exclusive');
  if (body.label_id === undefined && body.name === undefined) throw invalidParam('label_id, name', 'are missing, exactly one parameter must be provided');
  return String(body.label_id ?? body.name);
}

function ownFields(body: UpdateLabelInput): UpdateLabelInput {
  const out: UpdateLabelInput = {};
  if (body.new_name !== undefined) out.new_name = body.new_name;
  if (body.color !== undefined) out.color = body.color;
  if (body.description !== undefined) out.description = body.description;
  return out;
}

const SINGLE_GROUP_SCOPE: GroupLabelScope = { includeAncestorGroups: false, includeDescendantGroups: false, onlyGroupLabels: true };

export default async function labelRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const db = () => cairn.db;

  /** The project forms of a page of labels: counts (when asked) and subscriptions in one statement each. */
  async function presentProjectLabels(request: FastifyRequest, project: ProjectRow, rows: LabelRow[], withCounts = false) {
    const user = request.actor?.user ?? null;
    const ids = rows.map((r) => r.id);
    const [counts, subscribed] = await Promise.all([withCounts ? labelCounts(db(), user, ids) : null, subscribedLabelIds(db(), user?.id, ids, project.id)]);
    return rows.map((r) => presentProjectLabel(r, r.priority, { counts: counts ? (counts.get(r.id) ?? NO_COUNTS) : undefined, subscribed: subscribed.has(r.id) }));
  }

  async function presentGroupLabels(request: FastifyRequest, rows: Label[], withCounts = false) {
    const user = request.actor?.user ?? null;
    const ids = rows.map((r) => r.id);
    const [counts, subscribed] = await Promise.all([withCounts ? labelCounts(db(), user, ids) : null, subscribedLabelIds(db(), user?.id, ids, null)]);
    return rows.map((r) => presentLabel(r, { counts: counts ? (counts.get(r.id) ?? NO_COUNTS) : undefined, subscribed: subscribed.has(r.id) }));
  }

  async function projectLabel(project: ProjectRow, idOrTitle: string, includeAncestorGroups = true): Promise<LabelRow> {
    const label = await findProjectLabel(db(), project, idOrTitle, includeAncestorGroups);
    if (!label) throw notFound('Label');
    return label;
  }

  async function groupLabel(request: FastifyRequest, group: Namespace, idOrTitle: string, scope = SINGLE_GROUP_SCOPE): Promise<Label> {
    const label = await findGroupLabel(db(), request.actor?.user ?? null, group, idOrTitle, scope);
    if (!label) throw notFound('Label');
    return label;
  }

  /** One project label as the project sees it now (its priority there, the caller's subscription). */
  async function renderProjectLabel(request: FastifyRequest, project: ProjectRow, labelId: number) {
    return (await presentProjectLabels(request, project, [await projectLabel(project, String(labelId))]))[0];
  }

  /**
   * PUT of a project label: its own fields, then its priority in the project. A group label seen
   * from the project may be prioritized by the project's label managers, but only its group's
   * label managers change it (GitLab authorizes update_label on the label itself).
   */
  async function updateProjectLabel(request: FastifyRequest, idOrTitle: string, body: Record<string, unknown>) {
    const { project } = projectOf(request);
    const priority = priorityParam(body);
    const label = await projectLabel(project, idOrTitle, false);
    const fields = ownFields(body as UpdateLabelInput);
    if (Object.keys(fields).length) {
      if (label.group_id !== null) await authorizeGroup(request, label.group_id, 'admin_label');
      await updateLabel(db(), label, fields);
    }
    if (priority !== undefined) await setLabelPriority(db(), project.id, label.id, priority);
    return renderProjectLabel(request, project, label.id);
  }

  async function deleteProjectLabel(request: FastifyRequest, reply: FastifyReply, idOrTitle: string) {
    const { project } = projectOf(request);
    const label = await projectLabel(project, idOrTitle, false);
    if (label.group_id !== null) await authorizeGroup(request, label.group_id, 'admin_label');
    await deleteLabel(db(), label);
    return reply.code(204).send();
  }

  async function updateGroupLabel(request: FastifyRequest, idOrTitle: string, body: UpdateLabelInput) {
    const { group } = groupOf(request);
    const label = await groupLabel(request, group, idOrTitle);
    const updated = await updateLabel(db(), label, ownFields(body));
    return (await presentGroupLabels(request, [updated]))[0];
  }

  const readProject = { project: 'read_label', signedIn: true } as const;
  const manageProject = { project: 'admin_label', signedIn: true } as const;
  const readGroup = { group: 'read_label', signedIn: true } as const;
  const manageGroup = { group: 'admin_label', signedIn: true } as const;

  // ------------------------------------------------------------------------------------------
  // Project labels

  app.get('/api/v4/projects/:id/labels', route({ matrix: 'read',
    access: readProject,
    paginated: true,
    schema: { params: IdParams, querystring: ProjectListQuery, response: { 200: Type.Array(ProjectLabelSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const q = request.query;
    const { rows, total } = await listProjectLabels(db(), project, { includeAncestorGroups: q.include_ancestor_groups ?? true, search: q.search }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return presentProjectLabels(request, project, rows, q.with_counts ?? false);
  });

  app.get('/api/v4/projects/:id/labels/:label_id', route({ matrix: 'read',
    access: readProject,
    schema: { params: LabelParams, querystring: Type.Object({ include_ancestor_groups: Type.Optional(Type.Boolean()) }), response: { 200: ProjectLabelSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const label = await projectLabel(project, request.params.label_id, request.query.include_ancestor_groups ?? true);
    return (await presentProjectLabels(request, project, [label]))[0];
  });

  app.post('/api/v4/projects/:id/labels', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: IdParams, body: ProjectCreateBody, response: { 201: ProjectLabelSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const body = request.body;
    const label = await createLabel(db(), { project }, { name: body.name, color: body.color, description: body.description, priority: priorityParam(body) });
    return reply.code(201).send(await renderProjectLabel(request, project, label.id));
  });

  app.put('/api/v4/projects/:id/labels/:label_id', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: LabelParams, body: ProjectUpdateBody, response: { 200: ProjectLabelSchema } },
  }), async (request) => {
    atLeastOneOf(request.body, ['new_name', 'color', 'description', 'priority']);
    return updateProjectLabel(request, request.params.label_id, request.body);
  });

  /** Deprecated since GitLab 12.4 (the label in the body); kept for older clients. */
  app.put('/api/v4/projects/:id/labels', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: IdParams, body: Type.Object({ ...ProjectUpdateBody.properties, ...LegacyTarget }), response: { 200: ProjectLabelSchema } },
  }), async (request) => {
    const key = legacyLabelKey(request.body);
    atLeastOneOf(request.body, ['new_name', 'color', 'description', 'priority']);
    return updateProjectLabel(request, key, request.body);
  });

  app.delete('/api/v4/projects/:id/labels/:label_id', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: LabelParams, response: { 204: NoContent } },
  }), async (request, reply) => deleteProjectLabel(request, reply, request.params.label_id));

  /** Deprecated since GitLab 12.4 (the label in the query or body); kept for older clients. */
  app.delete('/api/v4/projects/:id/labels', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: IdParams, querystring: Type.Object(LegacyTarget), response: { 204: NoContent } },
  }), async (request, reply) => deleteProjectLabel(request, reply, legacyLabelKey(request.query)));

  app.put('/api/v4/projects/:id/labels/:label_id/promote', route({ matrix: 'reporter',
    // The project is read here; the group's label managers promote (checked below, as GitLab does).
    access: readProject,
    schema: { params: LabelParams, response: { 200: GroupLabelSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    // A project outside any group has no group to promote its labels to.
    if (project.namespace.type !== 'Group') throw apiError(400, 'Failed to promote project label to group label');
    await authorizeGroup(request, project.namespace.id, 'admin_label');
    const label = await projectLabel(project, request.params.label_id, false);
    const promoted = await promoteLabel(db(), label, project);
    return (await presentGroupLabels(request, [promoted]))[0];
  });

  app.post('/api/v4/projects/:id/labels/:label_id/subscribe', route({ matrix: 'read',
    access: readProject,
    schema: { params: LabelParams, response: { 201: ProjectLabelSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const label = await projectLabel(project, request.params.label_id);
    if (!(await subscribeToLabel(db(), label.id, user!.id, project.id))) return reply.code(304).send();
    return reply.code(201).send((await presentProjectLabels(request, project, [label]))[0]);
  });

  app.post('/api/v4/projects/:id/labels/:label_id/unsubscribe', route({ matrix: 'read',
    access: readProject,
    schema: { params: LabelParams, response: { 201: ProjectLabelSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const label = await projectLabel(project, request.params.label_id);
    if (!(await unsubscribeFromLabel(db(), label.id, user!.id, project.id))) return reply.code(304).send();
    return reply.code(201).send((await presentProjectLabels(request, project, [label]))[0]);
  });

  // ------------------------------------------------------------------------------------------
  // Group labels

  const groupScope = (q: { include_ancestor_groups?: boolean; include_descendant_groups?: boolean; only_group_labels?: boolean }): GroupLabelScope => ({
    includeAncestorGroups: q.include_ancestor_groups ?? true,
    includeDescendantGroups: q.include_descendant_groups ?? false,
    onlyGroupLabels: q.only_group_labels ?? true,
  });

  app.get('/api/v4/groups/:id/labels', route({ matrix: 'read',
    access: readGroup,
    paginated: true,
    schema: { params: IdParams, querystring: GroupListQuery, response: { 200: Type.Array(GroupLabelSchema) } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    const page = pageParams(request);
    const q = request.query;
    const { rows, total } = await listGroupLabels(db(), user, group, { ...groupScope(q), search: q.search }, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return presentGroupLabels(request, rows, q.with_counts ?? false);
  });

  app.get('/api/v4/groups/:id/labels/:label_id', route({ matrix: 'read',
    access: readGroup,
    schema: { params: LabelParams, querystring: Type.Object(GroupScopeQuery), response: { 200: GroupLabelSchema } },
  }), async (request) => {
    const { group } = groupOf(request);
    const label = await groupLabel(request, group, request.params.label_id, groupScope(request.query));
    return (await presentGroupLabels(request, [label]))[0];
  });

  app.post('/api/v4/groups/:id/labels', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: IdParams, body: CreateBody, response: { 201: GroupLabelSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const body = request.body;
    const label = await createLabel(db(), { group }, { name: body.name, color: body.color, description: body.description });
    return reply.code(201).send((await presentGroupLabels(request, [label]))[0]);
  });

  app.put('/api/v4/groups/:id/labels/:label_id', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: LabelParams, body: GroupUpdateBody, response: { 200: GroupLabelSchema } },
  }), async (request) => {
    atLeastOneOf(request.body, ['new_name', 'color', 'description']);
    return updateGroupLabel(request, request.params.label_id, request.body);
  });

  /** Deprecated since GitLab 12.4 (the label in the body); kept for older clients. */
  app.put('/api/v4/groups/:id/labels', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: IdParams, body: Type.Object({ ...UpdateFields, ...LegacyTarget }), response: { 200: GroupLabelSchema } },
  }), async (request) => {
    const key = legacyLabelKey(request.body);
    atLeastOneOf(request.body, ['new_name', 'color', 'description']);
    return updateGroupLabel(request, key, request.body);
  });

  app.delete('/api/v4/groups/:id/labels/:label_id', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: LabelParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    await deleteLabel(db(), await groupLabel(request, group, request.params.label_id));
    return reply.code(204).send();
  });

  /** Deprecated since GitLab 12.4 (`name` in the query or body); kept for older clients. */
  app.delete('/api/v4/groups/:id/labels', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: IdParams, querystring: Type.Object({ name: Type.Optional(Type.String()) }), response: { 204: NoContent } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    if (request.query.name === undefined) throw missingParam('name');
    await deleteLabel(db(), await groupLabel(request, group, request.query.name));
    return reply.code(204).send();
  });

  app.post('/api/v4/groups/:id/labels/:label_id/subscribe', route({ matrix: 'read',
    access: readGroup,
    schema: { params: LabelParams, response: { 201: GroupLabelSchema } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    const label = await groupLabel(request, group, request.params.label_id, groupScope({}));
    if (!(await subscribeToLabel(db(), label.id, user!.id, null))) return reply.code(304).send();
    return reply.code(201).send((await presentGroupLabels(request, [label]))[0]);
  });

  app.post('/api/v4/groups/:id/labels/:label_id/unsubscribe', route({ matrix: 'read',
    access: readGroup,
    schema: { params: LabelParams, response: { 201: GroupLabelSchema } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    const label = await groupLabel(request, group, request.params.label_id, groupScope({}));
    if (!(await unsubscribeFromLabel(db(), label.id, user!.id, null))) return reply.code(304).send();
    return reply.code(201).send((await presentGroupLabels(request, [label]))[0]);
  });
}
