import { sql, type RawBuilder } from 'kysely';
import type { Cairn } from '../context.js';
import type { Project, User } from '../db/schema/core.js';
import type { Snippet } from '../db/schema/snippets.js';
import type { FoundProject } from '../finders/projects.js';
import { notFound } from '../plugins/errors.js';
import { loadProjectForUser } from '../finders/authorize.js';
import { AccessLevel, Visibility } from './access.js';
import { MEMBER } from './rules.js';
import { can, effectiveLevel, type AbilityActor, type ProjectSubject } from './abilities.js';

/**
 * Who may see and change a snippet, as GitLab's PersonalSnippetPolicy and ProjectSnippetPolicy
 * decide it. Personal snippets: public for anyone, internal for signed-in users who are not
 * external, private for their author; administrators see all. Project snippets: first the
 * project (readable, its snippets feature available to the caller), then the snippet's own
 * visibility, where project members (guest and up) also see private ones. The SQL form
 * (snippetVisibleTo) is the same rule for lists.
 */

export type SnippetRef = Pick<Snippet, 'author_id' | 'visibility_level' | 'project_id'>;

/** A project snippet's project, and the caller's effective level on it. */
export type SnippetProjectSubject = ProjectSubject;

/** May the actor use the project's snippets at all (read_project, and the feature on for them)? */
export function snippetsFeatureReadable(actor: AbilityActor, s: SnippetProjectSubject): boolean {
  return can(actor, 'read_snippet', s);
}

export function canReadSnippet(actor: AbilityActor, snippet: SnippetRef, project?: SnippetProjectSubject | null): boolean {
  const isAuthor = !!actor && actor.id === snippet.author_id;
  if (snippet.project_id === null) {
    if (actor?.admin || isAuthor || snippet.visibility_level >= Visibility.PUBLIC) return true;
    return snippet.visibility_level >= Visibility.INTERNAL && !!actor && !actor.external;
  }
  if (!project || !snippetsFeatureReadable(actor, project)) return false;
  if (actor?.admin || isAuthor || snippet.visibility_level >= Visibility.PUBLIC) return true;
  if (!actor) return false;
  if (project.accessLevel >= AccessLevel.GUEST) return true;
  return snippet.visibility_level >= Visibility.INTERNAL && !actor.external;
}

/**
 * Change its title, files, visibility; push to its repository: the author, an administrator,
 * and for project snippets the project's maintainers and owners.
 */
export function canUpdateSnippet(actor: AbilityActor, snippet: SnippetRef, project?: SnippetProjectSubject | null): boolean {
  if (!actor || !canReadSnippet(actor, snippet, project)) return false;
  // An archived project is read-only, its snippets too.
  if (project?.project.archived) return false;
  if (actor.admin || actor.id === snippet.author_id) return true;
  return snippet.project_id !== null && !!project && project.accessLevel >= AccessLevel.MAINTAINER;
}

/** Delete it: whoever may update it. */
export const canDeleteSnippet = canUpdateSnippet;

/** Create a personal snippet: signed-in users who are not external. */
export function canCreatePersonalSnippet(actor: AbilityActor): boolean {
  return !!actor && !actor.external;
}

/** Create a snippet in a project: reporters and up, the snippets feature on, not archived (project ability create_snippet). */
export function canCreateProjectSnippet(actor: AbilityActor, project: SnippetProjectSubject): boolean {
  return can(actor, 'create_snippet', project);
}

/** The snippet's visibility may not exceed its project's (a public snippet in a private project). */
export function visibilityAllowedInProject(level: number, project: Pick<Project, 'visibility_level'>): boolean {
  return level <= project.visibility_level;
}

/**
 * SQL: the snippet aliased `s` (with its project left-joined as `p`, null for personal ones) is
 * visible to the user. The same rules as canReadSnippet, for lists.
 */
export function snippetVisibleTo(user: Pick<User, 'id' | 'admin' | 'external'> | null): RawBuilder<boolean> {
  if (user?.admin) return sql<boolean>`true`;
  // The snippets feature: "disabled" hides them; "private" is for members (guests and up).
  const feature = sql`coalesce(p.settings->>'snippets_access_level', 'enabled')`;
  if (!user) {
    return sql<boolean>`(s.visibility_level = 20 and (s.project_id is null or (p.visibility_level = 20 and ${feature} in ('enabled', 'public'))))`;
  }
  const member = sql`p.id in ${MEMBER.projectIds(user.id)}`;
  const projectReadable = user.external ? sql`(p.visibility_level = 20 or ${member})` : sql`(p.visibility_level >= 10 or ${member})`;
  const levelSeen = user.external ? sql`s.visibility_level = 20` : sql`s.visibility_level >= 10`;
  return sql<boolean>`(
    (s.project_id is null and (s.author_id = ${user.id} or ${levelSeen}))
    or (s.project_id is not null and ${projectReadable}
        and (${feature} in ('enabled', 'public') or (${feature} = 'private' and ${member}))
        and (s.author_id = ${user.id} or ${levelSeen} or ${member}))
  )`;
}

/** A snippet with, for a project snippet, its project as loaded for the caller. */
export interface SnippetAccess {
  snippet: Snippet;
  /** The project (project snippets), with the caller's level; null for personal snippets. */
  project: FoundProject | null;
  subject: SnippetProjectSubject | null;
  user: User | null;
}

/** Loads the project of a project snippet for the caller (through the shared cache, as routes do). */
export async function snippetAccessFor(cairn: Cairn, user: User | null, snippet: Snippet): Promise<SnippetAccess> {
  if (snippet.project_id === null) return { snippet, project: null, subject: null, user };
  const found = await loadProjectForUser(cairn, user?.id, snippet.project_id);
  if (!found) return { snippet, project: null, subject: null, user };
  const project = { ...found };
  return { snippet, project, subject: { project, accessLevel: effectiveLevel(user, project.callerAccessLevel ?? 0) }, user };
}

/** The snippet `id` if the caller may read it; 404 Snippet otherwise (as GitLab hides it). */
export async function findReadableSnippet(cairn: Cairn, user: User | null, id: number, opts: { projectId?: number } = {}): Promise<SnippetAccess> {
  const snippet = await cairn.db.selectFrom('snippets').selectAll().where('id', '=', id).executeTakeFirst();
  if (!snippet || (opts.projectId !== undefined && snippet.project_id !== opts.projectId)) throw notFound('Snippet');
  const access = await snippetAccessFor(cairn, user, snippet);
  if (!canReadSnippet(user, snippet, access.subject)) throw notFound('Snippet');
  return access;
}
