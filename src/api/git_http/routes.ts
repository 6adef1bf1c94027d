import fs from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ProjectWithNamespace } from '../../finders/projects.js';
import { jobTokenMayAccess } from '../../policies/job_token_scope.js';
import { loadProjectForUser } from '../../finders/authorize.js';
import {
  ensureHooksDir,
  GIT_SERVICES,
  InvalidPushError,
  isProtocolV2,
  readReceivePackHead,
  refusalReport,
  sanitizeGitProtocol,
  serviceExit,
  servicePreamble,
  packObjectsCacheDir,
  startService,
  type GitService,
} from '../../git/http.js';
import { repositoryWritten, type GitProcess } from '../../git/command.js';
import type { Snippet } from '../../db/schema/snippets.js';
import { checkGitAccess, checkSnippetGitAccess, GIT_MESSAGES, type GitCredential } from '../../policies/git_access.js';
import { snippetAccessFor } from '../../policies/snippets.js';
import { acquireWriteLease, releaseWriteLease } from '../../services/repository_writes.js';
import { endRefJournal, journalRefUpdates, recordPush } from '../../services/post_receive.js';
import { projectRepoPath } from '../../services/projects.js';
import { checkRefUpdates } from '../../services/push_rules.js';
import { checkSnippetRefUpdates, recordSnippetPush, snippetRepoPath } from '../../services/snippets.js';
import { RawBody, route, type Access } from '../route.js';
import { authenticateGitClient, GitHttpError } from './auth.js';

/**
 * Git's smart HTTP protocol (v0 and v2) at `/<full_path>[.git]/info/refs`,
 * `/<full_path>[.git]/git-upload-pack` and `/<full_path>[.git]/git-receive-pack`, for projects
 * and for snippets (`/snippets/<id>.git`, `/<project>/snippets/<id>.git`), with
 * HTTP Basic authentication (tokens or password), GitLab's access rules, Cairn's push rules
 * and the post-receive hook point. Bodies stream both ways; a pack is never held in memory.
 */

/** A group may nest 20 levels deep, so a project path has up to 21 segments. */
export const MAX_PATH_SEGMENTS = 21;

const NO_CACHE = {
  'cache-control': 'no-cache, max-age=0, must-revalidate',
  pragma: 'no-cache',
  expires: 'Fri, 01 Jan 1980 00:00:00 GMT',
};

/** What a git request is about: a project's repository or a snippet's. */
type GitTarget = { kind: 'project'; project: ProjectWithNamespace } | { kind: 'snippet'; snippet: Snippet };

interface GitRequestContext {
  target: GitTarget;
  cred: GitCredential | null;
  accessLevel: number;
  gitDir: string;
  gitProtocol: string | undefined;
}

export function projectPathOf(request: FastifyRequest): string {
  const params = request.params as Record<string, string>;
  const segments: string[] = [];
  for (let i = 0; i < MAX_PATH_SEGMENTS && params[`p${i}`] !== undefined; i++) segments.push(params[`p${i}`]);
  const last = segments.length - 1;
  if (segments[last].toLowerCase().endsWith('.git')) segments[last] = segments[last].slice(0, -4);
  return segments.join('/');
}

export function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** A snippet's repository path: `snippets/<id>` (personal) or `<project path>/snippets/<id>`. */
const SNIPPET_PATH = /^(?:(.+)\/)?snippets\/(\d{1,10})$/;

/** Authenticates the client and checks its access to the project (or snippet) for `service`. */
/**
 * `pushRpc`: the receive-pack POST itself. A repository that turned read-only since the ref
 * advertisement (a storage move began) is not refused here with a bare HTTP 403 (git would only
 * print "RPC failed"): receivePack refuses every update in the push report instead, with the
 * read-only message, when it cannot take a write lease.
 */
