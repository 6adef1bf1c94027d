import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Deployment, DeploymentStatus, Environment, EnvironmentState, EnvironmentTier } from '../../db/schema/environments.js';
import { DEPLOYMENT_STATUSES, ENVIRONMENT_TIERS } from '../../db/schema/environments.js';
import {
  DEPLOYMENT_ORDERS,
  deploymentsQuery,
  environmentsQuery,
  findDeployment,
  findEnvironment,
  lastDeployments,
  loadDeploymentExtras,
  type DeploymentOrder,
} from '../../finders/environments.js';
import { apiError, badRequest, forbidden, invalidParam, missingParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { canDeployTo } from '../../policies/environments.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { presentDeployment, presentEnvironment, presentEnvironmentBasic, presentEnvironmentDetail } from '../../presenters/environments.js';
import type { ProjectRow } from '../../presenters/projects.js';
import {
  DeploymentSchema,
  EnvironmentBasicSchema,
  EnvironmentDetailSchema,
  EnvironmentMessageSchema,
  EnvironmentSchema,
} from '../../presenters/schemas/environments.js';
import {
  createEnvironment,
  deploymentDestroyError,
  ensureEnvironment,
  environmentNameErrorBody,
  reportDeploymentStatus,
  scheduleReviewAppsDeletion,
  stopEnvironment,
  stopJobRunner,
  stopStaleEnvironments,
  updateEnvironment,
  insertDeployment,
} from '../../services/environments.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { renderProject } from '../projects/present.js';
import { NoContent, projectOf, route } from '../route.js';

// Environments and Deployments APIs (GitLab's): reporters (and, for public jobs, whoever sees the
// project's pipelines) read them; developers create, change and stop environments and report
// deployments, within the project's protected environments; maintainers delete deployments. A CI
// job token works on all of them (GitLab 16.2+), with its user's rights, in its own project and
// those whose job token allowlist admits it.

const EnvironmentParams = Type.Object({ id: Type.String(), environment_id: RowId });
const DeploymentParams = Type.Object({ id: Type.String(), deployment_id: RowId });
const Str = Type.Optional(Type.String());
const NullableStr = Type.Optional(Type.Union([Type.String(), Type.Null()]));

const EnvironmentsQuery = Type.Object({ name: Str, search: Str, states: Str });
const EnvironmentBody = Type.Object({ name: Str, external_url: NullableStr, tier: Str, description: NullableStr });
const StopBody = Type.Object({ force: Type.Optional(Type.Boolean()) });
const StopStaleBody = Type.Object({ before: Str, limit: Type.Optional(Type.Union([Type.Integer(), Type.String()])) });
/** `limit` of the bulk environment operations: 1 to 1000, 100 when absent (GitLab's). */
function limitParam(raw: number | string | undefined): number {
  const limit = raw === undefined ? 100 : typeof raw === 'number' ? raw : /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw invalidParam('limit', 'does not have a valid value');
  return limit;
}
const ReviewAppsQuery = Type.Object({ before: Str, limit: Type.Optional(Type.Union([Type.Integer(), Type.String()])), dry_run: Type.Optional(Type.Union([Type.Boolean(), Type.String()])) });
const DeploymentsQuery = Type.Object({
  order_by: Str,
  sort: Str,
  updated_after: Str,
  updated_before: Str,
  finished_after: Str,
  finished_before: Str,
  environment: Str,
  status: Str,
});
const DeploymentBody = Type.Object({ environment: Str, sha: Str, ref: Str, tag: Type.Optional(Type.Boolean()), status: Str });
const DeploymentUpdateBody = Type.Object({ status: Str });

/** Statuses a deployment reported through the API may take. */
const REPORTED_STATUSES = ['running', 'success', 'failed', 'canceled'] as const;

function tierParam(value: string | undefined): EnvironmentTier | undefined {
  if (value === undefined) return undefined;
  if (!(ENVIRONMENT_TIERS as string[]).includes(value)) throw invalidParam('tier', 'does not have a valid value');
  return value as EnvironmentTier;
}

function statusParam<T extends string>(value: string | undefined, allowed: readonly T[], name = 'status'): T | undefined {
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) throw invalidParam(name, 'does not have a valid value');
  return value as T;
}

