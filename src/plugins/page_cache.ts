import type { FastifyReply, FastifyRequest } from 'fastify';
import type { HeaderTarget } from './pagination.js';

/**
 * A list page as rendered for one caller: its JSON and the headers that go with it (X-Total,
 * Link...). The JSON is kept as bytes, which go out as they are; nothing may write into them.
 */
interface RenderedPage {
  json: Buffer;
  headers: [string, string][];
  complete: boolean;
}

export interface PageBody {
  body: unknown;
  /** false when part of the page could not be read (e.g. a repository): such a page is not kept. */
  complete?: boolean;
}

/**
 * The key of a page in the cache: who asks (the user, the credential's owner under sudo, the
 * credential itself, its kind and its scopes) and the whole request URL (path and every query
 * parameter). null when the request could carry more than that (a body), so it is never cached.
 */
function pageKey(request: FastifyRequest): string | null {
  if (request.method !== 'GET' && request.method !== 'HEAD') return null;
  const body = request.body;
  if (body !== undefined && body !== null && body !== '' && !(typeof body === 'object' && Object.keys(body).length === 0)) return null;
  const actor = request.actor;
  const who = actor ? `${actor.user.id}:${actor.authUser.id}:${actor.kind}:${actor.tokenId ?? ''}:${[...actor.scopes].sort().join(',')}` : 'anonymous';
  return `page:${who}:${request.url}`;
}

/**
 * Sends a list page rendered by `render` (finder, then presenters), kept in the process cache
 * (src/cache/) per caller and URL, with the headers `render` set on the target it is given.
 * The request's authorization ran before this and read its inputs in this request, so the page
 * is kept only if nothing was written since the request began (`since`); every write then drops it.
 */
export async function sendCachedPage(request: FastifyRequest, reply: FastifyReply, render: (headers: HeaderTarget) => Promise<PageBody>) {
  const renderPage = async (): Promise<RenderedPage> => {
    const headers: [string, string][] = [];
    const { body, complete = true } = await render({ header: (name, value) => headers.push([name, value]) });
    return { json: Buffer.from(JSON.stringify(body)), headers, complete };
  };
  const key = pageKey(request);
  const page = key === null
    ? await renderPage()
    : await request.server.cairn.cache.load(key, renderPage, {
      since: request.cacheGeneration,
      keep: (p) => p.complete,
      size: (p) => p.json.length + 64 * p.headers.length,
    });
  for (const [name, value] of page.headers) reply.header(name, value);
  return reply.type('application/json').send(page.json);
}
