import type { User } from '../db/schema/core.js';
import type { Snippet } from '../db/schema/snippets.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import type { GitService } from '../git/http.js';
import { can, effectiveLevel } from './abilities.js';
import { deployTokenReaches } from './deploy_tokens.js';
import { canReadSnippet, canUpdateSnippet, type SnippetProjectSubject } from './snippets.js';

/** Who is talking git over HTTP, and what their credential lets them do. */
export interface GitCredential {
  user: User;
  /** The credential allows fetching (api, read_repository or write_repository scope; a password). */
  download: boolean;
  /** The credential allows pushing (api or write_repository scope; a password). */
  push: boolean;
  /** A CI job token's project: other projects admit it only through their job token allowlist. */
  jobProjectId?: number;
  /**
   * A deploy key (git over SSH): it reaches only the projects it is enabled on, pushing where its
   * link has can_push; `user` is its creator, in whose name a push is recorded.
   */
  deployKey?: { id: number };
  /**
   * A deploy token (git over HTTP): it reaches only its project, or its group's projects
   * (subgroups' too), fetching and pushing as its scopes say (`download`, `push`); `user` is its
   * creator (or the ghost user), in whose name a push is recorded, never with their own rights.
   */
  deployToken?: { id: number; projectId: number | null; groupId: number | null };
}

/** A deploy key's link to the project of a request (deploy_keys_projects), null when it has none. */
export type DeployKeyLink = { can_push: boolean } | null;

export const GIT_MESSAGES = {
  projectNotFound: "The project you were looking for could not be found or you don't have permission to view it.",
  download: 'You are not allowed to download code from this project.',
  authDownload: 'You are not allowed to download code.',
  authUpload: 'You are not allowed to upload code.',
  push: 'You are not allowed to push code to this project.',
  archived: "You can't push code to an archived project.",
  readOnly: 'The repository is temporarily read-only. Please try again later.',
  snippetNotFound: 'The snippet you were looking for could not be found.',
  updateSnippet: 'You are not allowed to update this snippet.',
  deployKeyPush: 'This deploy key does not have write access to this project.',
} as const;

export type GitAccessDecision =
  | { allowed: true; accessLevel: number }
  /** 401 asks git for credentials; 404 hides the project; 403 says why. */
  | { allowed: false; status: 401 | 403 | 404; message: string };

/**
 * The access check of one git request (the ref advertisement or the RPC itself). Anonymous
 * callers get 401 wherever a credential could help, so git asks for one; a signed-in user gets
 * 404 for a project they cannot see, 403 with GitLab's message otherwise.
 */
export function checkGitAccess(
  project: ProjectWithNamespace | undefined,
  cred: GitCredential | null,
  service: GitService,
  /** The user's own level on the project (membership, inherited or shared), 0 for none. */
  memberLevel: number,
): GitAccessDecision {
  const user = cred?.user ?? null;
  const deny = (status: 401 | 403 | 404, message: string): GitAccessDecision => ({ allowed: false, status, message });
  if (!project) return user ? deny(404, GIT_MESSAGES.projectNotFound) : deny(401, GIT_MESSAGES.projectNotFound);
  const accessLevel = effectiveLevel(user, memberLevel);
  const subject = { project, accessLevel };
  if (!can(user, 'read_project', subject)) {
    return user ? deny(404, GIT_MESSAGES.projectNotFound) : deny(401, GIT_MESSAGES.projectNotFound);
  }
  if (service === 'git-upload-pack') {
    if (cred && !cred.download) return deny(403, GIT_MESSAGES.authDownload);
    if (!can(user, 'download_code', subject)) return user ? deny(403, GIT_MESSAGES.download) : deny(401, GIT_MESSAGES.download);
    return { allowed: true, accessLevel };
  }
  if (!cred) return deny(401, GIT_MESSAGES.push);
  if (!cred.push) return deny(403, GIT_MESSAGES.authUpload);
  if (!can(user, 'push_code', subject)) return deny(403, GIT_MESSAGES.push);
  if (project.archived) return deny(403, GIT_MESSAGES.archived);
  if (project.repository_read_only) return deny(403, GIT_MESSAGES.readOnly);
  return { allowed: true, accessLevel };
}

