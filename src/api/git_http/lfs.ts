import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { loadProjectForUser } from '../../finders/authorize.js';
import type { FoundProject } from '../../finders/projects.js';
import { LfsError, linkedObjects, openLfsObject, storeLfsObject, isOid } from '../../lfs/objects.js';
import { createLock, deleteLock, listLocks, LockExistsError, presentLock } from '../../lfs/locks.js';
import { can } from '../../policies/abilities.js';
import { checkGitAccess, type GitCredential } from '../../policies/git_access.js';
import { jobTokenMayAccess } from '../../policies/job_token_scope.js';
import { projectSettings } from '../../presenters/projects.js';
import { RawBody, route } from '../route.js';
import { authorizeGitPath, deployTokenProject, findAuthKeyById, GitAccessError, keyCredential, type GitSession } from '../../services/git_transport.js';
import { isLfsToken, lfsTokenUsername, verifyLfsToken } from '../../lfs/tokens.js';
import { clearIpFailures, ipAuthState, recordIpFailure } from '../../services/auth_failures.js';
import { ACCESS_DENIED, authenticateGitClient, GitHttpError, IP_BANNED, parseBasicAuth } from './auth.js';
import { header, MAX_PATH_SEGMENTS, projectPathOf } from './routes.js';

/**
 * Git LFS over HTTP (the git-lfs batch API with the basic transfer adapter, and the locks API) at
 * `/<full_path>.git/info/lfs/...`, with the objects themselves at
 * `/<full_path>.git/gitlab-lfs/objects/<oid>[/<size>]` as GitLab has them. Same credentials and
 * access rules as git over HTTP (HTTP Basic: tokens, `oauth2:`, `gitlab-ci-token:`): downloads
 * for whoever may fetch, uploads and locks for whoever may push. Errors are LFS's JSON form
 * (`{"message": ...}`, application/vnd.git-lfs+json). Objects stream through the process both
 * ways (the storage layer has no presigned URLs).
 */

const LFS_TYPE = 'application/vnd.git-lfs+json';
/** Largest batch / lock request body (JSON): 10,000 objects fit easily. */
const MAX_JSON_BODY = 4 * 1024 * 1024;
/** Objects of one batch request (GitLab has no limit; git-lfs sends 100 at a time). */
const MAX_BATCH_OBJECTS = 10_000;
const HREF_EXPIRES_IN = 3600;

type Operation = 'download' | 'upload';

interface LfsContext {
  project: FoundProject;
  cred: GitCredential | null;
  accessLevel: number;
  fullPath: string;
}

function sendLfsError(reply: FastifyReply, status: number, message: string, extra: Record<string, unknown> = {}) {
  reply.code(status).header('content-type', LFS_TYPE);
  if (status === 401) reply.header('www-authenticate', 'Basic realm="GitLab"');
  return reply.send(Buffer.from(JSON.stringify({ ...extra, message })));
}

/** Runs `handler`; refusals become LFS's JSON errors. */
function lfsRoute(handler: (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    try {
      return await handler(request, reply);
    } catch (err) {
      if (err instanceof LockExistsError) return sendLfsError(reply, 409, err.message, { lock: presentLock(err.lock) });
      if (err instanceof LfsError || err instanceof GitHttpError) return sendLfsError(reply, err.status, err.message);
      throw err;
    }
  };
}

/**
 * Who calls, and whether they may download (or upload) on the project of the path: git's own
 * check (policies/git_access.ts) so that LFS and git always agree. A project with LFS disabled is
 * not found, as GitLab has it.
 */
