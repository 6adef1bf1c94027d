import fs from 'node:fs';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { DeployToken } from '../db/schema/deploy_tokens.js';
import type { Key } from '../db/schema/keys.js';
import type { Snippet } from '../db/schema/snippets.js';
import { loadProjectForUser } from '../finders/authorize.js';
import type { FoundProject, ProjectWithNamespace } from '../finders/projects.js';
import { repositoryWritten, type GitProcess } from '../git/command.js';
import { ensureHooksDir, packObjectsCacheDir, refusalReport, startService, type GitService, type ReceivePackHead } from '../git/http.js';
import { checkDeployKeyGitAccess, checkDeployTokenGitAccess, checkGitAccess, checkSnippetGitAccess, GIT_MESSAGES, type GitCredential } from '../policies/git_access.js';
import { deployTokenGitRights } from '../policies/deploy_tokens.js';
import { jobTokenMayAccess } from '../policies/job_token_scope.js';
import { snippetAccessFor } from '../policies/snippets.js';
import { accountLockedFor } from './auth_failures.js';
import { endRefJournal, journalRefUpdates, recordPush } from './post_receive.js';
import { projectRepoPath } from './projects.js';
import { checkRefUpdates } from './push_rules.js';
import { acquireWriteLease, releaseWriteLease } from './repository_writes.js';
import { ghostUser } from './user-deletion.js';
import { checkSnippetRefUpdates, recordSnippetPush, snippetRepoPath } from './snippets.js';

/**
 * The git service work behind every transport (smart HTTP in api/git_http, SSH in ssh/): which
 * repository a path names and whether the caller may fetch from or push to it, starting
 * upload-pack / receive-pack, the ref-update checks of a push (push rules, protected branches,
 * write leases) and the post-receive work (recordPush: pipelines, merge request refresh, cache
 * invalidation, housekeeping). A transport only authenticates the caller and moves bytes.
 */

/** A refusal: `status` for HTTP (401 asks for credentials, 404 hides the project), `message` for the client's `remote:` / `fatal:` line. */
export class GitAccessError extends Error {
  constructor(
    readonly status: 400 | 401 | 403 | 404,
    message: string,
  ) {
    super(message);
  }
}

/** What a git request is about: a project's repository or a snippet's. */
export type GitTarget = { kind: 'project'; project: ProjectWithNamespace } | { kind: 'snippet'; snippet: Snippet };

export interface GitSession {
  target: GitTarget;
  cred: GitCredential | null;
  accessLevel: number;
  gitDir: string;
  /** The sanitized Git-Protocol header / GIT_PROTOCOL variable. */
  gitProtocol: string | undefined;
}

type Log = { warn: (obj: unknown, msg: string) => void; error: (obj: unknown, msg: string) => void };

/** A snippet's repository path: `snippets/<id>` (personal) or `<project path>/snippets/<id>`. */
const SNIPPET_PATH = /^(?:(.+)\/)?snippets\/(\d{1,10})$/;

/**
 * Finds the repository `fullPath` names (a project's full path, or a snippet's) and checks the
 * caller's access for `service`. `pushRpc`: the push itself, after the ref advertisement: a
 * repository that turned read-only since then is refused per ref by startPush (a report git
 * prints), not here.
 */
