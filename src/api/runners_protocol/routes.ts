import crypto from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiBuild, CiRunner } from '../../db/schema/ci.js';
import { jobTokenResolver, findRunningJobByToken } from '../../ci/job_tokens.js';
import { finishBuild } from '../../ci/jobs/state.js';
import { buildJobPayload, dependencyJobs, RUNNER_FAILURE_REASONS } from '../../ci/protocol/payload.js';
import { pickJob } from '../../ci/protocol/pick.js';
import { jobWakeup } from '../../ci/queue.js';
import {
  deleteRunner,
  findRunnerByToken,
  recordRunnerContact,
  registerRunner,
  resetRunnerToken,
  type RegisterParams,
  type RunnerInfo,
} from '../../ci/runners.js';
import { appendTrace } from '../../ci/trace.js';
import { artifactTooLarge, downloadableArchive, storeUploadedArtifacts, type ArtifactUpload } from '../../services/artifacts.js';
import { sendArchive } from '../job_artifacts/send.js';
import { dropUnreadBody } from './unread_body.js';
import { ApiError, apiError, badRequest, forbidden, missingParam, notFound, unauthorized } from '../../plugins/errors.js';
import { RawBody, route, type Access } from '../route.js';
import { RowId } from '../params.js';
import { findProjectRow } from '../../finders/projects.js';
import { presentJob, presentPipelineSummary } from '../../presenters/ci.js';
import { loadJobExtras } from '../../finders/pipelines.js';
import { presentProjectIdentity } from '../../presenters/projects.js';
import { presentUserBasic } from '../../presenters/users.js';
import { ProjectIdentitySchema } from '../../presenters/schemas/projects.js';
import { Nullable, Timestamp } from '../../presenters/schemas/common.js';
import { JobSchema } from '../../presenters/schemas/ci.js';

// The runner protocol (what gitlab-runner's network/gitlab.go speaks): registration, the job
// long poll, job updates, trace appends and artifacts. Runners authenticate with their own
// tokens (in the body, or RUNNER-TOKEN) and jobs with the job token (JOB-TOKEN or the body's
// token), so these routes skip the API's user authentication.

const RUNNER: Access = { custom: 'runner authentication token (body `token` or RUNNER-TOKEN header)' };
const REGISTRATION: Access = { custom: 'runner registration token of the instance, a group or a project (body `token`)' };
const JOB: Access = { custom: 'job token of the running job :id (JOB-TOKEN header or body `token`)' };
const config = { skipApiAuth: true };

const Message = Type.Object({ message: Type.Unknown() }, { additionalProperties: true });
const RunnerTokenAnswer = Type.Object({ id: Type.Integer(), token: Type.String(), token_expires_at: Type.Union([Type.String(), Type.Null()]) });
const InfoBody = Type.Optional(Type.Object({}, { additionalProperties: true }));
const JobParams = Type.Object({ id: RowId });

const Variable = Type.Object({ key: Type.String(), value: Type.String(), public: Type.Boolean(), masked: Type.Boolean(), file: Type.Boolean(), raw: Type.Boolean() });
const JobPayload = Type.Object(
  {
    id: Type.Integer(),
    token: Type.String(),
    allow_git_fetch: Type.Boolean(),
    job_info: Type.Object({ id: Type.Integer(), name: Type.String(), stage: Type.String(), project_id: Type.Integer(), project_name: Type.String() }, { additionalProperties: true }),
    git_info: Type.Object(
      {
        repo_url: Type.String(),
        ref: Type.String(),
        sha: Type.String(),
        before_sha: Type.String(),
        ref_type: Type.Union([Type.Literal('branch'), Type.Literal('tag')]),
        refspecs: Type.Array(Type.String()),
        depth: Type.Integer(),
      },
      { additionalProperties: true },
    ),
    runner_info: Type.Object({ timeout: Type.Integer(), runner_session_url: Type.Null() }),
    variables: Type.Array(Variable),
    steps: Type.Array(Type.Object({ name: Type.String(), script: Type.Array(Type.String()), timeout: Type.Integer(), when: Type.String(), allow_failure: Type.Boolean() })),
    image: Type.Union([Type.Object({ name: Type.String() }, { additionalProperties: true }), Type.Null()]),
    services: Type.Array(Type.Object({ name: Type.String() }, { additionalProperties: true })),
    artifacts: Type.Array(Type.Object({ artifact_type: Type.String(), artifact_format: Type.String(), paths: Type.Array(Type.String()) }, { additionalProperties: true })),
    cache: Type.Array(Type.Object({ key: Type.String() }, { additionalProperties: true })),
    credentials: Type.Array(Type.Unknown()),
    dependencies: Type.Array(
      Type.Object({
        id: Type.Integer(),
        name: Type.String(),
        token: Type.String(),
        artifacts_file: Type.Optional(Type.Object({ filename: Type.String(), size: Type.Integer() })),
      }),
    ),
    features: Type.Object({}, { additionalProperties: true }),
  },
  { additionalProperties: false },
);

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function bodyOf(request: FastifyRequest): Record<string, any> {
  const b = request.body;
  return b && typeof b === 'object' && !Buffer.isBuffer(b) ? (b as Record<string, any>) : {};
}

