import { listTree, resolveCommit } from '../../git/refs.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { VISIBILITY_NAMES } from '../../policies/access.js';
import { sshRepoUrl } from '../../presenters/users.js';
import type { PageContext, ProjectPage } from '../context.js';
import { html, pathUrl, trusted } from '../html.js';
import { projectPath, sendPage } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';
import { commitSummary, findReadme, readmeCard, refSwitcher, repoUrl, treeTable } from './files.js';

export { findReadme };

/** The clone box: the repository's HTTP and SSH URLs (what `git clone` takes), as the API's http_url_to_repo and ssh_url_to_repo. */
export function cloneBox(ctx: PageContext, page: ProjectPage) {
  const { config } = ctx.cairn;
  const url = `${config.externalUrl}/${pathUrl(page.fullPath)}.git`;
  const ssh = config.sshPort ? html`<label for="clone-ssh">Clone with SSH</label>
<div class="row"><input type="text" id="clone-ssh" readonly value="${sshRepoUrl(config.externalUrl, config.sshPort, page.fullPath)}" class="mono grow"><button type="button" class="secondary" data-copy="clone-ssh">Copy</button></div>` : '';
  return html`<div class="card"><label for="clone-http" class="mt0">Clone with HTTP</label>
<div class="row"><input type="text" id="clone-http" readonly value="${url}" class="mono grow"><button type="button" class="secondary" data-copy="clone-http">Copy</button></div>${ssh}</div>`;
}

/** The clone URL in one line, for the bar above the files. */
function cloneLine(ctx: PageContext, page: ProjectPage) {
  const url = `${ctx.cairn.config.externalUrl}/${pathUrl(page.fullPath)}.git`;
  return html`<div class="clone row"><label for="clone-http">Clone</label><input type="text" id="clone-http" readonly value="${url}" class="mono"><button type="button" class="secondary small" data-copy="clone-http">Copy</button></div>`;
}

/**
 * The project's page: its name and description, the clone URL, and (for visitors who may read
 * the code) the branch/tag switcher, the default branch's last commit, its root folder and the
 * README rendered below, with relative links into the repository.
 */
async function projectHome(ctx: PageContext, page: ProjectPage) {
  const p = page.project;
  const codeVisible = page.can('download_code');
  // What the repository holds, not the empty_repo flag (a push may be in flight).
  const gitDir = gitDirOf(ctx, page);
  const ref = p.default_branch;
  const commit = codeVisible && ref ? await resolveCommit(ctx.cairn.catfile, gitDir, `refs/heads/${ref}`) : null;
  let files = html``;
  if (commit && ref) {
    const entries = (await listTree(ctx.cairn.catfile, gitDir, commit.oid, '', false)) ?? [];
    const entry = findReadme(entries);
    const [switcher, readme] = await Promise.all([refSwitcher(ctx, page, ref), entry ? readmeCard(ctx, page, commit, ref, entry) : null]);
    const browse = html`<a class="button secondary small" href="${repoUrl(page, 'tree', ref)}">Browse files</a>`;
    files = html`<div class="repo-bar">${switcher}<a href="${projectPath(page)}/-/branches" class="small">Branches</a> <a href="${projectPath(page)}/-/tags" class="small">Tags</a>${cloneLine(ctx, page)}</div>
${commitSummary(page, commit, browse)}
${treeTable(page, ref, '', entries)}
${readme ?? ''}`;
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
${codeVisible && !commit ? cloneBox(ctx, page) : ''}
${files}${empty}`,
  });
}

export function registerProjectPages(pages: PageRegistry) {
  pages.projectPage('GET', '', projectHome);
}