export default async function environmentRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const ctxOf = (request: FastifyRequest) => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });

  async function loadEnvironment(projectId: number, id: number): Promise<Environment> {
    const env = await findEnvironment(cairn.db, projectId, id);
    if (!env) throw notFound('Environment');
    return env;
  }

  /** Protected environments: the caller needs a deploy access level to act on this one (403 otherwise). */
  async function assertMayDeploy(access: ProjectAccess, name: string) {
    if (!(await canDeployTo(cairn.db, access.project.id, name, access.user, access.accessLevel))) throw forbidden();
  }

  /** The project as environments show it (BasicProjectDetails), once per request. */
  const projectBody = (request: FastifyRequest) => {
    const access = projectOf(request);
    return renderProject(request, access.project, 'simple', access.accessLevel);
  };

  async function renderDeployments(request: FastifyRequest, project: ProjectRow, rows: Deployment[]) {
    const extras = await loadDeploymentExtras(cairn, project, rows);
    return rows.map((d) => presentDeployment(ctxOf(request), project, d, extras));
  }

  // ---- environments ----------------------------------------------------------------------------

  app.get('/api/v4/projects/:id/environments', route({ matrix: 'readCode',
    config: { jobToken: true },
    access: { project: 'read_environment' },
    paginated: true,
    schema: { params: IdParams, querystring: EnvironmentsQuery, response: { 200: Type.Array(EnvironmentSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const { name, search, states } = request.query;
    if (name !== undefined && search !== undefined) mutuallyExclusive();
    if (search !== undefined && search.length < 3) throw badRequest('Search query is less than 3 characters');
    const state = statusParam<EnvironmentState>(states, ['available', 'stopping', 'stopped'], 'states');
    const page = pageParams(request);
    const q = environmentsQuery(cairn.db, project.id, { name, search, states: state });
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    const body = await projectBody(request);
    return rows.map((e) => presentEnvironment(e, body));
  });

  app.get('/api/v4/projects/:id/environments/:environment_id', route({ matrix: 'readCode',
    config: { jobToken: true },
    access: { project: 'read_environment' },
    schema: { params: EnvironmentParams, response: { 200: EnvironmentDetailSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const env = await loadEnvironment(project.id, request.params.environment_id);
    const last = (await lastDeployments(cairn.db, [env.id])).get(env.id) ?? null;
    const extras = await loadDeploymentExtras(cairn, project, last ? [last] : []);
    extras.environments.set(env.id, env);
    return presentEnvironmentDetail(ctxOf(request), project, await projectBody(request), env, last, extras);
  });

  app.post('/api/v4/projects/:id/environments', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'create_environment', signedIn: true },
    schema: { params: IdParams, body: EnvironmentBody, response: { 201: EnvironmentSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const body = request.body ?? {};
    if (body.name === undefined || body.name === '') throw missingParam('name');
    const env = await createEnvironment(cairn.db, project.id, body.name, {
      externalUrl: body.external_url ?? null, tier: tierParam(body.tier), description: body.description ?? null,
    });
    return reply.code(201).send(presentEnvironment(env, await projectBody(request)));
  });

  app.put('/api/v4/projects/:id/environments/:environment_id', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'update_environment', signedIn: true },
    schema: { params: EnvironmentParams, body: EnvironmentBody, response: { 200: EnvironmentSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const env = await loadEnvironment(project.id, request.params.environment_id);
    const body = request.body ?? {};
    // GitLab no longer renames environments (a job's environment is found by its name).
    if (body.name !== undefined && body.name !== env.name) throw badRequest('name is not allowed to be changed');
    const updated = await updateEnvironment(cairn.db, env, { externalUrl: body.external_url, tier: tierParam(body.tier), description: body.description });
    return presentEnvironment(updated, await projectBody(request));
  });

  app.delete('/api/v4/projects/:id/environments/:environment_id', route({ matrix: { is: 'developer', fresh: ['environment_id'] },
    config: { jobToken: true },
    access: { project: 'destroy_environment', signedIn: true },
    schema: { params: EnvironmentParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const env = await loadEnvironment(access.project.id, request.params.environment_id);
    // GitLab's environment policy: only a stopped environment may be deleted.
    if (env.state !== 'stopped') throw forbidden();
    await assertMayDeploy(access, env.name);
    await cairn.db.deleteFrom('environments').where('id', '=', env.id).execute();
    return reply.code(204).send();
  });

  app.post('/api/v4/projects/:id/environments/:environment_id/stop', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'stop_environment', signedIn: true },
    schema: { params: EnvironmentParams, body: StopBody, response: { 200: EnvironmentSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const env = await loadEnvironment(access.project.id, request.params.environment_id);
    await assertMayDeploy(access, env.name);
    const stopped = await stopEnvironment(cairn.db, stopJobRunner(cairn), env, access.user?.id ?? null, { force: request.body?.force === true });
    return presentEnvironment(stopped, await projectBody(request));
  });

  // Before the :environment_id routes' handlers run, the static path wins (find-my-way).
  app.delete('/api/v4/projects/:id/environments/review_apps', route({ matrix: { is: 'developer', fresh: [] }, // a dry run unless asked: the world's project serves
    config: { jobToken: true },
    access: { project: 'destroy_environment', signedIn: true },
    schema: {
      params: IdParams,
      querystring: ReviewAppsQuery,
      response: { 200: Type.Object({ scheduled_entries: Type.Array(EnvironmentBasicSchema), unprocessable_entries: Type.Array(EnvironmentBasicSchema) }) },
    },
  }), async (request) => {
    const access = projectOf(request);
    const q = request.query;
    const before = q.before === undefined || q.before === '' ? new Date(Date.now() - 30 * 24 * 3600 * 1000) : timestampParam('before', q.before)!;
    const limit = limitParam(q.limit === '' ? undefined : q.limit);
    const dryRun = q.dry_run === undefined || q.dry_run === '' ? true : /^(true|1)$/i.test(String(q.dry_run)) ? true : /^(false|0)$/i.test(String(q.dry_run)) ? false : null;
    if (dryRun === null) throw invalidParam('dry_run');
    const result = await scheduleReviewAppsDeletion(cairn.db, access.project.id, {
      before,
      limit,
      dryRun,
      mayDestroy: (env) => canDeployTo(cairn.db, access.project.id, env.name, access.user, access.accessLevel),
    });
    return { scheduled_entries: result.scheduled.map(presentEnvironmentBasic), unprocessable_entries: result.unprocessable.map(presentEnvironmentBasic) };
  });

  app.post('/api/v4/projects/:id/environments/stop_stale', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'stop_environment', signedIn: true },
    schema: { params: IdParams, body: StopStaleBody, response: { 200: EnvironmentMessageSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const body = request.body ?? {};
    if (body.before === undefined || body.before === '') throw missingParam('before');
    const before = timestampParam('before', body.before)!;
    const limit = limitParam(body.limit);
    const now = Date.now();
    const week = 7 * 24 * 3600 * 1000;
    if (before.getTime() > now - week || before.getTime() < now - 10 * 365 * 24 * 3600 * 1000) throw apiError(400, 'Invalid Date');
    await stopStaleEnvironments(cairn, access.project.id, before, limit, access.user?.id ?? null);
    return { message: 'Successfully requested stop for all stale environments' };
  });

  // ---- deployments -----------------------------------------------------------------------------

  app.get('/api/v4/projects/:id/deployments', route({ matrix: 'readCode',
    config: { jobToken: true },
    access: { project: 'read_deployment' },
    paginated: true,
    schema: { params: IdParams, querystring: DeploymentsQuery, response: { 200: Type.Array(DeploymentSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const qs = request.query;
    const orderBy = statusParam<DeploymentOrder>(qs.order_by, DEPLOYMENT_ORDERS, 'order_by') ?? 'id';
    const sort = statusParam(qs.sort, ['asc', 'desc'] as const, 'sort') ?? 'asc';
    const status = statusParam<DeploymentStatus>(qs.status, DEPLOYMENT_STATUSES);
    const filters = {
      environment: qs.environment,
      status,
      updatedAfter: timestampParam('updated_after', qs.updated_after),
      updatedBefore: timestampParam('updated_before', qs.updated_before),
      finishedAfter: timestampParam('finished_after', qs.finished_after),
      finishedBefore: timestampParam('finished_before', qs.finished_before),
    };
    // GitLab's DeploymentsFinder refuses the combinations it cannot answer efficiently.
    const byFinished = !!(filters.finishedAfter || filters.finishedBefore);
    const byUpdated = !!(filters.updatedAfter || filters.updatedBefore);
    if (byFinished && byUpdated) throw badRequest('Both `updated_at` filter and `finished_at` filter can not be specified');
    if (byFinished && orderBy !== 'finished_at') throw badRequest('`finished_at` filter and `finished_at` sorting must be paired');
    if (byFinished && status !== 'success') throw badRequest('`finished_at` filter must be combined with `success` status filter.');
    const page = pageParams(request);
    const q = deploymentsQuery(cairn.db, project.id, filters);
    let rowsQ = q.selectAll().orderBy(orderBy, sort);
    if (orderBy !== 'id') rowsQ = rowsQ.orderBy('id', sort);
    const [rows, total] = await Promise.all([
      rowsQ.limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return renderDeployments(request, project, rows);
  });

  app.get('/api/v4/projects/:id/deployments/:deployment_id', route({ matrix: 'readCode',
    config: { jobToken: true },
    access: { project: 'read_deployment' },
    schema: { params: DeploymentParams, response: { 200: DeploymentSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const d = await findDeployment(cairn.db, project.id, request.params.deployment_id);
    if (!d) throw notFound('Deployment');
    return (await renderDeployments(request, project, [d]))[0];
  });

  app.post('/api/v4/projects/:id/deployments', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'create_deployment', signedIn: true },
    schema: { params: IdParams, body: DeploymentBody, response: { 201: DeploymentSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const body = request.body ?? {};
    const missing = (['environment', 'sha', 'ref', 'tag', 'status'] as const).filter((k) => body[k] === undefined || body[k] === '');
    if (missing.length) throw missingParam(missing.join(' is missing, '));
    const status = statusParam(body.status, REPORTED_STATUSES)!;
    const name = body.environment!;
    const nameError = environmentNameErrorBody(name);
    if (nameError) throw nameError;
    await assertMayDeploy(access, name);
    const deployment = await cairn.db.transaction().execute(async (trx) => {
      const env = await ensureEnvironment(trx, access.project.id, name);
      if (!env) throw environmentNameErrorBody(name) ?? badRequest('environment is invalid');
      const created = await insertDeployment(trx, {
        projectId: access.project.id, environmentId: env.id, ref: body.ref!, tag: body.tag!, sha: body.sha!, userId: access.user?.id ?? null,
      });
      return reportDeploymentStatus(trx, created, status);
    });
    return reply.code(201).send((await renderDeployments(request, access.project, [deployment]))[0]);
  });

  app.put('/api/v4/projects/:id/deployments/:deployment_id', route({ matrix: 'developer',
    config: { jobToken: true },
    access: { project: 'update_deployment', signedIn: true },
    schema: { params: DeploymentParams, body: DeploymentUpdateBody, response: { 200: DeploymentSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const d = await findDeployment(cairn.db, access.project.id, request.params.deployment_id);
    if (!d) throw notFound('Deployment');
    const body = request.body ?? {};
    if (body.status === undefined || body.status === '') throw missingParam('status');
    const status = statusParam(body.status, REPORTED_STATUSES)!;
    if (d.deployable_id !== null) throw forbidden('Deployments created using GitLab CI can not be updated using the API');
    const env = await cairn.db.selectFrom('environments').select('name').where('id', '=', d.environment_id).executeTakeFirstOrThrow();
    await assertMayDeploy(access, env.name);
    const updated = await cairn.db.transaction().execute((trx) => reportDeploymentStatus(trx, d, status));
    return (await renderDeployments(request, access.project, [updated]))[0];
  });

  app.delete('/api/v4/projects/:id/deployments/:deployment_id', route({ matrix: { is: 'maintainer', fresh: ['deployment_id'], job: 403 },
    config: { jobToken: true },
    access: { project: 'destroy_deployment', signedIn: true },
    schema: { params: DeploymentParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const d = await findDeployment(cairn.db, project.id, request.params.deployment_id);
    if (!d) throw notFound('Deployment');
    const refusal = await deploymentDestroyError(cairn.db, d);
    if (refusal) throw apiError(400, refusal);
    await cairn.db.deleteFrom('deployments').where('id', '=', d.id).where('status', '<>', 'running').execute();
    return reply.code(204).send();
  });
}

function mutuallyExclusive(): never {
  throw invalidParam('name, search', 'are mutually exclusive');
}