/** The runner of the request's token; 403 (GitLab's forbidden!) when there is none. */
async function authenticateRunner(request: FastifyRequest): Promise<CiRunner> {
  const token = bodyOf(request).token ?? header(request, 'runner-token');
  if (token === undefined || token === '') throw missingParam('token');
  const runner = await findRunnerByToken(request.server.cairn, token);
  if (!runner) throw forbidden();
  return runner;
}

function jobStatusError(status: number, message: string, build?: Pick<CiBuild, 'status'>) {
  return new ApiError(status, { message }, build ? { 'Job-Status': build.status } : {});
}

/**
 * The job :id, authenticated by its token and running. 404 for an unknown job; 403 for a wrong
 * or dead token (a finished or canceled job's token is gone), which makes the runner stop.
 */
export async function authenticateJob(request: FastifyRequest, id: number): Promise<CiBuild> {
  const cairn = request.server.cairn;
  const token = header(request, 'job-token') ?? bodyOf(request).token ?? (request.query as Record<string, unknown> | undefined)?.token;
  const build = await findRunningJobByToken(cairn, token);
  if (build && build.id === id) return build;
  const exists = await cairn.db.selectFrom('ci_builds').select(['id', 'status']).where('id', '=', id).executeTakeFirst();
  if (!exists) throw notFound();
  if (exists.status !== 'running') throw jobStatusError(403, '403 Forbidden - Job is not processing on runner');
  throw forbidden();
}

function clientIp(request: FastifyRequest): string | null {
  return request.ip ?? null;
}

/** GitLab answers 204 "no job" with X-GitLab-Last-Update, a value the runner sends back as last_update. */
function lastUpdate(): string {
  return crypto.randomBytes(16).toString('hex');
}

async function touchRunner(cairn: Cairn, runnerId: number | null) {
  if (!runnerId) return;
  await sql`update ci_runners set contacted_at = now() where id = ${runnerId}
            and (contacted_at is null or contacted_at < now() - interval '1 minute')`.execute(cairn.db);
}

const TRACE_UPDATE_INTERVAL = '3';

/** GET /job/allowed_agents, as the spec shows it. */
const AllowedAgentsSchema = Type.Object({
  allowed_agents: Type.Array(Type.Object({ id: Type.Integer(), config_project: ProjectIdentitySchema })),
  job: Type.Object({ id: Type.Integer(), name: Type.String(), stage: Type.String(), project_id: Type.Integer(), project_name: Type.String() }, { additionalProperties: false }),
  pipeline: Type.Object({
    id: Type.Integer(), project_id: Type.Integer(), sha: Type.String(), ref: Type.String(), status: Type.String(),
    created_at: Timestamp, updated_at: Timestamp, web_url: Type.String(),
  }, { additionalProperties: false }),
  project: ProjectIdentitySchema,
  user: Type.Object({
    id: Type.Integer(), name: Type.String(), username: Type.String(), state: Type.String(), avatar_url: Nullable(Type.String()), web_url: Type.String(),
  }, { additionalProperties: false }),
}, { additionalProperties: false });

