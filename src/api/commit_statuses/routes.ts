import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { COMMIT_STATUS_STATES, createCommitStatus, type CommitStatusState } from '../../ci/commit_statuses.js';
import type { CiBuild } from '../../db/schema/ci.js';
import type { User } from '../../db/schema/core.js';
import { invalidParam, missingParam } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { Nullable, Sha, Timestamp, strict } from '../../presenters/schemas/common.js';
import { UserBasicSchema } from '../../presenters/schemas/users.js';
import { iso, presentUserBasic, type PresentContext } from '../../presenters/users.js';
import { findCommitOrFail } from '../../services/commits.js';
import { ShaParams } from '../params.js';
import { projectOf, route } from '../route.js';

/** GitLab's Entities::CommitStatus. */
const CommitStatusSchema = Type.Object(
  {
    id: Type.Integer(),
    sha: Sha,
    ref: Nullable(Type.String()),
    status: Type.String(),
    name: Type.String(),
    target_url: Nullable(Type.String()),
    description: Nullable(Type.String()),
    created_at: Timestamp,
    started_at: Nullable(Timestamp),
    finished_at: Nullable(Timestamp),
    allow_failure: Type.Boolean(),
    coverage: Nullable(Type.Number()),
    pipeline_id: Type.Integer(),
    author: Nullable(UserBasicSchema),
  },
  strict,
);

function presentCommitStatus(ctx: PresentContext, b: CiBuild, users: Map<number, User>) {
  const author = b.user_id ? users.get(b.user_id) : undefined;
  return {
    id: b.id,
    sha: b.sha,
    ref: b.ref,
    status: b.status,
    name: b.name,
    target_url: b.target_url,
    description: b.description,
    created_at: iso(b.created_at)!,
    started_at: iso(b.started_at),
    finished_at: iso(b.finished_at),
    allow_failure: b.allow_failure,
    coverage: b.coverage === null ? null : Number(b.coverage),
    pipeline_id: b.pipeline_id,
    author: author ? presentUserBasic(ctx, author) : null,
  };
}

const ListQuery = Type.Object({
  ref: Type.Optional(Type.String()),
  stage: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  pipeline_id: Type.Optional(Type.Integer()),
  all: Type.Optional(Type.Boolean()),
  order_by: Type.Optional(Type.String()),
  sort: Type.Optional(Type.String()),
});

const CreateBody = Type.Object({
  state: Type.Optional(Type.String()),
  ref: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  context: Type.Optional(Type.String()),
  target_url: Type.Optional(Type.String()),
  description: Type.Optional(Type.String()),
  coverage: Type.Optional(Type.Number()),
  pipeline_id: Type.Optional(Type.Integer()),
});

const ctxOf = (request: FastifyRequest): PresentContext => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

/** Commit statuses: every job of the commit's pipelines, and external statuses posted by other systems. */
export default async function commitStatusRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  async function usersOf(rows: CiBuild[]): Promise<Map<number, User>> {
    const ids = [...new Set(rows.flatMap((r) => (r.user_id ? [r.user_id] : [])))];
    const users = ids.length ? await cairn.db.selectFrom('users').selectAll().where('id', 'in', ids).execute() : [];
    return new Map(users.map((u) => [u.id, u as User]));
  }

  app.get('/api/v4/projects/:id/repository/commits/:sha/statuses', route({ matrix: 'read',
    access: { project: 'read_build' },
    paginated: true,
    schema: { params: ShaParams, querystring: ListQuery, response: { 200: Type.Array(CommitStatusSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    const orderBy = q.order_by ?? 'id';
    if (orderBy !== 'id' && orderBy !== 'pipeline_id') throw invalidParam('order_by', 'does not have a valid value');
    const sort = q.sort ?? 'asc';
    if (sort !== 'asc' && sort !== 'desc') throw invalidParam('sort', 'does not have a valid value');
    const commit = await findCommitOrFail(cairn, project, request.params.sha);
    let query = cairn.db.selectFrom('ci_builds as b')
      .innerJoin('ci_pipelines as p', 'p.id', 'b.pipeline_id')
      .where('p.project_id', '=', project.id).where('p.sha', '=', commit.oid);
    if (q.ref) query = query.where('p.ref', '=', q.ref);
    if (q.pipeline_id !== undefined) query = query.where('p.id', '=', q.pipeline_id);
    if (!q.all) query = query.where('b.retried', '=', false);
    if (q.stage) query = query.where('b.stage', '=', q.stage);
    if (q.name) query = query.where('b.name', '=', q.name);
    const page = pageParams(request);
    const [rows, total] = await Promise.all([
      query.selectAll('b').orderBy(`b.${orderBy}` as 'b.id', sort).orderBy('b.id', sort).limit(page.perPage).offset(page.offset).execute(),
      query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
    ]);
    setPaginationHeaders(request, reply, page, Number(total.n));
    const users = await usersOf(rows as CiBuild[]);
    return (rows as CiBuild[]).map((b) => presentCommitStatus(ctxOf(request), b, users));
  });

  // Developers and up (GitLab's create_commit_status, then update_pipeline on the pipeline).
  app.post('/api/v4/projects/:id/statuses/:sha', route({ matrix: 'developer',
    access: { project: 'update_pipeline', signedIn: true },
    schema: { params: ShaParams, body: CreateBody, response: { 201: CommitStatusSchema } },
  }), async (request, reply) => {
    const { project, user } = projectOf(request);
    const b = request.body;
    if (b.state === undefined || b.state === '') throw missingParam('state');
    if (!(COMMIT_STATUS_STATES as readonly string[]).includes(b.state)) throw invalidParam('state', 'does not have a valid value');
    const commit = await findCommitOrFail(cairn, project, request.params.sha);
    const row = await createCommitStatus(cairn, {
      project,
      user: user!,
      sha: commit.oid,
      state: b.state as CommitStatusState,
      ref: b.ref || undefined,
      name: b.name || b.context || undefined,
      targetUrl: b.target_url,
      description: b.description,
      coverage: b.coverage,
      pipelineId: b.pipeline_id,
    });
    return reply.code(201).send(presentCommitStatus(ctxOf(request), row, await usersOf([row])));
  });
}
