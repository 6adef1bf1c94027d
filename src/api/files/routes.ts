import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { contentBodyLimit } from '../../config.js';
import { ApiError, unauthorized } from '../../plugins/errors.js';
import { fileHeaders, presentBlameRange, presentFile } from '../../presenters/commits.js';
import { BlameRangeSchema, FileWriteSchema, RepositoryFileSchema } from '../../presenters/schemas/files.js';
import { createCommit } from '../../services/commits.js';
import { blameFile, readFile, validFilePath } from '../../services/files.js';
import { openLfsObject, parseLfsPointer } from '../../lfs/objects.js';
import { projectSettings } from '../../presenters/projects.js';
import { NoContent, projectOf, RawBody, route } from '../route.js';

const FileParams = Type.Object({ id: Type.String(), file_path: Type.String() });

const WriteBody = Type.Object({
  branch: Type.String(),
  commit_message: Type.String(),
  start_branch: Type.Optional(Type.String()),
  encoding: Type.Optional(Type.Union([Type.Literal('text'), Type.Literal('base64')])),
  author_email: Type.Optional(Type.String()),
  author_name: Type.Optional(Type.String()),
  content: Type.Optional(Type.String()),
  last_commit_id: Type.Optional(Type.String()),
  execute_filemode: Type.Optional(Type.Boolean()),
});
const CreateBody = Type.Object({ ...WriteBody.properties, content: Type.String() }, { required: ['branch', 'commit_message', 'content'] });
const UpdateBody = CreateBody;
const DeleteQuery = Type.Object(
  {
    branch: Type.String(),
    commit_message: Type.String(),
    start_branch: Type.Optional(Type.String()),
    author_email: Type.Optional(Type.String()),
    author_name: Type.Optional(Type.String()),
    last_commit_id: Type.Optional(Type.String()),
  },
  { required: ['branch', 'commit_message'] },
);

function filePath(params: { file_path: string }): string {
  const p = params.file_path;
  if (!validFilePath(p)) throw new ApiError(400, { error: 'file_path should be a valid file path' });
  return p;
}

function requireUser(request: FastifyRequest) {
  if (!request.actor) throw unauthorized();
  return request.actor.user;
}

/** Text is served as UTF-8 text; anything with a NUL byte near the start as binary. */
function rawContentType(content: Buffer): string {
  return content.subarray(0, 8000).includes(0) ? 'application/octet-stream' : 'text/plain; charset=utf-8';
}

export default async function fileRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = fastify.cairn;
  const base = '/api/v4/projects/:id/repository/files/:file_path';
  const read = { project: 'download_code' } as const;
  /**
   * Writers must read the code; whether they may push to the branch (protected branches,
   * archived projects) is the commit service's decision, in GitLab's words. Anonymous callers
   * get 401 once the project is known to be readable (the handler's requireUser).
   */
  const write = { project: 'download_code', writesRepository: true } as const;

  app.get(base, route({ matrix: 'readCode',
    access: read,
    schema: { params: FileParams, querystring: Type.Object({ ref: Type.String() }), response: { 200: RepositoryFileSchema } },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const path = filePath(request.params);
    const file = await readFile(cairn, project, request.query.ref, path);
    reply.headers(fileHeaders(file));
    return presentFile(file);
  });

  app.get(`${base}/raw`, route({ matrix: 'readCode',
    access: read,
    schema: {
      params: FileParams,
      querystring: Type.Object({ ref: Type.Optional(Type.String()), lfs: Type.Optional(Type.Boolean()) }),
      response: { 200: RawBody('text/plain or application/octet-stream') },
    },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const path = filePath(request.params);
    const file = await readFile(cairn, project, request.query.ref || project.default_branch || 'HEAD', path);
    const name = path.split('/').pop()!;
    reply.headers(fileHeaders(file));
    reply.header('content-disposition', `inline; filename="${name.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(name)}`);
    reply.header('x-content-type-options', 'nosniff');
    // ?lfs=true: a Git LFS pointer is answered with the object it points to (when the project has it).
    const pointer = request.query.lfs && projectSettings(project).lfs_enabled ? parseLfsPointer(file.content) : null;
    const object = pointer ? await openLfsObject(cairn, project.id, pointer.oid) : null;
    if (object) {
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) object.stream.destroy();
      });
      return reply.type('application/octet-stream').header('content-length', String(object.size)).send(object.stream);
    }
    return reply.type(rawContentType(file.content)).send(file.content);
  });

  app.get(`${base}/blame`, route({ matrix: 'readCode',
    access: read,
    schema: {
      params: FileParams,
      querystring: Type.Object({
        ref: Type.String(),
        range: Type.Optional(Type.Object({ start: Type.Integer(), end: Type.Integer() })),
      }),
      response: { 200: Type.Array(BlameRangeSchema) },
    },
  }), async (request, reply) => {
    const { project } = projectOf(request);
    const path = filePath(request.params);
    const { file, ranges } = await blameFile(cairn, project, request.query.ref, path, request.query.range);
    reply.headers(fileHeaders(file));
    return ranges.map((r) => presentBlameRange(r.range, r.commit));
  });

  const commitFile = async (
    request: FastifyRequest,
    params: { id: string; file_path: string },
    action: 'create' | 'update' | 'delete',
    body: { branch: string; commit_message: string; start_branch?: string; encoding?: string; author_email?: string; author_name?: string; content?: string; last_commit_id?: string; execute_filemode?: boolean },
  ) => {
    const access = projectOf(request);
    const path = filePath(params);
    const user = requireUser(request);
    await createCommit(cairn, {
      project: access.project,
      user,
      accessLevel: access.accessLevel,
      branch: body.branch,
      startBranch: body.start_branch || body.branch,
      message: body.commit_message,
      actions: [
        {
          action,
          file_path: path,
          content: action === 'delete' ? undefined : body.content,
          encoding: body.encoding,
          last_commit_id: body.last_commit_id,
          execute_filemode: body.execute_filemode,
        },
      ],
      authorName: body.author_name,
      authorEmail: body.author_email,
      staleMessage: () =>
        action === 'delete'
          ? 'You are attempting to delete a file that has been previously updated.'
          : 'You are attempting to update a file that has changed since you started editing it.',
    });
    return { file_path: path, branch: body.branch };
  };

  // File content (possibly base64) needs more room than an ordinary body.
  const bodyLimit = contentBodyLimit(cairn.config);
  app.post(base, route({ matrix: 'readCode',
    access: write,
    bodyLimit,
    schema: { params: FileParams, body: CreateBody, response: { 201: FileWriteSchema } },
  }), async (request, reply) => {
    return reply.code(201).send(await commitFile(request, request.params, 'create', request.body));
  });
  app.put(base, route({ matrix: 'readCode',
    access: write,
    bodyLimit,
    schema: { params: FileParams, body: UpdateBody, response: { 200: FileWriteSchema } },
  }), async (request) => commitFile(request, request.params, 'update', request.body));
  app.delete(base, route({ matrix: 'readCode',
    access: write,
    schema: { params: FileParams, querystring: DeleteQuery, response: { 204: NoContent } },
  }), async (request, reply) => {
    await commitFile(request, request.params, 'delete', request.query);
    return reply.code(204).send();
  });
}
