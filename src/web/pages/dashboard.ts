import type { Namespace } from '../../db/schema/core.js';
import { pageNumber, pagination, PER_PAGE } from '../components/pagination.js';
import { listGroups, type GroupFilters } from '../../finders/groups.js';
import { listProjects, projectFullName, type ProjectFilters } from '../../finders/projects.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { VISIBILITY_NAMES } from '../../policies/access.js';
import type { ProjectRow } from '../../presenters/projects.js';
import { PageRedirect, requireUser, type PageContext } from '../context.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { avatar, sendPage } from '../layout.js';
import type { WebNamespace } from '../namespaces.js';
import type { PageRegistry } from '../router.js';

/**
 * The pages outside any project: `/` (the dashboard or explore), the signed-in user's projects
 * and groups (`/dashboard/...`), what anyone may find (`/explore/...`), a user's page and a
 * group's page. Every list comes from the API's finders with the visitor as the caller, so
 * visibility is decided in SQL exactly as for GET /projects and GET /groups.
 */

function visibilityBadge(level: number): SafeHtml {
  const name = VISIBILITY_NAMES[level] ?? 'private';
  return html`<span class="badge" title="${name[0].toUpperCase() + name.slice(1)}">${name}</span>`;
}

/** A description as one short line of plain text. */
function shortText(text: string | null | undefined, max = 200): string {
  const t = (text ?? '').replace(/\s+/g, ' ').trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

export function projectList(rows: ProjectRow[], empty: string): SafeHtml {
  if (!rows.length) return html`<div class="empty">${empty}</div>`;
  return html`<ul class="list projects">${rows.map((p) => html`<li><span class="avatar project" aria-hidden="true">${(p.name.trim()[0] ?? '?').toUpperCase()}</span><div class="grow"><a class="title" href="/${pathUrl(`${p.namespace.full_path}/${p.path}`)}">${projectFullName(p)}</a> ${visibilityBadge(p.visibility_level)}${p.archived ? html` <span class="badge">archived</span>` : ''}
${p.description ? html`<div class="meta">${shortText(p.description)}</div>` : ''}</div>
<div class="meta">Updated ${timeAgo(p.last_activity_at ?? p.updated_at)}</div></li>`)}</ul>`;
}

export function groupList(rows: Namespace[], empty: string): SafeHtml {
  if (!rows.length) return html`<div class="empty">${empty}</div>`;
  return html`<ul class="list groups">${rows.map((g) => html`<li><span class="avatar project" aria-hidden="true">${(g.name.trim()[0] ?? '?').toUpperCase()}</span><div class="grow"><a class="title" href="/groups/${pathUrl(g.full_path)}">${g.full_name}</a> ${visibilityBadge(g.visibility_level)}
${g.description ? html`<div class="meta">${shortText(g.description)}</div>` : ''}</div></li>`)}</ul>`;
}

function searchBox(ctx: PageContext, name: 'name' | 'filter', label: string): SafeHtml {
  return html`<form method="get" action="${ctx.path}" class="filters" role="search">
<div><label for="list-search">${label}</label><input type="search" id="list-search" name="${name}" value="${ctx.query[name] ?? ''}"></div>
<button type="submit" class="secondary">Search</button></form>`;
}

function tabs(links: [string, string][], current: string): SafeHtml {
  return html`<nav class="tabs" aria-label="Lists">${links.map(([text, href]) => html`<a href="${href}"${href === current ? trusted(' aria-current="page"') : ''}>${text}</a>`)}</nav>`;
}

async function projectsPage(ctx: PageContext, filters: ProjectFilters) {
  const n = pageNumber(ctx);
  const search = ctx.query.name?.trim() || undefined;
  return listProjects(ctx.cairn.db, ctx.user, { ...filters, search, searchNamespaces: true, orderBy: 'last_activity_at', sort: 'desc' }, { limit: PER_PAGE, offset: (n - 1) * PER_PAGE });
}

async function groupsPage(ctx: PageContext, filters: GroupFilters) {
  const n = pageNumber(ctx);
  const search = (ctx.query.filter ?? ctx.query.name)?.trim() || undefined;
  return listGroups(ctx.cairn.db, ctx.user, { ...filters, search, orderBy: 'name', sort: 'asc' }, { limit: PER_PAGE, offset: (n - 1) * PER_PAGE });
}

async function home(ctx: PageContext) {
  throw new PageRedirect(ctx.user ? '/dashboard/projects' : '/explore');
}

const DASHBOARD_TABS: [string, string][] = [['Your projects', '/dashboard/projects'], ['Starred projects', '/dashboard/projects/starred']];

async function dashboardProjects(ctx: PageContext, starred: boolean) {
  requireUser(ctx);
  const { rows, total } = await projectsPage(ctx, starred ? { starred: true } : { membership: true });
  return sendPage(ctx, {
    title: 'Projects',
    breadcrumbs: [['Your work'], ['Projects']],
    body: html`<div class="spread"><h1>Projects</h1><a class="button secondary" href="/explore/projects">Explore projects</a></div>
${tabs(DASHBOARD_TABS, ctx.path)}
${searchBox(ctx, 'name', 'Filter by name')}
${projectList(rows, ctx.query.name ? 'No project matches this search.' : starred ? 'You have not starred any project.' : 'You are not a member of any project yet.')}
${pagination(ctx, pageNumber(ctx), total)}`,
  });
}

async function dashboardGroups(ctx: PageContext) {
  requireUser(ctx);
  const { rows, total } = await groupsPage(ctx, { allAvailable: false });
  return sendPage(ctx, {
    title: 'Groups',
    breadcrumbs: [['Your work'], ['Groups']],
    body: html`<div class="spread"><h1>Groups</h1><a class="button secondary" href="/explore/groups">Explore groups</a></div>
${searchBox(ctx, 'filter', 'Filter by name')}
${groupList(rows, ctx.query.filter ? 'No group matches this search.' : 'You are not a member of any group yet.')}
${pagination(ctx, pageNumber(ctx), total)}`,
  });
}

const EXPLORE_TABS: [string, string][] = [['Projects', '/explore/projects'], ['Groups', '/explore/groups']];

async function exploreProjects(ctx: PageContext) {
  const { rows, total } = await projectsPage(ctx, {});
  return sendPage(ctx, {
    title: 'Explore projects',
    breadcrumbs: [['Explore'], ['Projects']],
    body: html`<h1>Explore projects</h1>
${tabs(EXPLORE_TABS, ctx.path === '/explore' ? '/explore/projects' : ctx.path)}
${searchBox(ctx, 'name', 'Filter by name')}
${projectList(rows, ctx.query.name ? 'No project matches this search.' : 'There are no projects to show.')}
${pagination(ctx, pageNumber(ctx), total)}`,
  });
}

async function exploreGroups(ctx: PageContext) {
  const { rows, total } = await groupsPage(ctx, { allAvailable: true });
  return sendPage(ctx, {
    title: 'Explore groups',
    breadcrumbs: [['Explore'], ['Groups']],
    body: html`<h1>Explore groups</h1>
${tabs(EXPLORE_TABS, ctx.path)}
${searchBox(ctx, 'filter', 'Filter by name')}
${groupList(rows, ctx.query.filter ? 'No group matches this search.' : 'There are no groups to show.')}
${pagination(ctx, pageNumber(ctx), total)}`,
  });
}

/** `/<username>` (a user's personal projects) and `/<group>`, `/groups/<group>` (its subgroups and projects). */
async function namespaceHome(ctx: PageContext, ns: WebNamespace) {
  const n = pageNumber(ctx);
  const projects = await listProjects(ctx.cairn.db, ctx.user, { namespaceIds: [ns.namespace.id], orderBy: 'last_activity_at', sort: 'desc' }, { limit: PER_PAGE, offset: (n - 1) * PER_PAGE });
  if (ns.kind === 'user') {
    const u = ns.user;
    return sendPage(ctx, {
      title: `${u.name} (@${u.username})`,
      breadcrumbs: [['Users'], [u.username]],
      body: html`<div class="profile row">${avatar(u)}<div><h1 class="mt0">${u.name}</h1><div class="muted">@${u.username}${u.state !== 'active' ? html` · <span class="badge blocked">${u.state}</span>` : ''}</div></div></div>
${u.bio ? html`<p>${u.bio}</p>` : ''}
<h2>Personal projects</h2>
${projectList(projects.rows, 'This user has no personal projects you can see.')}
${pagination(ctx, n, projects.total)}`,
    });
  }
  const g = ns.namespace;
  // Subgroups on the first page only (GitLab lists them before the projects).
  const subgroups = n === 1 ? await listGroups(ctx.cairn.db, ctx.user, { parentId: g.id, allAvailable: true, orderBy: 'name', sort: 'asc' }, { limit: 100, offset: 0 }) : null;
  const crumbs = g.full_path.split('/').map((part, i, all): [string, string?] => [part, i < all.length - 1 ? `/groups/${pathUrl(all.slice(0, i + 1).join('/'))}` : undefined]);
  return sendPage(ctx, {
    title: g.full_name,
    breadcrumbs: crumbs,
    body: html`<div class="spread"><h1>${g.name}</h1>${visibilityBadge(g.visibility_level)}</div>
<p class="muted small">Group ID: ${g.id}</p>
${g.description ? html`<div class="md">${trusted(renderMarkdown(g.description))}</div>` : ''}
${subgroups && subgroups.rows.length ? html`<h2>Subgroups</h2>${groupList(subgroups.rows, '')}${subgroups.total > subgroups.rows.length ? html`<p class="muted small">${subgroups.total - subgroups.rows.length} more subgroups are not listed.</p>` : ''}` : ''}
<h2>Projects</h2>
${projectList(projects.rows, 'This group has no projects you can see.')}
${pagination(ctx, n, projects.total)}`,
  });
}

export function registerDashboardPages(pages: PageRegistry) {
  pages.globalPage('GET', '', home);
  pages.globalPage('GET', '/dashboard', async () => {
    throw new PageRedirect('/dashboard/projects');
  });
  pages.globalPage('GET', '/dashboard/projects', (ctx) => dashboardProjects(ctx, false));
  pages.globalPage('GET', '/dashboard/projects/starred', (ctx) => dashboardProjects(ctx, true));
  pages.globalPage('GET', '/dashboard/groups', dashboardGroups);
  pages.globalPage('GET', '/explore', exploreProjects);
  pages.globalPage('GET', '/explore/projects', exploreProjects);
  pages.globalPage('GET', '/explore/groups', exploreGroups);
  pages.namespacePage('GET', '', namespaceHome);
}
