import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { JOB_SCOPES } from '../../ci/jobs/state.js';
import { assignRunner, deleteRunner, parseTagList, resetRegistrationToken, unassignRunner, updateRunner, type RunnerUpdate } from '../../ci/runners.js';
import type { CiBuild, CiRunner, RunnerType } from '../../db/schema/ci.js';
import type { User } from '../../db/schema/core.js';
import { findProjectRow, listProjects } from '../../finders/projects.js';
import { findRunner, listRunners, runnerOwners, userManagesRunner, type RunnerFilters, type RunnerVisibility } from '../../finders/runners.js';
import { RUNNER_JOB_READER } from '../../policies/rules.js';
import { sql } from 'kysely';
import { requireUser } from '../../plugins/auth.js';
import { ApiError, forbidden, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentRunnerJob } from '../../presenters/ci.js';
import { loadJobExtras } from '../../finders/pipelines.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { presentRunner, presentRunnerDetail } from '../../presenters/runners.js';
import { Nullable, Timestamp, strict } from '../../presenters/schemas/common.js';
import { RunnerDetailSchema, RunnerJobSchema, RunnerSchema } from '../../presenters/schemas/runners.js';
import { IdParams, RowId } from '../params.js';
import { presentContext } from '../projects/present.js';
import { groupOf, NoContent, projectOf, route } from '../route.js';
import { capList } from '../list_filters.js';

/** GitLab's answer to a registration token reset. */
const ResetTokenSchema = Type.Object({ token: Type.String(), token_expires_at: Nullable(Timestamp) }, strict);

const Enum = <T extends string>(values: readonly T[]) => Type.Union(values.map((v) => Type.Literal(v)));

const RUNNER_TYPES = ['instance_type', 'group_type', 'project_type'] as const;
/** Status filter values: the current ones and the deprecated (active, paused, never_contacted). */
const RUNNER_STATUSES = ['online', 'offline', 'not_connected', 'never_contacted', 'active', 'paused'] as const;
/** The admin list's scope also takes the legacy specific / shared and the types. */
const ADMIN_SCOPES = [...RUNNER_STATUSES, 'specific', 'shared', ...RUNNER_TYPES] as const;

const filterQuery = {
  type: Type.Optional(Enum(RUNNER_TYPES)),
  status: Type.Optional(Enum(RUNNER_STATUSES)),
  paused: Type.Optional(Type.Boolean()),
  tag_list: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
};
const ListQuery = Type.Object({ scope: Type.Optional(Enum(RUNNER_STATUSES)), ...filterQuery });
const AdminListQuery = Type.Object({ scope: Type.Optional(Enum(ADMIN_SCOPES)), ...filterQuery });
/** The group list has no scope (a deprecated project_type gives nothing there). */
const GroupListQuery = Type.Object(filterQuery);

const RunnerParams = Type.Object({ id: RowId });
const ProjectRunnerParams = Type.Object({ id: Type.String(), runner_id: RowId });

/** What PUT /runners/:id takes: at least one of them. */
const UPDATE_FIELDS = ['description', 'active', 'paused', 'tag_list', 'run_untagged', 'locked', 'access_level', 'maximum_timeout', 'maintainer_note', 'maintenance_note'] as const;
const UpdateBody = Type.Object({
  description: Type.Optional(Type.String()),
  active: Type.Optional(Type.Boolean()),
  paused: Type.Optional(Type.Boolean()),
  tag_list: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  run_untagged: Type.Optional(Type.Boolean()),
  locked: Type.Optional(Type.Boolean()),
  access_level: Type.Optional(Enum(['not_protected', 'ref_protected'] as const)),
  // Null first: with type coercion on, a null would otherwise become 0 (or "").
  maximum_timeout: Type.Optional(Type.Union([Type.Null(), Type.Integer({ minimum: 0, maximum: 2147483647 })])),
  maintainer_note: Type.Optional(Type.Union([Type.Null(), Type.String()])),
  maintenance_note: Type.Optional(Type.Union([Type.Null(), Type.String()])),
});

const JobsQuery = Type.Object({
  status: Type.Optional(Enum(JOB_SCOPES)),
  order_by: Type.Optional(Enum(['id'] as const)),
  sort: Type.Optional(Enum(['asc', 'desc'] as const)),
});

const noAccess = () => forbidden('No access granted');
const runnerNotFound = () => notFound('Runner');

function filtersOf(q: { scope?: string; type?: RunnerType; status?: string; paused?: boolean; tag_list?: string | string[] }): RunnerFilters {
  return { scope: q.scope, type: q.type, status: q.status, paused: q.paused, tagList: q.tag_list === undefined ? undefined : capList(parseTagList(q.tag_list), 'tag_list') };
}

/**
 * The Runners API (GitLab's lib/api/ci/runners.rb): lists, details, updates, removal, a runner's
 * jobs, enabling project runners for projects, and the registration tokens of projects and groups.
 * Who may: administrators any runner; a project runner the maintainers of any of its projects; a
 * group runner the maintainers and owners of its group; instance runners are readable by any
 * signed-in user and changed only by administrators. The runner side of the protocol is in
 * ../runners_protocol.
 */