async function authorizeGit(request: FastifyRequest, service: GitService, pushRpc = false): Promise<GitRequestContext> {
  const cairn = request.server.cairn;
  const cred = await authenticateGitClient(cairn, header(request, 'authorization'), request.ip);
  const fullPath = projectPathOf(request);
  const userId = cred?.user.id;
  const snippetPath = SNIPPET_PATH.exec(fullPath);
  // `snippets` is a reserved top-level path, so `snippets/<id>` is never a project; a project
  // path ending in `/snippets/<id>` is tried as a project first, as GitLab's RepoPath does.
  let project =
    fullPath.includes('/') && !fullPath.split('/').includes('') && !(snippetPath && snippetPath[1] === undefined)
      ? await loadProjectForUser(cairn, userId, fullPath)
      : undefined;
  if (!project && snippetPath) return authorizeSnippetGit(request, cred, snippetPath[1] ?? null, Number(snippetPath[2]), service, pushRpc);
  // A CI job token of another project sees this one only through its job token allowlist.
  if (project && cred?.jobProjectId !== undefined && !(await jobTokenMayAccess(cairn.db, cred.jobProjectId, project))) project = undefined;
  const decision = checkGitAccess(project && pushRpc ? { ...project, repository_read_only: false } : project, cred, service, project?.callerAccessLevel ?? 0);
  if (!decision.allowed) throw new GitHttpError(decision.status, decision.message);
  return {
    target: { kind: 'project', project: project! },
    cred,
    accessLevel: decision.accessLevel,
    gitDir: projectRepoPath(cairn, project!),
    gitProtocol: sanitizeGitProtocol(request.headers['git-protocol']),
  };
}

/** The snippet of a snippet repository path, for the caller: its project (if any) must be the one in the path. */
async function authorizeSnippetGit(request: FastifyRequest, cred: GitCredential | null, projectPath: string | null, id: number, service: GitService, pushRpc: boolean): Promise<GitRequestContext> {
  const cairn = request.server.cairn;
  const user = cred?.user ?? null;
  let snippet = id <= 2147483647 ? await cairn.db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirst() : undefined;
  let access = snippet ? await snippetAccessFor(cairn, user, snippet) : null;
  if (snippet && access) {
    const inPlace = projectPath === null ? snippet.project_id === null : !!access.project && access.project.id === snippet.project_id && projectPathMatches(access.project, projectPath);
    if (!inPlace) snippet = undefined;
  }
  const decision = checkSnippetGitAccess(snippet && pushRpc ? { ...snippet, repository_read_only: false } : snippet, access?.subject ?? null, cred, service);
  if (!decision.allowed) throw new GitHttpError(decision.status, decision.message);
  return {
    target: { kind: 'snippet', snippet: snippet! },
    cred,
    accessLevel: decision.accessLevel,
    gitDir: snippetRepoPath(cairn, snippet!),
    gitProtocol: sanitizeGitProtocol(request.headers['git-protocol']),
  };
}

function projectPathMatches(project: ProjectWithNamespace, path: string): boolean {
  return `${project.namespace.full_path}/${project.path}`.toLowerCase() === path.toLowerCase();
}

function targetId(target: GitTarget): string {
  return target.kind === 'project' ? `project ${target.project.id}` : `snippet ${target.snippet.id}`;
}

function sendGitError(reply: FastifyReply, err: GitHttpError) {
  reply.code(err.status).header('content-type', 'text/plain; charset=utf-8').headers(NO_CACHE);
  if (err.status === 401) reply.header('www-authenticate', 'Basic realm="GitLab"');
  return reply.send(err.message + '\n');
}

/** Runs `handler`, turning expected refusals into plain-text answers git shows as `remote:` lines. */
function gitRoute(handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      return await handler(request, reply);
    } catch (err) {
      if (err instanceof GitHttpError) return sendGitError(reply, err);
      throw err;
    }
  };
}