async function authorizeLfs(request: FastifyRequest, op: Operation): Promise<LfsContext> {
  const cairn = request.server.cairn;
  const fullPath = projectPathOf(request);
  const basic = parseBasicAuth(header(request, 'authorization'));
  if (basic && isLfsToken(basic.password)) return authorizeLfsToken(request, basic.username, basic.password, fullPath, op);
  const cred = await authenticateGitClient(cairn, header(request, 'authorization'), request.ip);
  const service = op === 'download' ? 'git-upload-pack' : 'git-receive-pack';
  if (cred?.deployToken) {
    // A deploy token: the projects it reaches, as its scopes allow (the check git's own requests make).
    let found: FoundProject;
    try {
      found = await deployTokenProject(cairn, cred, fullPath.includes('/') && !fullPath.split('/').includes('') ? fullPath : null, service);
    } catch (err) {
      if (err instanceof GitAccessError) throw new LfsError(err.status, err.message);
      throw err;
    }
    if (!projectSettings(found).lfs_enabled) throw new LfsError(404, 'Not found: Git LFS is disabled for this project.');
    return { project: found, cred, accessLevel: 0, fullPath: `${found.namespace.full_path}/${found.path}` };
  }
  let project = fullPath.includes('/') && !fullPath.split('/').includes('') ? await loadProjectForUser(cairn, cred?.user.id, fullPath) : undefined;
  if (project && cred?.jobProjectId !== undefined && !(await jobTokenMayAccess(cairn.db, cred.jobProjectId, project))) project = undefined;
  const decision = checkGitAccess(project, cred, service, project?.callerAccessLevel ?? 0);
  if (!decision.allowed) throw new LfsError(decision.status, decision.message);
  if (!projectSettings(project!).lfs_enabled) throw new LfsError(404, 'Not found: Git LFS is disabled for this project.');
  return { project: project!, cred, accessLevel: decision.accessLevel, fullPath: `${project!.namespace.full_path}/${project!.path}` };
}

/**
 * The credential of `git-lfs-authenticate` over SSH (lfs/tokens.ts): its key, looked up again (a
 * deleted or expired key, a blocked owner end it), acting on the project it was issued for only,
 * by the same access rules as git over SSH (services/git_transport.ts authorizeGitPath; deploy
 * keys only on their projects). A download token only downloads; an upload token does both
 * (a batch upload reads first).
 */
async function authorizeLfsToken(request: FastifyRequest, username: string, token: string, fullPath: string, op: Operation): Promise<LfsContext> {
  // Behind the same failed-authentication ban as every git credential over HTTP.
  const cairn = request.server.cairn;
  const standing = await ipAuthState(cairn, 'git_http', request.ip);
  if (standing.bannedFor) throw new GitHttpError(403, IP_BANNED);
  try {
    const ctx = await checkLfsToken(request, username, token, fullPath, op);
    if (standing.hasFailures) await clearIpFailures(cairn, 'git_http', request.ip);
    return ctx;
  } catch (err) {
    if (err instanceof GitHttpError && err.status === 401) await recordIpFailure(cairn, 'git_http', request.ip);
    throw err;
  }
}

async function checkLfsToken(request: FastifyRequest, username: string, token: string, fullPath: string, op: Operation): Promise<LfsContext> {
  const cairn = request.server.cairn;
  const claims = verifyLfsToken(cairn.config, token);
  if (!claims || (op === 'upload' && claims.operation !== 'upload')) throw new GitHttpError(401, ACCESS_DENIED);
  const key = await findAuthKeyById(cairn, claims.keyId);
  if (!key) throw new GitHttpError(401, ACCESS_DENIED);
  let cred: GitCredential;
  try {
    cred = await keyCredential(cairn, key);
  } catch (err) {
    if (err instanceof GitAccessError) throw new GitHttpError(401, ACCESS_DENIED);
    throw err;
  }
  if (username.toLowerCase() !== lfsTokenUsername(key, cred.user.username).toLowerCase()) throw new GitHttpError(401, ACCESS_DENIED);
  let session: GitSession;
  try {
    session = await authorizeGitPath(cairn, cred, fullPath, op === 'download' ? 'git-upload-pack' : 'git-receive-pack');
  } catch (err) {
    if (err instanceof GitAccessError) throw new LfsError(err.status, err.message);
    throw err;
  }
  // Issued for another project: not a credential here.
  if (session.target.kind !== 'project' || session.target.project.id !== claims.projectId) throw new GitHttpError(401, ACCESS_DENIED);
  const project = session.target.project as FoundProject;
  if (!projectSettings(project).lfs_enabled) throw new LfsError(404, 'Not found: Git LFS is disabled for this project.');
  return { project, cred, accessLevel: session.accessLevel, fullPath: `${session.target.project.namespace.full_path}/${session.target.project.path}` };
}