export default async function runnerRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const db = cairn.db;

  async function sendList(request: FastifyRequest, reply: { header(n: string, v: string): unknown }, visibility: RunnerVisibility, filters: RunnerFilters) {
    const page = pageParams(request);
    const { rows, total } = await listRunners(db, visibility, filters, { limit: page.perPage, offset: page.offset });
    setPaginationHeaders(request, reply, page, total);
    return rows.map(presentRunner);
  }

  /** The runner, for a caller who may manage it (404 when there is none, 403 otherwise). */
  async function managedRunner(user: User, id: number): Promise<CiRunner> {
    const runner = await findRunner(db, id);
    if (!runner) throw runnerNotFound();
    if (!(await userManagesRunner(db, user, runner.id))) throw noAccess();
    return runner;
  }

  async function renderDetail(request: FastifyRequest, runner: CiRunner) {
    const user = requireUser(request);
    const owners = await runnerOwners(db, runner.id);
    // Only the projects the caller may see (administrators see them all).
    const { rows } = owners.projectIds.length
      ? await listProjects(db, user, { ids: owners.projectIds }, { limit: owners.projectIds.length, offset: 0, withTotal: false })
      : { rows: [] as ProjectRow[] };
    const order = new Map(owners.projectIds.map((id, i) => [id, i]));
    rows.sort((a, b) => order.get(a.id)! - order.get(b.id)!);
    return presentRunnerDetail(presentContext(request), runner, { projects: rows, groups: owners.groups });
  }

  // ---- lists ----------------------------------------------------------------------------------

  app.get('/api/v4/runners', route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(RunnerSchema) } },
  }), async (request, reply) => {
    const user = requireUser(request);
    return sendList(request, reply, { kind: 'owned', userId: user.id }, filtersOf(request.query));
  });

  app.get('/api/v4/runners/all', route({ matrix: 'admin',
    access: { admin: true },
    paginated: true,
    schema: { querystring: AdminListQuery, response: { 200: Type.Array(RunnerSchema) } },
  }), async (request, reply) => sendList(request, reply, { kind: 'all' }, filtersOf(request.query)));

  app.get('/api/v4/projects/:id/runners', route({ matrix: 'maintainer',
    access: { project: 'admin_project_runners', signedIn: true },
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(RunnerSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const visibility: RunnerVisibility = {
      kind: 'project',
      projectId: project.id,
      namespaceTraversalIds: project.namespace.traversal_ids ?? [],
      instanceRunners: (project.settings as Record<string, unknown>)?.shared_runners_enabled !== false,
    };
    return sendList(request, reply, visibility, filtersOf(request.query));
  });

  app.get('/api/v4/groups/:id/runners', route({ matrix: 'maintainer',
    access: { group: 'read_group_runners', signedIn: true },
    paginated: true,
    schema: { params: IdParams, querystring: GroupListQuery, response: { 200: Type.Array(RunnerSchema) } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    return sendList(request, reply, { kind: 'group', traversalIds: group.traversal_ids }, filtersOf(request.query));
  });

  // ---- one runner -----------------------------------------------------------------------------

  app.get('/api/v4/runners/:id', route({ matrix: { is: 'signedIn', cells: { external: 403, nonmember: 403, guest: 403, reporter: 403, developer: 403 } },
    access: { custom: 'administrators; instance runners any signed-in user; others who manage the runner', signedIn: true },
    schema: { params: RunnerParams, response: { 200: RunnerDetailSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const runner = await findRunner(db, request.params.id);
    if (!runner) throw runnerNotFound();
    if (runner.runner_type !== 'instance_type' && !(await userManagesRunner(db, user, runner.id))) throw noAccess();
    return renderDetail(request, runner);
  });

  app.put('/api/v4/runners/:id', route({
    // Validated first (at least one attribute), as GitLab: an empty body is 400 to every signed-in caller.
    matrix: { is: 'signedIn' },
    access: { custom: 'administrators; others who manage the runner (not instance runners)', signedIn: true },
    schema: { params: RunnerParams, body: UpdateBody, response: { 200: RunnerDetailSchema } },
  }), async (request) => {
    const user = requireUser(request);
    const body = (request.body ?? {}) as RunnerUpdate & Record<string, unknown>;
    if (!UPDATE_FIELDS.some((f) => body[f] !== undefined)) {
      throw new ApiError(400, { error: `${UPDATE_FIELDS.join(', ')} are missing, at least one parameter must be provided` });
    }
    if (body.active !== undefined && body.paused !== undefined) throw new ApiError(400, { error: 'active, paused are mutually exclusive' });
    const runner = await managedRunner(user, request.params.id);
    const updated = await updateRunner(cairn, runner, body);
    if (!updated) throw runnerNotFound();
    return renderDetail(request, updated);
  });

  app.delete('/api/v4/runners/:id', route({ matrix: { is: 'signedIn', cells: { external: 403, nonmember: 403, guest: 403, reporter: 403, developer: 403 } },
    access: { custom: 'administrators; others who manage the runner, when it has at most one project', signedIn: true },
    schema: { params: RunnerParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const runner = await findRunner(db, request.params.id);
    if (!runner) throw runnerNotFound();
    if (!user.admin) {
      const { projectIds } = await runnerOwners(db, runner.id);
      if (projectIds.length > 1) throw forbidden('Runner associated with more than one project');
      if (!(await userManagesRunner(db, user, runner.id))) throw noAccess();
    }
    await deleteRunner(cairn, runner.id);
    return reply.code(204).send();
  });

  app.get('/api/v4/runners/:id/jobs', route({ matrix: { is: 'signedIn', cells: { external: 403, nonmember: 403, guest: 403, reporter: 403, developer: 403 } },
    access: { custom: 'administrators; others who manage the runner see the jobs of projects they are a reporter of', signedIn: true },
    paginated: true,
    schema: { params: RunnerParams, querystring: JobsQuery, response: { 200: Type.Array(RunnerJobSchema) } },
  }), async (request, reply) => {
    const user = requireUser(request);
    const runner = await managedRunner(user, request.params.id);
    const page = pageParams(request);
    let q = db.selectFrom('ci_builds as b').where('b.runner_id', '=', runner.id).where('b.type', '=', 'Ci::Build');
    if (request.query.status) q = q.where('b.status', '=', request.query.status);
    if (!user.admin) {
      q = q.where((eb) =>
        eb('b.project_id', 'in', sql<number>`${RUNNER_JOB_READER.projectIds(user.id)}`),
      );
    }
    const sort = request.query.sort ?? 'desc';
    const [rows, total] = await Promise.all([
      q.selectAll('b').orderBy('b.id', sort).limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return renderRunnerJobs(request, rows as CiBuild[]);
  });

  /** Each job with its project: the page's projects loaded once each, their jobs' extras together. */
  async function renderRunnerJobs(request: FastifyRequest, builds: CiBuild[]) {
    const ctx = presentContext(request);
    const byProject = new Map<number, CiBuild[]>();
    for (const b of builds) byProject.set(b.project_id, [...(byProject.get(b.project_id) ?? []), b]);
    const shown = new Map<number, unknown>();
    for (const [projectId, jobs] of byProject) {
      const project = await findProjectRow(db, projectId);
      if (!project) continue;
      const extras = await loadJobExtras(cairn, project, jobs);
      for (const b of jobs) shown.set(b.id, presentRunnerJob(ctx, project, b, extras));
    }
    return builds.filter((b) => shown.has(b.id)).map((b) => shown.get(b.id));
  }

  // ---- project runners ------------------------------------------------------------------------

  app.post('/api/v4/projects/:id/runners', route({ matrix: 'maintainer',
    access: { project: 'admin_project_runners', signedIn: true },
    schema: { params: IdParams, body: Type.Object({ runner_id: RowId }), response: { 201: RunnerSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const runner = await findRunner(db, request.body.runner_id);
    if (!runner) throw runnerNotFound();
    if (runner.runner_type === 'group_type') throw forbidden('Runner is a group runner');
    if (runner.runner_type === 'instance_type') throw forbidden('Runner is a shared runner');
    if (runner.locked) throw forbidden('Runner is locked');
    // GitLab's assign_runner: the caller maintains one of the runner's projects already.
    if (!user!.admin && !(await userManagesRunner(db, user!, runner.id))) throw noAccess();
    await assignRunner(cairn, runner.id, project.id);
    return reply.code(201).send(presentRunner(runner));
  });

  app.delete('/api/v4/projects/:id/runners/:runner_id', route({ matrix: 'maintainer',
    access: { project: 'admin_project_runners', signedIn: true },
    schema: { params: ProjectRunnerParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const outcome = await unassignRunner(cairn, request.params.runner_id, project.id);
    if (outcome === 'gone') throw runnerNotFound();
    return reply.code(204).send();
  });

  // ---- registration tokens --------------------------------------------------------------------

  // Maintainers of the project (GitLab's update_runners_registration_token).
  app.post('/api/v4/projects/:id/runners/reset_registration_token', route({ matrix: 'maintainer',
    access: { project: 'admin_project', signedIn: true },
    schema: { params: IdParams, response: { 201: ResetTokenSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const token = await resetRegistrationToken(cairn, { type: 'project_type', projectId: project.id });
    return reply.code(201).send({ token, token_expires_at: null });
  });

  // Owners of the group.
  app.post('/api/v4/groups/:id/runners/reset_registration_token', route({ matrix: 'owner',
    access: { group: 'admin_group', signedIn: true },
    schema: { params: IdParams, response: { 201: ResetTokenSchema } },
  }), async (request, reply) => {
    const { group } = groupOf(request);
    const token = await resetRegistrationToken(cairn, { type: 'group_type', namespaceId: group.id });
    return reply.code(201).send({ token, token_expires_at: null });
  });
}
