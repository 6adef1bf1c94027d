import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import { contentBodyLimit } from '../../config.js';
import type { User } from '../../db/schema/core.js';
import type { Snippet } from '../../db/schema/snippets.js';
import { listSnippets, snippetRelations, type SnippetFilter } from '../../finders/snippets.js';
import { ApiError, forbidden, invalidParam, missingParam, notFound, unauthorized } from '../../plugins/errors.js';
import { pageParams, setPaginationHeaders } from '../../plugins/pagination.js';
import { VISIBILITY_LEVELS } from '../../policies/access.js';
import { authorizeProject } from '../../finders/authorize.js';
import {
  canCreatePersonalSnippet,
  canDeleteSnippet,
  canUpdateSnippet,
  findReadableSnippet,
  visibilityAllowedInProject,
  type SnippetAccess,
} from '../../policies/snippets.js';
import { projectFullPath } from '../../presenters/projects.js';
import { presentSnippet, presentUserAgentDetail } from '../../presenters/snippets.js';
import { SnippetSchema, UserAgentDetailSchema } from '../../presenters/schemas/snippets.js';
import type { PresentContext } from '../../presenters/users.js';
import {
  createSnippet,
  deleteSnippet,
  firstSnippetFile,
  readSnippetFile,
  SNIPPET_DEFAULT_BRANCH,
  snippetError,
  snippetFiles,
  snippetFilesOf,
  updateSnippet,
  validSnippetPath,
  type SnippetBlob,
  type SnippetFileInput,
  type UpdateSnippetInput,
} from '../../services/snippets.js';
import { RowId, timestampParam } from '../params.js';
import { NoContent, projectOf, RawBody, route } from '../route.js';

/**
 * The Snippets API (personal snippets, `/snippets`) and the Project snippets API
 * (`/projects/:id/snippets`). Reads are for whoever may see the snippet (policies/snippets.ts);
 * a snippet the caller may not see is a 404. Files live in each snippet's repository
 * (services/snippets.ts); its discussions and award emoji are served over its noteable
 * registration (src/noteables/snippet.ts).
 */

const SnippetIdParams = Type.Object({ id: RowId });
const ProjectSnippetParams = Type.Object({ id: Type.String(), snippet_id: RowId });
const FileParams = { ref: Type.String(), file_path: Type.String() };

const ListQuery = Type.Object({
  created_after: Type.Optional(Type.String()),
  created_before: Type.Optional(Type.String()),
});

/** `files` and `visibility` are checked by hand, to answer in Grape's words. */
const CreateBody = Type.Object({
  title: Type.String(),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  visibility: Type.Optional(Type.Unknown()),
  files: Type.Optional(Type.Unknown()),
  file_name: Type.Optional(Type.String()),
  content: Type.Optional(Type.String()),
});
const UpdateBody = Type.Object({
  title: Type.Optional(Type.String()),
  description: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  visibility: Type.Optional(Type.Unknown()),
  files: Type.Optional(Type.Unknown()),
  file_name: Type.Optional(Type.String()),
  content: Type.Optional(Type.String()),
});
type CreateBody = Static<typeof CreateBody>;
type UpdateBody = Static<typeof UpdateBody>;

const MULTIPLE_FILES = 'To update Snippets with multiple files, you must use the `files` parameter';
const INVALID_ACTIONS = 'Snippet actions have invalid data';
const UPDATE_PARAMS = ['content', 'description', 'files', 'file_name', 'title', 'visibility'];

function visibilityParam(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const level = typeof value === 'string' ? VISIBILITY_LEVELS[value] : undefined;
  if (level === undefined) throw invalidParam('visibility', 'does not have a valid value');
  return level;
}

function titleParam(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!value.trim()) throw new ApiError(400, { error: 'title is empty' });
  if (value.length > 255) throw snippetError(400, 'Title is too long (maximum is 255 characters)');
  return value;
}

/** Grape's file_path validator: a relative path git may write. */
function filePathParam(name: string, value: unknown): string {
  if (typeof value !== 'string') throw invalidParam(name);
  if (!validSnippetPath(value)) throw new ApiError(400, { error: `${name} should be a valid file path` });
  return value;
}

function filesArray(value: unknown): Record<string, unknown>[] {
  if (!Array.isArray(value)) throw invalidParam('files');
  return value.map((f, i) => {
    if (!f || typeof f !== 'object' || Array.isArray(f)) throw invalidParam(`files[${i}]`);
    return f as Record<string, unknown>;
  });
}

