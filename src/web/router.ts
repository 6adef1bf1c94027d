import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { NoContent, RawBody, route } from '../api/route.js';
import { ApiError } from '../plugins/errors.js';
import { findNamespaceByPath, type WebNamespace } from './namespaces.js';
import { loadProjectPage, pageContext, PageError, pageNotFound, PageRedirect, type PageContext, type ProjectPage } from './context.js';
import { errorPageHtml, sendHtml } from './layout.js';

/**
 * The web pages live at GitLab's paths, which nest without limit (`/group/sub/project/-/tree/main/dir/file`),
 * so one catch-all route per method hands every path that no API, git or OAuth route took to
 * this router. A page is declared with the pattern of what follows the project's `/-/`
 * (`tree/*`, `merge_requests/:iid`), of a global path (`/explore`), or of a namespace (a user's
 * or group's page). Paths that are no page get the API's JSON 404, as before.
 */
export type Method = 'GET' | 'POST';
export type ProjectHandler = (ctx: PageContext, page: ProjectPage) => Promise<unknown>;
export type GlobalHandler = (ctx: PageContext) => Promise<unknown>;
export type NamespaceHandler = (ctx: PageContext, ns: WebNamespace) => Promise<unknown>;

interface Pattern<H> {
  method: Method;
  segments: string[];
  handler: H;
}

export class PageRegistry {
  readonly project: Pattern<ProjectHandler>[] = [];
  readonly global: Pattern<GlobalHandler>[] = [];
  readonly namespace: Pattern<NamespaceHandler>[] = [];

  /** A page of a project: `pattern` is what follows `/<project>/-/` ('' for the project's own page). */
  projectPage(method: Method, pattern: string, handler: ProjectHandler) {
    this.project.push({ method, segments: split(pattern), handler });
  }

  /** A page at a fixed path (`/`, `/explore/projects`, `/-/snippets/:id`). */
  globalPage(method: Method, pattern: string, handler: GlobalHandler) {
    this.global.push({ method, segments: split(pattern), handler });
  }

  /** A user's or group's page: '' is `/<path>`; others follow `/groups/<path>/-/` (groups) . */
  namespacePage(method: Method, pattern: string, handler: NamespaceHandler) {
    this.namespace.push({ method, segments: split(pattern), handler });
  }
}

function split(pattern: string): string[] {
  return pattern.split('/').filter((s) => s !== '');
}

/** Matches path segments against a pattern: `:name` takes one segment, a final `*` the rest (joined by '/'). */
export function matchSegments(pattern: string[], segments: string[]): Record<string, string> | null {
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p === '*') {
      params['*'] = segments.slice(i).join('/');
      return params;
    }
    if (i >= segments.length) return null;
    if (p.startsWith(':')) params[p.slice(1)] = segments[i];
    else if (p !== segments[i]) return null;
  }
  return pattern.length === segments.length ? params : null;
}

function find<H>(patterns: Pattern<H>[], method: Method, segments: string[]): { handler: H; params: Record<string, string> } | null {
  for (const p of patterns) {
    if (p.method !== method) continue;
    const params = matchSegments(p.segments, segments);
    if (params) return { handler: p.handler, params };
  }
  return null;
}

/** Path segments, each percent-decoded; null when a segment cannot be decoded or is unsafe. */
function decodeSegments(path: string): string[] | null {
  const out: string[] = [];
  for (const raw of path.split('/')) {
    if (raw === '') continue;
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      return null;
    }
    if (s === '.' || s === '..' || s.includes('/') || /[\u0000-\u001f\u007f]/.test(s)) return null;
    out.push(s);
  }
  return out;
}

/** Paths that are never pages: their misses keep the JSON 404 of the API. */
const NOT_PAGES = /^\/(api|oauth)(\/|$)/;