/** The JSON body of a batch or lock request, read by hand: LFS clients send their own media type. */
async function jsonBody(request: FastifyRequest): Promise<Record<string, unknown>> {
  const body = request.body as Readable | Record<string, unknown> | undefined;
  let value: unknown = body;
  if (body && typeof (body as Readable).pipe === 'function') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body as Readable) {
      size += chunk.length;
      if (size > MAX_JSON_BODY) throw new LfsError(413, 'The request body is too large.');
      chunks.push(chunk);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if (!text.trim()) value = {};
    else {
      try {
        value = JSON.parse(text);
      } catch {
        throw new LfsError(422, 'The request body is not valid JSON.');
      }
    }
  }
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw new LfsError(422, 'The request body must be a JSON object.');
  return value as Record<string, unknown>;
}

function objectsUrl(request: FastifyRequest, ctx: LfsContext): string {
  return `${request.server.cairn.config.externalUrl.replace(/\/+$/, '')}/${ctx.fullPath}.git/gitlab-lfs/objects`;
}

/** The Authorization the client used, handed back in each action so the transfer carries it. */
function actionHeaders(request: FastifyRequest, extra: Record<string, string> = {}): Record<string, string> {
  const auth = header(request, 'authorization');
  return { ...(auth ? { Authorization: auth } : {}), ...extra };
}

interface BatchObject {
  oid: string;
  size: number;
  authenticated?: boolean;
  actions?: Partial<Record<'download' | 'upload' | 'verify', { href: string; header?: Record<string, string>; expires_in: number }>>;
  error?: { code: number; message: string };
}

async function batch(request: FastifyRequest, reply: FastifyReply) {
  const cairn = request.server.cairn;
  // Read access first: an outsider learns nothing from the body's validation.
  let ctx = await authorizeLfs(request, 'download');
  const body = await jsonBody(request);
  const operation = body.operation;
  if (operation !== 'download' && operation !== 'upload') throw new LfsError(422, 'The operation must be "download" or "upload".');
  if (operation === 'upload') ctx = await authorizeLfs(request, 'upload');
  if (body.hash_algo !== undefined && body.hash_algo !== 'sha256') throw new LfsError(409, 'Only the sha256 hash algorithm is supported.');
  if (body.transfers !== undefined && (!Array.isArray(body.transfers) || !body.transfers.every((t) => typeof t === 'string'))) throw new LfsError(422, 'The transfers must be a list of names.');
  const objects = body.objects;
  if (!Array.isArray(objects)) throw new LfsError(422, 'The objects must be a list.');
  if (objects.length > MAX_BATCH_OBJECTS) throw new LfsError(413, `A batch may name at most ${MAX_BATCH_OBJECTS} objects.`);
  const wanted = objects.map((o) => ({ oid: (o as any)?.oid, size: (o as any)?.size }));
  const linked = await linkedObjects(cairn.db, ctx.project.id, wanted.map((o) => o.oid).filter(isOid));
  const base = objectsUrl(request, ctx);
  const limit = cairn.config.maxLfsObjectSize;
  const out = wanted.map(({ oid, size }): BatchObject => {
    const shownOid = typeof oid === 'string' ? oid.slice(0, 128) : '';
    const shownSize = typeof size === 'number' && Number.isFinite(size) ? size : 0;
    if (!isOid(oid)) return { oid: shownOid, size: shownSize, error: { code: 422, message: 'The oid must be 64 lowercase hexadecimal digits (a sha256).' } };
    if (!Number.isSafeInteger(size) || size < 0) return { oid, size: shownSize, error: { code: 422, message: 'The size must be a non-negative integer.' } };
    const have = linked.get(oid);
    if (operation === 'download') {
      if (have === undefined) return { oid, size, error: { code: 404, message: 'Object does not exist on the server or you don\'t have permissions to access it' } };
      return { oid, size: have, authenticated: true, actions: { download: { href: `${base}/${oid}`, header: actionHeaders(request), expires_in: HREF_EXPIRES_IN } } };
    }
    // Already here with these bytes: nothing to transfer.
    if (have === size) return { oid, size };
    if (size > limit) return { oid, size, error: { code: 413, message: `The object is larger than the limit of ${limit} bytes.` } };
    return {
      oid,
      size,
      authenticated: true,
      actions: {
        upload: { href: `${base}/${oid}/${size}`, header: actionHeaders(request, { 'Content-Type': 'application/octet-stream' }), expires_in: HREF_EXPIRES_IN },
        verify: { href: `${base}/verify`, header: actionHeaders(request), expires_in: HREF_EXPIRES_IN },
      },
    };
  });
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from(JSON.stringify({ transfer: 'basic', objects: out, hash_algo: 'sha256' })));
}

