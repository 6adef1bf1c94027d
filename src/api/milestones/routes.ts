import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import {
  findMilestone,
  groupMilestoneScope,
  listMilestones,
  projectMilestoneScope,
  type MilestoneFilters,
  type MilestoneRow,
  type MilestoneScope,
} from '../../finders/milestones.js';
import { invalidParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentMilestone, today } from '../../presenters/milestones.js';
import { GroupMilestoneSchema, MilestoneSchema, ProjectMilestoneSchema } from '../../presenters/schemas/milestones.js';
import { createMilestone, deleteMilestone, updateMilestone, type MilestoneParent } from '../../services/milestones.js';
import { presentContext } from '../projects/present.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';
import { capList } from '../list_filters.js';

const enumOf = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)));

const MilestoneParams = Type.Object({ id: Type.String(), milestone_id: RowId });

const ListQuery = {
  state: Type.Optional(enumOf(['active', 'closed', 'all'] as const)),
  /** `iids[]=1&iids[]=2` or `iids=1,2`; parsed by hand (GitLab's comma-separated integer array). */
  iids: Type.Optional(Type.Array(Type.String())),
  title: Type.Optional(Type.String()),
  search: Type.Optional(Type.String()),
  include_parent_milestones: Type.Optional(Type.Boolean()),
  include_ancestors: Type.Optional(Type.Boolean()),
  updated_before: Type.Optional(Type.String()),
  updated_after: Type.Optional(Type.String()),
};
const ProjectListQuery = Type.Object(ListQuery);
const GroupListQuery = Type.Object({ ...ListQuery, include_descendants: Type.Optional(Type.Boolean()) });

const OptionalFields = {
  description: Type.Optional(Type.String()),
  due_date: Type.Optional(Type.String()),
  start_date: Type.Optional(Type.String()),
};
const CreateBody = Type.Object({ title: Type.String(), ...OptionalFields });
const UpdateBody = Type.Object({
  title: Type.Optional(Type.String()),
  state_event: Type.Optional(enumOf(['close', 'activate'] as const)),
  ...OptionalFields,
});
const UPDATE_FIELDS = ['title', 'description', 'start_date', 'due_date', 'state_event'];

type ListQueryValues = {
  state?: 'active' | 'closed' | 'all';
  iids?: string[];
  title?: string;
  search?: string;
  include_parent_milestones?: boolean;
  include_ancestors?: boolean;
  updated_before?: string;
  updated_after?: string;
};

/** The list filters; `include_parent_milestones` is GitLab's deprecated name of `include_ancestors`. */
function listParams(q: ListQueryValues): { filters: MilestoneFilters; includeAncestors: boolean } {
  if (q.include_ancestors !== undefined && q.include_parent_milestones !== undefined) {
    throw invalidParam('include_ancestors, include_parent_milestones', 'are mutually exclusive');
  }
  const includeAncestors = q.include_ancestors ?? q.include_parent_milestones ?? false;
  let iids: number[] | undefined;
  if (q.iids) {
    const parts = capList(q.iids.flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== ''), 'iids');
    if (parts.some((v) => !/^\d+$/.test(v) || Number(v) > 2147483647)) throw invalidParam('iids');
    iids = parts.map(Number);
  }
  return {
    includeAncestors,
    filters: {
      state: q.state ?? 'all',
      iids: includeAncestors ? undefined : iids,
      title: q.title,
      search: q.search,
      updatedBefore: timestampParam('updated_before', q.updated_before),
      updatedAfter: timestampParam('updated_after', q.updated_after),
    },
  };
}

function atLeastOneOf(body: Record<string, unknown>) {
  if (!UPDATE_FIELDS.some((n) => n in body)) throw invalidParam(UPDATE_FIELDS.join(', '), 'are missing, at least one parameter must be provided');
}

