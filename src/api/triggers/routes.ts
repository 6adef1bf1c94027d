import crypto from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { sql } from 'kysely';
import { Type } from 'typebox';
import { findRunningJobByToken } from '../../ci/job_tokens.js';
import { createPipeline, type PipelineVariableInput } from '../../ci/pipelines/create.js';
import { pipelineRefusal, resolvePipelineRef } from '../../ci/pipelines/run_as.js';
import type { User } from '../../db/schema/core.js';
import type { CiTrigger } from '../../db/schema/pipeline_schedules.js';
import { projectAccessLevel } from '../../finders/access_levels.js';
import { loadPipelineExtras } from '../../finders/pipelines.js';
import { findProjectRow, type FoundProject } from '../../finders/projects.js';
import { findUserById, findUsersByIds } from '../../finders/users.js';
import { decryptSecret, encryptSecret, tokenDigest } from '../../lib/secrets.js';
import { apiError, forbidden, notFound, validationFailed } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { registerMultipartFields } from '../../plugins/params.js';
import { can, effectiveLevel } from '../../policies/abilities.js';
import { jobTokenMayAccess } from '../../policies/job_token_scope.js';
import { canAdminTrigger, seesTriggerToken } from '../../policies/pipeline_schedules.js';
import { presentPipeline } from '../../presenters/ci.js';
import { presentTrigger } from '../../presenters/pipeline_schedules.js';
import { PipelineSchema } from '../../presenters/schemas/ci.js';
import { TriggerSchema } from '../../presenters/schemas/pipeline_schedules.js';
import { RowId } from '../params.js';
import { NoContent, projectOf, route } from '../route.js';

// Pipeline trigger tokens (GitLab's Pipeline trigger tokens API) and the pipelines they start.
// A token (`glptt-` and 40 hex digits, as GitLab 16+) is looked up by its SHA-256 digest; its value
// is also kept encrypted because GitLab shows a trigger's token in full to the user who owns it
// (others see four characters of it). A triggered pipeline runs as the token's owner, with source
// `trigger`; a running job's CI_JOB_TOKEN works too, as the job's user, source `pipeline`.

const IdParams = Type.Object({ id: Type.String() });
const TriggerParams = Type.Object({ id: Type.String(), trigger_id: RowId });
const RefParams = Type.Object({ id: Type.String(), ref: Type.String() });
const TriggerBody = Type.Object({ token: Type.String(), ref: Type.String(), variables: Type.Optional(Type.Unknown()) });
const RefTriggerBody = Type.Object({ token: Type.String(), variables: Type.Optional(Type.Unknown()) });

const TOKEN_PREFIX = 'glptt-';
const VARIABLE_KEY = /^[A-Za-z0-9_]{1,255}$/;

/** What others than its owner see of a token: its first four characters after the prefix (GitLab's short_token). */
const shortToken = (token: string) => (token.startsWith(TOKEN_PREFIX) ? token.slice(TOKEN_PREFIX.length) : token).slice(0, 4);

/** GitLab's payload variable: the request's parameters but the token, as a file. */
const PAYLOAD_VARIABLE = 'TRIGGER_PAYLOAD';

