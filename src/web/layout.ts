import crypto from 'node:crypto';
import type { FastifyReply } from 'fastify';
import type { ProjectAbility } from '../policies/abilities.js';
import { SCRIPT } from './assets/script.js';
import { STYLE } from './assets/style.js';
import type { PageContext, ProjectPage } from './context.js';
import { html, pathUrl, trusted, type SafeHtml } from './html.js';

const digest = (text: string) => crypto.createHash('sha256').update(text, 'utf8').digest('hex').slice(0, 12);

/** The style sheet and the script, under names that change with their content (cached for good). */
export const ASSETS = {
  style: { path: `/-/assets/cairn-${digest(STYLE)}.css`, body: STYLE, type: 'text/css; charset=utf-8' },
  script: { path: `/-/assets/cairn-${digest(SCRIPT)}.js`, body: SCRIPT, type: 'text/javascript; charset=utf-8' },
} as const;

/**
 * The Content-Security-Policy of the web pages: only this site's own style sheet, script,
 * images and event streams; no inline script or style, no plugins, no framing, forms post
 * only here. Markdown images from other hosts do not load (GitLab proxies them; Cairn does not).
 */
export const WEB_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export const WEB_HEADERS: Record<string, string> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'strict-origin-when-cross-origin',
  'content-security-policy': WEB_CSP,
};

const LOGO = trusted(`<svg viewBox="0 0 32 32" aria-hidden="true"><path fill="#e24329" d="M16 3 5 27h22z"/><path fill="#fc6d26" d="M16 3 9 27h14z"/><path fill="#fca326" d="M16 11l-4 16h8z"/></svg>`);

export interface PageOptions {
  title: string;
  body: SafeHtml;
  /** A project page: its navigation at the side, `section` marked current. */
  project?: ProjectPage;
  section?: ProjectSection;
  /** Links above the title: [text, href] (the last one usually without href). */
  breadcrumbs?: [string, string?][];
  narrow?: boolean;
  /** Extra side navigation instead of a project's (a group, the dashboard). */
  side?: { title: string; links: SideLink[]; current?: string };
}

export interface SideLink {
  key: string;
  text: string;
  href: string;
  count?: number;
}

export type ProjectSection =
  | 'project' | 'files' | 'commits' | 'branches' | 'tags' | 'issues' | 'merge_requests' | 'pipelines' | 'jobs' | 'snippets' | 'members' | 'settings';

/** The links of a project's navigation, each shown only to visitors with its ability. */
const PROJECT_NAV: { key: ProjectSection; text: string; ability: ProjectAbility; href: (base: string, ref: string) => string }[] = [
  { key: 'project', text: 'Project overview', ability: 'read_project', href: (b) => b },
  { key: 'files', text: 'Files', ability: 'download_code', href: (b, ref) => `${b}/-/tree/${pathUrl(ref)}` },
  { key: 'commits', text: 'Commits', ability: 'download_code', href: (b, ref) => `${b}/-/commits/${pathUrl(ref)}` },
  { key: 'branches', text: 'Branches', ability: 'download_code', href: (b) => `${b}/-/branches` },
  { key: 'tags', text: 'Tags', ability: 'download_code', href: (b) => `${b}/-/tags` },
  { key: 'issues', text: 'Issues', ability: 'read_issue', href: (b) => `${b}/-/issues` },
  { key: 'merge_requests', text: 'Merge requests', ability: 'read_merge_request', href: (b) => `${b}/-/merge_requests` },
  { key: 'pipelines', text: 'Pipelines', ability: 'read_pipeline', href: (b) => `${b}/-/pipelines` },
  { key: 'jobs', text: 'Jobs', ability: 'read_build', href: (b) => `${b}/-/jobs` },
  { key: 'snippets', text: 'Snippets', ability: 'read_snippet', href: (b) => `${b}/-/snippets` },
  { key: 'members', text: 'Members', ability: 'read_project_member', href: (b) => `${b}/-/project_members` },
  { key: 'settings', text: 'Settings', ability: 'admin_project', href: (b) => `${b}/-/settings/repository` },
];

/** The web path of a project (`/group/sub/project`). */
export function projectPath(page: ProjectPage): string {
  return '/' + pathUrl(page.fullPath);
}

function initials(name: string): string {
  return (name.trim()[0] ?? '?').toUpperCase();
}

export function avatar(user: { name?: string | null; username: string }): SafeHtml {
  return html`<span class="avatar" aria-hidden="true">${initials(user.name || user.username)}</span>`;
}

