import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { artifactStore, deleteObjects } from '../../storage/index.js';
import { cancelBuild, eraseBuild, isPlayable, isRetryable, JOB_SCOPES, playBuild, retryBuild } from '../../ci/jobs/state.js';
import { readTrace } from '../../ci/trace.js';
import type { CiBuild } from '../../db/schema/ci.js';
import { loadJobExtras, projectJobsQuery } from '../../finders/pipelines.js';
import { encryptSecret } from '../../lib/secrets.js';
import { can } from '../../policies/abilities.js';
import { OWN_JOB_ERASER } from '../../policies/rules.js';
import { canUpdateRef } from '../../policies/branches.js';
import { canDeployTo } from '../../policies/environments.js';
import { badRequest, forbidden, invalidParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentBridge, presentJob } from '../../presenters/ci.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { BridgeSchema, JobSchema } from '../../presenters/schemas/ci.js';
import { IdParams, RowId } from '../params.js';
import { projectOf, RawBody, route } from '../route.js';

const JobParams = Type.Object({ id: Type.String(), job_id: RowId });
const PipelineParams = Type.Object({ id: Type.String(), pipeline_id: RowId });
const Scope = Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())]));

/** `scope` as a string or an array of job statuses; 400 for anything else. */
export function jobScopes(scope: string | string[] | undefined): string[] | null {
  if (scope === undefined) return null;
  const list = Array.isArray(scope) ? scope : [scope];
  if (list.some((s) => !(JOB_SCOPES as readonly string[]).includes(s))) throw invalidParam('scope', 'does not have a valid value');
  return list.length ? list : null;
}

const ctxOf = (request: FastifyRequest) => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