export default async function triggerRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  registerMultipartFields(app);
  const ctxOf = (request: FastifyRequest) => ({ baseUrl: cairn.config.externalUrl, viewer: request.actor?.user ?? null });

  async function present(request: FastifyRequest, triggers: CiTrigger[]) {
    const owners = await findUsersByIds(cairn.db, triggers.flatMap((t) => (t.owner_id === null ? [] : [t.owner_id])));
    const viewer = request.actor?.user ?? null;
    return triggers.map((t) => {
      const token = decryptSecret(cairn.config, t.token_encrypted) ?? '';
      return presentTrigger(ctxOf(request), t, (t.owner_id !== null && owners.get(t.owner_id)) || null, seesTriggerToken(viewer, t) ? token : shortToken(token));
    });
  }

  async function findTrigger(projectId: number, id: number): Promise<CiTrigger> {
    const t = await cairn.db.selectFrom('ci_triggers').selectAll().where('id', '=', id).where('project_id', '=', projectId).executeTakeFirst();
    if (!t) throw notFound('Trigger');
    return t;
  }

  const manage = { project: 'admin_build', signedIn: true } as const;

  app.get('/api/v4/projects/:id/triggers', route({ matrix: 'maintainer',
    access: manage,
    paginated: true,
    schema: { params: IdParams, response: { 200: Type.Array(TriggerSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const page = pageParams(request);
    const q = cairn.db.selectFrom('ci_triggers').where('project_id', '=', project.id);
    const [rows, total] = await Promise.all([
      q.selectAll().orderBy('id').limit(page.perPage).offset(page.offset).execute(),
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    return present(request, rows);
  });

  app.get('/api/v4/projects/:id/triggers/:trigger_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: TriggerParams, response: { 200: TriggerSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return (await present(request, [await findTrigger(project.id, request.params.trigger_id)]))[0];
  });

  app.post('/api/v4/projects/:id/triggers', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: IdParams, body: Type.Object({ description: Type.String() }), response: { 201: TriggerSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    if (request.body.description.length > 255) throw validationFailed({ description: ['is too long (maximum is 255 characters)'] });
    const token = `${TOKEN_PREFIX}${crypto.randomBytes(20).toString('hex')}`;
    const row = await cairn.db
      .insertInto('ci_triggers')
      .values({ project_id: project.id, owner_id: user!.id, description: request.body.description, token_digest: tokenDigest(token), token_encrypted: encryptSecret(cairn.config, token) })
      .returningAll()
      .executeTakeFirstOrThrow();
    return reply.code(201).send((await present(request, [row]))[0]);
  });

  app.put('/api/v4/projects/:id/triggers/:trigger_id', route({ matrix: { is: 'admin', reads: 'maintainer' },
    access: manage,
    schema: { params: TriggerParams, body: Type.Object({ description: Type.Optional(Type.String()) }), response: { 200: TriggerSchema } },
  }), async (request) => {
    const { project, user, accessLevel } = projectOf(request);
    const current = await findTrigger(project.id, request.params.trigger_id);
    if (!canAdminTrigger(user, { project, accessLevel }, current)) throw forbidden('The current user is not authorized to manage the pipeline trigger token');
    const description = request.body.description;
    if (description !== undefined && description.length > 255) throw validationFailed({ description: ['is too long (maximum is 255 characters)'] });
    const row = await cairn.db
      .updateTable('ci_triggers')
      .set({ ...(description !== undefined ? { description } : {}), updated_at: sql`now()` as any })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return (await present(request, [row]))[0];
  });

  app.delete('/api/v4/projects/:id/triggers/:trigger_id', route({ matrix: 'maintainer',
    access: manage,
    schema: { params: TriggerParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const current = await findTrigger(project.id, request.params.trigger_id);
    // Its pipelines stay (their trigger_id is set to null).
    await cairn.db.deleteFrom('ci_triggers').where('id', '=', current.id).execute();
    return reply.code(204).send();
  });

  // ---- triggering ------------------------------------------------------------------------------

  /** Who a trigger request runs as: a trigger token of this project, or a running job's token; null when neither. */
  async function credentialOf(project: FoundProject, token: string): Promise<{ user: User | undefined; trigger?: CiTrigger; jobId?: number } | null> {
    const trigger = await cairn.db.selectFrom('ci_triggers').selectAll().where('token_digest', '=', tokenDigest(token)).executeTakeFirst();
    // A trigger of another project tells nothing about this one.
    if (trigger) return trigger.project_id === project.id ? { user: trigger.owner_id === null ? undefined : await findUserById(cairn.db, trigger.owner_id), trigger } : null;
    const job = await findRunningJobByToken(cairn, token);
    if (!job) return null;
    const user = job.user_id === null ? undefined : await findUserById(cairn.db, job.user_id);
    if (!user || user.state !== 'active') throw apiError(401, '401 Unauthorized');
    // A project the job's user cannot see, or that the job's project may not reach, is not found.
    const level = effectiveLevel(user, await projectAccessLevel(cairn.db, user.id, project));
    if (!can(user, 'read_project', { project, accessLevel: level })) return null;
    if (!(await jobTokenMayAccess(cairn.db, job.project_id, project))) return null;
    return { user, jobId: job.id };
  }

  async function trigger(request: FastifyRequest, idOrPath: string, ref: string, token: string, rawVariables: unknown) {
    if (String(request.headers['x-gitlab-event'] ?? '') === 'Pipeline Hook') throw forbidden();
    const given = rawVariables === undefined || rawVariables === null || rawVariables === '' ? {} : rawVariables;
    if (typeof given !== 'object' || Array.isArray(given) || !Object.values(given as object).every((v) => typeof v === 'string')) {
      throw apiError(400, 'variables needs to be a map of key-valued strings');
    }
    const project = await findProjectRow(cairn.db, idOrPath);
    if (!project) throw notFound();
    const cred = await credentialOf(project, token);
    if (!cred) throw notFound();
    const entries = Object.entries(given as Record<string, string>);
    if (entries.some(([key]) => !VARIABLE_KEY.test(key))) throw validationFailed({ base: ["Variables key can contain only letters, digits and '_'."] });
    const target = await resolvePipelineRef(cairn, project, ref);
    if (!target) throw validationFailed({ base: ['Reference not found'] });
    const refusal = await pipelineRefusal(cairn, project, cred.user, target);
    if (refusal) throw validationFailed({ base: [refusal] });
    const payload: Record<string, unknown> = { ref, id: idOrPath };
    if (rawVariables !== undefined) payload.variables = given;
    const variables: PipelineVariableInput[] = [
      ...entries.filter(([key]) => key !== PAYLOAD_VARIABLE).map(([key, value]) => ({ key, value })),
      { key: PAYLOAD_VARIABLE, value: JSON.stringify(payload), variable_type: 'file' as const },
    ];
    const result = await createPipeline(cairn, {
      project, ref: target.ref, tag: target.tag, sha: target.sha, source: cred.trigger ? 'trigger' : 'pipeline', userId: cred.user!.id,
      variables, api: true, triggerId: cred.trigger?.id ?? null, sourceJobId: cred.jobId ?? null,
      // The token's last use is its newest pipeline's creation.
      beforeCommit: async (trx) => {
        if (cred.trigger) await trx.updateTable('ci_triggers').set({ last_used_at: sql`now()` as any }).where('id', '=', cred.trigger.id).execute();
      },
    });
    if (result.kind !== 'created') throw validationFailed({ base: result.errors ?? [result.message] });
    const p = result.pipeline;
    return presentPipeline(ctxOf(request), project, p, await loadPipelineExtras(cairn.db, p));
  }

  // The token in the parameters is the credential: API tokens are not read here.
  const own = { custom: 'a pipeline trigger token of the project, or a CI job token of a job that may reach it (`token` parameter)' } as const;
  const config = { skipApiAuth: true };

  app.post('/api/v4/projects/:id/trigger/pipeline', route({ matrix: { own: 400 },
    access: own,
    config,
    schema: { params: IdParams, body: TriggerBody, response: { 201: PipelineSchema } },
  }), async (request, reply) => {
    const body = request.body;
    return reply.code(201).send(await trigger(request, request.params.id, body.ref, body.token, body.variables));
  });

  app.post('/api/v4/projects/:id/ref/:ref/trigger/pipeline', route({ matrix: { own: 400 },
    access: own,
    config,
    schema: { params: RefParams, body: RefTriggerBody, response: { 201: PipelineSchema } },
  }), async (request, reply) => {
    const body = request.body;
    return reply.code(201).send(await trigger(request, request.params.id, request.params.ref, body.token, body.variables));
  });
}
