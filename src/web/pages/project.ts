import { listTree, readBlob } from '../../git/refs.js';
import { resolveCommit } from '../../git/refs.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { VISIBILITY_NAMES } from '../../policies/access.js';
import type { PageContext, ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, trusted } from '../html.js';
import { projectPath, sendPage } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';

/** The README of a tree: the first of GitLab's preferred names found among its entries. */
export function findReadme<T extends { name: string; type: string }>(entries: T[]): T | undefined {
  const blobs = entries.filter((e) => e.type === 'blob' && /^readme(\.[a-z0-9]+)?$/i.test(e.name));
  const rank = (name: string) => (/\.(md|markdown|mdown|mkd)$/i.test(name) ? 0 : /^readme$/i.test(name) ? 1 : /\.txt$/i.test(name) ? 2 : 3);
  return blobs.sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name))[0];
}

/** A README's content as HTML: Markdown rendered (the API's renderer), anything else as plain text. */
export async function renderReadme(ctx: PageContext, page: ProjectPage, entry: { name: string; oid: string }) {
  const blob = await readBlob(ctx.cairn.catfile, gitDirOf(ctx, page), entry.oid);
  if (!blob || blob.size > 1024 * 1024) return null;
  const text = blob.data.toString('utf8');
  const body = /\.(md|markdown|mdown|mkd)$/i.test(entry.name) ? html`<div class="md">${trusted(renderMarkdown(text))}</div>` : html`<pre>${text}</pre>`;
  return html`<section class="card flush" aria-labelledby="readme-title"><header><h2 id="readme-title" class="card-title">${entry.name}</h2></header><div class="pad">${body}</div></section>`;
}

/** The clone box: HTTP URL of the repository (what `git clone` takes). */
export function cloneBox(ctx: PageContext, page: ProjectPage) {
  const url = `${ctx.cairn.config.externalUrl}/${pathUrl(page.fullPath)}.git`;
  return html`<div class="card"><label for="clone-http" class="mt0">Clone with HTTP</label>
<div class="row"><input type="text" id="clone-http" readonly value="${url}" class="mono grow"><button type="button" class="secondary" data-copy="clone-http">Copy</button></div></div>`;
}

async function projectHome(ctx: PageContext, page: ProjectPage) {
  const p = page.project;
  const base = projectPath(page);
  const codeVisible = page.can('download_code');
  let readme = html``;
  let summary = html``;
  // What the repository holds, not the empty_repo flag (a push may be in flight).
  const gitDir = gitDirOf(ctx, page);
  const commit = codeVisible && p.default_branch ? await resolveCommit(ctx.cairn.catfile, gitDir, `refs/heads/${p.default_branch}`) : null;
  if (codeVisible && p.default_branch) {
    if (commit) {
      const entries = (await listTree(ctx.cairn.catfile, gitDir, commit.oid, '', false)) ?? [];
      const entry = findReadme(entries);
      if (entry) readme = (await renderReadme(ctx, page, entry)) ?? html``;
      summary = html`<div class="card"><div class="spread"><div><a href="${base}/-/commit/${commit.oid}" class="title">${commit.message.split('\n')[0]}</a>
<div class="muted small">${commit.author.name} authored ${timeAgo(new Date(commit.author.time * 1000))} · <span class="sha">${commit.oid.slice(0, 8)}</span></div></div>
<div class="row"><a class="button secondary" href="${base}/-/tree/${pathUrl(p.default_branch)}">Browse files</a></div></div></div>`;
    }
  }
  const empty = codeVisible && !commit
    ? html`<div class="card"><h2 class="mt0">The repository for this project is empty</h2><p>Push an existing repository:</p>
<pre class="md">git remote add origin ${ctx.cairn.config.externalUrl}/${page.fullPath}.git
git push --set-upstream origin --all</pre></div>`
    : html``;
  return sendPage(ctx, {
    title: p.name,
    project: page,
    section: 'project',
    body: html`<div class="spread"><h1>${p.name}</h1><span class="badge">${VISIBILITY_NAMES[p.visibility_level] ?? 'private'}</span></div>
${p.description ? html`<div class="md muted">${trusted(renderMarkdown(p.description))}</div>` : ''}
<p class="muted small">Project ID: ${p.id}${p.archived ? ' · Archived' : ''}</p>
${codeVisible ? cloneBox(ctx, page) : ''}
${summary}${empty}${readme}`,
  });
}

export function registerProjectPages(pages: PageRegistry) {
  pages.projectPage('GET', '', projectHome);
}
