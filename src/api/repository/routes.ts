import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { inSameForkNetwork } from '../../finders/forks.js';
import { ARCHIVE_FORMATS } from '../../git/archive.js';
import { ApiError, apiError, forbidden, invalidParam, missingParam } from '../../plugins/errors.js';
import { paginateArray, paginateArrayWithKeyset } from '../../plugins/pagination.js';
import { checkRateLimit } from '../../plugins/rate_limit.js';
import { authorizeProject } from '../../finders/authorize.js';
import { presentCommit } from '../../presenters/commits.js';
import { presentBlob, presentComparison, presentContributor, presentTreeEntry } from '../../presenters/repository.js';
import { CommitSchema } from '../../presenters/schemas/commits.js';
import { BlobSchema, CompareSchema, ContributorSchema, TreeEntrySchema } from '../../presenters/schemas/repository.js';
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
import { capList } from '../list_filters.js';
import { projectOf, RawBody, route } from '../route.js';

const ARCHIVE_RATE_LIMITED = { message: { error: 'This archive has been requested too many times. Try again later.' } };

const TreeQuery = Type.Object({
  ref: Type.Optional(Type.String()),
  path: Type.Optional(Type.String()),
  recursive: Type.Optional(Type.Boolean({ default: false })),
  pagination: Type.Optional(Type.Union([Type.Literal('legacy'), Type.Literal('keyset'), Type.Literal('none')])),
  page_token: Type.Optional(Type.String()),
});

const ArchiveQuery = Type.Object({ sha: Type.Optional(Type.String()), path: Type.Optional(Type.String()), format: Type.Optional(Type.String()) });
const ArchiveParams = Type.Object({ id: Type.String(), format: Type.String() });

const CompareQuery = Type.Object({
  from: Type.String(),
  to: Type.String(),
  from_project_id: Type.Optional(Type.Integer()),
  straight: Type.Optional(Type.Boolean({ default: false })),
});

const ContributorsQuery = Type.Object({
  ref: Type.Optional(Type.String()),
  order_by: Type.Optional(Type.Union([Type.Literal('name'), Type.Literal('email'), Type.Literal('commits')])),
  sort: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});

const MergeBaseQuery = Type.Object({ refs: Type.Union([Type.Array(Type.String()), Type.String()]) });

export default async function repositoryRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;
  const read = { project: 'download_code' } as const;

  app.get('/api/v4/projects/:id/repository/tree', route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IdParams, querystring: TreeQuery, response: { 200: Type.Array(TreeEntrySchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const q = request.query;
    if (q.pagination === 'none' && !q.recursive) throw invalidParam('pagination', 'cannot be "none" unless "recursive" is true');
    const entries = await treeEntries(cairn, project, { ref: q.ref, path: q.path, recursive: !!q.recursive });
    if (q.pagination === 'none') return entries.map(presentTreeEntry);
    return paginateArrayWithKeyset(request, reply, entries, keysetTreePage).map(presentTreeEntry);
  });

  app.get('/api/v4/projects/:id/repository/blobs/:sha', route({ matrix: 'readCode',
    access: read,
    schema: { params: ShaParams, response: { 200: BlobSchema } },
  }), async (request) => {
    const { project } = projectOf(request);
    return presentBlob(await blobById(cairn, project, request.params.sha));
  });

  app.get('/api/v4/projects/:id/repository/blobs/:sha/raw', route({ matrix: 'readCode',
    access: read,
    schema: { params: ShaParams, response: { 200: RawBody('text/plain or application/octet-stream') } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
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

  const archive = async (request: FastifyRequest, reply: FastifyReply, query: Static<typeof ArchiveQuery>, suffix: string | undefined) => {
    const { project } = projectOf(request);
    const formatName = suffix ?? query.format ?? 'tar.gz';
    const format = ARCHIVE_FORMATS[formatName];
    if (!format) throw apiError(404, '404 Not Found');
    await checkRateLimit(request, { name: 'archive', limit: cairn.config.archiveRateLimit, body: ARCHIVE_RATE_LIMITED });
    const { stream, filename } = await projectArchive(cairn, project, { sha: query.sha, path: query.path, format });
    return reply
      .headers({
        'content-type': 'application/octet-stream',
        'content-transfer-encoding': 'binary',
        'content-disposition': `attachment; filename="${filename.replace(/["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(filename)}`,
      })
      .send(stream);
  };
  app.get('/api/v4/projects/:id/repository/archive', route({ matrix: 'readCode',
    access: read,
    schema: { params: IdParams, querystring: ArchiveQuery, response: { 200: RawBody('application/octet-stream') } },
  }), (request, reply) => archive(request, reply, request.query, undefined));
  app.get('/api/v4/projects/:id/repository/archive.:format', route({ matrix: 'readCode',
    access: read,
    schema: { params: ArchiveParams, querystring: ArchiveQuery, response: { 200: RawBody('application/octet-stream') } },
  }), (request, reply) => archive(request, reply, request.query, request.params.format));

  app.get('/api/v4/projects/:id/repository/compare', route({ matrix: 'readCode',
    access: read,
    schema: { params: IdParams, querystring: CompareQuery, response: { 200: CompareSchema } },
  }), async (request) => {
    const q = request.query;
    // The schema answers an absent parameter; an empty one gets the same words, by hand.
    if (q.from === '') throw missingParam('from');
    if (q.to === '') throw missingParam('to');
    const { project } = projectOf(request);
    let fromProject;
    if (q.from_project_id !== undefined && q.from_project_id !== project.id) {
      // Another project of the same fork network, which the caller must be able to read too.
      if (!(await inSameForkNetwork(cairn.db, project.id, q.from_project_id))) {
        throw apiError(400, `Target project id:${q.from_project_id} is not a fork of project id:${request.params.id}`);
      }
      try {
        fromProject = (await authorizeProject(request, q.from_project_id, 'download_code')).project;
      } catch (e) {
        if (e instanceof ApiError && e.status === 403) throw forbidden("You don't have access to this fork's parent project");
        throw apiError(400, `Target project id:${q.from_project_id} is not a fork of project id:${request.params.id}`);
      }
    }
    const result = await compare(cairn, project, { from: q.from, to: q.to, straight: !!q.straight, fromProject });
    return presentComparison(result, linkContext(cairn, project));
  });

  app.get('/api/v4/projects/:id/repository/contributors', route({ matrix: 'readCode',
    access: read,
    paginated: true,
    schema: { params: IdParams, querystring: ContributorsQuery, response: { 200: Type.Array(ContributorSchema) } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const list = sortContributors(await contributors(cairn, project, request.query.ref), request.query.order_by ?? 'commits', request.query.sort ?? 'asc');
    return paginateArray(request, reply, list).map(presentContributor);
  });

  app.get('/api/v4/projects/:id/repository/merge_base', route({ matrix: 'readCode',
    access: read,
    schema: { params: IdParams, querystring: MergeBaseQuery, response: { 200: CommitSchema } },
  }), async (request) => {
    const raw = request.query.refs;
    const refs = capList((Array.isArray(raw) ? raw : [raw]).flatMap((r) => String(r).split(',')).filter((r) => r !== ''), 'refs');
    const { project } = projectOf(request);
    return presentCommit(linkContext(cairn, project), await mergeBaseOf(cairn, project, refs));
  });
}
