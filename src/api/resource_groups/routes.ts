import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { PROCESS_MODES } from '../../ci/jobs/resource_groups.js';
import type { CiBuild } from '../../db/schema/ci.js';
import type { CiResourceGroup, ProcessMode } from '../../db/schema/ci_resource_groups.js';
import { loadJobExtras } from '../../finders/pipelines.js';
import { invalidParam, notFound } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { presentJobBasic, presentResourceGroup } from '../../presenters/ci.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { JobBasicSchema, ResourceGroupSchema } from '../../presenters/schemas/ci.js';
import { IdParams } from '../params.js';
import { projectOf, route } from '../route.js';

// Resource groups (GitLab's Resource group API): the groups `resource_group:` made in a project
// (src/ci/jobs/resource_groups.ts), the job holding each and those waiting for it, and the process
// mode that orders them. Developers and up, as GitLab's read_ and update_resource_group.

const KeyParams = Type.Object({ id: Type.String(), key: Type.String() });
const UpdateBody = Type.Object({ process_mode: Type.Optional(Type.String()) });

export default async function resourceGroupRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const ctxOf = (request: FastifyRequest) => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });
  const base = '/api/v4/projects/:id/resource_groups';

  async function loadGroup(projectId: number, key: string): Promise<CiResourceGroup> {
    const group = await cairn.db.selectFrom('ci_resource_groups').selectAll().where('project_id', '=', projectId).where('key', '=', key).executeTakeFirst();
    if (!group) throw notFound();
    return group;
  }

  async function renderJobs(request: FastifyRequest, project: ProjectRow, rows: CiBuild[]) {
    const extras = await loadJobExtras(cairn, project, rows);
    return rows.map((b) => presentJobBasic(ctxOf(request), project, b, extras));
  }

  app.get(base, route({ matrix: 'developer',
    access: { project: 'read_resource_group' },
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(ResourceGroupSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const q = cairn.db.selectFrom('ci_resource_groups').where('project_id', '=', project.id);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return rows.map(presentResourceGroup);
  });

  app.get(`${base}/:key`, route({ matrix: 'developer',
    access: { project: 'read_resource_group' },
    schema: { params: KeyParams, response: { 200: ResourceGroupSchema } },
  }), async (request) => presentResourceGroup(await loadGroup(projectOf(request).project.id, request.params.key)));

  // The job holding the group's resource; `null` when it is free (GitLab presents nil).
  app.get(`${base}/:key/current_job`, route({ matrix: 'developer',
    access: { project: 'read_resource_group' },
    schema: { params: KeyParams, response: { 200: Type.Union([JobBasicSchema, Type.Null()]) } },
  }), async (request) => {
    const { project } = projectOf(request);
    const group = await loadGroup(project.id, request.params.key);
    const job = await cairn.db
      .selectFrom('ci_resources as r')
      .innerJoin('ci_builds as b', 'b.id', 'r.build_id')
      .selectAll('b')
      .where('r.resource_group_id', '=', group.id)
      .orderBy('r.id')
      .limit(1)
      .executeTakeFirst();
    return job ? (await renderJobs(request, project, [job]))[0] : null;
  });

  // The jobs waiting for the resource, in the order the process mode hands it out.
  app.get(`${base}/:key/upcoming_jobs`, route({ matrix: 'developer',
    access: { project: 'read_resource_group' },
    paginated: true,
    schema: { params: KeyParams, response: { 200: Type.Array(JobBasicSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const group = await loadGroup(project.id, request.params.key);
    const newest = group.process_mode === 'newest_first' || group.process_mode === 'newest_ready_first';
    const page = pageParams(request);
    const q = cairn.db.selectFrom('ci_builds').where('resource_group_id', '=', group.id).where('status', '=', 'waiting_for_resource');
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('pipeline_id', newest ? 'desc' : 'asc').orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return renderJobs(request, project, rows);
  });

  app.put(`${base}/:key`, route({ matrix: 'developer',
    access: { project: 'update_resource_group' },
    schema: { params: KeyParams, body: UpdateBody, response: { 200: ResourceGroupSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    const group = await loadGroup(project.id, request.params.key);
    const mode = request.body?.process_mode;
    if (mode === undefined) return presentResourceGroup(group);
    if (!(PROCESS_MODES as string[]).includes(mode)) throw invalidParam('process_mode', 'does not have a valid value');
    const updated = await cairn.db
      .updateTable('ci_resource_groups')
      .set({ process_mode: mode as ProcessMode, updated_at: sql`now()` as any })
      .where('id', '=', group.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return presentResourceGroup(updated);
  });
}