export async function authorizeGitPath(
  cairn: Cairn,
  cred: GitCredential | null,
  fullPath: string,
  service: GitService,
  opts: { pushRpc?: boolean; gitProtocol?: string } = {},
): Promise<GitSession> {
  const pushRpc = opts.pushRpc ?? false;
  const snippetPath = SNIPPET_PATH.exec(fullPath);
  const projectLike = fullPath.includes('/') && !fullPath.split('/').includes('') && !(snippetPath && snippetPath[1] === undefined);
  if (cred?.deployKey) {
    // A deploy key sees the projects it is enabled on, whatever their visibility, and nothing else.
    const project = projectLike ? await loadProjectForUser(cairn, undefined, fullPath) : undefined;
    const link = project
      ? ((await cairn.db.selectFrom('deploy_keys_projects').select('can_push').where('deploy_key_id', '=', cred.deployKey.id).where('project_id', '=', project.id).executeTakeFirst()) ?? null)
      : null;
    const decision = checkDeployKeyGitAccess(project && pushRpc ? { ...project, repository_read_only: false } : project, link, service);
    if (!decision.allowed) throw new GitAccessError(decision.status, decision.message);
    return { target: { kind: 'project', project: project! }, cred, accessLevel: 0, gitDir: projectRepoPath(cairn, project!), gitProtocol: opts.gitProtocol };
  }
  if (cred?.deployToken) {
    const project = await deployTokenProject(cairn, cred, projectLike ? fullPath : null, service, pushRpc);
    return { target: { kind: 'project', project }, cred, accessLevel: 0, gitDir: projectRepoPath(cairn, project), gitProtocol: opts.gitProtocol };
  }
  const userId = cred?.user.id;
  // `snippets` is a reserved top-level path, so `snippets/<id>` is never a project; a project
  // path ending in `/snippets/<id>` is tried as a project first, as GitLab's RepoPath does.
  let project = projectLike ? await loadProjectForUser(cairn, userId, fullPath) : undefined;
  if (!project && snippetPath) return authorizeSnippetPath(cairn, cred, snippetPath[1] ?? null, Number(snippetPath[2]), service, pushRpc, opts.gitProtocol);
  // A CI job token of another project sees this one only through its job token allowlist.
  if (project && cred?.jobProjectId !== undefined && !(await jobTokenMayAccess(cairn.db, cred.jobProjectId, project))) project = undefined;
  const decision = checkGitAccess(project && pushRpc ? { ...project, repository_read_only: false } : project, cred, service, project?.callerAccessLevel ?? 0);
  if (!decision.allowed) throw new GitAccessError(decision.status, decision.message);
  return { target: { kind: 'project', project: project! }, cred, accessLevel: decision.accessLevel, gitDir: projectRepoPath(cairn, project!), gitProtocol: opts.gitProtocol };
}

/**
 * The project a deploy token asks for by path, if the token may fetch from it (or push to it): the
 * one check of git over HTTP and of Git LFS (api/git_http/lfs.ts). Never a snippet.
 */
export async function deployTokenProject(cairn: Cairn, cred: GitCredential, fullPath: string | null, service: GitService, pushRpc = false): Promise<FoundProject> {
  if (!cred.deployToken) throw new Error('not a deploy token');
  const project = fullPath ? await loadProjectForUser(cairn, undefined, fullPath) : undefined;
  const decision = checkDeployTokenGitAccess(project && pushRpc ? { ...project, repository_read_only: false } : project, { ...cred, deployToken: cred.deployToken }, service);
  if (!decision.allowed) throw new GitAccessError(decision.status, decision.message);
  return project!;
}

/**
 * The credential of a deploy token: its rights are its scopes; a push is recorded in the name of
 * its creator (never with their own rights: no administrator powers), or of the ghost user once
 * the creator is gone or no longer active.
 */
export async function deployTokenCredential(cairn: Cairn, token: DeployToken): Promise<GitCredential> {
  const creator = token.creator_id === null ? undefined : await cairn.db.selectFrom('users').selectAll().where('id', '=', token.creator_id).executeTakeFirst();
  const user = creator && creator.state === 'active' && creator.user_type !== 'ghost' ? creator : await ghostUser(cairn.db);
  return {
    user: { ...user, admin: false },
    ...deployTokenGitRights(token.scopes),
    deployToken: { id: token.id, projectId: token.project_id, groupId: token.group_id },
  };
}