export default async function jobRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  async function render(request: FastifyRequest, project: ProjectRow, builds: CiBuild[]) {
    const extras = await loadJobExtras(cairn, project, builds);
    return builds.map((b) => presentJob(ctxOf(request), project, b, extras));
  }

  async function findJob(projectId: number, jobId: number): Promise<CiBuild> {
    const job = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', jobId).where('project_id', '=', projectId).where('type', '=', 'Ci::Build').executeTakeFirst();
    if (!job) throw notFound();
    return job;
  }

  /** The pipeline and its descendants (child pipelines), for the pipeline's job list. */
  async function pipelineTree(projectId: number, pipelineId: number): Promise<number[]> {
    const root = await cairn.db.selectFrom('ci_pipelines').select('id').where('id', '=', pipelineId).where('project_id', '=', projectId).executeTakeFirst();
    if (!root) throw notFound();
    const ids = [root.id];
    let frontier = [root.id];
    while (frontier.length) {
      const children = await cairn.db.selectFrom('ci_pipelines').select('id').where('parent_pipeline_id', 'in', frontier).execute();
      frontier = children.map((c) => c.id).filter((id) => !ids.includes(id));
      ids.push(...frontier);
    }
    return ids;
  }

  app.get('/api/v4/projects/:id/jobs', route({ matrix: 'read',
    access: { project: 'read_build' },
    paginated: true,
    schema: { params: IdParams, querystring: Type.Object({ scope: Scope }), response: { 200: Type.Array(JobSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const scopes = jobScopes(request.query.scope);
    const page = pageParams(request);
    const q = projectJobsQuery(cairn.db, project.id, scopes);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return render(request, project, rows);
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id/jobs', route({ matrix: 'read',
    access: { project: 'read_build' },
    paginated: true,
    schema: {
      params: PipelineParams,
      querystring: Type.Object({ scope: Scope, include_retried: Type.Optional(Type.Boolean()) }),
      response: { 200: Type.Array(JobSchema) },
    },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const scopes = jobScopes(request.query.scope);
    const ids = await pipelineTree(project.id, request.params.pipeline_id);
    const page = pageParams(request);
    let q = cairn.db.selectFrom('ci_builds').where('pipeline_id', 'in', ids).where('type', '=', 'Ci::Build');
    if (!request.query.include_retried) q = q.where('retried', '=', false);
    if (scopes) q = q.where('status', 'in', scopes as any);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return render(request, project, rows);
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id/bridges', route({ matrix: 'read',
    access: { project: 'read_build' },
    paginated: true,
    schema: { params: PipelineParams, querystring: Type.Object({ scope: Scope }), response: { 200: Type.Array(BridgeSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const scopes = jobScopes(request.query.scope);
    const pipeline = await cairn.db.selectFrom('ci_pipelines').select('id').where('id', '=', request.params.pipeline_id).where('project_id', '=', project.id).executeTakeFirst();
    if (!pipeline) throw notFound();
    const page = pageParams(request);
    let q = cairn.db.selectFrom('ci_builds').where('pipeline_id', '=', pipeline.id).where('type', '=', 'Ci::Bridge').where('retried', '=', false);
    if (scopes) q = q.where('status', 'in', scopes as any);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    const extras = await loadJobExtras(cairn, project, rows);
    return rows.map((b) => presentBridge(ctxOf(request), project, b, extras));
  });

  app.get('/api/v4/projects/:id/jobs/:job_id', route({ matrix: 'read',
    access: { project: 'read_build' },
    schema: { params: JobParams, response: { 200: JobSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return (await render(request, project, [await findJob(project.id, request.params.job_id)]))[0];
  });

  app.get('/api/v4/projects/:id/jobs/:job_id/trace', route({ matrix: 'read',
    access: { project: 'read_build' },
    schema: { params: JobParams, response: { 200: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const job = await findJob(project.id, request.params.job_id);
    const trace = await readTrace(cairn.db, job.id);
    if (!trace) throw notFound();
    return reply.type('text/plain; charset=utf-8').send(trace);
  });

  app.post('/api/v4/projects/:id/jobs/:job_id/cancel', route({ matrix: 'developer',
    access: { project: 'update_build', signedIn: true },
    schema: { params: JobParams, response: { 201: JobSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const job = await findJob(project.id, request.params.job_id);
    // GitLab's update_build is refused on a ref the caller may not push or merge to.
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, job.ref, job.tag))) throw forbidden();
    const after = (await cancelBuild(cairn, job.id)) ?? job;
    return reply.code(201).send((await render(request, project, [after]))[0]);
  });

  app.post('/api/v4/projects/:id/jobs/:job_id/retry', route({ matrix: { is: 'developer', fresh: ['job_id'] },
    access: { project: 'update_build', signedIn: true },
    schema: { params: JobParams, response: { 201: JobSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const job = await findJob(project.id, request.params.job_id);
    // GitLab's update_build on a deployment job: the caller must be allowed to deploy to its environment.
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, job.ref, job.tag))) throw forbidden();
    if (!(await canDeployTo(cairn.db, project.id, job.environment, user, accessLevel))) throw forbidden();
    if (!isRetryable(job)) throw forbidden('Job is not retryable');
    const retried = await retryBuild(cairn, job.id, user!.id);
    if (!retried) throw forbidden('Job is not retryable');
    return reply.code(201).send((await render(request, project, [retried]))[0]);
  });

  app.post('/api/v4/projects/:id/jobs/:job_id/play', route({ matrix: 'developer',
    access: { project: 'update_build', signedIn: true },
    schema: {
      params: JobParams,
      body: Type.Optional(Type.Object({
        job_variables_attributes: Type.Optional(Type.Array(Type.Object({ key: Type.String(), value: Type.String(), variable_type: Type.Optional(Type.String()) }))),
      })),
      response: { 200: JobSchema },
    },
  }), async (request) => {
    const { project, user, accessLevel } = projectOf(request);
    const job = await findJob(project.id, request.params.job_id);
    // GitLab's play_job: update_build, and deploy rights on a protected environment.
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, job.ref, job.tag))) throw forbidden();
    if (!(await canDeployTo(cairn.db, project.id, job.environment, user, accessLevel))) throw forbidden();
    if (!isPlayable(job)) throw badRequest('Unplayable Job');
    const vars = (request.body?.job_variables_attributes ?? []).map((v) => {
      if (!/^[A-Za-z0-9_]{1,255}$/.test(v.key)) throw badRequest('job_variables_attributes key can contain only letters, digits and \'_\'.');
      return { key: v.key, valueEncrypted: encryptSecret(cairn.config, v.value), variableType: v.variable_type === 'file' ? 'file' as const : 'env_var' as const };
    });
    const played = await playBuild(cairn, job.id, user!.id, vars);
    if (!played) throw badRequest('Unplayable Job');
    return (await render(request, project, [played]))[0];
  });

  app.post('/api/v4/projects/:id/jobs/:job_id/erase', route({ matrix: { is: 'maintainer', fresh: ['job_id'] },
    access: { project: 'update_build', signedIn: true },
    schema: { params: JobParams, response: { 201: JobSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const { project, user } = access;
    const job = await findJob(project.id, request.params.job_id);
    const subject = { project, accessLevel: access.accessLevel };
    const mayErase = can(user, 'erase_build', subject) || (job.user_id === user!.id && OWN_JOB_ERASER.allows(access.accessLevel));
    if (!mayErase) throw forbidden();
    if (!(await canUpdateRef(cairn.db, project, user!, access.accessLevel, job.ref, job.tag))) throw forbidden();
    const erased = await eraseBuild(cairn, job.id, user!.id);
    if (!erased) throw forbidden('Job is not erasable!');
    await deleteObjects(artifactStore(cairn.config), erased.storeKeys);
    return reply.code(201).send((await render(request, project, [erased.build]))[0]);
  });
}
