import { sql } from 'kysely';
import type { Namespace, User } from '../db/schema/core.js';
import { can, type GroupAbility, type GroupSubject } from '../policies/abilities.js';
import { loadGroupFor } from '../finders/authorize.js';
import { pageNotFound, PageRedirect, signInLocation, type PageContext } from './context.js';
import { findUserById } from '../finders/users.js';

/** A user's or a group's namespace as a page sees it. */
export type WebNamespace =
  | { kind: 'user'; namespace: Namespace; user: User }
  | { kind: 'group'; namespace: Namespace; subject: GroupSubject; can(ability: GroupAbility): boolean };

/**
 * The namespace at a path for the page's visitor: a user (their personal namespace) or a group
 * they may read (GitLab's rule: members, members of something below it, or by its visibility).
 * 404 otherwise; anonymous visitors are sent to sign in first.
 */
export async function findNamespaceByPath(ctx: PageContext, fullPath: string, type?: 'Group' | 'User'): Promise<WebNamespace> {
  const refuse = () => (ctx.user ? pageNotFound() : new PageRedirect(signInLocation(ctx)));
  if (!fullPath || fullPath.length > 1024) throw refuse();
  const namespace = await ctx.cairn.db
    .selectFrom('namespaces')
    .selectAll()
    .where(sql<boolean>`lower(full_path) = lower(${fullPath})`)
    .$if(type !== undefined, (q) => q.where('type', '=', type!))
    .executeTakeFirst();
  if (!namespace) throw refuse();
  if (namespace.type === 'User') {
    const user = await findUserById(ctx.cairn.db, namespace.owner_id!);
    if (!user || (user.state !== 'active' && !ctx.user?.admin)) throw refuse();
    return { kind: 'user', namespace, user };
  }
  const subject = await loadGroupFor(ctx.cairn, ctx.user, namespace.id, ctx.request.cacheGeneration);
  if (!subject || !can(ctx.user, 'read_group', subject)) throw refuse();
  return { kind: 'group', namespace: { ...(subject.group as Namespace) }, subject, can: (ability) => can(ctx.user, ability, subject) };
}
