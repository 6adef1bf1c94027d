import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { Project } from '../../db/schema/core.js';
import { ApiError, apiError, forbidden } from '../../plugins/errors.js';
import { projectSettings } from '../../presenters/projects.js';
import { cacheKeyProblem, openCacheArchive, protectedKeyRefused, storeCacheArchive } from '../../services/ci_caches.js';
import { RawBody, route, type Access } from '../route.js';
import { RowId } from '../params.js';
import { authenticateJob } from './routes.js';
import { dropUnreadBody } from './unread_body.js';

// CI caches for Cairn's runner (not GitLab's API: gitlab-runner keeps caches itself, on its host
// or in a bucket its own configuration names). A running job, with its job token, reads and
// writes the archives of its project's cache keys; they live in the artifacts' object store, so
// every runner of the instance shares them (src/services/ci_caches.ts).

const JOB: Access = { custom: "Cairn's runner cache, not GitLab's API: the job token of the running job :id (JOB-TOKEN), its own project's caches only" };
const Params = Type.Object({ id: RowId });
// The key is checked by the handler, after the job token: a caller without one gets 403 whatever it sends.
const Query = Type.Object({ key: Type.Optional(Type.String()) }, { additionalProperties: true });

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The running job's project and the key it asks for, checked. */
async function jobAndKey(request: FastifyRequest) {
  const { id } = request.params as { id: number };
  const build = await authenticateJob(request, id);
  const key = (request.query as { key?: string }).key;
  const problem = cacheKeyProblem(key);
  if (problem) throw apiError(400, `400 Bad request - ${problem}`);
  const project = await request.server.cairn.db.selectFrom('projects').select(['id', 'settings']).where('id', '=', build.project_id).executeTakeFirst();
  if (!project) throw forbidden();
  const separated = projectSettings(project as Project).ci_separated_caches !== false;
  if (protectedKeyRefused(key!, build, separated)) {
    throw new ApiError(403, { message: '403 Forbidden - a job of an unprotected ref cannot use a cache key ending in -protected' });
  }
  return { build, key: key! };
}

export default async function runnerCacheRoutes(app: FastifyInstance) {
  const cairn = app.cairn;
  // The archive is the request body, streamed to the store (never held in memory).
  app.addContentTypeParser(['application/zip', 'application/octet-stream'], (_request, payload, done) => done(null, payload));

  app.get('/api/v4/jobs/:id/cache', route({
    // The job column sends no key: 400 after its token was accepted.
    matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config: { skipApiAuth: true },
    schema: { params: Params, querystring: Query, response: { 200: RawBody('application/zip') } },
  }), async (request, reply) => {
    const { build, key } = await jobAndKey(request);
    const archive = await openCacheArchive(cairn, build.project_id, key);
    if (!archive) throw new ApiError(404, { message: '404 Cache Not Found' });
    return reply
      .code(200)
      .type('application/zip')
      .header('Content-Length', String(archive.size))
      .header('X-Content-Type-Options', 'nosniff')
      .send(archive.stream);
  });

  app.put('/api/v4/jobs/:id/cache', route({
    matrix: { own: 403, cells: { job: 'ok' } },
    access: JOB,
    config: { skipApiAuth: true },
    schema: { params: Params, querystring: Query, response: { 201: Type.Object({ message: Type.String(), size: Type.Integer() }) } },
  }), async (request, reply) => {
    try {
      const { build, key } = await jobAndKey(request);
      const body = request.body as Readable | undefined;
      if (!body || typeof (body as Readable).pipe !== 'function') throw apiError(400, '400 Bad request - the archive is missing (Content-Type: application/zip)');
      const length = header(request, 'content-length');
      const stored = await storeCacheArchive(cairn, build.project_id, key, body, length === undefined ? undefined : Number(length));
      return reply.code(201).send({ message: '201 Created', size: stored.size });
    } catch (err) {
      dropUnreadBody(request);
      throw err;
    }
  });
}
