import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { cancelPipeline, retryPipeline } from '../../ci/jobs/state.js';
import { createPipeline } from '../../ci/pipelines/create.js';
import type { CiPipeline } from '../../db/schema/ci.js';
import { loadPipelineExtras, PIPELINE_ORDER_BY, PIPELINE_SCOPES, PIPELINE_STATUSES, pipelinesQuery, type PipelineFilters } from '../../finders/pipelines.js';
import { resolveCommit, readRef } from '../../git/refs.js';
import { decryptSecret } from '../../lib/secrets.js';
import { forbidden, invalidParam, notFound, validationFailed } from '../../plugins/errors.js';
import { canUpdateRef, protectedRefPipelineMessage } from '../../policies/branches.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentPipeline, presentPipelineBasic } from '../../presenters/ci.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { PipelineBasicSchema, PipelineSchema, PipelineVariableSchema } from '../../presenters/schemas/ci.js';
import { projectRepoPath } from '../../services/projects.js';
import { pipelineTestSuites } from '../../services/test_reports.js';
import { presentTestReport, presentTestReportSummary } from '../../presenters/test_reports.js';
import { TestReportSchema, TestReportSummarySchema } from '../../presenters/schemas/test_reports.js';
import { artifactStore, deleteObjects } from '../../storage/index.js';
import { IdParams, RowId, timestampParam } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

const PipelineParams = Type.Object({ id: Type.String(), pipeline_id: RowId });
const STATUSES: readonly string[] = PIPELINE_STATUSES;
const SCOPES: readonly string[] = PIPELINE_SCOPES;
const ORDER_BY: readonly string[] = PIPELINE_ORDER_BY;

const ListQuery = Type.Object({
  scope: Type.Optional(Type.String()),
  status: Type.Optional(Type.String()),
  source: Type.Optional(Type.String()),
  ref: Type.Optional(Type.String()),
  sha: Type.Optional(Type.String()),
  yaml_errors: Type.Optional(Type.Boolean()),
  username: Type.Optional(Type.String()),
  updated_after: Type.Optional(Type.String()),
  updated_before: Type.Optional(Type.String()),
  created_after: Type.Optional(Type.String()),
  created_before: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  order_by: Type.Optional(Type.String()),
  sort: Type.Optional(Type.String()),
});