/** The request body as a stream, gunzipped when the client compressed it. */
function requestBody(request: FastifyRequest, service: GitService): Readable {
  const type = (header(request, 'content-type') ?? '').split(';')[0].trim().toLowerCase();
  const body = request.body as Readable | undefined;
  if (type !== `application/x-${service}-request` || !body || typeof body.pipe !== 'function') {
    throw new GitHttpError(415, `Unsupported Media Type: expected application/x-${service}-request`);
  }
  const encoding = (header(request, 'content-encoding') ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return body;
  if (encoding !== 'gzip' && encoding !== 'x-gzip') throw new GitHttpError(415, `Unsupported Content-Encoding: ${encoding}`);
  const gunzip = createGunzip();
  body.on('error', (e) => gunzip.destroy(e));
  // A corrupt body is handled where it is piped into git (see pipeInto); never an uncaught error.
  gunzip.on('error', () => {});
  return body.pipe(gunzip);
}

/**
 * git's stdout as the response body. It ends when git has exited (after `before`, if given),
 * also when git was killed, so a response never hangs on a dead process.
 */
function responseBody(proc: GitProcess, exit: Promise<unknown>, prefix: Buffer[] = [], before?: () => Promise<void>): PassThrough {
  const out = new PassThrough();
  for (const b of prefix) out.write(b);
  proc.stdout.pipe(out, { end: false });
  exit.then(async () => {
    try {
      if (before) await before();
    } finally {
      out.end();
    }
  });
  return out;
}

/** The first bytes git writes, or null when it exits without writing any. */
function firstChunk(proc: GitProcess): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const stdout = proc.stdout;
    const done = (b: Buffer | null) => {
      stdout.off('data', onData);
      stdout.off('end', onEnd);
      stdout.off('close', onEnd);
      stdout.pause();
      resolve(b);
    };
    const onData = (b: Buffer) => done(b);
    const onEnd = () => done(null);
    stdout.on('data', onData);
    stdout.on('end', onEnd);
    stdout.on('close', onEnd);
  });
}

/** Streams the request body into git's stdin; a broken body (bad gzip, reset) kills git. */
function pipeInto(input: Readable, proc: GitProcess) {
  if (input.errored) return proc.kill();
  // Everything was read already (the push commands took the whole body): only EOF is left to pass on.
  if (input.readableEnded) return proc.stdin.end();
  if (input.destroyed) return proc.kill();
  input.on('error', () => proc.kill());
  input.pipe(proc.stdin);
}

/** Ties a service process to the response (killed if the client goes away) and logs a failure. */
function superviseService(request: FastifyRequest, reply: FastifyReply, proc: GitProcess, service: GitService) {
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) proc.kill();
  });
  proc.stdin.on('error', () => {});
  proc.stdout.on('error', () => {});
  const exit = serviceExit(proc);
  exit.then(({ code, stderr }) => {
    if (code !== 0) request.log.warn({ service, code, stderr: stderr.slice(0, 2000) }, 'git service failed');
  });
  return exit;
}

async function infoRefs(request: FastifyRequest, reply: FastifyReply) {
  // Read by hand, not by a querystring schema: git expects this refusal as a 403 with its text.
  const service = (request.query as Record<string, unknown>).service;
  if (typeof service !== 'string' || !GIT_SERVICES.includes(service as GitService)) {
    throw new GitHttpError(403, 'Only the smart HTTP protocol is supported: use ?service=git-upload-pack or ?service=git-receive-pack.');
  }
  const svc = service as GitService;
  const ctx = await authorizeGit(request, svc);
  const proc = await startService({ gitDir: await liveGitDir(request, ctx), service: svc, advertiseRefs: true, gitProtocol: ctx.gitProtocol });
  const exit = superviseService(request, reply, proc, svc);
  proc.stdin.end();
  // Wait for the first bytes, so a repository that cannot be read is an error, not an empty 200.
  const first = await firstChunk(proc);
  if (!first) {
    const { code, stderr } = await exit;
    request.log.error({ code, stderr, target: targetId(ctx.target) }, 'ref advertisement failed');
    return reply.code(500).header('content-type', 'text/plain; charset=utf-8').send('The repository could not be read.\n');
  }
  // v2 advertises capabilities only; v0 starts with the service line git's HTTP transport expects.
  const prefix = isProtocolV2(ctx.gitProtocol) ? [first] : [servicePreamble(svc), first];
  const body = responseBody(proc, exit, prefix);
  return reply.code(200).header('content-type', `application/x-${svc}-advertisement`).headers(NO_CACHE).send(body);
}

/**
 * The repository's directory as the database says now. The row authorizeGit used may come from
 * the cache and predate a storage move that has just switched the repository and removed the
 * old copy: reads keep working during and after a move, so a directory that is gone is looked up
 * again (a read from the database, not the cache).
 */
