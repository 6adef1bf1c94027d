import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { contentBodyLimit } from '../../config.js';
import { projectFullPath, type ProjectWithNamespace } from '../../finders/projects.js';
import { ApiError, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, paginateArray, PaginationQuery, setPaginationHeaders } from '../../plugins/pagination.js';
import { authorizeProject } from '../../finders/authorize.js';
import {
  CherryPickDryRunSchema,
  CommitDetailSchema,
  CommitRefSchema,
  CommitSchema,
  CommitWithStatsSchema,
  DiffSchema,
} from '../../presenters/schemas/commits.js';
import {
  presentCommit,
  presentCommitDetail,
  presentCommitWithStats,
  presentDiff,
  type CommitContext,
  type CommitPipeline,
} from '../../presenters/commits.js';
import {
  commitDiff,
  commitRefs,
  createCommit,
  findCommitOrFail,
  listCommits,
  pickCommit,
  statsFor,
} from '../../services/commits.js';
import { latestPipelineForSha } from '../../ci/pipelines/lookup.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { can } from '../../policies/abilities.js';
import { presentPipelineSummary } from '../../presenters/ci.js';
import { IdParams, ShaParams, timestampParam } from '../params.js';
import { projectOf, route } from '../route.js';

const ListQuery = Type.Object({
  ref_name: Type.Optional(Type.String()),
  since: Type.Optional(Type.String()),
  until: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  author: Type.Optional(Type.String()),
  all: Type.Optional(Type.Boolean()),
  with_stats: Type.Optional(Type.Boolean()),
  first_parent: Type.Optional(Type.Boolean()),
  order: Type.Optional(Type.Union([Type.Literal('default'), Type.Literal('topo')])),
  trailers: Type.Optional(Type.Boolean()),
});

const Action = Type.Object({
  action: Type.Optional(Type.String()),
  file_path: Type.Optional(Type.String()),
  previous_path: Type.Optional(Type.String()),
  content: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  encoding: Type.Optional(Type.String()),
  last_commit_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  execute_filemode: Type.Optional(Type.Boolean()),
});

const CreateBody = Type.Object(
  {
    branch: Type.String(),
    commit_message: Type.String(),
    actions: Type.Array(Action),
    start_branch: Type.Optional(Type.String()),
    start_sha: Type.Optional(Type.String()),
    start_project: Type.Optional(Type.Union([Type.Integer(), Type.String()])),
    author_email: Type.Optional(Type.String()),
    author_name: Type.Optional(Type.String()),
    stats: Type.Optional(Type.Boolean()),
    force: Type.Optional(Type.Boolean()),
  },
  { required: ['branch', 'commit_message', 'actions'] },
);

const PickBody = Type.Object({
  branch: Type.String(),
  dry_run: Type.Optional(Type.Boolean()),
  message: Type.Optional(Type.String()),
});

function commitContext(request: FastifyRequest, project: ProjectWithNamespace): CommitContext & { projectId: number } {
  return { baseUrl: request.server.cairn.config.externalUrl, projectFullPath: projectFullPath(project), projectId: project.id };
}

/** The sha's latest pipeline in CommitDetail's form, when the caller may read pipelines (GitLab's can_read_pipeline?). */
async function lastPipeline(request: FastifyRequest, access: ProjectAccess, sha: string): Promise<CommitPipeline | null> {
  if (!can(request.actor?.user ?? null, 'read_pipeline', { project: access.project, accessLevel: access.accessLevel })) return null;
  const p = await latestPipelineForSha(request.server.cairn.db, access.project.id, sha);
  if (!p) return null;
  return presentPipelineSummary({ baseUrl: request.server.cairn.config.externalUrl }, access.project, p);
}

function parseDate(value: string | undefined, name: string): Date | null {
  return timestampParam(name, value) ?? null;
}

function requireUser(request: FastifyRequest) {
  if (!request.actor) throw unauthorized();
  return request.actor.user;
}