const VariableInput = Type.Object({ key: Type.String(), value: Type.Optional(Type.String()), variable_type: Type.Optional(Type.String()) });
const CreateBody = Type.Object({
  ref: Type.String(),
  variables: Type.Optional(Type.Union([Type.Array(VariableInput), Type.Record(Type.String(), VariableInput)])),
  /** Values for the configuration's `spec:inputs` (GitLab 17.11+). */
  inputs: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
/** GitLab's Pipeline::Chain::Validate::Config INPUTS_LIMIT. */
const MAX_PIPELINE_INPUTS = 20;

const ctxOf = (request: FastifyRequest) => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

export default async function pipelineRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  async function findPipeline(projectId: number, id: number): Promise<CiPipeline> {
    const p = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', id).where('project_id', '=', projectId).executeTakeFirst();
    if (!p) throw notFound();
    return p;
  }

  async function render(request: FastifyRequest, project: ProjectRow, p: CiPipeline) {
    return presentPipeline(ctxOf(request), project, p, await loadPipelineExtras(cairn.db, p));
  }

  app.get('/api/v4/projects/:id/pipelines', route({ matrix: 'read',
    access: { project: 'read_pipeline' },
    paginated: true,
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Array(PipelineBasicSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    if (q.scope !== undefined && !SCOPES.includes(q.scope)) throw invalidParam('scope', 'does not have a valid value');
    if (q.status !== undefined && !STATUSES.includes(q.status)) throw invalidParam('status', 'does not have a valid value');
    const orderBy = q.order_by ?? 'id';
    if (!ORDER_BY.includes(orderBy)) throw invalidParam('order_by', 'does not have a valid value');
    const sort = q.sort ?? 'desc';
    if (sort !== 'asc' && sort !== 'desc') throw invalidParam('sort', 'does not have a valid value');
    const after = timestampParam('updated_after', q.updated_after);
    const before = timestampParam('updated_before', q.updated_before);
    const createdAfter = timestampParam('created_after', q.created_after);
    const createdBefore = timestampParam('created_before', q.created_before);
    const query = pipelinesQuery(cairn.db, project.id, {
      scope: q.scope as PipelineFilters['scope'],
      status: q.status,
      source: q.source,
      ref: q.ref,
      sha: q.sha,
      name: q.name,
      yamlErrors: q.yaml_errors,
      username: q.username,
      updatedAfter: after,
      updatedBefore: before,
      createdAfter,
      createdBefore,
    });
    const page = pageParams(request);
    const [rows, total] = await Promise.all([
      query.selectAll('p').orderBy(`p.${orderBy}` as any, sort).orderBy('p.id', sort).limit(page.perPage).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return rows.map((p) => presentPipelineBasic(ctxOf(request), project, p as CiPipeline));
  });

  app.get('/api/v4/projects/:id/pipelines/latest', route({ matrix: 'read',
    access: { project: 'read_pipeline' },
    schema: { params: IdParams, querystring: Type.Object({ ref: Type.Optional(Type.String()) }), response: { 200: PipelineSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const ref = request.query.ref ?? project.default_branch ?? 'main';
    const p = await cairn.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).where('ref', '=', ref)
      .where('parent_pipeline_id', 'is', null).orderBy('id', 'desc').limit(1).executeTakeFirst();
    if (!p) throw notFound();
    return render(request, project, p);
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id', route({ matrix: 'read',
    access: { project: 'read_pipeline' },
    schema: { params: PipelineParams, response: { 200: PipelineSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return render(request, project, await findPipeline(project.id, request.params.pipeline_id));
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id/test_report', route({ matrix: 'read',
    access: { project: 'read_build' },
    schema: { params: PipelineParams, response: { 200: TestReportSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    return presentTestReport(await pipelineTestSuites(cairn, p.id));
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id/test_report_summary', route({ matrix: 'read',
    access: { project: 'read_build' },
    schema: { params: PipelineParams, response: { 200: TestReportSummarySchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    return presentTestReportSummary(await pipelineTestSuites(cairn, p.id));
  });

  app.get('/api/v4/projects/:id/pipelines/:pipeline_id/variables', route({ matrix: 'developer',
    access: { project: 'update_pipeline', signedIn: true },
    schema: { params: PipelineParams, response: { 200: Type.Array(PipelineVariableSchema) } },
  }), async (request) => {
    const { project } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    const vars = await cairn.db.selectFrom('ci_pipeline_variables').selectAll().where('pipeline_id', '=', p.id).orderBy('id').execute();
    return vars.map((v) => ({ key: v.key, value: decryptSecret(cairn.config, v.value_encrypted) ?? '', variable_type: v.variable_type }));
  });

  app.post('/api/v4/projects/:id/pipeline', route({ matrix: 'developer',
    access: { project: 'create_pipeline', signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: PipelineSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const body = request.body;
    const rawVars = Array.isArray(body.variables) ? body.variables : Object.values(body.variables ?? {});
    const variables = rawVars.map((v) => {
      if (!/^[A-Za-z0-9_]{1,255}$/.test(v.key)) throw validationFailed({ base: [`Variables key can contain only letters, digits and '_'.`] });
      return { key: v.key, value: v.value ?? '', variable_type: v.variable_type === 'file' ? 'file' as const : 'env_var' as const };
    });
    const inputs = body.inputs ?? {};
    if (Object.keys(inputs).length > MAX_PIPELINE_INPUTS) throw validationFailed({ base: [`There cannot be more than ${MAX_PIPELINE_INPUTS} inputs`] });
    const gitDir = projectRepoPath(cairn, project);
    let tag = false;
    let sha = await readRef(cairn.catfile, gitDir, `refs/heads/${body.ref}`);
    if (!sha) {
      const tagged = await readRef(cairn.catfile, gitDir, `refs/tags/${body.ref}`);
      if (tagged) {
        tag = true;
        sha = (await resolveCommit(cairn.catfile, gitDir, tagged))?.oid ?? null;
      }
    }
    if (!sha) throw validationFailed({ base: ['Reference not found'] });
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, body.ref, tag))) throw validationFailed({ base: [protectedRefPipelineMessage(body.ref)] });
    const result = await createPipeline(cairn, { project, ref: body.ref, tag, sha, source: 'api', userId: user!.id, variables, inputs, api: true, configRequired: true });
    if (result.kind !== 'created') throw validationFailed({ base: result.errors ?? [result.message] });
    return reply.code(201).send(await render(request, project, result.pipeline));
  });

  app.post('/api/v4/projects/:id/pipelines/:pipeline_id/retry', route({ matrix: 'developer',
    access: { project: 'update_pipeline', signedIn: true },
    schema: { params: PipelineParams, response: { 201: PipelineSchema } },
  }), async (request, reply) => {
    const { project, user, accessLevel } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    // GitLab's update_pipeline is refused on a ref the caller may not push or merge to.
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, p.ref, p.tag))) throw forbidden();
    await retryPipeline(cairn, p.id, user!.id);
    return reply.code(201).send(await render(request, project, await findPipeline(project.id, p.id)));
  });

  app.post('/api/v4/projects/:id/pipelines/:pipeline_id/cancel', route({ matrix: { is: 'developer', fresh: ['pipeline_id'] },
    access: { project: 'update_pipeline', signedIn: true },
    schema: { params: PipelineParams, response: { 200: PipelineSchema } },
  }), async (request) => {
    const { project, user, accessLevel } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    if (!(await canUpdateRef(cairn.db, project, user!, accessLevel, p.ref, p.tag))) throw forbidden();
    await cancelPipeline(cairn, p.id);
    return render(request, project, await findPipeline(project.id, p.id));
  });

  app.delete('/api/v4/projects/:id/pipelines/:pipeline_id', route({ matrix: 'owner',
    access: { project: 'destroy_pipeline', signedIn: true },
    schema: { params: PipelineParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const p = await findPipeline(project.id, request.params.pipeline_id);
    await cancelPipeline(cairn, p.id);
    // The artifact rows of the pipeline and its child pipelines go in the same transaction; their files once it committed.
    const storeKeys = await cairn.db.transaction().execute(async (trx) => {
      const gone = await sql<{ store_key: string }>`
        with recursive tree(id) as (
          select id from ci_pipelines where id = ${p.id}
          union select c.id from ci_pipelines c join tree on c.parent_pipeline_id = tree.id
        )
        delete from ci_job_artifacts where job_id in (select b.id from ci_builds b join tree on b.pipeline_id = tree.id)
        returning store_key`.execute(trx);
      await trx.deleteFrom('ci_pipelines').where('id', '=', p.id).execute();
      await trx.updateTable('merge_requests').set({ head_pipeline_id: null }).where('head_pipeline_id', '=', p.id).execute();
      return gone.rows.map((r) => r.store_key);
    });
    await deleteObjects(artifactStore(cairn.config), storeKeys);
    return reply.code(204).send();
  });
}