async function download(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'download');
  const oid = (request.params as Record<string, string>).oid;
  if (!isOid(oid)) throw new LfsError(422, 'The oid must be 64 lowercase hexadecimal digits (a sha256).');
  const found = await openLfsObject(request.server.cairn, ctx.project.id, oid);
  if (!found) throw new LfsError(404, 'Object does not exist on the server or you don\'t have permissions to access it');
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) found.stream.destroy();
  });
  return reply.code(200).header('content-type', 'application/octet-stream').header('content-length', String(found.size)).send(found.stream);
}

async function upload(request: FastifyRequest, reply: FastifyReply) {
  const { oid, size } = request.params as Record<string, string>;
  const body = request.body as Readable | undefined;
  const drain = () => {
    if (body && typeof body.resume === 'function' && !body.readableEnded) body.resume();
  };
  try {
    const ctx = await authorizeLfs(request, 'upload');
    if (!isOid(oid)) throw new LfsError(422, 'The oid must be 64 lowercase hexadecimal digits (a sha256).');
    if (!/^\d{1,16}$/.test(size)) throw new LfsError(422, 'The size must be a non-negative integer.');
    const limit = request.server.cairn.config.maxLfsObjectSize;
    if (Number(size) > limit) throw new LfsError(413, `The object is larger than the limit of ${limit} bytes.`);
    if (!body || typeof body.pipe !== 'function') throw new LfsError(400, 'The object must be sent as the request body.');
    await storeLfsObject(request.server.cairn, ctx.project.id, oid, Number(size), body);
  } catch (err) {
    // Never reset the connection under the client: it reads the refusal once its body is sent.
    drain();
    throw err;
  }
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from('{}'));
}

async function verify(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'upload');
  const body = await jsonBody(request);
  if (!isOid(body.oid)) throw new LfsError(422, 'The oid must be 64 lowercase hexadecimal digits (a sha256).');
  const have = (await linkedObjects(request.server.cairn.db, ctx.project.id, [body.oid])).get(body.oid);
  if (have === undefined) throw new LfsError(404, 'Object does not exist on the server');
  if (body.size !== undefined && body.size !== have) throw new LfsError(422, `The object has ${have} bytes, not ${String(body.size)}.`);
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from('{}'));
}

async function createLockHandler(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'upload');
  const body = await jsonBody(request);
  const lock = await createLock(request.server.cairn.db, ctx.project.id, ctx.cred!.user.id, body.path);
  return reply.code(201).header('content-type', LFS_TYPE).send(Buffer.from(JSON.stringify({ lock: presentLock(lock) })));
}

function queryString(q: Record<string, unknown>, name: string): string | undefined {
  const v = q[name];
  return typeof v === 'string' ? v : undefined;
}

async function listLocksHandler(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'download');
  const q = request.query as Record<string, unknown>;
  const limitText = queryString(q, 'limit');
  if (limitText !== undefined && !/^\d{1,6}$/.test(limitText)) throw new LfsError(422, 'The limit must be a positive integer.');
  const page = await listLocks(request.server.cairn.db, ctx.project.id, {
    id: queryString(q, 'id'),
    path: queryString(q, 'path'),
    cursor: queryString(q, 'cursor'),
    limit: limitText !== undefined ? Number(limitText) : undefined,
  });
  const out = { locks: page.locks.map(presentLock), ...(page.nextCursor ? { next_cursor: page.nextCursor } : {}) };
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from(JSON.stringify(out)));
}