export async function dispatch(registry: PageRegistry, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const method = request.method === 'HEAD' ? 'GET' : (request.method as Method);
  const path = request.url.split('?')[0];
  if (NOT_PAGES.test(path) || path.length > 4096) return reply.callNotFound();
  const segments = decodeSegments(path);
  if (!segments) return reply.callNotFound();
  const cairn = request.server.cairn;
  let ctx: PageContext | undefined;
  const context = async (params: Record<string, string>) => (ctx = await pageContext(cairn, request, reply, params));
  try {
    const global = find(registry.global, method, segments);
    if (global) return await global.handler(await context(global.params));

    const dash = segments.indexOf('-');
    if (dash > 0) {
      // /<project>/-/<page> or /groups/<group>/-/<page>
      if (segments[0] === 'groups' && dash > 1) {
        const hit = find(registry.namespace, method, segments.slice(dash + 1));
        if (!hit) return reply.callNotFound();
        const c = await context(hit.params);
        const ns = await findNamespaceByPath(c, segments.slice(1, dash).join('/'), 'Group');
        return await hit.handler(c, ns);
      }
      const hit = find(registry.project, method, segments.slice(dash + 1));
      if (!hit || dash < 2) return reply.callNotFound();
      const c = await context(hit.params);
      return await hit.handler(c, await loadProjectPage(c, segments.slice(0, dash).join('/')));
    }
    if (dash === 0 || segments.length === 0) return reply.callNotFound();

    // /<path>: a project (two segments or more), else a group or a user.
    const projectHome = segments.length >= 2 ? find(registry.project, method, []) : null;
    const namespaceHome = find(registry.namespace, method, []);
    if (!projectHome && !namespaceHome) return reply.callNotFound();
    const c = await context({});
    const fullPath = segments.join('/');
    if (projectHome) {
      try {
        return await projectHome.handler(c, await loadProjectPage(c, fullPath));
      } catch (e) {
        if (!namespaceHome || !(e instanceof PageError || e instanceof PageRedirect)) throw e;
      }
    }
    if (!namespaceHome) throw pageNotFound();
    const ns = await findNamespaceByPath(c, segments[0] === 'groups' ? segments.slice(1).join('/') : fullPath, segments[0] === 'groups' ? 'Group' : undefined);
    return await namespaceHome.handler(c, ns);
  } catch (e) {
    if (reply.sent) return reply;
    return sendError(request, reply, ctx ?? (await pageContext(cairn, request, reply, {}).catch(() => undefined)), e);
  }
}

function sendError(request: FastifyRequest, reply: FastifyReply, ctx: PageContext | undefined, e: unknown) {
  if (e instanceof PageRedirect) return reply.redirect(e.location, e.status);
  let status = 500;
  let title = 'Something went wrong';
  let detail: string | undefined = 'Try again, or tell the administrator of this instance.';
  if (e instanceof PageError) {
    status = e.status;
    title = e.message;
    detail = e.detail;
  } else if (e instanceof ApiError) {
    status = e.status;
    title = status === 404 ? 'Page not found' : status === 403 ? 'Access denied' : 'The request could not be done';
    detail = e.message;
  } else {
    request.log.error({ err: e }, 'page failed');
  }
  if (!ctx) return reply.code(status).send({ message: `${status} ${title}` });
  return sendHtml(reply, status, errorPageHtml(ctx, status, title, detail));
}

const Html = RawBody('text/html');
const Params = Type.Object({ '*': Type.String() });

/** The catch-all routes (after every other route: find-my-way prefers any static or param route). */
export function registerPageRoutes(app: FastifyInstance, registry: PageRegistry) {
  const access = {
    custom:
      'the session cookie: each page loads its project or group with the policies of the API (src/web/context.ts); ' +
      'what a visitor may not see is 404, anonymous visitors are sent to sign in',
  };
  const config = { skipApiAuth: true };
  app.get('/*', route({ matrix: { own: 'ok' }, access, config,
    schema: { params: Params, response: { 200: Html, 302: NoContent, 404: Html } },
  }), (request, reply) => dispatch(registry, request, reply));
  // (The matrix calls POST on the project's page, which takes no form: 404.)
  app.post('/*', route({ matrix: { own: 404 }, access, config,
    schema: { params: Params, response: { 200: Html, 201: Html, 302: NoContent, 404: Html } },
  }), (request, reply) => dispatch(registry, request, reply));
}
