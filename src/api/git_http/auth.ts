import type { Cairn, Credential } from '../../context.js';
import type { User } from '../../db/schema/core.js';
import { verifyPassword } from '../../lib/secrets.js';
import { deployTokenForLogin } from '../../services/deploy_tokens.js';
import { deployTokenCredential } from '../../services/git_transport.js';
import { findUserByLogin, upgradePasswordHash } from '../../services/users.js';
import { ApiError } from '../../plugins/errors.js';
import { resolveCredential } from '../../plugins/auth.js';
import { accountLockedFor, clearAccountFailures, clearIpFailures, ipAuthState, recordAccountFailure, recordIpFailure } from '../../services/auth_failures.js';
import type { GitCredential } from '../../policies/git_access.js';
import { jobTokenProjectId } from '../../policies/job_token_scope.js';

/** A git client's request failed authentication or access: a plain-text answer for `remote:`. */
export class GitHttpError extends Error {
  constructor(readonly status: 401 | 403 | 404 | 400 | 415 | 413, message: string) {
    super(message);
  }
}

export const ACCESS_DENIED =
  'HTTP Basic: Access denied. The password or token is wrong, has expired or lacks the read_repository / write_repository scope. ' +
  "Use a personal access token (username oauth2 or your own) when your account has two-factor authentication.";

const TWO_FACTOR =
  "HTTP Basic: Access denied. Your account has two-factor authentication: use a personal access token with the 'read_repository' or 'write_repository' scope as the password.";

const DEACTIVATED = 'Your account has been deactivated by your administrator. Please sign in again in a web browser to reactivate it.';

const ACCOUNT_LOCKED =
  'HTTP Basic: Access denied. Your account is locked after too many failed sign-in attempts. Try again later, or use a personal access token.';

export const IP_BANNED = 'Too many failed authentication attempts from your IP address. Try again later.';

const READ_SCOPES = ['api', 'read_repository', 'write_repository'];
const WRITE_SCOPES = ['api', 'write_repository'];

/** Parses `Authorization: Basic base64(user:password)`; null for any other (or no) header. */
export function parseBasicAuth(header: string | undefined): { username: string; password: string } | null {
  if (!header) return null;
  const m = /^basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

function checkState(user: User) {
  if (user.state === 'deactivated') throw new GitHttpError(403, DEACTIVATED);
  if (user.state !== 'active' || user.user_type === 'ghost') throw new GitHttpError(401, ACCESS_DENIED);
}

async function tryResolve(cairn: Cairn, channel: 'bearer' | 'private' | 'job', token: string): Promise<Credential | null> {
  try {
    return await resolveCredential(cairn, channel, token);
  } catch (err) {
    // A known but revoked/expired token: the resolver refuses it.
    if (err instanceof ApiError && err.status === 401) throw new GitHttpError(401, ACCESS_DENIED);
    throw err;
  }
}

function fromCredential(cred: Credential): GitCredential {
  checkState(cred.user);
  // CI job tokens fetch (dependencies, submodules) but never push.
  if (cred.kind === 'job_token') return { user: cred.user, download: true, push: false, jobProjectId: jobTokenProjectId(cred) ?? undefined };
  return {
    user: cred.user,
    download: cred.scopes.some((s) => READ_SCOPES.includes(s)),
    push: cred.scopes.some((s) => WRITE_SCOPES.includes(s)),
  };
}

/**
 * Who a git client is (see identifyGitClient), behind GitLab's failed authentication ban: an
 * address with too many failed attempts gets 403 for a while (services/auth_failures.ts); every
 * 401 counts against the address, and a successful authentication clears its count. Requests
 * without credentials (git's first, anonymous, try) neither count nor are refused.
 */
export async function authenticateGitClient(cairn: Cairn, authorization: string | undefined, ip: string): Promise<GitCredential | null> {
  if (!authorization) return null;
  const standing = await ipAuthState(cairn, 'git_http', ip);
  if (standing.bannedFor) throw new GitHttpError(403, IP_BANNED);
  let cred: GitCredential | null;
  try {
    cred = await identifyGitClient(cairn, authorization);
  } catch (err) {
    if (err instanceof GitHttpError && err.status === 401) await recordIpFailure(cairn, 'git_http', ip);
    throw err;
  }
  // Most clients never fail, so most requests have nothing to clear and write nothing.
  if (cred && standing.hasFailures) await clearIpFailures(cairn, 'git_http', ip);
  return cred;
}

/**
 * Who a git client is, from HTTP Basic credentials, in GitLab's order: a CI job token (user
 * gitlab-ci-token), an OAuth token (user oauth2), a personal access token (any user name), a
 * deploy token (its own user name), then the user's own password when password authentication for git is enabled.
 * Null without credentials; GitHttpError(401) when they are wrong.
 */
async function identifyGitClient(cairn: Cairn, authorization: string | undefined): Promise<GitCredential | null> {
  const basic = parseBasicAuth(authorization);
  if (!basic) {
    if (authorization) throw new GitHttpError(401, ACCESS_DENIED);
    return null;
  }
  const { username, password } = basic;
  if (!password) throw new GitHttpError(401, ACCESS_DENIED);

  if (username === 'gitlab-ci-token') {
    const job = await tryResolve(cairn, 'job', password);
    if (job) return fromCredential(job);
  }
  // A personal access token goes with any user name; an OAuth token only with oauth2 (as
  // GitLab's order has it). Personal access tokens first: their lookup is cached.
  const cred = (await tryResolve(cairn, 'private', password)) ?? (username === 'oauth2' ? await tryResolve(cairn, 'bearer', password) : null);
  if (cred) return fromCredential(cred);
  // A deploy token goes with its own user name; a revoked or expired one is a wrong password.
  const deployToken = await deployTokenForLogin(cairn.db, username, password);
  if (deployToken === 'inactive') throw new GitHttpError(401, ACCESS_DENIED);
  if (deployToken) return deployTokenCredential(cairn, deployToken);

  if (!cairn.config.gitPasswordAuthentication || !username) throw new GitHttpError(401, ACCESS_DENIED);
  const user = await findUserByLogin(cairn.db, username);
  if (!user) throw new GitHttpError(401, ACCESS_DENIED);
  // A locked account's password is not even checked, so guessing on stays pointless.
  if (await accountLockedFor(cairn, user.id)) throw new GitHttpError(401, ACCOUNT_LOCKED);
  if (user.password_automatically_set || !(await verifyPassword(password, user.encrypted_password))) {
    if (!user.password_automatically_set) await recordAccountFailure(cairn, user.id);
    throw new GitHttpError(401, ACCESS_DENIED);
  }
  await clearAccountFailures(cairn, user.id);
  await upgradePasswordHash(cairn.db, user, password);
  if (user.password_expires_at && new Date(user.password_expires_at).getTime() <= Date.now()) throw new GitHttpError(401, ACCESS_DENIED);
  checkState(user);
  if (user.two_factor_enabled) throw new GitHttpError(401, TWO_FACTOR);
  return { user, download: true, push: true };
}