async function verifyLocksHandler(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'upload');
  const body = await jsonBody(request);
  const cursor = typeof body.cursor === 'string' ? body.cursor : undefined;
  const limit = typeof body.limit === 'number' && Number.isSafeInteger(body.limit) ? body.limit : undefined;
  const page = await listLocks(request.server.cairn.db, ctx.project.id, { cursor, limit });
  const userId = ctx.cred!.user.id;
  const out = {
    ours: page.locks.filter((l) => l.user_id === userId).map(presentLock),
    theirs: page.locks.filter((l) => l.user_id !== userId).map(presentLock),
    ...(page.nextCursor ? { next_cursor: page.nextCursor } : {}),
  };
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from(JSON.stringify(out)));
}

async function unlockHandler(request: FastifyRequest, reply: FastifyReply) {
  const ctx = await authorizeLfs(request, 'upload');
  const body = await jsonBody(request);
  const force = body.force === true;
  const user = ctx.cred!.user;
  const mayForce = can(user, 'admin_project', { project: ctx.project, accessLevel: ctx.accessLevel });
  const lock = await deleteLock(request.server.cairn.db, ctx.project.id, user.id, (request.params as Record<string, string>).lock_id, force, mayForce);
  return reply.code(200).header('content-type', LFS_TYPE).send(Buffer.from(JSON.stringify({ lock: presentLock(lock) })));
}

export default async function lfsRoutes(app: FastifyInstance) {
  // Every body reaches the handlers as the raw stream: JSON requests are read by jsonBody (LFS
  // clients send application/vnd.git-lfs+json), uploads stream into the object store.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  const config = { skipApiAuth: true };
  const credential = 'git credential (HTTP Basic: token or password) with';
  const read = { custom: `${credential} download rights on the project of the path (policies/git_access.ts), LFS enabled on it` };
  const write = { custom: `${credential} push rights on the project of the path (policies/git_access.ts), LFS enabled on it` };
  const json = RawBody(LFS_TYPE);
  const batchRoute = route({
    matrix: 'git:read',
    access: { custom: `${credential} download rights for operation download, push rights for upload (policies/git_access.ts), LFS enabled on the project` },
    config,
    schema: { response: { 200: json } },
  });
  const downloadRoute = route({ matrix: 'git:read', access: read, config, schema: { response: { 200: RawBody('application/octet-stream') } } });
  const uploadRoute = route({ matrix: 'git:write', access: write, config, schema: { response: { 200: json } } });
  const verifyRoute = route({ matrix: { is: 'git:write' }, access: write, config, schema: { response: { 200: json } } });
  const lockRoute = route({ matrix: 'git:write', access: write, config, schema: { response: { 201: json } } });
  const listRoute = route({ matrix: 'git:read', access: read, config, schema: { response: { 200: json } } });
  const verifyLocksRoute = route({ matrix: 'git:write', access: write, config, schema: { response: { 200: json } } });
  const unlockRoute = route({
    matrix: 'git:write',
    access: { custom: `${write.custom}; the lock's owner, or a maintainer with force` },
    config,
    schema: { response: { 200: json } },
  });
  for (let n = 2; n <= MAX_PATH_SEGMENTS; n++) {
    const prefix = '/' + Array.from({ length: n }, (_, i) => `:p${i}`).join('/');
    app.post(`${prefix}/info/lfs/objects/batch`, batchRoute, lfsRoute(batch));
    app.get(`${prefix}/gitlab-lfs/objects/:oid`, downloadRoute, lfsRoute(download));
    app.put(`${prefix}/gitlab-lfs/objects/:oid/:size`, uploadRoute, lfsRoute(upload));
    app.post(`${prefix}/gitlab-lfs/objects/verify`, verifyRoute, lfsRoute(verify));
    app.post(`${prefix}/info/lfs/locks`, lockRoute, lfsRoute(createLockHandler));
    app.get(`${prefix}/info/lfs/locks`, listRoute, lfsRoute(listLocksHandler));
    app.post(`${prefix}/info/lfs/locks/verify`, verifyLocksRoute, lfsRoute(verifyLocksHandler));
    app.post(`${prefix}/info/lfs/locks/:lock_id/unlock`, unlockRoute, lfsRoute(unlockHandler));
  }
}
