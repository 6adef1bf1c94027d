import type { DeployToken } from '../db/schema/deploy_tokens.js';
import type { ProjectWithNamespace } from '../finders/projects.js';

/**
 * Deploy tokens' rules, as GitLab has them: a token is usable while it is neither revoked nor
 * expired (an expiry is a moment; a token expiring today at midnight has expired); it reaches
 * its own project, or (a group's) every project in the group and its subgroups; its scopes say
 * what it does there.
 */
export function isDeployTokenExpired(t: Pick<DeployToken, 'expires_at'>, now = new Date()): boolean {
  return t.expires_at !== null && new Date(t.expires_at).getTime() <= now.getTime();
}

export function isDeployTokenActive(t: Pick<DeployToken, 'expires_at' | 'revoked'>, now = new Date()): boolean {
  return !t.revoked && !isDeployTokenExpired(t, now);
}

/** The project is the token's, or lies in the token's group or one of its subgroups. */
export function deployTokenReaches(t: { projectId: number | null; groupId: number | null }, project: Pick<ProjectWithNamespace, 'id' | 'namespace'>): boolean {
  if (t.projectId !== null) return t.projectId === project.id;
  return t.groupId !== null && (project.namespace.traversal_ids ?? []).includes(t.groupId);
}

/** Fetching takes read_repository (or write_repository, as with personal access tokens); pushing write_repository. */
export function deployTokenGitRights(scopes: string[]): { download: boolean; push: boolean } {
  return { download: scopes.includes('read_repository') || scopes.includes('write_repository'), push: scopes.includes('write_repository') };
}
