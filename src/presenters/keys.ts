import type { User } from '../db/schema/core.js';
import type { DeployKeysProject, Key } from '../db/schema/keys.js';
import { iso, presentUserExtended, type PresentContext } from './users.js';

/** A project as GitLab's ProjectIdentity entity shows it (deploy key listings). */
export interface ProjectIdentityRow {
  id: number;
  description: string | null;
  name: string;
  path: string;
  namespace_full_path: string;
  namespace_full_name: string;
  created_at: Date | string;
}

/**
 * GitLab hides the key's comment (often an e-mail address) and names the owner instead:
 * "<type> <blob> <user name> (<host>)".
 */
export function publishableKey(ctx: PresentContext, key: Key, owner: User | null): string {
  const [type, blob] = key.key.split(' ');
  if (!owner) return `${type} ${blob}`;
  return `${type} ${blob} ${owner.name} (${new URL(ctx.baseUrl).hostname})`;
}

/** GitLab's SSHKey entity. */
export function presentSshKey(ctx: PresentContext, key: Key, owner: User | null) {
  return {
    id: key.id,
    title: key.title,
    created_at: iso(key.created_at),
    expires_at: iso(key.expires_at),
    key: publishableKey(ctx, key, owner),
    usage_type: key.usage_type,
  };
}

/** GET /keys/:id and the fingerprint lookup of a user key. */
export function presentSshKeyWithUser(ctx: PresentContext, key: Key, owner: User | null) {
  return { ...presentSshKey(ctx, key, owner), user: owner ? presentUserExtended(ctx, owner) : null };
}

export function presentDeployKeysProjectRow(link: DeployKeysProject) {
  return {
    id: link.id,
    deploy_key_id: link.deploy_key_id,
    project_id: link.project_id,
    created_at: iso(link.created_at),
    updated_at: iso(link.updated_at),
    can_push: link.can_push,
  };
}

/** The fingerprint lookup of a deploy key: also where the key is used. */
export function presentDeployKeyWithUser(ctx: PresentContext, key: Key, owner: User | null, links: DeployKeysProject[]) {
  return { ...presentSshKeyWithUser(ctx, key, owner), deploy_keys_projects: links.map(presentDeployKeysProjectRow) };
}

/** GitLab's DeployKey entity: the full key text and both fingerprints. */
export function presentDeployKey(ctx: PresentContext, key: Key) {
  return {
    ...presentSshKey(ctx, key, null),
    key: key.key,
    ...(key.fingerprint ? { fingerprint: key.fingerprint } : {}),
    fingerprint_sha256: key.fingerprint_sha256,
  };
}

export function presentProjectIdentity(p: ProjectIdentityRow) {
  return {
    id: p.id,
    description: p.description,
    name: p.name,
    name_with_namespace: `${p.namespace_full_name} / ${p.name}`,
    path: p.path,
    path_with_namespace: `${p.namespace_full_path}/${p.path}`,
    created_at: iso(p.created_at),
  };
}

/** The admin list: each key with the projects it may write to and those it may only read. */
export function presentDeployKeyWithProjects(ctx: PresentContext, key: Key, projects: (ProjectIdentityRow & { can_push: boolean })[]) {
  return {
    ...presentDeployKey(ctx, key),
    projects_with_write_access: projects.filter((p) => p.can_push).map(presentProjectIdentity),
    projects_with_readonly_access: projects.filter((p) => !p.can_push).map(presentProjectIdentity),
  };
}

/** A project's deploy key: the key merged with this project's push right. */
export function presentDeployKeysProject(ctx: PresentContext, link: DeployKeysProject, key: Key) {
  return { ...presentDeployKey(ctx, key), can_push: link.can_push };
}