export default async function commitRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = fastify.cairn;
  const base = '/api/v4/projects/:id/repository/commits';

  const read = { project: 'download_code' } as const;
  /**
   * Writers must read the code; whether they may push to the branch (protected branches,
   * archived projects) is the commit service's decision, in GitLab's words. Anonymous callers
   * get 401 once the project is known to be readable (the handler's requireUser).
   */
  const write = { project: 'download_code', writesRepository: true } as const;

  app.get(base, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    // with_stats=true adds stats to each commit.
    schema: { params: IdParams, querystring: ListQuery, response: { 200: Type.Union([Type.Array(CommitSchema), Type.Array(CommitWithStatsSchema)]) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    const page = pageParams(request);
    const { commits, total } = await listCommits(
      cairn,
      project,
      {
        ref: q.ref_name || project.default_branch || 'HEAD',
        all: q.all,
        path: q.path || null,
        since: parseDate(q.since, 'since'),
        until: parseDate(q.until, 'until'),
        firstParent: q.first_parent,
        topo: q.order === 'topo',
        author: q.author || null,
      },
      { offset: page.offset, limit: page.perPage },
    );
    setPaginationHeaders(request, reply, page, total);
    const ctx = commitContext(request, project);
    const opts = { trailers: q.trailers };
    if (!q.with_stats) return commits.map((c) => presentCommit(ctx, c, opts));
    const stats = await statsFor(cairn, project, commits);
    return commits.map((c) => presentCommitWithStats(ctx, c, stats.get(c.oid), opts));
  });

  app.post(base, route({ matrix: 'readCode',
    access: write,
    bodyLimit: contentBodyLimit(cairn.config),
    schema: { params: IdParams, body: CreateBody, response: { 201: CommitDetailSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const user = requireUser(request);
    const body = request.body;
    let startProject: ProjectWithNamespace | null = null;
    if (body.start_project !== undefined && body.start_project !== '' && String(body.start_project) !== String(access.project.id)) {
      // Another project, which the caller must be able to read too.
      try {
        startProject = (await authorizeProject(request, body.start_project, 'download_code')).project;
      } catch (e) {
        if (e instanceof ApiError) throw notFound('Project');
        throw e;
      }
    }
    const commit = await createCommit(cairn, {
      project: access.project,
      user,
      accessLevel: access.accessLevel,
      branch: body.branch,
      startBranch: body.start_branch,
      startSha: body.start_sha,
      startProject,
      message: body.commit_message,
      actions: body.actions,
      authorName: body.author_name,
      authorEmail: body.author_email,
      force: body.force,
    });
    const stats = body.stats === false ? null : (await statsFor(cairn, access.project, [commit])).get(commit.oid)!;
    const pipeline = await lastPipeline(request, access, commit.oid);
    return reply.code(201).send(presentCommitDetail(commitContext(request, access.project), commit, stats, pipeline));
  });

  app.get(`${base}/:sha`, route({ matrix: 'readCode',
    access: read,
    schema: { params: ShaParams, querystring: Type.Object({ stats: Type.Optional(Type.Boolean()) }), response: { 200: CommitDetailSchema } },
  }), async (request) => {
    const access = projectOf(request);
    const { project } = access;
    const commit = await findCommitOrFail(cairn, project, request.params.sha);
    const [stats, pipeline] = await Promise.all([
      request.query.stats === false ? null : statsFor(cairn, project, [commit]).then((s) => s.get(commit.oid)!),
      lastPipeline(request, access, commit.oid),
    ]);
    return presentCommitDetail(commitContext(request, project), commit, stats, pipeline);
  });

  app.get(`${base}/:sha/refs`, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: {
      params: ShaParams,
      querystring: Type.Object({ type: Type.Optional(Type.Union([Type.Literal('branch'), Type.Literal('tag'), Type.Literal('all')])) }),
      response: { 200: Type.Array(CommitRefSchema) },
    },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const commit = await findCommitOrFail(cairn, project, request.params.sha);
    const refs = await commitRefs(cairn, project, commit, request.query.type ?? 'all');
    return paginateArray(request, reply, refs);
  });

  for (const kind of ['cherry_pick', 'revert'] as const) {
    app.post(`${base}/:sha/${kind}`, route({ matrix: 'readCode',
      access: write,
      schema: { params: ShaParams, body: PickBody, response: { 200: CherryPickDryRunSchema, 201: CommitSchema } },
    }), async (request, reply) => {
      const access = projectOf(request);
      const user = requireUser(request);
      const commit = await findCommitOrFail(cairn, access.project, request.params.sha);
      const outcome = await pickCommit(cairn, kind, {
        project: access.project,
        user,
        accessLevel: access.accessLevel,
        commit,
        branch: request.body.branch,
        dryRun: request.body.dry_run === true,
        message: kind === 'cherry_pick' ? request.body.message : null,
      });
      if (outcome.dryRun) return reply.code(200).send({ dry_run: 'success' });
      return reply.code(201).send(presentCommit(commitContext(request, access.project), outcome.commit));
    });
  }

  app.get(`${base}/:sha/diff`, route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: ShaParams, response: { 200: Type.Array(DiffSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const commit = await findCommitOrFail(cairn, project, request.params.sha);
    const diffs = await commitDiff(cairn, project, commit);
    return paginateArray(request, reply, diffs).map(presentDiff);
  });

}