/** The files of a new snippet: `files[]` (file_path and content required, not blank), or the deprecated file_name + content. */
function createFiles(body: CreateBody): SnippetFileInput[] {
  const hasFiles = body.files !== undefined;
  const hasContent = body.content !== undefined;
  if (hasFiles && hasContent) throw invalidParam('files, content', 'are mutually exclusive');
  if (!hasFiles && !hasContent) throw invalidParam('files, content', 'are missing, exactly one parameter must be provided');
  if (hasContent) {
    if (!body.content) throw new ApiError(400, { error: 'content is empty' });
    if (body.file_name === undefined) throw missingParam('file_name');
    if (body.file_name) filePathParam('file_name', body.file_name);
    return [{ path: body.file_name, content: body.content! }];
  }
  const files = filesArray(body.files);
  if (!files.length) throw new ApiError(400, { error: 'files is empty' });
  return files.map((f, i) => {
    if (f.file_path === undefined || f.file_path === null) throw missingParam(`files[${i}][file_path]`);
    if (f.file_path === '') throw new ApiError(400, { error: `files[${i}][file_path] is empty` });
    const path = filePathParam(`files[${i}][file_path]`, f.file_path);
    if (f.content === undefined || f.content === null) throw missingParam(`files[${i}][content]`);
    if (typeof f.content !== 'string') throw invalidParam(`files[${i}][content]`);
    if (f.content === '') throw new ApiError(400, { error: `files[${i}][content] is empty` });
    return { path, content: f.content };
  });
}

const ACTIONS = ['create', 'update', 'delete', 'move'] as const;
type Action = (typeof ACTIONS)[number];

/** `files[]` of an update: Grape's checks (400), then GitLab's SnippetInputAction rules (422). */
function updateActions(value: unknown): NonNullable<UpdateSnippetInput['actions']> {
  const files = filesArray(value);
  const actions = files.map((f, i) => {
    if (f.action === undefined || f.action === null || f.action === '') throw missingParam(`files[${i}][action]`);
    if (typeof f.action !== 'string' || !ACTIONS.includes(f.action as Action)) throw invalidParam(`files[${i}][action]`, 'does not have a valid value');
    const opt = (name: string) => (f[name] === undefined || f[name] === null || f[name] === '' ? null : f[name]);
    const path = opt('file_path');
    const previous = opt('previous_path');
    if (path !== null) filePathParam(`files[${i}][file_path]`, path);
    if (previous !== null) filePathParam(`files[${i}][previous_path]`, previous);
    const content = f.content === undefined || f.content === null ? null : String(f.content);
    return { action: f.action as Action, path: path as string | null, previousPath: previous as string | null, content };
  });
  for (const a of actions) {
    const valid =
      (a.action === 'create' && !!a.content) ||
      (a.action === 'update' && !!a.path && !!a.content && (a.previousPath === null || a.previousPath === a.path)) ||
      (a.action === 'delete' && !!a.path) ||
      (a.action === 'move' && !!a.path && !!a.previousPath && a.path !== a.previousPath);
    if (!valid) throw snippetError(422, INVALID_ACTIONS);
  }
  return actions;
}

/** Text is served as text/plain, never rendered: nosniff, and an attachment when a browser could take it for markup. */
export function sendRaw(reply: FastifyReply, blob: SnippetBlob) {
  const name = blob.path.split('/').pop()!;
  const head = blob.content.subarray(0, 1024).toString('latin1').trimStart().toLowerCase();
  const markup = /^(<!doctype|<html|<head|<body|<script|<svg|<\?xml|<iframe|<object)/.test(head) || /\.(html?|svg|xht(ml)?|xml)$/i.test(name);
  const binary = blob.content.subarray(0, 8000).includes(0);
  const disposition = markup || binary ? 'attachment' : 'inline';
  reply.header('content-disposition', `${disposition}; filename="${name.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(name)}`);
  reply.header('x-content-type-options', 'nosniff');
  reply.header('cache-control', 'no-cache, private');
  return reply.type(binary ? 'application/octet-stream' : 'text/plain; charset=utf-8').send(blob.content);
}

function signedIn(request: FastifyRequest): User {
  const user = request.actor?.user;
  if (!user) throw unauthorized();
  return user;
}