/** The snippet of a snippet repository path, for the caller: its project (if any) must be the one in the path. */
async function authorizeSnippetPath(cairn: Cairn, cred: GitCredential | null, projectPath: string | null, id: number, service: GitService, pushRpc: boolean, gitProtocol: string | undefined): Promise<GitSession> {
  const user = cred?.user ?? null;
  let snippet = id <= 2147483647 ? await cairn.db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirst() : undefined;
  const access = snippet ? await snippetAccessFor(cairn, user, snippet) : null;
  if (snippet && access) {
    const inPlace = projectPath === null ? snippet.project_id === null : !!access.project && access.project.id === snippet.project_id && projectPathMatches(access.project, projectPath);
    if (!inPlace) snippet = undefined;
  }
  const decision = checkSnippetGitAccess(snippet && pushRpc ? { ...snippet, repository_read_only: false } : snippet, access?.subject ?? null, cred, service);
  if (!decision.allowed) throw new GitAccessError(decision.status, decision.message);
  return { target: { kind: 'snippet', snippet: snippet! }, cred, accessLevel: decision.accessLevel, gitDir: snippetRepoPath(cairn, snippet!), gitProtocol };
}

function projectPathMatches(project: ProjectWithNamespace, path: string): boolean {
  return `${project.namespace.full_path}/${project.path}`.toLowerCase() === path.toLowerCase();
}

export function targetId(target: GitTarget): string {
  return target.kind === 'project' ? `project ${target.project.id}` : `snippet ${target.snippet.id}`;
}

/**
 * The repository's directory as the database says now. The row authorizeGitPath used may come
 * from the cache and predate a storage move that has just switched the repository and removed
 * the old copy: reads keep working during and after a move, so a directory that is gone is
 * looked up again (a read from the database, not the cache).
 */
export async function liveGitDir(cairn: Cairn, session: GitSession): Promise<string> {
  if (fs.existsSync(session.gitDir)) return session.gitDir;
  if (session.target.kind === 'project') {
    const row = await cairn.db.selectFrom('projects').select(['repository_storage', 'disk_path']).where('id', '=', session.target.project.id).executeTakeFirst();
    return row ? projectRepoPath(cairn, row) : session.gitDir;
  }
  const row = await cairn.db.selectFrom('snippets').select(['repository_storage', 'disk_path']).where('id', '=', session.target.snippet.id).executeTakeFirst();
  return row ? snippetRepoPath(cairn, row) : session.gitDir;
}

/** The ref advertisement of `service` alone (HTTP's GET info/refs; the first half of a push over SSH). */
export async function startAdvertisement(cairn: Cairn, session: GitSession, service: GitService): Promise<GitProcess> {
  return startService({ gitDir: await liveGitDir(cairn, session), service, advertiseRefs: true, gitProtocol: session.gitProtocol });
}

/**
 * upload-pack for a fetch or clone: one request-response round per call over HTTP
 * (`stateless`), the whole conversation over SSH; identical fetches share packs.
 */
export async function startUploadPack(cairn: Cairn, session: GitSession, opts: { stateless: boolean }): Promise<GitProcess> {
  const { config } = cairn;
  return startService({
    gitDir: await liveGitDir(cairn, session),
    service: 'git-upload-pack',
    stateless: opts.stateless,
    gitProtocol: session.gitProtocol,
    packObjectsCache: { dir: packObjectsCacheDir(config.dataDir), maxAgeSeconds: config.packObjectsCacheMaxAge },
  });
}

/** `git archive --remote` (SSH only, as GitLab has it): upload-archive with the download right. */
export async function startUploadArchive(cairn: Cairn, session: GitSession): Promise<GitProcess> {
  return startService({ gitDir: await liveGitDir(cairn, session), service: 'git-upload-archive', gitProtocol: session.gitProtocol });
}

/**
 * A push after its commands were read: refused as a whole (`refused`: the report to send, no ref
 * moved), or receive-pack started with the commands already written to its stdin; the transport
 * pipes the rest of the request (the pack) in and git's answer out, and calls `finish` once git
 * has exited, before telling the client it is done.
 */
