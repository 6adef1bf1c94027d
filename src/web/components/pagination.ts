import type { PageContext } from '../context.js';
import { html, type SafeHtml } from '../html.js';

/** Rows per page of the web lists (GitLab's 20), unless a list says otherwise. */
export const PER_PAGE = 20;
const MAX_PAGE = 100_000;

/** `?page=` as a positive integer (1 when absent or nonsense; capped). */
export function pageNumber(ctx: PageContext): number {
  const n = Number(ctx.query.page);
  return Number.isInteger(n) && n >= 1 ? Math.min(n, MAX_PAGE) : 1;
}

/** The `page` parameter and the offset of its first row. */
export function pageOf(ctx: PageContext, perPage: number): { page: number; offset: number; perPage: number } {
  const page = pageNumber(ctx);
  return { page, offset: (page - 1) * perPage, perPage };
}

/** The URL of a list with some query parameters changed (others kept; '' or null removes one). */
export function withQuery(path: string, current: Record<string, string | string[]>, changes: Record<string, string | string[] | null>): string {
  const params = new URLSearchParams();
  const merged: Record<string, string | string[] | null> = { ...current, ...changes };
  for (const [k, v] of Object.entries(merged)) {
    if (v === null || v === '' || (Array.isArray(v) && !v.length)) continue;
    for (const one of [v].flat()) params.append(k, one);
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** Previous / next links around "Page n of m"; nothing when everything fits one page. */
export function pagerNav(page: number, pages: number, href: (n: number) => string, labels: [string, string] = ['Previous', 'Next']): SafeHtml {
  if (pages <= 1 && page <= 1) return html``;
  return html`<nav class="pagination row" aria-label="Pages">${page > 1 ? html`<a class="button secondary small" rel="prev" href="${href(Math.min(page - 1, pages))}">${labels[0]}</a>` : ''}<span class="muted small">Page ${page} of ${Math.max(pages, 1)}</span>${
    page < pages ? html`<a class="button secondary small" rel="next" href="${href(page + 1)}">${labels[1]}</a>` : ''
  }</nav>`;
}

/** The pager of a list at `path` whose other query parameters (`query`, lists too) are kept. */
export function pagination(list: { path: string; query: Record<string, string | string[]> }, page: number, total: number, perPage = PER_PAGE): SafeHtml {
  return pagerNav(page, Math.ceil(total / perPage), (n) => withQuery(list.path, list.query, { page: n === 1 ? null : String(n) }));
}
