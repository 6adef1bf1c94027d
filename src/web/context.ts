import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Cairn } from '../context.js';
import type { User } from '../db/schema/core.js';
import type { Session } from '../db/schema/oauth.js';
import type { FoundProject } from '../finders/projects.js';
import { csrfValid, loadSession } from '../oauth/sessions.js';
import { can, effectiveLevel, type ProjectAbility, type ProjectSubject } from '../policies/abilities.js';
import { loadProjectForUser } from '../finders/authorize.js';
import { projectFullPath } from '../presenters/projects.js';

/**
 * What every page handler gets: the request, who is signed in (the session cookie, the same
 * sessions as the sign-in and OAuth pages), the session's CSRF token for its forms, and the
 * params its pattern matched. Pages never read API tokens: a browser has only its session.
 */
export interface PageContext {
  cairn: Cairn;
  request: FastifyRequest;
  reply: FastifyReply;
  user: User | null;
  session: Session | null;
  /** The session's CSRF token ('' for anonymous visitors, who have no forms). */
  csrfToken: string;
  /** Params of the page's pattern (`:name` and `*` for the rest). */
  params: Record<string, string>;
  /** The query string, each parameter once (the last value wins). */
  query: Record<string, string>;
  /** The form fields of a POST (urlencoded), each a string or a list for `name[]` fields. */
  body: Record<string, unknown>;
  /** The path as requested (for sign-in redirects and the current link of the navigation). */
  path: string;
}

/** A page that cannot be shown: rendered by the web router as an error page with its status. */
export class PageError extends Error {
  constructor(readonly status: number, message: string, readonly detail?: string) {
    super(message);
  }
}

/** A redirect thrown from deep in a handler (e.g. to sign in). */
export class PageRedirect extends Error {
  constructor(readonly location: string, readonly status = 302) {
    super(location);
  }
}

export const pageNotFound = (detail?: string) => new PageError(404, 'Page not found', detail ?? 'The page could not be found or you don\'t have permission to view it.');
export const pageForbidden = (detail?: string) => new PageError(403, 'Access denied', detail ?? 'You don\'t have the permission to do this.');
export const pageBadRequest = (detail: string) => new PageError(400, 'Bad request', detail);

export async function pageContext(cairn: Cairn, request: FastifyRequest, reply: FastifyReply, params: Record<string, string>): Promise<PageContext> {
  const loaded = await loadSession(cairn, request);
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries((request.query ?? {}) as Record<string, unknown>)) {
    if (typeof v === 'string') query[k] = v;
    else if (Array.isArray(v) && typeof v[v.length - 1] === 'string') query[k] = v[v.length - 1];
  }
  const body = request.body && typeof request.body === 'object' && !Buffer.isBuffer(request.body) ? (request.body as Record<string, unknown>) : {};
  return {
    cairn,
    request,
    reply,
    user: loaded?.user ?? null,
    session: loaded?.session ?? null,
    csrfToken: loaded?.user ? loaded.session.csrf_token : '',
    params,
    query,
    body,
    path: request.url.split('?')[0],
  };
}

/** Where an anonymous visitor goes for a page that needs a signed-in user (GitLab's authenticate_user!). */
export function signInLocation(ctx: PageContext): string {
  return `/users/sign_in?redirect_to=${encodeURIComponent(ctx.request.url)}`;
}

/** The signed-in user, or a redirect to the sign-in page. */
export function requireUser(ctx: PageContext): User {
  if (!ctx.user) throw new PageRedirect(signInLocation(ctx));
  return ctx.user;
}

/**
 * A form post must carry the session's CSRF token (field `authenticity_token`, or the
 * X-CSRF-Token header): 422 otherwise, as GitLab's InvalidAuthenticityToken.
 */
export function requireCsrf(ctx: PageContext): User {
  const user = requireUser(ctx);
  const submitted = ctx.body.authenticity_token ?? ctx.request.headers['x-csrf-token'];
  if (!csrfValid(ctx.session, submitted)) {
    throw new PageError(422, 'The change you requested was rejected', 'The form was stale or did not come from this site. Go back, reload the page and try again.');
  }
  return user;
}

/** A string form field ('' when absent). */
export function field(ctx: PageContext, name: string): string {
  const v = ctx.body[name];
  return typeof v === 'string' ? v : Array.isArray(v) && typeof v[0] === 'string' ? v[0] : '';
}

/** A project as a page sees it: the row, the caller's effective level, and `can` bound to them. */
export interface ProjectPage {
  project: FoundProject;
  fullPath: string;
  subject: ProjectSubject;
  can(ability: ProjectAbility): boolean;
}

/**
 * The project at a full path for the page's visitor: 404 when it does not exist or they may not
 * see it (anonymous visitors are sent to sign in first, as GitLab does), the same policies as
 * the API (`can` of src/policies/abilities.ts).
 */
export async function loadProjectPage(ctx: PageContext, fullPath: string): Promise<ProjectPage> {
  const found = fullPath.includes('/') ? await loadProjectForUser(ctx.cairn, ctx.user?.id, fullPath) : undefined;
  const subject = found ? { project: found, accessLevel: effectiveLevel(ctx.user, found.callerAccessLevel ?? 0) } : null;
  if (!found || !subject || !can(ctx.user, 'read_project', subject) || found.pending_delete) {
    if (!ctx.user) throw new PageRedirect(signInLocation(ctx));
    throw pageNotFound();
  }
  const project = { ...found };
  return { project, fullPath: projectFullPath(project), subject, can: (ability) => can(ctx.user, ability, subject) };
}

/** 404 unless the visitor has the ability (what they may not see is not there); 403 for actions. */
export function requireAbility(ctx: PageContext, page: ProjectPage, ability: ProjectAbility, refusal: 'hide' | 'forbid' = 'hide') {
  if (page.can(ability)) return;
  if (refusal === 'hide') {
    if (!ctx.user) throw new PageRedirect(signInLocation(ctx));
    throw pageNotFound();
  }
  throw pageForbidden();
}