async function liveGitDir(request: FastifyRequest, ctx: GitRequestContext): Promise<string> {
  if (fs.existsSync(ctx.gitDir)) return ctx.gitDir;
  const cairn = request.server.cairn;
  if (ctx.target.kind === 'project') {
    const row = await cairn.db.selectFrom('projects').select(['repository_storage', 'disk_path']).where('id', '=', ctx.target.project.id).executeTakeFirst();
    return row ? projectRepoPath(cairn, row) : ctx.gitDir;
  }
  const row = await cairn.db.selectFrom('snippets').select(['repository_storage', 'disk_path']).where('id', '=', ctx.target.snippet.id).executeTakeFirst();
  return row ? snippetRepoPath(cairn, row) : ctx.gitDir;
}

async function uploadPack(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeGit(request, 'git-upload-pack');
  const input = requestBody(request, 'git-upload-pack');
  const { config } = request.server.cairn;
  const proc = await startService({
    gitDir: await liveGitDir(request, ctx),
    service: 'git-upload-pack',
    gitProtocol: ctx.gitProtocol,
    packObjectsCache: { dir: packObjectsCacheDir(config.dataDir), maxAgeSeconds: config.packObjectsCacheMaxAge },
  });
  const exit = superviseService(request, reply, proc, 'git-upload-pack');
  pipeInto(input, proc);
  // Headers wait for git's first bytes: a request git cannot read (bad gzip, garbage) is a 400.
  const first = await firstChunk(proc);
  if (!first && (await exit).code !== 0) throw new GitHttpError(400, 'The upload-pack request could not be read.');
  const out = responseBody(proc, exit, first ? [first] : []);
  return reply.code(200).header('content-type', 'application/x-git-upload-pack-result').headers(NO_CACHE).send(out);
}

async function receivePack(request: FastifyRequest, reply: FastifyReply) {
  const cairn = request.server.cairn;
  const ctx = await authorizeGit(request, 'git-receive-pack', true);
  const input = requestBody(request, 'git-receive-pack');
  let head: Awaited<ReturnType<typeof readReceivePackHead>>;
  try {
    head = await readReceivePackHead(input);
  } catch (err) {
    // Never destroy the request: that resets the connection before the answer is sent.
    input.resume();
    if (err instanceof InvalidPushError) throw new GitHttpError(400, err.message);
    throw new GitHttpError(400, 'The push request could not be read.');
  }
  if (!head.updates.length) {
    // git's probe before a push larger than http.postBuffer, or a push with nothing to do:
    // receive-pack reads the flush-pkt and answers nothing, so Cairn answers nothing too.
    input.resume();
    return reply.code(200).header('content-type', 'application/x-git-receive-pack-result').headers(NO_CACHE).send(Buffer.alloc(0));
  }
  const user = ctx.cred!.user;
  const target = ctx.target;
  const decision =
    target.kind === 'project'
      ? await checkRefUpdates(cairn, target.project, user, head.updates, ctx.accessLevel)
      : { refusals: checkSnippetRefUpdates(head.updates), noForceRefs: [] as string[] };
  // Held until the push is recorded: a storage move waits for it before copying the repository,
  // and none is granted once a move has made the repository read-only (services/repository_writes.ts).
  const container = target.kind === 'project' ? { type: 'Project' as const, id: target.project.id } : { type: 'Snippet' as const, id: target.snippet.id };
  const lease = decision.refusals.size ? null : await acquireWriteLease(cairn.db, container);
  if (!decision.refusals.size && lease === null) {
    // A move began after the ref advertisement: every update is refused in the push report, so
    // git prints GitLab's read-only message instead of a bare HTTP error.
    for (const u of head.updates) decision.refusals.set(u.ref, GIT_MESSAGES.readOnly);
  }
  const release = () => (lease === null ? Promise.resolve() : releaseWriteLease(cairn.db, lease.id).catch(() => {}));
  // The repository is where the row says now (a move may have finished since the row was read).
  const moved = lease
    ? target.kind === 'project'
      ? { kind: 'project' as const, project: { ...target.project, repository_storage: lease.storage } }
      : { kind: 'snippet' as const, snippet: { ...target.snippet, repository_storage: lease.storage } }
    : target;
  const gitDir = lease ? (moved.kind === 'project' ? projectRepoPath(cairn, moved.project) : snippetRepoPath(cairn, moved.snippet)) : ctx.gitDir;
  reply.code(200).header('content-type', 'application/x-git-receive-pack-result').headers(NO_CACHE);

  if (decision.refusals.size) {
    // Nothing is unpacked; read the rest of the request so the client sees the report, not a reset.
    if (!head.ended) {
      input.resume();
      await finished(input).catch(() => {});
    }
    return reply.send(refusalReport(head, decision.refusals));
  }

  const noForce = decision.noForceRefs;
  // Journalled before receive-pack may move a ref: a crash before the push is recorded replays it.
  let journal: number | null = null;
  let proc: Awaited<ReturnType<typeof startService>>;
  try {
    if (moved.kind === 'project') journal = await journalRefUpdates(cairn, moved.project.id, user.id, head.updates, head.pushOptions);
    proc = await startService({
    gitDir,
    service: 'git-receive-pack',
    gitProtocol: ctx.gitProtocol,
    hooksPath: noForce.length ? await ensureHooksDir(cairn.config.dataDir) : undefined,
    hookEnv: noForce.length ? { CAIRN_NO_FORCE_REFS: noForce.join('\n') } : undefined,
    });
  } catch (err) {
    if (journal !== null) await endRefJournal(cairn, journal).catch(() => {});
    await release();
    throw err;
  }
  const exit = superviseService(request, reply, proc, 'git-receive-pack');
  proc.stdin.write(head.consumed);
  if (head.ended) proc.stdin.end();
  else pipeInto(input, proc);

  // The response stays open until the push is recorded, so a client that sees success can rely on it.
  // Recorded whatever git's exit status: refs may have moved before a client hung up and
  // receive-pack was killed; recordPush keeps only the updates that took effect.
  const out = responseBody(proc, exit, [], async () => {
    try {
      // Caches drop what they computed from repositories before the client hears of the push.
      await repositoryWritten(gitDir).catch((err) => request.log.warn({ err }, 'announcing a repository write failed'));
      if (moved.kind === 'project') await recordPush(cairn, moved.project, user.id, head.updates, request.log, head.pushOptions);
      else await recordSnippetPush(cairn, moved.snippet, head.updates);
    } catch (err) {
      request.log.error({ err, target: targetId(target) }, 'recording a push failed');
    } finally {
      if (journal !== null) await endRefJournal(cairn, journal).catch(() => {});
      await release();
    }
  });
  return reply.send(out);
}