export default async function snippetRoutes(fastify: FastifyInstance) {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const cairn = fastify.cairn;
  const ctxOf = (request: FastifyRequest): PresentContext => ({ baseUrl: cairn.config.externalUrl, sshPort: cairn.config.sshPort, viewer: request.actor?.user ?? null });
  const bodyLimit = contentBodyLimit(cairn.config);

  async function presentMany(request: FastifyRequest, rows: Snippet[]) {
    const [{ authors, projectPaths }, files] = await Promise.all([snippetRelations(cairn.db, rows), snippetFilesOf(cairn, rows)]);
    return rows.map((s) =>
      presentSnippet(ctxOf(request), s, {
        author: authors.get(s.author_id)!,
        projectPath: s.project_id === null ? null : (projectPaths.get(s.project_id) ?? null),
        files: files.get(s.id) ?? [],
        defaultBranch: SNIPPET_DEFAULT_BRANCH,
      }),
    );
  }

  async function presentOne(request: FastifyRequest, access: Pick<SnippetAccess, 'snippet' | 'project'>) {
    const s = access.snippet;
    const [author, files] = await Promise.all([
      cairn.db.selectFrom('users').selectAll().where('id', '=', s.author_id).executeTakeFirstOrThrow(),
      snippetFiles(cairn, s),
    ]);
    return presentSnippet(ctxOf(request), s, {
      author,
      projectPath: access.project ? projectFullPath(access.project) : null,
      files,
      defaultBranch: SNIPPET_DEFAULT_BRANCH,
    });
  }

  async function page(request: FastifyRequest, reply: FastifyReply, viewer: User | null, filter: SnippetFilter, query: { created_after?: string; created_before?: string }) {
    const p = pageParams(request);
    const { rows, total } = await listSnippets(
      cairn.db,
      viewer,
      { ...filter, createdAfter: timestampParam('created_after', query.created_after), createdBefore: timestampParam('created_before', query.created_before) },
      { offset: p.offset, limit: p.perPage },
    );
    setPaginationHeaders(request, reply, p, total);
    return presentMany(request, rows);
  }

  /** A snippet's changes from an update body (what both PUT forms share). */
  function updateInput(body: UpdateBody, current: string[], projectVisibility: number | null): UpdateSnippetInput {
    if (!UPDATE_PARAMS.some((n) => n in body)) throw invalidParam(UPDATE_PARAMS.join(', '), 'are missing, at least one parameter must be provided');
    if (body.files !== undefined && body.content !== undefined) throw invalidParam('files, content', 'are mutually exclusive');
    if (body.files !== undefined && body.file_name !== undefined) throw invalidParam('files, file_name', 'are mutually exclusive');
    if (body.content === '') throw new ApiError(400, { error: 'content is empty' });
    const input: UpdateSnippetInput = {
      title: titleParam(body.title),
      description: body.description,
      visibilityLevel: visibilityParam(body.visibility),
    };
    if (input.visibilityLevel !== undefined && projectVisibility !== null && !visibilityAllowedInProject(input.visibilityLevel, { visibility_level: projectVisibility })) {
      throw snippetError(400, "Visibility level can not be more visible than the project's");
    }
    if (body.content !== undefined || body.file_name !== undefined) {
      if (current.length > 1) throw snippetError(400, MULTIPLE_FILES);
      if (body.file_name) filePathParam('file_name', body.file_name);
      input.single = { fileName: body.file_name || undefined, content: body.content };
    } else if (body.files !== undefined) {
      input.actions = updateActions(body.files);
    }
    return input;
  }

  // -------------------------------------------------------------------------------------------
  // Personal snippets

  const base = '/api/v4/snippets';

  app.get(base, route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(SnippetSchema) } },
  }), async (request, reply) => {
    const user = signedIn(request);
    return page(request, reply, user, { authorId: user.id }, request.query);
  });

  app.get(`${base}/public`, route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(SnippetSchema) } },
  }), async (request, reply) => page(request, reply, null, { onlyPersonal: true, onlyPublic: true }, request.query));

  app.get(`${base}/all`, route({ matrix: 'signedIn',
    access: { signedIn: true },
    paginated: true,
    schema: { querystring: ListQuery, response: { 200: Type.Array(SnippetSchema) } },
  }), async (request, reply) => page(request, reply, signedIn(request), {}, request.query));

  app.get(`${base}/:id`, route({ matrix: { is: 'public', cells: { external: 404, nonmember: 404, guest: 404, reporter: 404, developer: 404, owner: 404, anonymous: 404 } },
    access: { custom: 'whoever may read the snippet (policies/snippets.ts canReadSnippet); 404 otherwise' },
    schema: { params: SnippetIdParams, response: { 200: SnippetSchema } },
  }), async (request) => presentOne(request, await findReadableSnippet(cairn, request.actor?.user ?? null, request.params.id)));

  app.get(`${base}/:id/raw`, route({ matrix: { is: 'public', cells: { external: 404, nonmember: 404, guest: 404, reporter: 404, developer: 404, owner: 404, anonymous: 404 } },
    access: { custom: 'whoever may read the snippet (policies/snippets.ts canReadSnippet); 404 otherwise' },
    schema: { params: SnippetIdParams, response: { 200: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { snippet } = await findReadableSnippet(cairn, request.actor?.user ?? null, request.params.id);
    const file = await firstSnippetFile(cairn, snippet);
    if (!file) throw notFound('File');
    return sendRaw(reply, file);
  });

  app.get(`${base}/:id/files/:ref/:file_path/raw`, route({ matrix: { is: 'public', cells: { external: 404, nonmember: 404, guest: 404, reporter: 404, developer: 404, owner: 404, anonymous: 404 } },
    access: { custom: 'whoever may read the snippet (policies/snippets.ts canReadSnippet); 404 otherwise' },
    schema: { params: Type.Object({ id: RowId, ...FileParams }), response: { 200: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { snippet } = await findReadableSnippet(cairn, request.actor?.user ?? null, request.params.id);
    const path = filePathParam('file_path', request.params.file_path);
    return sendRaw(reply, await readSnippetFile(cairn, snippet, request.params.ref, path));
  });

  app.get(`${base}/:id/user_agent_detail`, route({ matrix: 'admin',
    access: { admin: true },
    schema: { params: SnippetIdParams, response: { 200: UserAgentDetailSchema } },
  }), async (request) => {
    const snippet = await cairn.db.selectFrom('snippets').selectAll().where('id', '=', request.params.id).executeTakeFirst();
    if (!snippet) throw notFound('Snippet');
    if (snippet.user_agent === null) throw notFound('UserAgentDetail');
    return presentUserAgentDetail(snippet);
  });

  /** Creates a personal (project null) or project snippet from a create body; 201 with it. */
  async function create(request: FastifyRequest, reply: FastifyReply, project: SnippetAccess['project'], body: Static<typeof CreateBody>, visibility: number) {
    const snippet = await createSnippet(cairn, {
      author: signedIn(request),
      project,
      title: titleParam(body.title)!,
      description: body.description ?? null,
      visibilityLevel: visibility,
      files: createFiles(body),
      userAgent: String(request.headers['user-agent'] ?? ''),
      ipAddress: request.ip,
    });
    reply.code(201);
    return presentOne(request, { snippet, project });
  }

  /** PUT of a snippet the caller has found: whoever may update it (403 otherwise). */
  async function update(request: FastifyRequest, access: SnippetAccess, body: Static<typeof UpdateBody>) {
    const user = signedIn(request);
    if (!canUpdateSnippet(user, access.snippet, access.subject)) throw forbidden();
    const input = updateInput(body, await snippetFiles(cairn, access.snippet), access.project?.visibility_level ?? null);
    const snippet = await updateSnippet(cairn, access.snippet, user, input);
    return presentOne(request, { snippet, project: access.project });
  }

  /** DELETE of a snippet the caller has found: whoever may delete it (403 otherwise); 204. */
  async function remove(request: FastifyRequest, reply: FastifyReply, access: SnippetAccess) {
    if (!canDeleteSnippet(signedIn(request), access.snippet, access.subject)) throw forbidden();
    await deleteSnippet(cairn, access.snippet);
    return reply.code(204).send();
  }

  app.post(base, route({ matrix: 'signedIn',
    access: { custom: 'signed-in users who are not external (policies/snippets.ts canCreatePersonalSnippet)', signedIn: true },
    bodyLimit,
    schema: { body: CreateBody, response: { 201: SnippetSchema } },
  }), async (request, reply) => {
    if (!canCreatePersonalSnippet(signedIn(request))) throw forbidden();
    const visibility = visibilityParam(request.body.visibility ?? 'internal')!;
    return create(request, reply, null, request.body, visibility);
  });

  /** PUT and DELETE /snippets/:id act on the caller's own snippets only (GitLab's snippets_for_current_user): 404 for others'. */
  async function ownSnippet(request: FastifyRequest, id: number): Promise<SnippetAccess> {
    const user = signedIn(request);
    const access = await findReadableSnippet(cairn, user, id);
    if (access.snippet.author_id !== user.id) throw notFound('Snippet');
    return access;
  }

  app.put(`${base}/:id`, route({ matrix: { is: 'signedIn', cells: { external: 404, nonmember: 404, guest: 404, reporter: 404, developer: 404, owner: 404, admin: 404 } },
    access: { custom: "the snippet's author (policies/snippets.ts canUpdateSnippet); 404 for anyone else's", signedIn: true },
    bodyLimit,
    schema: { params: SnippetIdParams, body: UpdateBody, response: { 200: SnippetSchema } },
  }), async (request) => {
    return update(request, await ownSnippet(request, request.params.id), request.body);
  });

  app.delete(`${base}/:id`, route({ matrix: { is: 'signedIn', cells: { external: 404, nonmember: 404, guest: 404, reporter: 404, developer: 404, owner: 404, admin: 404 } },
    access: { custom: "the snippet's author (policies/snippets.ts canDeleteSnippet); 404 for anyone else's", signedIn: true },
    schema: { params: SnippetIdParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    return remove(request, reply, await ownSnippet(request, request.params.id));
  });

  // -------------------------------------------------------------------------------------------
  // Project snippets

  const pbase = '/api/v4/projects/:id/snippets';
  /** A snippet of the route's project that the caller may read; 404 Snippet otherwise. */
  const projectSnippet = (request: FastifyRequest, snippetId: number) => {
    const access = projectOf(request);
    return findReadableSnippet(cairn, access.user, snippetId, { projectId: access.project.id });
  };

  app.get(pbase, route({ matrix: 'read',
    access: { project: 'read_snippet', signedIn: true },
    paginated: true,
    schema: { params: Type.Object({ id: Type.String() }), querystring: ListQuery, response: { 200: Type.Array(SnippetSchema) } },
  }), async (request, reply) => {
    const access = projectOf(request);
    return page(request, reply, access.user, { projectId: access.project.id }, request.query);
  });

  app.get(`${pbase}/:snippet_id`, route({ matrix: 'read',
    access: { project: 'read_snippet' },
    schema: { params: ProjectSnippetParams, response: { 200: SnippetSchema } },
  }), async (request) => presentOne(request, await projectSnippet(request, request.params.snippet_id)));

  app.get(`${pbase}/:snippet_id/raw`, route({ matrix: 'read',
    access: { project: 'read_snippet' },
    schema: { params: ProjectSnippetParams, response: { 200: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { snippet } = await projectSnippet(request, request.params.snippet_id);
    const file = await firstSnippetFile(cairn, snippet);
    if (!file) throw notFound('File');
    return sendRaw(reply, file);
  });

  app.get(`${pbase}/:snippet_id/files/:ref/:file_path/raw`, route({ matrix: 'read',
    access: { project: 'read_snippet' },
    schema: { params: Type.Object({ ...ProjectSnippetParams.properties, ...FileParams }), response: { 200: RawBody('text/plain') } },
  }), async (request, reply) => {
    const { snippet } = await projectSnippet(request, request.params.snippet_id);
    const path = filePathParam('file_path', request.params.file_path);
    return sendRaw(reply, await readSnippetFile(cairn, snippet, request.params.ref, path));
  });

  app.get(`${pbase}/:snippet_id/user_agent_detail`, route({ matrix: 'admin',
    access: { admin: true },
    schema: { params: ProjectSnippetParams, response: { 200: UserAgentDetailSchema } },
  }), async (request) => {
    const { project } = await authorizeProject(request, request.params.id);
    const snippet = await cairn.db
      .selectFrom('snippets')
      .selectAll()
      .where('id', '=', request.params.snippet_id)
      .where('project_id', '=', project.id)
      .executeTakeFirst();
    if (!snippet) throw notFound('Snippet');
    if (snippet.user_agent === null) throw notFound('UserAgentDetail');
    return presentUserAgentDetail(snippet);
  });

  app.post(pbase, route({ matrix: 'reporter',
    access: { project: 'create_snippet', signedIn: true },
    bodyLimit,
    schema: { params: Type.Object({ id: Type.String() }), body: Type.Object({ ...CreateBody.properties, visibility: Type.Unknown() }), response: { 201: SnippetSchema } },
  }), async (request, reply) => {
    const access = projectOf(request);
    const visibility = visibilityParam(request.body.visibility)!;
    if (!visibilityAllowedInProject(visibility, access.project)) throw snippetError(400, "Visibility level can not be more visible than the project's");
    return create(request, reply, access.project, request.body, visibility);
  });

  app.put(`${pbase}/:snippet_id`, route({ matrix: 'maintainer',
    access: { project: 'read_snippet', signedIn: true },
    bodyLimit,
    schema: { params: ProjectSnippetParams, body: UpdateBody, response: { 200: SnippetSchema } },
  }), async (request) => {
    return update(request, await projectSnippet(request, request.params.snippet_id), request.body);
  });

  app.delete(`${pbase}/:snippet_id`, route({ matrix: 'maintainer',
    access: { project: 'read_snippet', signedIn: true },
    schema: { params: ProjectSnippetParams, response: { 204: NoContent } },
  }), async (request, reply) => {
    return remove(request, reply, await projectSnippet(request, request.params.snippet_id));
  });
}