export type PushRun = { refused: Buffer } | { refused?: undefined; proc: GitProcess; finish: () => Promise<void> };

export async function startPush(cairn: Cairn, session: GitSession, head: ReceivePackHead, log: Log): Promise<PushRun> {
  const user = session.cred!.user;
  const target = session.target;
  const decision =
    target.kind === 'project'
      ? await checkRefUpdates(cairn, target.project, user, head.updates, session.accessLevel, { deployKey: !!session.cred?.deployKey || !!session.cred?.deployToken })
      : { refusals: checkSnippetRefUpdates(head.updates), noForceRefs: [] as string[] };
  // Held until the push is recorded: a storage move waits for it before copying the repository,
  // and none is granted once a move has made the repository read-only (services/repository_writes.ts).
  const container = target.kind === 'project' ? { type: 'Project' as const, id: target.project.id } : { type: 'Snippet' as const, id: target.snippet.id };
  const lease = decision.refusals.size ? null : await acquireWriteLease(cairn.db, container);
  if (!decision.refusals.size && lease === null) {
    // A move began after the ref advertisement: every update is refused in the push report, so
    // git prints GitLab's read-only message instead of a bare transport error.
    for (const u of head.updates) decision.refusals.set(u.ref, GIT_MESSAGES.readOnly);
  }
  if (decision.refusals.size) return { refused: refusalReport(head, decision.refusals) };
  const release = () => releaseWriteLease(cairn.db, lease!.id).catch(() => {});
  // The repository is where the row says now (a move may have finished since the row was read).
  const moved: GitTarget =
    target.kind === 'project'
      ? { kind: 'project', project: { ...target.project, repository_storage: lease!.storage } }
      : { kind: 'snippet', snippet: { ...target.snippet, repository_storage: lease!.storage } };
  const gitDir = moved.kind === 'project' ? projectRepoPath(cairn, moved.project) : snippetRepoPath(cairn, moved.snippet);
  const noForce = decision.noForceRefs;
  // Journalled before receive-pack may move a ref: a crash before the push is recorded replays it.
  let journal: number | null = null;
  let proc: GitProcess;
  try {
    if (moved.kind === 'project') journal = await journalRefUpdates(cairn, moved.project.id, user.id, head.updates, head.pushOptions);
    proc = await startService({
      gitDir,
      service: 'git-receive-pack',
      gitProtocol: session.gitProtocol,
      hooksPath: noForce.length ? await ensureHooksDir(cairn.config.dataDir) : undefined,
      hookEnv: noForce.length ? { CAIRN_NO_FORCE_REFS: noForce.join('\n') } : undefined,
    });
  } catch (err) {
    if (journal !== null) await endRefJournal(cairn, journal).catch(() => {});
    await release();
    throw err;
  }
  proc.stdin.on('error', () => {});
  proc.stdin.write(head.consumed);
  if (head.ended) proc.stdin.end();
  // Recorded whatever git's exit status: refs may have moved before a client hung up and
  // receive-pack was killed; recordPush keeps only the updates that took effect.
  const finish = async () => {
    try {
      // Caches drop what they computed from repositories before the client hears of the push.
      await repositoryWritten(gitDir).catch((err) => log.warn({ err }, 'announcing a repository write failed'));
      if (moved.kind === 'project') await recordPush(cairn, moved.project, user.id, head.updates, log, head.pushOptions);
      else await recordSnippetPush(cairn, moved.snippet, head.updates);
    } catch (err) {
      log.error({ err, target: targetId(target) }, 'recording a push failed');
    } finally {
      if (journal !== null) await endRefJournal(cairn, journal).catch(() => {});
      await release();
    }
  };
  return { proc, finish };
}

// ---------------------------------------------------------------------------------------------
// SSH keys as git credentials.