export default async function runnerProtocolRoutes(app: FastifyInstance) {
  const cairn = app.cairn;
  if (!cairn.tokenResolvers.includes(jobTokenResolver)) cairn.tokenResolvers.push(jobTokenResolver);
  // Long polls end when the app closes (their requests would otherwise hold the close up).
  const closing = new AbortController();
  // Every held long poll listens on it: as many listeners as waiting runners, not a leak.
  setMaxListeners(0, closing.signal);
  app.addHook('onClose', async () => closing.abort());

  // Trace patches arrive as text/plain (binary-safe here); artifacts as multipart, streamed.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser(['text/plain', 'application/octet-stream'], { parseAs: 'buffer', bodyLimit: Math.max(cairn.config.maxBodySize, 4 * 1024 * 1024) }, (_r, body, done) => done(null, body));
  app.addContentTypeParser('multipart/form-data', (_request, payload, done) => done(null, payload));

  // ---- the job of a job token ---------------------------------------------------------------

  app.get('/api/v4/job', route({ matrix: { own: 401, job: 'ok' },
    access: { custom: 'a CI job token (JOB-TOKEN, job_token or Bearer): the job it belongs to', signedIn: true },
    config: { jobToken: true },
    schema: { response: { 200: JobSchema } },
  }), async (request) => {
    const actor = request.actor;
    if (!actor || actor.kind !== 'job_token') throw unauthorized();
    const build = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', Number(actor.meta?.jobId)).executeTakeFirst();
    const project = build ? await findProjectRow(cairn.db, build.project_id) : undefined;
    if (!build || !project) throw unauthorized();
    const extras = await loadJobExtras(cairn, project, [build]);
    return presentJob({ baseUrl: cairn.config.externalUrl, viewer: actor.user }, project, build, extras);
  });

  // GitLab's Kubernetes agents a job may use (premium). Cairn has no agents, so the list is
  // empty; the job, its pipeline, project and user are as GitLab shows them.
  app.get('/api/v4/job/allowed_agents', route({ matrix: { own: 401, job: 'ok' },
    access: { custom: 'a CI job token (JOB-TOKEN or job_token): the job it belongs to', signedIn: true },
    config: { jobToken: true },
    schema: { response: { 200: AllowedAgentsSchema } },
  }), async (request) => {
    const actor = request.actor;
    if (!actor || actor.kind !== 'job_token') throw unauthorized();
    const build = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', Number(actor.meta?.jobId)).executeTakeFirst();
    const project = build ? await findProjectRow(cairn.db, build.project_id) : undefined;
    const pipeline = build ? await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', build.pipeline_id).executeTakeFirst() : undefined;
    if (!build || !project || !pipeline) throw unauthorized();
    const ctx = { baseUrl: cairn.config.externalUrl, viewer: actor.user };
    const { source: _source, iid: _iid, ...pipelineShown } = presentPipelineSummary(ctx, project, pipeline);
    const { id, name, username, state, avatar_url, web_url } = presentUserBasic(ctx, actor.user);
    return {
      allowed_agents: [],
      job: { id: build.id, name: build.name, stage: build.stage, project_id: project.id, project_name: project.name },
      pipeline: pipelineShown,
      project: presentProjectIdentity(project),
      user: { id, name, username, state, avatar_url, web_url },
    };
  });

  // ---- registration ------------------------------------------------------------------------

  app.post('/api/v4/runners', route({ matrix: { own: 'ok' },
    access: REGISTRATION,
    config,
    schema: {
      body: Type.Object({
        token: Type.Optional(Type.String()),
        description: Type.Optional(Type.String()),
        maintenance_note: Type.Optional(Type.String()),
        maintainer_note: Type.Optional(Type.String()),
        info: InfoBody,
        active: Type.Optional(Type.Boolean()),
        paused: Type.Optional(Type.Boolean()),
        locked: Type.Optional(Type.Boolean()),
        run_untagged: Type.Optional(Type.Boolean()),
        tag_list: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
        access_level: Type.Optional(Type.String()),
        maximum_timeout: Type.Optional(Type.Integer({ minimum: 0, maximum: 2147483647 })),
      }, { additionalProperties: true }),
      response: { 201: RunnerTokenAnswer },
    },
  }), async (request, reply) => {
    const body = bodyOf(request);
    if (!body.token) throw missingParam('token');
    const created = await registerRunner(cairn, body.token, body as RegisterParams, clientIp(request));
    if (!created) throw forbidden();
    return reply.code(201).send(created);
  });

  app.post('/api/v4/runners/verify', route({ matrix: { own: 'ok' },
    access: RUNNER,
    config,
    schema: { body: Type.Object({ token: Type.Optional(Type.String()), system_id: Type.Optional(Type.String()), info: InfoBody }, { additionalProperties: true }), response: { 200: RunnerTokenAnswer } },
  }), async (request, reply) => {
    const runner = await authenticateRunner(request);
    const body = bodyOf(request);
    await recordRunnerContact(cairn, runner, body.info as RunnerInfo | undefined, clientIp(request));
    return reply.send({ id: runner.id, token: String(body.token ?? header(request, 'runner-token')), token_expires_at: runner.token_expires_at ? new Date(runner.token_expires_at).toISOString() : null });
  });

  app.delete('/api/v4/runners', route({ matrix: { own: 'ok' },
    access: RUNNER,
    config,
    schema: { body: Type.Optional(Type.Object({ token: Type.Optional(Type.String()) }, { additionalProperties: true })), response: { 204: Type.Null() } },
  }), async (request, reply) => {
    const runner = await authenticateRunner(request);
    await deleteRunner(cairn, runner.id);
    return reply.code(204).send();
  });

  app.post('/api/v4/runners/reset_authentication_token', route({ matrix: { own: 'ok' },
    access: RUNNER,
    config,
    schema: {
      body: Type.Object({ token: Type.Optional(Type.String()) }, { additionalProperties: true }),
      response: { 201: Type.Object({ token: Type.String(), token_expires_at: Type.Union([Type.String(), Type.Null()]) }) },
    },
  }), async (request, reply) => {
    const runner = await authenticateRunner(request);
    return reply.code(201).send(await resetRunnerToken(cairn, runner.id));
  });

  // ---- the job long poll ------------------------------------------------------------------

  app.post('/api/v4/jobs/request', route({ matrix: { own: 'ok' },
    access: RUNNER,
    config,
    schema: {
      body: Type.Object({ token: Type.Optional(Type.String()), info: InfoBody, last_update: Type.Optional(Type.String()), system_id: Type.Optional(Type.String()), session: Type.Optional(Type.Unknown()) }, { additionalProperties: true }),
      response: { 201: JobPayload, 204: Type.Null() },
    },
  }), async (request, reply) => {
    const runner = await authenticateRunner(request);
    await recordRunnerContact(cairn, runner, bodyOf(request).info as RunnerInfo | undefined, clientIp(request));
    const noJob = () => reply.code(204).header('X-GitLab-Last-Update', lastUpdate()).send();
    if (!runner.active) return noJob();

    // Held open until a job is taken, the poll time is over, the runner hung up or Cairn stops.
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableEnded) gone.abort();
    };
    reply.raw.once('close', onClose);
    const stopClosing = () => gone.abort();
    closing.signal.addEventListener('abort', stopClosing, { once: true });
    if (closing.signal.aborted) gone.abort();
    const wakeup = jobWakeup(cairn);
    const deadline = Date.now() + cairn.config.runnerPollTimeout * 1000;
    try {
      for (;;) {
        const since = wakeup.generation;
        const picked = await pickJob(cairn, runner);
        if (picked) {
          if (gone.signal.aborted && !closing.signal.aborted) {
            // The runner is gone: nobody will run it. Hand it back to the queue by failing it
            // as GitLab does for a lost runner would take a timeout; fail it at once instead.
            await finishBuild(cairn, picked.build.id, { status: 'failed', failureReason: 'runner_system_failure' });
            return reply;
          }
          const payload = await buildJobPayload(cairn, picked.build, picked.token, runner);
          return reply.code(201).send(payload);
        }
        const left = deadline - Date.now();
        if (left <= 0 || gone.signal.aborted) return noJob();
        await wakeup.wait(since, left, gone.signal);
      }
    } finally {
      wakeup.close();
      reply.raw.off('close', onClose);
      closing.signal.removeEventListener('abort', stopClosing);
    }
  });

  // ---- job updates and trace ----------------------------------------------------------------

  app.put('/api/v4/jobs/:id', route({ matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config,
    schema: {
      params: JobParams,
      body: Type.Object(
        {
          token: Type.Optional(Type.String()),
          state: Type.Optional(Type.String()),
          failure_reason: Type.Optional(Type.String()),
          exit_code: Type.Optional(Type.Integer({ minimum: -2147483648, maximum: 2147483647 })),
          checksum: Type.Optional(Type.String()),
          output: Type.Optional(Type.Object({}, { additionalProperties: true })),
          info: InfoBody,
        },
        { additionalProperties: true },
      ),
      response: { 200: RawBody('text/plain') },
    },
  }), async (request, reply) => {
    const { id } = request.params as { id: number };
    const build = await authenticateJob(request, id);
    const body = bodyOf(request);
    await touchRunner(cairn, build.runner_id);
    let status: string = build.status;
    if (body.state === 'success' || body.state === 'failed') {
      const reason = body.state === 'failed' ? (RUNNER_FAILURE_REASONS.has(body.failure_reason) ? body.failure_reason : body.failure_reason ? 'unknown_failure' : 'script_failure') : undefined;
      const done = await finishBuild(cairn, build.id, { status: body.state, failureReason: reason, exitCode: typeof body.exit_code === 'number' ? body.exit_code : null });
      if (!done) {
        const now = await cairn.db.selectFrom('ci_builds').select('status').where('id', '=', build.id).executeTakeFirst();
        throw jobStatusError(403, '403 Forbidden - Job is not processing on runner', now ?? undefined);
      }
      status = body.state;
    } else if (body.state !== undefined && body.state !== 'running' && body.state !== 'pending') {
      throw badRequest('state does not have a valid value');
    } else {
      // The runner's keep-alive: the job is being worked on (the stuck-job sweep, ci/jobs/stuck.ts,
      // fails running jobs nobody updated for an hour). Written at most once a minute.
      await sql`update ci_builds set updated_at = now() where id = ${build.id} and status = 'running'
                and updated_at < now() - interval '1 minute'`.execute(cairn.db);
    }
    return reply.code(200).header('Job-Status', status).header('X-GitLab-Trace-Update-Interval', TRACE_UPDATE_INTERVAL).type('text/plain').send('200');
  });

  app.patch('/api/v4/jobs/:id/trace', route({ matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config,
    schema: { params: JobParams, response: { 202: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { id } = request.params as { id: number };
    const build = await authenticateJob(request, id);
    const range = header(request, 'content-range');
    if (!range) throw apiError(400, '400 Missing header Content-Range');
    const m = /^(?:bytes\s+)?(\d+)-(\d+)(?:\/\d+|\/\*)?$/.exec(range.trim());
    if (!m) throw apiError(400, '400 Bad Request - invalid Content-Range');
    const start = Number(m[1]);
    const data = Buffer.isBuffer(request.body) ? request.body : typeof request.body === 'string' ? Buffer.from(request.body) : Buffer.alloc(0);
    await touchRunner(cairn, build.runner_id);
    if (start + data.length > cairn.config.maxTraceSize) {
      await finishBuild(cairn, build.id, { status: 'failed', failureReason: 'trace_size_exceeded' });
      throw new ApiError(403, { message: '403 Forbidden: Job log size limit exceeded' }, { 'Job-Status': 'failed' });
    }
    const result = await appendTrace(cairn.db, build.id, start, data);
    if (!result.ok) {
      throw new ApiError(416, { message: '416 Range Not Satisfiable' }, { Range: `0-${result.size}`, 'Job-Status': build.status });
    }
    return reply
      .code(202)
      .header('Job-Status', build.status)
      .header('Range', `0-${result.size}`)
      .header('X-GitLab-Trace-Update-Interval', TRACE_UPDATE_INTERVAL)
      .type('text/plain')
      .send('202');
  });

  // ---- artifacts ----------------------------------------------------------------------------

  app.post('/api/v4/jobs/:id/artifacts/authorize', route({ matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config,
    schema: {
      params: JobParams,
      querystring: Type.Object({ filesize: Type.Optional(Type.Integer({ minimum: 0 })), artifact_type: Type.Optional(Type.String()) }, { additionalProperties: true }),
      body: Type.Optional(Type.Object({ filesize: Type.Optional(Type.Integer({ minimum: 0 })) }, { additionalProperties: true })),
      response: { 200: Type.Object({ TempPath: Type.String(), MaximumSize: Type.Integer(), UploadHashFunctions: Type.Array(Type.String()) }) },
    },
  }), async (request, reply) => {
    const { id } = request.params as { id: number };
    await authenticateJob(request, id);
    const size = (request.query as { filesize?: number }).filesize ?? bodyOf(request).filesize;
    if (typeof size === 'number' && size > cairn.config.maxArtifactsSize) throw artifactTooLarge();
    // No Workhorse in front: the upload goes straight to POST /jobs/:id/artifacts.
    return reply.send({ TempPath: '', MaximumSize: cairn.config.maxArtifactsSize, UploadHashFunctions: ['sha256'] });
  });

  app.post('/api/v4/jobs/:id/artifacts', route({ matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config,
    schema: {
      params: JobParams,
      querystring: Type.Object(
        { artifact_type: Type.Optional(Type.String()), artifact_format: Type.Optional(Type.String()), expire_in: Type.Optional(Type.String()), accessibility: Type.Optional(Type.String()) },
        { additionalProperties: true },
      ),
      response: { 201: Type.Object({ message: Type.String() }) },
    },
  }), async (request, reply) => {
    const { id } = request.params as { id: number };
    const bodyLeftUnread = () => dropUnreadBody(request);
    const build = await authenticateJob(request, id).catch((err) => {
      bodyLeftUnread();
      throw err;
    });
    await storeUploadedArtifacts(cairn, build, {
      body: request.body as Readable | undefined,
      contentType: header(request, 'content-type'),
      contentLength: header(request, 'content-length'),
      query: request.query as ArtifactUpload['query'],
      bodyLeftUnread,
    });
    return reply.code(201).send({ message: '201 Created' });
  });

  // A dependency's archive, for a running job (its token) of the same project or depending on it.
  app.get('/api/v4/jobs/:id/artifacts', route({
    // The job column's token is the credential here; the running job has no artifacts yet (404).
    matrix: { own: 401, cells: { job: 404 } },
    access: { custom: "job token (JOB-TOKEN, `token` or `job_token`) of a running job of the same project, or one that depends on job :id" },
    config,
    schema: {
      params: JobParams,
      querystring: Type.Object({ token: Type.Optional(Type.String()), job_token: Type.Optional(Type.String()), direct_download: Type.Optional(Type.Boolean()) }, { additionalProperties: true }),
      response: { 200: RawBody('application/zip') },
    },
  }), async (request, reply) => {
    const { id } = request.params as { id: number };
    const q = request.query as { token?: string; job_token?: string };
    const current = await findRunningJobByToken(cairn, header(request, 'job-token') ?? q.token ?? q.job_token);
    if (!current) throw new ApiError(401, { message: '401 Unauthorized' });
    const target = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', id).executeTakeFirst();
    if (!target) throw notFound();
    if (target.project_id !== current.project_id) {
      const deps = await dependencyJobs(cairn.db, current);
      if (!deps.some((d) => d.id === target.id)) throw forbidden();
    }
    return sendArchive(cairn, reply, await downloadableArchive(cairn.db, target.id));
  });
}