function header(ctx: PageContext): SafeHtml {
  const me = ctx.user
    ? html`<div class="me"><a href="/${pathUrl(ctx.user.username)}">${avatar(ctx.user)} <span class="hide-sm">${ctx.user.name}</span></a>
<a href="/-/user_settings/personal_access_tokens" class="hide-sm">Access tokens</a>
<form method="post" action="/users/sign_out"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}"><button type="submit" class="secondary small">Sign out</button></form></div>`
    : html`<div class="me"><a class="button small" href="/users/sign_in?redirect_to=${encodeURIComponent(ctx.request.url)}">Sign in</a></div>`;
  const nav = ctx.user
    ? html`<a href="/dashboard/projects">Projects</a><a href="/dashboard/groups">Groups</a><a href="/dashboard/issues">Issues</a><a href="/dashboard/merge_requests">Merge requests</a><a href="/-/snippets">Snippets</a><a href="/explore">Explore</a>`
    : html`<a href="/explore">Explore</a><a href="/explore/groups">Groups</a><a href="/explore/snippets">Snippets</a>`;
  return html`<header class="top"><a class="brand" href="/">${LOGO}<span>Cairn</span></a><nav aria-label="Main">${nav}</nav>${me}</header>`;
}

function projectNav(page: ProjectPage, current: ProjectSection | undefined): SafeHtml {
  const base = projectPath(page);
  const ref = page.project.default_branch ?? 'main';
  const links = PROJECT_NAV.filter((n) => page.can(n.ability)).map(
    (n) => html`<a href="${n.href(base, ref)}"${n.key === current ? trusted(' aria-current="page"') : ''}>${n.text}</a>`,
  );
  return html`<nav class="side" aria-label="Project"><div class="ctx"><a href="${base}">${page.project.name}</a></div>${links}</nav>`;
}

function sideNav(side: NonNullable<PageOptions['side']>): SafeHtml {
  return html`<nav class="side" aria-label="${side.title}"><div class="ctx">${side.title}</div>${side.links.map(
    (l) => html`<a href="${l.href}"${l.key === side.current ? trusted(' aria-current="page"') : ''}>${l.text}${l.count !== undefined ? html`<span class="count">${l.count}</span>` : ''}</a>`,
  )}</nav>`;
}

function breadcrumbs(items: [string, string?][] | undefined): SafeHtml {
  if (!items?.length) return html``;
  return html`<nav class="breadcrumbs" aria-label="Breadcrumbs">${items.map(([text, href], i) => html`${i ? ' / ' : ''}${href ? html`<a href="${href}">${text}</a>` : text}`)}</nav>`;
}

/** A whole page: the header, the project's (or another) navigation, breadcrumbs and the body. */
export function renderPage(ctx: PageContext, opts: PageOptions): string {
  const crumbs = opts.breadcrumbs ?? (opts.project ? projectCrumbs(opts.project) : undefined);
  const side = opts.project ? projectNav(opts.project, opts.section) : opts.side ? sideNav(opts.side) : html``;
  const doc = html`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${opts.title}${opts.project ? ` · ${opts.project.fullPath}` : ''} · Cairn</title>
<link rel="stylesheet" href="${ASSETS.style.path}">
<script src="${ASSETS.script.path}" defer></script>
</head>
<body>
<a class="skip" href="#content">Skip to content</a>
${header(ctx)}
<div class="layout">${side}<main id="content"${opts.narrow ? trusted(' class="narrow"') : ''}>
${breadcrumbs(crumbs)}
${opts.body}
</main></div>
</body>
</html>`;
  return doc.value;
}

/** Breadcrumbs of a project: each namespace of its path, then the project. */
export function projectCrumbs(page: ProjectPage, ...more: [string, string?][]): [string, string?][] {
  const parts = page.fullPath.split('/');
  const crumbs: [string, string?][] = parts.slice(0, -1).map((p, i) => [p, '/' + pathUrl(parts.slice(0, i + 1).join('/'))]);
  crumbs.push([page.project.name, projectPath(page)]);
  return [...crumbs, ...more];
}

export function sendHtml(reply: FastifyReply, status: number, body: string) {
  return reply.code(status).headers(WEB_HEADERS).send(body);
}

/** Renders and sends a page (200 unless said otherwise). */
export function sendPage(ctx: PageContext, opts: PageOptions & { status?: number }) {
  return sendHtml(ctx.reply, opts.status ?? 200, renderPage(ctx, opts));
}

/** The error page (404, 403, 422...), in the site's layout. */
export function errorPageHtml(ctx: PageContext, status: number, title: string, detail?: string): string {
  return renderPage(ctx, {
    title,
    narrow: true,
    body: html`<div class="card"><h1>${status}: ${title}</h1>${detail ? html`<p>${detail}</p>` : ''}<p><a href="/">Go to the home page</a></p></div>`,
  });
}