export default async function milestoneRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const db = () => cairn.db;

  const present = (request: FastifyRequest, rows: MilestoneRow[]) => {
    const ctx = presentContext(request);
    const day = today();
    return rows.map((m) => presentMilestone(ctx, m, day));
  };

  async function milestoneOf(parent: { projectId: number } | { groupId: number }, id: number): Promise<MilestoneRow> {
    const found = await findMilestone(db(), parent, id);
    // GitLab's `milestones.find` raises RecordNotFound, which its API answers as a bare 404.
    if (!found) throw notFound();
    return found;
  }

  async function list(request: FastifyRequest, reply: FastifyReply, scope: MilestoneScope, filters: MilestoneFilters) {
    const page = pageParams(request);
    const { rows, total } = await listMilestones(db(), scope, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return present(request, rows as MilestoneRow[]);
  }

  const projectParent = (request: FastifyRequest): MilestoneParent => {
    const { project } = projectOf(request);
    return { projectId: project.id, namespaceGroupId: project.namespace.type === 'Group' ? project.namespace.id : null };
  };

  /** A milestone as its presenter needs it, after a write (its path comes with it). */
  const reload = async (parent: { projectId: number } | { groupId: number }, id: number) => milestoneOf(parent, id);

  const readProject = { project: 'read_milestone', signedIn: true } as const;
  const manageProject = { project: 'admin_milestone', signedIn: true } as const;
  const readGroup = { group: 'read_milestone', signedIn: true } as const;
  const manageGroup = { group: 'admin_milestone', signedIn: true } as const;

  // ------------------------------------------------------------------------------------------
  // Project milestones

  app.get('/api/v4/projects/:id/milestones', route({ matrix: 'read',
    access: readProject,
    paginated: true,
    schema: { params: IdParams, querystring: ProjectListQuery, response: { 200: Type.Array(MilestoneSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const { filters, includeAncestors } = listParams(request.query);
    return list(request, reply, projectMilestoneScope(project, includeAncestors), filters);
  });

  app.get('/api/v4/projects/:id/milestones/:milestone_id', route({ matrix: 'read',
    access: readProject,
    schema: { params: MilestoneParams, response: { 200: ProjectMilestoneSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return present(request, [await milestoneOf({ projectId: project.id }, request.params.milestone_id)])[0];
  });

  app.post('/api/v4/projects/:id/milestones', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: IdParams, body: CreateBody, response: { 201: ProjectMilestoneSchema } },
  }), async (request, reply) => {
    const parent = projectParent(request);
    const created = await createMilestone(db(), parent, request.body, { config: cairn.config });
    return reply.code(201).send(present(request, [await reload({ projectId: created.project_id! }, created.id)])[0]);
  });

  app.put('/api/v4/projects/:id/milestones/:milestone_id', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: MilestoneParams, body: UpdateBody, response: { 200: ProjectMilestoneSchema } },
  }), async (request) => {
    atLeastOneOf(request.body);
    const parent = projectParent(request);
    const where = { projectId: projectOf(request).project.id };
    const milestone = await milestoneOf(where, request.params.milestone_id);
    await updateMilestone(db(), parent, milestone, request.body, { config: cairn.config });
    return present(request, [await reload(where, milestone.id)])[0];
  });

  app.delete('/api/v4/projects/:id/milestones/:milestone_id', route({ matrix: 'reporter',
    access: manageProject,
    schema: { params: MilestoneParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    await deleteMilestone(db(), await milestoneOf({ projectId: project.id }, request.params.milestone_id));
    return reply.code(204).send();
  });

  // ------------------------------------------------------------------------------------------
  // Group milestones

  app.get('/api/v4/groups/:id/milestones', route({ matrix: 'read',
    access: readGroup,
    paginated: true,
    schema: { params: IdParams, querystring: GroupListQuery, response: { 200: Type.Array(MilestoneSchema) } },
  }), async (request, reply) => {
    const { group, user } = groupOf(request);
    const { filters, includeAncestors } = listParams(request.query);
    return list(request, reply, groupMilestoneScope(user, group, includeAncestors, request.query.include_descendants ?? false), filters);
  });

  app.get('/api/v4/groups/:id/milestones/:milestone_id', route({ matrix: 'read',
    access: readGroup,
    schema: { params: MilestoneParams, response: { 200: GroupMilestoneSchema } },
  }), async (request) => {
    const { group } = groupOf(request);
    return present(request, [await milestoneOf({ groupId: group.id }, request.params.milestone_id)])[0];
  });

  app.post('/api/v4/groups/:id/milestones', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: IdParams, body: CreateBody, response: { 201: GroupMilestoneSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const created = await createMilestone(db(), { groupId: group.id }, request.body);
    return reply.code(201).send(present(request, [await reload({ groupId: group.id }, created.id)])[0]);
  });

  app.put('/api/v4/groups/:id/milestones/:milestone_id', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: MilestoneParams, body: UpdateBody, response: { 200: GroupMilestoneSchema } },
  }), async (request) => {
    atLeastOneOf(request.body);
    const { group } = groupOf(request);
    const where = { groupId: group.id };
    const milestone = await milestoneOf(where, request.params.milestone_id);
    await updateMilestone(db(), where, milestone, request.body);
    return present(request, [await reload(where, milestone.id)])[0];
  });

  app.delete('/api/v4/groups/:id/milestones/:milestone_id', route({ matrix: 'reporter',
    access: manageGroup,
    schema: { params: MilestoneParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    await deleteMilestone(db(), await milestoneOf({ groupId: group.id }, request.params.milestone_id));
    return reply.code(204).send();
  });
}