export default async function gitHttpRoutes(app: FastifyInstance) {
  // The request body is handed over as the raw stream; the handlers pipe it into git.
  app.addContentTypeParser(
    ['application/x-git-upload-pack-request', 'application/x-git-receive-pack-request'],
    (_request, payload, done) => done(null, payload),
  );
  // The access check is authorizeGit's (a `custom` access adds no hook), and no input schema is
  // declared, so the hot path runs no validation: the path segments are joined by hand, the body
  // is a stream and `service` is checked by infoRefs.
  const config = { skipApiAuth: true };
  const credential = 'git credential (HTTP Basic: token or password) with';
  const download: Access = { custom: `${credential} download rights on the project of the path (policies/git_access.ts)` };
  const push: Access = { custom: `${credential} push rights on the project of the path (policies/git_access.ts); each ref update by the push rules (services/push_rules.ts)` };
  const advertisement = route({ matrix: 'git:read',
    access: { custom: `${credential} the rights of ?service: download for git-upload-pack, push for git-receive-pack (policies/git_access.ts)` },
    config,
    schema: {
      response: {
        200: Type.Union([RawBody('application/x-git-upload-pack-advertisement'), RawBody('application/x-git-receive-pack-advertisement')]),
      },
    },
  });
  const fetchPack = route({ matrix: 'git:read',  access: download, config, schema: { response: { 200: RawBody('application/x-git-upload-pack-result') } } });
  const receive = route({ matrix: 'git:write',  access: push, config, schema: { response: { 200: RawBody('application/x-git-receive-pack-result') } } });
  for (let n = 2; n <= MAX_PATH_SEGMENTS; n++) {
    const prefix = '/' + Array.from({ length: n }, (_, i) => `:p${i}`).join('/');
    app.get(`${prefix}/info/refs`, advertisement, gitRoute(infoRefs));
    app.post(`${prefix}/git-upload-pack`, fetchPack, gitRoute(uploadPack));
    app.post(`${prefix}/git-receive-pack`, receive, gitRoute(receivePack));
  }
}
