import path from 'node:path';
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { CiBuild } from '../../db/schema/ci.js';
import { ApiError, apiError, forbidden, missingParam, notFound } from '../../plugins/errors.js';
import { presentJob } from '../../presenters/ci.js';
import { loadJobExtras } from '../../finders/pipelines.js';
import { JobSchema } from '../../presenters/schemas/ci.js';
import {
  deleteJobArtifacts,
  downloadableArchive,
  keepArtifacts,
  latestSuccessfulBuildForRef,
  latestSuccessfulPipelineId,
  scheduleProjectArtifactsExpiry,
} from '../../services/artifacts.js';
import { mayReadJobArtifacts } from '../../policies/rules.js';
import { artifactStore } from '../../storage/index.js';
import { openZipEntry, validArtifactPath, type ZipEntryInfo } from '../../storage/zip.js';
import { acceptsGzip, contentDisposition, gzipLength, gzipMember, sendArchive } from './send.js';
import { IdParams, RowId } from '../params.js';
import { NoContent, projectOf, RawBody, route } from '../route.js';

const JobParams = Type.Object({ id: Type.String(), job_id: RowId });
const JobFileParams = Type.Object({ id: Type.String(), job_id: RowId, '*': Type.String() });
const RefParams = Type.Object({ id: Type.String(), '*': Type.String() });
const JobTokenQuery = Type.Object({ job_token: Type.Optional(Type.String()) });
const RefQuery = Type.Object({ job: Type.Optional(Type.String()), job_token: Type.Optional(Type.String()) });
const ACCEPTED = Type.Object({ message: Type.String() });

// Types a browser may show inline without running anything; everything else is a download.
const SAFE_TYPES: Record<string, string> = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.gif': 'image/gif', '.webp': 'image/webp',
  '.pdf': 'application/pdf', '.json': 'application/json', '.zip': 'application/zip', '.gz': 'application/gzip',
  '.txt': 'text/plain; charset=utf-8', '.log': 'text/plain; charset=utf-8', '.md': 'text/plain; charset=utf-8',
  '.xml': 'text/plain; charset=utf-8', '.csv': 'text/plain; charset=utf-8', '.yml': 'text/plain; charset=utf-8', '.yaml': 'text/plain; charset=utf-8',
};

const ctxOf = (request: FastifyRequest) => ({ baseUrl: request.server.cairn.config.externalUrl, viewer: request.actor?.user ?? null });