/**
 * The access check of a git request on a snippet's repository (GitLab's GitAccessSnippet):
 * clone for whoever may read the snippet, push for whoever may update it (policies/snippets.ts).
 * `project` is the project of a project snippet, with the caller's level; null for personal ones.
 */
export function checkSnippetGitAccess(
  snippet: Snippet | undefined,
  project: SnippetProjectSubject | null,
  cred: GitCredential | null,
  service: GitService,
): GitAccessDecision {
  const user = cred?.user ?? null;
  const deny = (status: 401 | 403 | 404, message: string): GitAccessDecision => ({ allowed: false, status, message });
  if (!snippet || !canReadSnippet(user, snippet, project)) return user ? deny(404, GIT_MESSAGES.snippetNotFound) : deny(401, GIT_MESSAGES.snippetNotFound);
  const accessLevel = project?.accessLevel ?? 0;
  if (service === 'git-upload-pack') {
    if (cred && !cred.download) return deny(403, GIT_MESSAGES.authDownload);
    return { allowed: true, accessLevel };
  }
  if (!cred) return deny(401, GIT_MESSAGES.updateSnippet);
  if (!cred.push) return deny(403, GIT_MESSAGES.authUpload);
  if (!canUpdateSnippet(user, snippet, project)) return deny(403, GIT_MESSAGES.updateSnippet);
  if (snippet.repository_read_only) return deny(403, GIT_MESSAGES.readOnly);
  return { allowed: true, accessLevel };
}

/**
 * The access check of a git request made with a deploy token (GitLab's DeployToken#has_access_to?
 * and its scopes): the projects it does not reach do not exist for it, whatever their visibility;
 * it fetches with read_repository (or write_repository) and pushes with write_repository.
 */
export function checkDeployTokenGitAccess(project: ProjectWithNamespace | undefined, cred: GitCredential & { deployToken: object }, service: GitService): GitAccessDecision {
  const deny = (status: 403 | 404, message: string): GitAccessDecision => ({ allowed: false, status, message });
  if (!project || !deployTokenReaches(cred.deployToken, project)) return deny(404, GIT_MESSAGES.projectNotFound);
  if (service === 'git-upload-pack') return cred.download ? { allowed: true, accessLevel: 0 } : deny(403, GIT_MESSAGES.authDownload);
  if (!cred.push) return deny(403, GIT_MESSAGES.authUpload);
  if (project.archived) return deny(403, GIT_MESSAGES.archived);
  if (project.repository_read_only) return deny(403, GIT_MESSAGES.readOnly);
  return { allowed: true, accessLevel: 0 };
}

/**
 * The access check of a git request made with a deploy key (GitLab's DeployKeyAccess): only the
 * projects the key is enabled on exist for it; it fetches from them, and pushes where its link has
 * can_push (branch protections are checked per ref by services/push_rules.ts).
 */
export function checkDeployKeyGitAccess(project: ProjectWithNamespace | undefined, link: DeployKeyLink, service: GitService): GitAccessDecision {
  const deny = (status: 403 | 404, message: string): GitAccessDecision => ({ allowed: false, status, message });
  if (!project || !link) return deny(404, GIT_MESSAGES.projectNotFound);
  if (service === 'git-upload-pack') return { allowed: true, accessLevel: 0 };
  if (!link.can_push) return deny(403, GIT_MESSAGES.deployKeyPush);
  if (project.archived) return deny(403, GIT_MESSAGES.archived);
  if (project.repository_read_only) return deny(403, GIT_MESSAGES.readOnly);
  return { allowed: true, accessLevel: 0 };
}