export const KEY_MESSAGES = {
  expired: 'Your SSH key has expired.',
  blocked: 'Your account has been blocked.',
  pending: 'Your account is pending approval from your administrator and hence blocked.',
  deactivated: 'Your account has been deactivated by your administrator. Please sign in again in a web browser to reactivate it.',
  locked: 'Your account is locked.',
  deployKeyOwner: "This deploy key's owner can no longer use it: the account is blocked or gone.",
} as const;

/** The SSH key whose public key blob has this SHA-256 fingerprint (`SHA256:...`), if it may authenticate. */
export async function findAuthKey(cairn: Cairn, fingerprintSha256: string): Promise<Key | undefined> {
  const key = await cairn.db.selectFrom('keys').selectAll().where('fingerprint_sha256', '=', fingerprintSha256).executeTakeFirst();
  // A key registered for signing commits only is no login key (GitLab's usage_type).
  if (!key || key.usage_type === 'signing') return undefined;
  return key;
}

/** The SSH key `cairn shell key-N` names (sshd authenticated it by the line `cairn ssh authorized-keys` printed), if it may authenticate. */
export async function findAuthKeyById(cairn: Cairn, id: number): Promise<Key | undefined> {
  if (!Number.isSafeInteger(id) || id < 1 || id > 2147483647) return undefined;
  const key = await cairn.db.selectFrom('keys').selectAll().where('id', '=', id).executeTakeFirst();
  if (!key || key.usage_type === 'signing') return undefined;
  return key;
}

/**
 * What an authenticated SSH key may do, by GitLab's rules: an expired key, and a user who is
 * blocked, banned, deactivated, pending approval or locked out, are refused with GitLab's words.
 * A user's key acts as the user (fetch and push as their rights allow); a deploy key only on its
 * projects (checkDeployKeyGitAccess), in its creator's name.
 */
export async function keyCredential(cairn: Cairn, key: Key): Promise<GitCredential> {
  if (key.expires_at && new Date(key.expires_at).getTime() <= Date.now()) throw new GitAccessError(403, KEY_MESSAGES.expired);
  const user = key.user_id === null ? undefined : await cairn.db.selectFrom('users').selectAll().where('id', '=', key.user_id).executeTakeFirst();
  if (key.type === 'DeployKey') {
    if (!user || user.state !== 'active') throw new GitAccessError(403, KEY_MESSAGES.deployKeyOwner);
    return { user, download: true, push: true, deployKey: { id: key.id } };
  }
  if (!user) throw new GitAccessError(403, KEY_MESSAGES.blocked);
  checkUserState(user);
  if (await accountLockedFor(cairn, user.id)) throw new GitAccessError(403, KEY_MESSAGES.locked);
  return { user, download: true, push: true };
}

function checkUserState(user: User) {
  if (user.state === 'active' && user.user_type !== 'ghost') return;
  if (user.state === 'deactivated') throw new GitAccessError(403, KEY_MESSAGES.deactivated);
  if (user.state === 'blocked_pending_approval') throw new GitAccessError(403, KEY_MESSAGES.pending);
  throw new GitAccessError(403, KEY_MESSAGES.blocked);
}

/** How stale last_used_at may get before a use writes it again (GitLab: once a day). */
const LAST_USED_REFRESH_MS = 24 * 3600 * 1000;

/** Notes that the key was used, at most once a day per key (a guarded UPDATE: concurrent uses write once). */
export async function touchKey(cairn: Cairn, key: Pick<Key, 'id' | 'last_used_at'>): Promise<void> {
  if (key.last_used_at && Date.now() - new Date(key.last_used_at).getTime() < LAST_USED_REFRESH_MS) return;
  await cairn.db
    .updateTable('keys')
    .set({ last_used_at: sql`now()` as any })
    .where('id', '=', key.id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', sql<Date>`now() - interval '1 day'`)]))
    .execute();
}
