import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ARCHIVE_FORMATS } from '../../git/archive.js';
import { ApiError, apiError, forbidden, invalidParam, missingParam } from '../../plugins/errors.js';
import { paginateArray, paginateArrayWithKeyset, PaginationQuery } from '../../plugins/pagination.js';
import { checkRateLimit } from '../../plugins/rate_limit.js';
import { authorizeProject } from '../../policies/projects.js';
import { presentCommit } from '../../presenters/commits.js';
import { presentBlob, presentComparison, presentContributor, presentTreeEntry } from '../../presenters/repository.js';
import {
  blobById,
  compare,
  contributors,
  isTextBlob,
  keysetTreePage,
  linkContext,
  mergeBaseOf,
  projectArchive,
  sortContributors,
  treeEntries,
} from '../../services/repository.js';
import { IdParams, ShaParams } from '../params.js';


const ARCHIVE_RATE_LIMITED = { message: { error: 'This archive has been requested too many times. Try again later.' } };

export default async function repositoryRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  app.get(
    '/api/v4/projects/:id/repository/tree',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          ref: Type.Optional(Type.String()),
          path: Type.Optional(Type.String()),
          recursive: Type.Optional(Type.Boolean({ default: false })),
          pagination: Type.Optional(Type.Union([Type.Literal('legacy'), Type.Literal('keyset'), Type.Literal('none')])),
          page_token: Type.Optional(Type.String()),
          ...PaginationQuery,
        }),
      },
    },
    async (request, reply) => {
      const { project } = await authorizeProject(request, request.params.id, 'download_code');
      const q = request.query;
      if (q.pagination === 'none' && !q.recursive) throw invalidParam('pagination', 'cannot be "none" unless "recursive" is true');
      const entries = await treeEntries(cairn, project, { ref: q.ref, path: q.path, recursive: !!q.recursive });
      if (q.pagination === 'none') return entries.map(presentTreeEntry);
      return paginateArrayWithKeyset(request, reply, entries, keysetTreePage).map(presentTreeEntry);
    },
  );

  app.get('/api/v4/projects/:id/repository/blobs/:sha', { schema: { params: ShaParams } }, async (request) => {
    const { project } = await authorizeProject(request, request.params.id, 'download_code');
    return presentBlob(await blobById(cairn, project, request.params.sha));
  });

  app.get('/api/v4/projects/:id/repository/blobs/:sha/raw', { schema: { params: ShaParams } }, async (request, reply) => {
    const { project } = await authorizeProject(request, request.params.id, 'download_code');
    const blob = await blobById(cairn, project, request.params.sha);
    return reply
      .headers({
        'content-type': isTextBlob(blob.data) ? 'text/plain; charset=utf-8' : 'application/octet-stream',
        'x-content-type-options': 'nosniff',
        'content-disposition': 'inline',
        'cache-control': 'no-cache, no-store',
        pragma: 'no-cache',
        expires: 'Fri, 01 Jan 1990 00:00:00 GMT',
      })
      .send(blob.data);
  });

  const archiveQuery = Type.Object({ sha: Type.Optional(Type.String()), path: Type.Optional(Type.String()), format: Type.Optional(Type.String()) });
  const archive = async (request: any, reply: any, suffix: string | undefined) => {
    const { project } = await authorizeProject(request, request.params.id, 'download_code');
    const formatName = suffix ?? request.query.format ?? 'tar.gz';
    const format = ARCHIVE_FORMATS[formatName];
    if (!format) throw apiError(404, '404 Not Found');
    await checkRateLimit(request, { name: 'archive', limit: cairn.config.archiveRateLimit, body: ARCHIVE_RATE_LIMITED });
    const { stream, filename } = await projectArchive(cairn, project, { sha: request.query.sha, path: request.query.path, format });
    return reply
      .headers({
        'content-type': 'application/octet-stream',
        'content-transfer-encoding': 'binary',
        'content-disposition': `attachment; filename="${filename.replace(/["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(filename)}`,
      })
      .send(stream);
  };
  app.get('/api/v4/projects/:id/repository/archive', { schema: { params: IdParams, querystring: archiveQuery } }, (request, reply) =>
    archive(request, reply, undefined),
  );
  app.get(
    '/api/v4/projects/:id/repository/archive.:format',
    { schema: { params: Type.Object({ id: Type.String(), format: Type.String() }), querystring: archiveQuery } },
    (request, reply) => archive(request, reply, request.params.format),
  );

  app.get(
    '/api/v4/projects/:id/repository/compare',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          from: Type.Optional(Type.String()),
          to: Type.Optional(Type.String()),
          from_project_id: Type.Optional(Type.Integer()),
          straight: Type.Optional(Type.Boolean({ default: false })),
        }),
      },
    },
    async (request) => {
      const q = request.query;
      if (q.from === undefined || q.from === '') throw missingParam('from');
      if (q.to === undefined || q.to === '') throw missingParam('to');
      const { project } = await authorizeProject(request, request.params.id, 'download_code');
      let fromProject;
      if (q.from_project_id !== undefined && q.from_project_id !== project.id) {
        try {
          fromProject = (await authorizeProject(request, q.from_project_id, 'download_code')).project;
        } catch (e) {
          if (e instanceof ApiError && e.status === 403) throw forbidden("You don't have access to this fork's parent project");
          throw apiError(400, `Target project id:${q.from_project_id} is not a fork of project id:${request.params.id}`);
        }
      }
      const result = await compare(cairn, project, { from: q.from, to: q.to, straight: !!q.straight, fromProject });
      return presentComparison(result, linkContext(cairn, project));
    },
  );

  app.get(
    '/api/v4/projects/:id/repository/contributors',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          ref: Type.Optional(Type.String()),
          order_by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('email'), Type.Literal('commits')])),
          sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
          ...PaginationQuery,
        }),
      },
    },
    async (request, reply) => {
      const { project } = await authorizeProject(request, request.params.id, 'download_code');
      const list = sortContributors(await contributors(cairn, project, request.query.ref), request.query.order_by ?? 'commits', request.query.sort ?? 'asc');
      return paginateArray(request, reply, list).map(presentContributor);
    },
  );

  app.get(
    '/api/v4/projects/:id/repository/merge_base',
    { schema: { params: IdParams, querystring: Type.Object({ refs: Type.Optional(Type.Union([Type.Array(Type.String()), Type.String()])) }) } },
    async (request) => {
      const raw = request.query.refs;
      if (raw === undefined) throw missingParam('refs');
      const refs = (Array.isArray(raw) ? raw : [raw]).flatMap((r) => String(r).split(',')).filter((r) => r !== '');
      const { project } = await authorizeProject(request, request.params.id, 'download_code');
      return presentCommit(linkContext(cairn, project), await mergeBaseOf(cairn, project, refs));
    },
  );
}