export default async function jobArtifactRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = app.cairn;

  async function findJob(projectId: number, jobId: number): Promise<CiBuild> {
    const job = await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', jobId).where('project_id', '=', projectId).where('type', '=', 'Ci::Build').executeTakeFirst();
    if (!job) throw notFound('Build');
    return job;
  }

  function authorizeArtifacts(request: FastifyRequest, build: CiBuild) {
    const access = projectOf(request);
    if (!mayReadJobArtifacts(build, access.accessLevel, !!access.user?.admin)) throw forbidden();
  }

  /**
   * One file of the job's archive. Inflating costs the server CPU in proportion to the inflated
   * size, which a small upload can make huge (1 MiB of deflated zeros is 1 GiB). So a deflated
   * entry goes as it is stored, wrapped as gzip (Content-Encoding: gzip), to every client that
   * takes gzip (browsers, curl --compressed, python-gitlab through requests); one that does not is
   * sent the inflated bytes only up to the instance's artifact size limit, and a 406 beyond that
   * says how to ask for it. Stored entries are copied as they are.
   */
  async function sendEntry(request: FastifyRequest, reply: FastifyReply, build: CiBuild, rawPath: string) {
    const artifact = await downloadableArchive(cairn.db, build.id);
    if (!artifact) throw notFound();
    const entryPath = validArtifactPath(rawPath);
    if (entryPath === null) throw apiError(400, '400 Bad request');
    const gzip = acceptsGzip(request.headers['accept-encoding']);
    const limit = cairn.config.maxArtifactsSize;
    const deflated = (e: ZipEntryInfo) => e.method === 8 && !e.encrypted;
    let entry;
    try {
      entry = await openZipEntry(artifactStore(cairn.config), artifact.store_key, Number(artifact.size), entryPath, (e) =>
        deflated(e) && gzip ? 'raw' : deflated(e) && e.size > limit ? 'none' : 'inflate',
      );
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // Not a zip (or a damaged one): there is no such file in it.
      request_log(reply, err);
      throw notFound();
    }
    if (!entry) throw notFound();
    if (!entry.stream) {
      throw apiError(406, `406 Not Acceptable - ${entryPath} is ${entry.size} bytes inflated, more than the ${limit} sent uncompressed: ask for it with Accept-Encoding: gzip (curl --compressed), or download the whole archive`);
    }
    const gzipped = deflated(entry) && gzip;
    let body: Readable;
    if (gzipped) body = gzipMember(entry.stream, entry.crc32, entry.size).stream;
    else {
      // An entry whose data is damaged, or inflates past the size it states (yauzl stops it
      // there), fails at its first bytes: known before the 200 goes out.
      try {
        body = await started(entry.stream);
      } catch (err) {
        request_log(reply, err);
        throw notFound();
      }
    }
    const type = SAFE_TYPES[path.posix.extname(entryPath).toLowerCase()] ?? 'application/octet-stream';
    reply
      .code(200)
      .type(type)
      .header('Vary', 'Accept-Encoding')
      .header('Content-Disposition', contentDisposition(path.posix.basename(entryPath)))
      .header('X-Content-Type-Options', 'nosniff')
      .header('Content-Security-Policy', "default-src 'none'; sandbox");
    if (gzipped) reply.header('Content-Encoding', 'gzip').header('Content-Length', String(gzipLength(entry.compressedSize)));
    else reply.header('Content-Length', String(entry.size));
    return reply.send(body);
  }

  /** The stream once its first chunk came (or it ended); rejects when it fails before. */
  async function started(stream: Readable): Promise<Readable> {
    const chunks = stream[Symbol.asyncIterator]();
    const first = await chunks.next();
    return Readable.from(
      (async function* () {
        if (first.done) return;
        yield first.value as Buffer;
        for (let next = await chunks.next(); !next.done; next = await chunks.next()) yield next.value as Buffer;
      })(),
      { objectMode: false },
    );
  }

  function request_log(reply: FastifyReply, err: unknown) {
    reply.request.log.warn({ err }, 'artifact archive could not be read as a zip');
  }

  /** `<ref>/download` or `<ref>/raw/<path>`; a ref may itself contain slashes (and even "/raw/"). */
  async function refLookup(projectId: number, rest: string): Promise<{ ref: string; kind: 'download' } | { ref: string; kind: 'raw'; path: string } | null> {
    if (rest.endsWith('/download') && rest.length > '/download'.length) return { ref: rest.slice(0, -'/download'.length), kind: 'download' };
    const splits: number[] = [];
    for (let i = rest.indexOf('/raw/'); i > 0; i = rest.indexOf('/raw/', i + 1)) splits.push(i);
    for (const i of splits) {
      const ref = rest.slice(0, i);
      if (splits.length === 1 || (await latestSuccessfulPipelineId(cairn.db, projectId, ref)) !== null) return { ref, kind: 'raw', path: rest.slice(i + '/raw/'.length) };
    }
    return null;
  }

  app.get('/api/v4/projects/:id/jobs/:job_id/artifacts', route({
    matrix: 'read',
    access: { project: 'read_build' },
    config: { jobToken: true },
    schema: { params: JobParams, querystring: JobTokenQuery, response: { 200: RawBody('application/zip') } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const build = await findJob(project.id, request.params.job_id);
    authorizeArtifacts(request, build);
    return sendArchive(cairn, reply, await downloadableArchive(cairn.db, build.id));
  });

  app.get('/api/v4/projects/:id/jobs/:job_id/artifacts/*', route({
    matrix: 'read',
    access: { project: 'read_build' },
    config: { jobToken: true },
    schema: { params: JobFileParams, querystring: JobTokenQuery, response: { 200: RawBody('application/octet-stream') } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const build = await findJob(project.id, request.params.job_id);
    authorizeArtifacts(request, build);
    return sendEntry(request, reply, build, request.params['*']);
  });

  // GET .../jobs/artifacts/:ref_name/download?job= and .../jobs/artifacts/:ref_name/raw/*artifact_path?job=
  app.get('/api/v4/projects/:id/jobs/artifacts/*', route({
    matrix: 'read',
    access: { project: 'read_build' },
    config: { jobToken: true },
    schema: { params: RefParams, querystring: RefQuery, response: { 200: RawBody('application/octet-stream') } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const job = request.query.job;
    if (job === undefined || job === '') throw missingParam('job');
    const target = await refLookup(project.id, request.params['*']);
    if (!target || !target.ref) throw notFound();
    const build = await latestSuccessfulBuildForRef(cairn.db, project.id, target.ref, job);
    if (!build) throw notFound('Build');
    authorizeArtifacts(request, build);
    if (target.kind === 'download') return sendArchive(cairn, reply, await downloadableArchive(cairn.db, build.id));
    return sendEntry(request, reply, build, target.path);
  });

  app.post('/api/v4/projects/:id/jobs/:job_id/artifacts/keep', route({
    matrix: 'developer',
    access: { project: 'update_build', signedIn: true },
    schema: { params: JobParams, response: { 200: JobSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const build = await findJob(project.id, request.params.job_id);
    if (!(await downloadableArchive(cairn.db, build.id))) throw notFound();
    await keepArtifacts(cairn.db, build.id);
    const kept = await findJob(project.id, build.id);
    const extras = await loadJobExtras(cairn, project, [kept]);
    return reply.code(200).send({ ...presentJob(ctxOf(request), project, kept, extras), download_url: null });
  });

  app.delete('/api/v4/projects/:id/jobs/:job_id/artifacts', route({
    matrix: 'maintainer',
    access: { project: 'destroy_artifacts', signedIn: true },
    schema: { params: JobParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const build = await findJob(project.id, request.params.job_id);
    await deleteJobArtifacts(cairn, build.id);
    return reply.code(204).send();
  });

  app.delete('/api/v4/projects/:id/artifacts', route({
    matrix: 'maintainer',
    access: { project: 'destroy_artifacts', signedIn: true },
    schema: { params: IdParams, response: { 202: ACCEPTED } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    await scheduleProjectArtifactsExpiry(cairn.db, project.id);
    return reply.code(202).send({ message: '202 Accepted' });
  });
}
