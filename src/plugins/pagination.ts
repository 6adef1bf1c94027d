import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';

export const DEFAULT_PER_PAGE = 20;
export const MAX_PER_PAGE = 100;

/** Query properties every offset-paginated list accepts; spread into a route's querystring. */
export const PaginationQuery = {
  page: Type.Optional(Type.Union([Type.Integer(), Type.String()])),
  per_page: Type.Optional(Type.Union([Type.Integer(), Type.String()])),
};

export interface Page {
  page: number;
  perPage: number;
  offset: number;
}

function positiveInt(v: unknown): number | null {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : NaN;
  return Number.isInteger(n) && n > 0 ? n : null;
}

/** Reads page/per_page as GitLab does: bad or missing values fall back, per_page capped at 100. */
export function pageParams(request: FastifyRequest): Page {
  const q = (request.query ?? {}) as Record<string, unknown>;
  const perPage = Math.min(positiveInt(q.per_page) ?? DEFAULT_PER_PAGE, MAX_PER_PAGE);
  // A page far past the end is an empty page, but its offset must still be an exact integer PostgreSQL takes.
  const page = Math.min(positiveInt(q.page) ?? 1, Math.floor(Number.MAX_SAFE_INTEGER / perPage));
  return { page, perPage, offset: (page - 1) * perPage };
}

export function externalBase(request: FastifyRequest): string {
  return request.server.cairn.config.externalUrl;
}

function pageUrl(request: FastifyRequest, params: Record<string, string | number>): string {
  const url = new URL(request.url, 'http://x');
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, String(v));
  return `${externalBase(request)}${url.pathname}${url.search}`;
}

/** Where headers go: the reply, or a recorder that keeps them with a cached page (page_cache.ts). */
export interface HeaderTarget {
  header(name: string, value: string): unknown;
}

/**
 * Sets GitLab's offset pagination headers for a page of a list of `total` rows. A null total is a
 * list too long to count (GitLab's 10,000-row cap): X-Total, X-Total-Pages and rel="last" are left
 * out, as GitLab does, and `hasNext` says whether a page follows.
 */
export function setPaginationHeaders(request: FastifyRequest, reply: HeaderTarget, page: Page, total: number | null, hasNext = false) {
  const totalPages = total === null ? null : Math.max(1, Math.ceil(total / page.perPage));
  const next = (totalPages === null ? hasNext : page.page < totalPages) ? page.page + 1 : null;
  const prev = page.page > 1 ? page.page - 1 : null;
  const links: string[] = [];
  if (prev) links.push(`<${pageUrl(request, { page: prev, per_page: page.perPage })}>; rel="prev"`);
  if (next) links.push(`<${pageUrl(request, { page: next, per_page: page.perPage })}>; rel="next"`);
  links.push(`<${pageUrl(request, { page: 1, per_page: page.perPage })}>; rel="first"`);
  if (totalPages !== null) links.push(`<${pageUrl(request, { page: totalPages, per_page: page.perPage })}>; rel="last"`);
  const headers: Record<string, string> = {
    'x-page': String(page.page),
    'x-per-page': String(page.perPage),
    ...(total !== null && totalPages !== null ? { 'x-total': String(total), 'x-total-pages': String(totalPages) } : {}),
    'x-next-page': next ? String(next) : '',
    'x-prev-page': prev ? String(prev) : '',
    link: links.join(', '),
  };
  for (const [name, value] of Object.entries(headers)) reply.header(name, value);
}

/** Paginates an in-memory list (for lists that do not come from SQL, e.g. git output). */
export function paginateArray<T>(request: FastifyRequest, reply: FastifyReply, items: T[]): T[] {
  const page = pageParams(request);
  setPaginationHeaders(request, reply, page, items.length);
  return items.slice(page.offset, page.offset + page.perPage);
}

/**
 * Keyset pagination: the caller fetched perPage + 1 rows; when there is more, a `Link`
 * rel="next" header carries the given cursor parameters.
 */
export function setKeysetNext(request: FastifyRequest, reply: HeaderTarget, perPage: number, cursor: Record<string, string | number> | null) {
  reply.header('x-per-page', String(perPage));
  if (cursor) reply.header('link', `<${pageUrl(request, { ...cursor, per_page: perPage })}>; rel="next"`);
}

/** One keyset page of a list, and the token of the page after it (null on the last page). */
export interface KeysetSlice<T> {
  page: T[];
  next: string | null;
}

/**
 * Paginates an in-memory list that also offers GitLab's keyset pagination: with
 * `pagination=keyset`, `slice` cuts the page that follows `page_token` and a `Link` rel="next"
 * header carries the next token; otherwise the list is paged by number as paginateArray does.
 */
export function paginateArrayWithKeyset<T>(
  request: FastifyRequest,
  reply: FastifyReply,
  items: T[],
  slice: (items: T[], perPage: number, pageToken: string | undefined) => KeysetSlice<T>,
): T[] {
  const q = (request.query ?? {}) as Record<string, unknown>;
  if (q.pagination !== 'keyset') return paginateArray(request, reply, items);
  const { perPage } = pageParams(request);
  const { page, next } = slice(items, perPage, typeof q.page_token === 'string' ? q.page_token : undefined);
  setKeysetNext(request, reply, perPage, next ? { pagination: 'keyset', page_token: next } : null);
  return page;
}

/**
 * Keyset slicing by a string key that GitLab uses as the token (a branch name): the page starts
 * at the first item whose key sorts after the token, and its last key is the next token.
 */
export function sliceAfterKey<T>(keyOf: (item: T) => string) {
  return (items: T[], perPage: number, pageToken: string | undefined): KeysetSlice<T> => {
    const start = pageToken ? items.findIndex((item) => keyOf(item) > pageToken) : 0;
    if (start < 0) return { page: [], next: null };
    const page = items.slice(start, start + perPage);
    return { page, next: start + perPage < items.length ? keyOf(page[page.length - 1]) : null };
  };
}
