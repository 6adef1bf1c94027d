import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { PLAY_SCHEDULE_JOB, checkCron, nextRunAt } from '../../ci/pipelines/schedules.js';
import type { CiPipeline } from '../../db/schema/ci.js';
import type { CiPipelineSchedule, CiPipelineScheduleVariable } from '../../db/schema/pipeline_schedules.js';
import { pipelineSchedulesQuery } from '../../finders/pipeline_schedules.js';
import { PIPELINE_SCOPES, PIPELINE_STATUSES, pipelinesQuery, type PipelineFilters } from '../../finders/pipelines.js';
import { findUserById, findUsersByIds } from '../../finders/users.js';
import { readRef } from '../../git/refs.js';
import { enqueue } from '../../jobs/queue.js';
import { decryptSecret, encryptSecret } from '../../lib/secrets.js';
import { forbidden, invalidParam, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { registerMultipartFields } from '../../plugins/params.js';
import { can, type ProjectSubject } from '../../policies/abilities.js';
import { canUpdateRef } from '../../policies/branches.js';
import { canAdminSchedule, canUpdateSchedule, ownedBy } from '../../policies/pipeline_schedules.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { presentPipelineBasic } from '../../presenters/ci.js';
import { presentPipelineSchedule, presentPipelineScheduleDetails, presentScheduleVariable } from '../../presenters/pipeline_schedules.js';
import { PipelineBasicSchema } from '../../presenters/schemas/ci.js';
import { CreatedMessageSchema, PipelineScheduleDetailsSchema, PipelineScheduleSchema, ScheduleVariableSchema } from '../../presenters/schemas/pipeline_schedules.js';
import { validateVariable } from '../../services/ci_variables.js';
import { projectRepoPath } from '../../services/projects.js';
import { RowId, timestampParam } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

// Pipeline schedules (GitLab's Pipeline schedules API): reporters see them, developers create
// them (and own what they create), their owner edits them, maintainers delete and take them over;
// src/ci/pipelines/schedules.ts runs them. Refusals are GitLab's: a schedule the caller may not
// see is 404 "Pipeline Schedule Not Found", a save the owner may not make 400 with its reason.

const IdParams = Type.Object({ id: Type.String() });
const ScheduleParams = Type.Object({ id: Type.String(), pipeline_schedule_id: RowId });
const VariableParams = Type.Object({ id: Type.String(), pipeline_schedule_id: RowId, key: Type.String() });
const ScheduleFields = {
  description: Type.Optional(Type.String()),
  ref: Type.Optional(Type.String()),
  cron: Type.Optional(Type.String()),
  cron_timezone: Type.Optional(Type.String()),
  active: Type.Optional(Type.Boolean()),
};
const CreateBody = Type.Object({ ...ScheduleFields, description: Type.String(), ref: Type.String(), cron: Type.String() });
const UpdateBody = Type.Object(ScheduleFields);
const VariableBody = Type.Object({ key: Type.String(), value: Type.String(), variable_type: Type.Optional(Type.String()) });
const VariableUpdateBody = Type.Object({ value: Type.Optional(Type.String()), variable_type: Type.Optional(Type.String()) });
const PipelinesQuery = Type.Object({
  scope: Type.Optional(Type.String()),
  status: Type.Optional(Type.String()),
  updated_before: Type.Optional(Type.String()),
  updated_after: Type.Optional(Type.String()),
  created_before: Type.Optional(Type.String()),
  created_after: Type.Optional(Type.String()),
  sort: Type.Optional(Type.String()),
});

/** A schedule's ref as a ref name and kind (a short name that named nothing counts as a branch). */
function refOf(ref: string): { ref: string; tag: boolean } {
  if (ref.startsWith('refs/tags/')) return { ref: ref.slice('refs/tags/'.length), tag: true };
  if (ref.startsWith('refs/heads/')) return { ref: ref.slice('refs/heads/'.length), tag: false };
  return { ref, tag: false };
}

export default async function pipelineScheduleRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  registerMultipartFields(app);
  const ctxOf = (request: FastifyRequest) => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });
  const subjectOf = (access: ProjectAccess): ProjectSubject => ({ project: access.project, accessLevel: access.accessLevel });

  /** The schedule of the route's project, 404 to whoever may not see it. */
  async function loadSchedule(request: FastifyRequest, id: number): Promise<CiPipelineSchedule> {
    const access = projectOf(request);
    const schedule = await cairn.db.selectFrom('ci_pipeline_schedules').selectAll().where('id', '=', id).where('project_id', '=', access.project.id).executeTakeFirst();
    if (!schedule || !can(access.user, 'read_pipeline_schedule', subjectOf(access))) throw notFound('Pipeline Schedule');
    return schedule;
  }

  async function loadVariable(schedule: CiPipelineSchedule, key: string): Promise<CiPipelineScheduleVariable> {
    const v = await cairn.db.selectFrom('ci_pipeline_schedule_variables').selectAll().where('pipeline_schedule_id', '=', schedule.id).where('key', '=', key).executeTakeFirst();
    if (!v) throw notFound('Pipeline Schedule Variable');
    return v;
  }

  const presentVariable = (v: CiPipelineScheduleVariable) => presentScheduleVariable(v, decryptSecret(cairn.config, v.value_encrypted) ?? '');

  async function details(request: FastifyRequest, schedule: CiPipelineSchedule) {
    const access = projectOf(request);
    const [owner, lastPipeline, variables] = await Promise.all([
      schedule.owner_id === null ? undefined : findUserById(cairn.db, schedule.owner_id),
      cairn.db.selectFrom('ci_pipelines').selectAll().where('pipeline_schedule_id', '=', schedule.id).orderBy('id', 'desc').limit(1).executeTakeFirst(),
      canAdminSchedule(access.user, subjectOf(access), schedule)
        ? cairn.db.selectFrom('ci_pipeline_schedule_variables').selectAll().where('pipeline_schedule_id', '=', schedule.id).orderBy('id').execute()
        : undefined,
    ]);
    return presentPipelineScheduleDetails(ctxOf(request), access.project, schedule, {
      owner: owner ?? null,
      lastPipeline: (lastPipeline as CiPipeline | undefined) ?? null,
      variables: variables?.map(presentVariable),
    });
  }

  /**
   * GitLab's expansion of a schedule's ref: a short name becomes refs/heads/<name> or
   * refs/tags/<name>, whichever exists; a name of both is refused; a name of neither is kept.
   */
  async function expandRef(access: ProjectAccess, ref: string): Promise<string> {
    if (/^refs\/(heads|tags)\/\S/.test(ref)) return ref;
    const gitDir = projectRepoPath(cairn, access.project);
    const [branch, tag] = await Promise.all([readRef(cairn.catfile, gitDir, `refs/heads/${ref}`), readRef(cairn.catfile, gitDir, `refs/tags/${ref}`)]);
    if (branch && tag) throw validationFailed({ ref: ['is ambiguous'] });
    if (branch) return `refs/heads/${ref}`;
    if (tag) return `refs/tags/${ref}`;
    return ref;
  }

  /** The checks of a schedule's fields, in GitLab's words, and who may put the schedule on its ref. */
  async function checkFields(access: ProjectAccess, s: { description: string; ref: string; cron: string; cron_timezone: string }, refusal: string) {
    const errors: Record<string, string[]> = {};
    if (!s.description.trim()) errors.description = ["can't be blank"];
    if (!s.ref.trim()) errors.ref = ["can't be blank"];
    const cron = checkCron(s.cron, s.cron_timezone);
    if (!cron.ok) errors[cron.field] = [' is invalid syntax'];
    if (Object.keys(errors).length) throw validationFailed(errors);
    // A protected ref: only who may update it may schedule pipelines on it.
    const target = refOf(s.ref);
    if (!(await canUpdateRef(cairn.db, access.project, access.user!, access.accessLevel, target.ref, target.tag))) {
      throw validationFailed({ base: [refusal] });
    }
  }

  const readAccess = { project: 'read_project', signedIn: true } as const;
  const scheduleRead = { is: 'reporter', refused: 404 } as const;
  // Who sees the project but not its schedules gets 404 for a schedule (GitLab's pipeline_schedule helper).
  const hidden = { guest: 404, nonmember: 404, external: 404 } as const;

  app.get('/api/v4/projects/:id/pipeline_schedules', route({ matrix: 'reporter',
    access: { project: 'read_pipeline_schedule', signedIn: true },
    paginated: true,
    schema: { params: IdParams, querystring: Type.Object({ scope: Type.Optional(Type.String()) }), response: { 200: Type.Array(PipelineScheduleSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const scope = request.query.scope;
    if (scope !== undefined && scope !== 'active' && scope !== 'inactive') throw invalidParam('scope', 'does not have a valid value');
    const q = pipelineSchedulesQuery(cairn.db, project.id, scope);
    const page = pageParams(request);
    const [rows, total] = await Promise.all([
      // Newest first, as GitLab's PipelineSchedulesFinder.
      q.selectAll().orderBy('id', 'desc').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    const owners = await findUsersByIds(cairn.db, rows.flatMap((r) => (r.owner_id === null ? [] : [r.owner_id])));
    return rows.map((s) => presentPipelineSchedule(ctxOf(request), s, (s.owner_id !== null && owners.get(s.owner_id)) || null));
  });

  app.get('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id', route({ matrix: scheduleRead,
    access: readAccess,
    schema: { params: ScheduleParams, response: { 200: PipelineScheduleDetailsSchema } },
  }), async (request) => details(request, await loadSchedule(request, request.params.pipeline_schedule_id)));

  app.get('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/pipelines', route({ matrix: scheduleRead,
    access: readAccess,
    paginated: true,
    schema: { params: ScheduleParams, querystring: PipelinesQuery, response: { 200: Type.Array(PipelineBasicSchema) } },
  }), async (request, reply) => {
    const schedule = await loadSchedule(request, request.params.pipeline_schedule_id);
    const access = projectOf(request);
    if (!can(access.user, 'read_pipeline', subjectOf(access))) throw forbidden();
    const q = request.query;
    if (q.scope !== undefined && !(PIPELINE_SCOPES as readonly string[]).includes(q.scope)) throw invalidParam('scope', 'does not have a valid value');
    if (q.status !== undefined && !(PIPELINE_STATUSES as readonly string[]).includes(q.status)) throw invalidParam('status', 'does not have a valid value');
    const sort = q.sort ?? 'asc';
    if (sort !== 'asc' && sort !== 'desc') throw invalidParam('sort', 'does not have a valid value');
    const query = pipelinesQuery(cairn.db, access.project.id, {
      scope: q.scope as PipelineFilters['scope'],
      status: q.status,
      updatedAfter: timestampParam('updated_after', q.updated_after),
      updatedBefore: timestampParam('updated_before', q.updated_before),
      createdAfter: timestampParam('created_after', q.created_after),
      createdBefore: timestampParam('created_before', q.created_before),
      pipelineScheduleId: schedule.id,
    });
    const page = pageParams(request);
    const [rows, total] = await Promise.all([
      query.selectAll('p').orderBy('p.id', sort).limit(page.perPage).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return rows.map((p) => presentPipelineBasic(ctxOf(request), access.project, p as CiPipeline));
  });

  app.post('/api/v4/projects/:id/pipeline_schedules', route({ matrix: 'developer',
    access: { project: 'create_pipeline_schedule', signedIn: true },
    schema: { params: IdParams, body: CreateBody, response: { 201: PipelineScheduleDetailsSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const body = request.body;
    if (!body.ref.trim()) throw invalidParam('ref', 'is empty');
    const fields = { description: body.description, ref: await expandRef(access, body.ref.trim()), cron: body.cron.trim(), cron_timezone: body.cron_timezone ?? 'UTC' };
    await checkFields(access, fields, 'The current user is not authorized to create the pipeline schedule');
    const schedule = await cairn.db
      .insertInto('ci_pipeline_schedules')
      .values({ project_id: access.project.id, owner_id: access.user!.id, ...fields, active: body.active ?? true, next_run_at: nextRunAt(fields) })
      .returningAll()
      .executeTakeFirstOrThrow();
    return reply.code(201).send(await details(request, schedule));
  });

  app.put('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id', route({ matrix: { is: 'admin', reads: 'reporter', cells: hidden },
    access: readAccess,
    schema: { params: ScheduleParams, body: UpdateBody, response: { 200: PipelineScheduleDetailsSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const current = await loadSchedule(request, request.params.pipeline_schedule_id);
    if (!canUpdateSchedule(access.user, subjectOf(access), current) || !(await mayUseRef(access, current.ref))) throw forbidden();
    const body = request.body;
    const fields = {
      description: body.description ?? current.description,
      ref: body.ref === undefined ? current.ref : await expandRef(access, body.ref.trim()),
      cron: body.cron?.trim() ?? current.cron,
      cron_timezone: body.cron_timezone ?? current.cron_timezone,
    };
    await checkFields(access, fields, 'The current user is not authorized to update the pipeline schedule');
    // Saved, the schedule is rescheduled from now (GitLab's set_next_run_at on every save).
    const schedule = await cairn.db
      .updateTable('ci_pipeline_schedules')
      .set({ ...fields, active: body.active ?? current.active, next_run_at: nextRunAt(fields), updated_at: sql`now()` as any })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return details(request, schedule);
  });

  /** May the caller put pipelines on this ref (a protected one: who may update it)? */
  async function mayUseRef(access: ProjectAccess, ref: string): Promise<boolean> {
    const target = refOf(ref);
    return !!access.user && canUpdateRef(cairn.db, access.project, access.user, access.accessLevel, target.ref, target.tag);
  }

  app.post('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/take_ownership', route({ matrix: { is: 'maintainer', reads: 'reporter', cells: hidden, fresh: ['pipeline_schedule_id'] },
    access: readAccess,
    schema: { params: ScheduleParams, response: { 200: PipelineScheduleDetailsSchema, 201: PipelineScheduleDetailsSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const current = await loadSchedule(request, request.params.pipeline_schedule_id);
    if (!canAdminSchedule(access.user, subjectOf(access), current)) throw forbidden();
    if (ownedBy(access.user, current)) return reply.code(200).send(await details(request, current));
    const schedule = await cairn.db
      .updateTable('ci_pipeline_schedules')
      .set({ owner_id: access.user!.id, next_run_at: nextRunAt(current), updated_at: sql`now()` as any })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return reply.code(201).send(await details(request, schedule));
  });

  app.delete('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id', route({ matrix: { is: 'maintainer', reads: 'reporter', cells: hidden },
    access: readAccess,
    schema: { params: ScheduleParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const current = await loadSchedule(request, request.params.pipeline_schedule_id);
    if (!canAdminSchedule(access.user, subjectOf(access), current)) throw forbidden();
    // Its pipelines stay (their pipeline_schedule_id is set to null), its variables go with it.
    await cairn.db.deleteFrom('ci_pipeline_schedules').where('id', '=', current.id).execute();
    return reply.code(204).send();
  });

  app.post('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/play', route({ matrix: { is: 'developer', reads: 'reporter', cells: hidden },
    access: readAccess,
    schema: { params: ScheduleParams, response: { 201: CreatedMessageSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const schedule = await loadSchedule(request, request.params.pipeline_schedule_id);
    if (!can(access.user, 'create_pipeline', subjectOf(access)) || !(await mayUseRef(access, schedule.ref))) throw forbidden();
    // The pipeline is created by the queue, as the caller; the next scheduled run is not affected.
    await enqueue(cairn.db, PLAY_SCHEDULE_JOB, { scheduleId: schedule.id, userId: access.user!.id }, { maxAttempts: 3 });
    return reply.code(201).send({ message: '201 Created' });
  });

  // ---- variables ------------------------------------------------------------------------------

  /** The schedule of a variable route, for a caller who may set pipeline variables and edit it. */
  async function editableSchedule(request: FastifyRequest, id: number, rule: 'update' | 'admin'): Promise<CiPipelineSchedule> {
    const access = projectOf(request);
    const schedule = await loadSchedule(request, id);
    const allowed = rule === 'update' ? canUpdateSchedule(access.user, subjectOf(access), schedule) : canAdminSchedule(access.user, subjectOf(access), schedule);
    if (!allowed) throw forbidden();
    return schedule;
  }

  const setVariables = { project: 'set_pipeline_variables', signedIn: true } as const;

  app.post('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/variables', route({ matrix: { is: 'admin', reads: 'developer' },
    access: setVariables,
    schema: { params: ScheduleParams, body: VariableBody, response: { 201: ScheduleVariableSchema } },
  }), async (request, reply) => {
    const schedule = await editableSchedule(request, request.params.pipeline_schedule_id, 'update');
    const body = request.body;
    const variableType = body.variable_type ?? 'env_var';
    validateVariable({ key: body.key, value: body.value, variable_type: variableType });
    const row = await cairn.db
      .insertInto('ci_pipeline_schedule_variables')
      .values({ pipeline_schedule_id: schedule.id, key: body.key, value_encrypted: encryptSecret(cairn.config, body.value), variable_type: variableType as 'env_var' | 'file' })
      .onConflict((oc) => oc.columns(['pipeline_schedule_id', 'key']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) throw validationFailed({ key: ['has already been taken'] });
    return reply.code(201).send(presentVariable(row));
  });

  app.get('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/variables/:key', route({ matrix: { is: 'maintainer', reads: 'reporter', cells: hidden },
    access: readAccess,
    schema: { params: VariableParams, response: { 200: ScheduleVariableSchema } },
  }), async (request) => {
    const schedule = await editableSchedule(request, request.params.pipeline_schedule_id, 'admin');
    return presentVariable(await loadVariable(schedule, request.params.key));
  });

  app.put('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/variables/:key', route({ matrix: { is: 'admin', reads: 'developer' },
    access: setVariables,
    schema: { params: VariableParams, body: VariableUpdateBody, response: { 200: ScheduleVariableSchema } },
  }), async (request) => {
    const schedule = await editableSchedule(request, request.params.pipeline_schedule_id, 'update');
    const current = await loadVariable(schedule, request.params.key);
    const body = request.body;
    validateVariable({ value: body.value, variable_type: body.variable_type });
    const row = await cairn.db
      .updateTable('ci_pipeline_schedule_variables')
      .set({
        ...(body.value !== undefined ? { value_encrypted: encryptSecret(cairn.config, body.value) } : {}),
        ...(body.variable_type !== undefined ? { variable_type: body.variable_type as 'env_var' | 'file' } : {}),
        updated_at: sql`now()` as any,
      })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return presentVariable(row);
  });

  app.delete('/api/v4/projects/:id/pipeline_schedules/:pipeline_schedule_id/variables/:key', route({ matrix: { is: 'maintainer', reads: 'developer' },
    access: setVariables,
    schema: { params: VariableParams, response: { 202: ScheduleVariableSchema } },
  }), async (request, reply) => {
    const schedule = await editableSchedule(request, request.params.pipeline_schedule_id, 'admin');
    const current = await loadVariable(schedule, request.params.key);
    await cairn.db.deleteFrom('ci_pipeline_schedule_variables').where('id', '=', current.id).execute();
    return reply.code(202).send(presentVariable(current));
  });
}

