import { listBranches } from '../../services/branches.js';
import { listTags } from '../../services/tags.js';
import { requireAbility, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, type SafeHtml } from '../html.js';
import { projectCrumbs, projectPath, sendPage } from '../layout.js';
import type { PageRegistry } from '../router.js';
import { pageNumber, pagination, PER_PAGE } from '../components/pagination.js';
import { repoUrl } from './files.js';

/**
 * A project's branches (`/-/branches`) and tags (`/-/tags`): the lists of the branches and tags
 * API (the same services, so the same protection and merged answers), searchable, 20 a page.
 */

function searchForm(action: string, label: string, value: string): SafeHtml {
  return html`<form method="get" action="${action}" class="filters" role="search">
<div><label for="ref-search">${label}</label><input type="search" id="ref-search" name="search" value="${value}"></div>
<button type="submit" class="secondary">Search</button></form>`;
}

async function branchesPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const base = projectPath(page);
  const search = ctx.query.search ?? '';
  const all = await listBranches(ctx.cairn, page.project, { user: ctx.user, accessLevel: page.subject.accessLevel }, { search, sort: 'updated_desc' });
  // The default branch first, as GitLab's overview shows it.
  all.sort((a, b) => Number(b.isDefault) - Number(a.isDefault));
  const n = pageNumber(ctx);
  const shown = all.slice((n - 1) * PER_PAGE, n * PER_PAGE);
  const items = shown.map((b) => html`<li><div class="grow"><a class="title" href="${repoUrl(page, 'tree', b.name)}">${b.name}</a>
${b.isDefault ? html` <span class="badge">default</span>` : ''}${b.protected ? html` <span class="badge warn">protected</span>` : ''}${b.merged ? html` <span class="badge merged">merged</span>` : ''}
<div class="meta"><a class="sha" href="${base}/-/commit/${b.commit.oid}">${b.commit.oid.slice(0, 8)}</a> · ${b.commit.message.split('\n')[0]} · ${timeAgo(new Date(b.commit.committer.time * 1000))}</div></div>
${b.isDefault ? '' : html`<a class="button secondary small" href="${base}/-/compare/${pathUrl(page.project.default_branch ?? 'main')}...${pathUrl(b.name)}">Compare</a>`}</li>`);
  return sendPage(ctx, {
    title: 'Branches',
    project: page,
    section: 'branches',
    breadcrumbs: projectCrumbs(page, ['Repository'], ['Branches']),
    body: html`<h1>Branches</h1>
${searchForm(`${base}/-/branches`, 'Filter by branch name', search)}
${items.length ? html`<ul class="list">${items}</ul>` : html`<div class="empty">${search ? 'No branch matches this search.' : 'This repository has no branches.'}</div>`}
${pagination(ctx, n, all.length)}`,
  });
}

async function tagsPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const base = projectPath(page);
  const search = ctx.query.search ?? '';
  const all = await listTags(ctx.cairn, page.project, { search, orderBy: 'updated', sort: 'desc' });
  const n = pageNumber(ctx);
  const shown = all.slice((n - 1) * PER_PAGE, n * PER_PAGE);
  const items = shown.map((t) => html`<li><div class="grow"><a class="title" href="${repoUrl(page, 'tree', t.name)}">${t.name}</a>${t.protected ? html` <span class="badge warn">protected</span>` : ''}
${t.annotation?.message.trim() ? html`<div class="small">${t.annotation.message.trim().split('\n')[0]}</div>` : ''}
${t.commit ? html`<div class="meta"><a class="sha" href="${base}/-/commit/${t.commit.oid}">${t.commit.oid.slice(0, 8)}</a> · ${t.commit.message.split('\n')[0]} · ${timeAgo(new Date(t.commit.committer.time * 1000))}</div>` : ''}</div></li>`);
  return sendPage(ctx, {
    title: 'Tags',
    project: page,
    section: 'tags',
    breadcrumbs: projectCrumbs(page, ['Repository'], ['Tags']),
    body: html`<h1>Tags</h1>
${searchForm(`${base}/-/tags`, 'Filter by tag name', search)}
${items.length ? html`<ul class="list">${items}</ul>` : html`<div class="empty">${search ? 'No tag matches this search.' : 'This repository has no tags.'}</div>`}
${pagination(ctx, n, all.length)}`,
  });
}

export function registerBranchPages(pages: PageRegistry) {
  pages.projectPage('GET', 'branches', branchesPage);
  pages.projectPage('GET', 'tags', tagsPage);
}
