import type { Namespace, User } from '../db/schema/core.js';
import { avatarUrl, type PresentContext } from './users.js';

/** A namespace with, for personal namespaces, its owner (for the avatar and project `owner`). */
export type NamespaceWithOwner = Namespace & { owner?: User | null };

export function groupWebUrl(ctx: PresentContext, fullPath: string): string {
  return `${ctx.baseUrl}/groups/${fullPath}`;
}

export function groupAvatarUrl(ctx: PresentContext, ns: Pick<Namespace, 'id' | 'avatar_path'>): string | null {
  return ns.avatar_path ? `${ctx.baseUrl}/uploads/-/system/group/avatar/${ns.id}/${ns.avatar_path}` : null;
}

export function namespaceKind(ns: Pick<Namespace, 'type'>): 'user' | 'group' {
  return ns.type === 'User' ? 'user' : 'group';
}

/** GitLab's NamespaceBasic (the `namespace` of a project). */
export function presentNamespaceBasic(ctx: PresentContext, ns: NamespaceWithOwner) {
  const user = ns.type === 'User';
  return {
    id: ns.id,
    name: ns.name,
    path: ns.path,
    kind: namespaceKind(ns),
    full_path: ns.full_path,
    parent_id: ns.parent_id,
    avatar_url: user ? (ns.owner ? avatarUrl(ctx, ns.owner) : null) : groupAvatarUrl(ctx, ns),
    web_url: user ? `${ctx.baseUrl}/${ns.full_path}` : groupWebUrl(ctx, ns.full_path),
  };
}

export interface NamespaceCounts {
  projectsCount: number;
  /** Only for groups the caller administers (GitLab shows it to group owners). */
  membersCountWithDescendants?: number | null;
}

/** The Namespaces API form. */
export function presentNamespace(ctx: PresentContext, ns: NamespaceWithOwner, counts: NamespaceCounts) {
  return {
    ...presentNamespaceBasic(ctx, ns),
    ...(counts.membersCountWithDescendants !== undefined && counts.membersCountWithDescendants !== null
      ? { members_count_with_descendants: counts.membersCountWithDescendants }
      : {}),
    projects_count: counts.projectsCount,
  };
}
