import { PassThrough, type Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  GIT_SERVICES,
  InvalidPushError,
  isProtocolV2,
  readReceivePackHead,
  sanitizeGitProtocol,
  serviceExit,
  servicePreamble,
  type GitService,
} from '../../git/http.js';
import type { GitProcess } from '../../git/command.js';
import {
  authorizeGitPath,
  GitAccessError,
  startAdvertisement,
  startPush,
  startUploadPack,
  targetId,
  type GitSession,
} from '../../services/git_transport.js';
import { RawBody, route, type Access } from '../route.js';
import { authenticateGitClient, GitHttpError } from './auth.js';

/**
 * Git's smart HTTP protocol (v0 and v2) at `/<full_path>[.git]/info/refs`,
 * `/<full_path>[.git]/git-upload-pack` and `/<full_path>[.git]/git-receive-pack`, for projects
 * and for snippets (`/snippets/<id>.git`, `/<project>/snippets/<id>.git`), with
 * HTTP Basic authentication (tokens or password), GitLab's access rules, Cairn's push rules
 * and the post-receive hook point. Bodies stream both ways; a pack is never held in memory. The
 * git service work itself is services/git_transport.ts's, shared with git over SSH (src/ssh/).
 */

/** A group may nest 20 levels deep, so a project path has up to 21 segments. */
export const MAX_PATH_SEGMENTS = 21;

const NO_CACHE = {
  'cache-control': 'no-cache, max-age=0, must-revalidate',
  pragma: 'no-cache',
  expires: 'Fri, 01 Jan 1980 00:00:00 GMT',
};

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

/**
 * Authenticates the client and checks its access to the project (or snippet) of the path for
 * `service`, through the checks every transport shares (services/git_transport.ts).
 * `pushRpc`: the receive-pack POST itself (see authorizeGitPath).
 */
async function authorizeGit(request: FastifyRequest, service: GitService, pushRpc = false): Promise<GitSession> {
  const cairn = request.server.cairn;
  const cred = await authenticateGitClient(cairn, header(request, 'authorization'), request.ip);
  try {
    return await authorizeGitPath(cairn, cred, projectPathOf(request), service, { pushRpc, gitProtocol: sanitizeGitProtocol(request.headers['git-protocol']) });
  } catch (err) {
    if (err instanceof GitAccessError) throw new GitHttpError(err.status, err.message);
    throw err;
  }
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
  const proc = await startAdvertisement(request.server.cairn, ctx, svc);
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

async function uploadPack(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeGit(request, 'git-upload-pack');
  const input = requestBody(request, 'git-upload-pack');
  const proc = await startUploadPack(request.server.cairn, ctx, { stateless: true });
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
  reply.code(200).header('content-type', 'application/x-git-receive-pack-result').headers(NO_CACHE);
  const push = await startPush(cairn, ctx, head, request.log);
  if (push.refused) {
    // Nothing is unpacked; read the rest of the request so the client sees the report, not a reset.
    if (!head.ended) {
      input.resume();
      await finished(input).catch(() => {});
    }
    return reply.send(push.refused);
  }
  const { proc, finish } = push;
  const exit = superviseService(request, reply, proc, 'git-receive-pack');
  if (!head.ended) pipeInto(input, proc);
  // The response stays open until the push is recorded, so a client that sees success can rely on it.
  return reply.send(responseBody(proc, exit, [], finish));
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
