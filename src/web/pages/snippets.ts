import { sendRaw } from '../../api/snippets/routes.js';
import type { Snippet } from '../../db/schema/snippets.js';
import { listSnippets, snippetRelations, type SnippetFilter } from '../../finders/snippets.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { snippetNoteable } from '../../noteables/index.js';
import { ApiError } from '../../plugins/errors.js';
import { VISIBILITY_NAMES, VISIBILITY_LEVELS, Visibility } from '../../policies/access.js';
import { canCreatePersonalSnippet, canReadSnippet, findReadableSnippet, visibilityAllowedInProject } from '../../policies/snippets.js';
import { createSnippet, readSnippetFile, SNIPPET_DEFAULT_BRANCH, snippetFiles, validSnippetPath } from '../../services/snippets.js';
import {
  apiErrorText,
  createNoteAction,
  csrfField,
  hidden,
  loadDiscussions,
  loadNoteAwards,
  loadNoteTarget,
  registerNoteActions,
  renderCommentForm,
  renderDiscussions,
  type NoteTarget,
} from '../components/notes.js';
import { field, pageForbidden, pageNotFound, requireAbility, requireCsrf, requireUser, type PageContext, type ProjectPage } from '../context.js';
import { highlightLines } from '../highlight.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { projectCrumbs, projectPath, sendPage, type PageOptions } from '../layout.js';
import type { PageRegistry } from '../router.js';
import { pageNumber, pagination, PER_PAGE } from '../components/pagination.js';
import { findUserById } from '../../finders/users.js';

/**
 * Snippets: the visitor's own (`/-/snippets`, GitLab's /dashboard/snippets), the explore list
 * of public and internal personal snippets, a personal snippet (`/-/snippets/:id`) and a
 * project's (`/<project>/-/snippets[/:id]`): title, description, each file highlighted with
 * its raw link, and comments. Who sees what is policies/snippets.ts (a snippet the visitor may
 * not see is a 404; anonymous visitors are sent to sign in), lists the API's finder, new
 * snippets the API's createSnippet.
 */

/** Files bigger than this are not shown inline (the raw link serves them). */
const SHOW_MAX_BYTES = 1024 * 1024;

interface LoadedSnippet {
  snippet: Snippet;
  /** The snippet's page. */
  url: string;
  target: NoteTarget;
  page?: ProjectPage;
}

function snippetId(ctx: PageContext): number {
  const id = Number(ctx.params.id);
  if (!Number.isInteger(id) || id < 1 || id > 2147483647) throw hidden(ctx);
  return id;
}

/** A personal snippet the visitor may read (GitLab's /-/snippets/:id takes personal snippets only). */
async function loadPersonalSnippet(ctx: PageContext): Promise<LoadedSnippet> {
  const id = snippetId(ctx);
  let snippet: Snippet;
  try {
    snippet = (await findReadableSnippet(ctx.cairn, ctx.user, id)).snippet;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw hidden(ctx);
    throw e;
  }
  if (snippet.project_id !== null) throw hidden(ctx);
  const url = `/-/snippets/${snippet.id}`;
  // Personal snippets have no notes API; on the page, whoever reads one and is signed in comments (GitLab's create_note).
  const target: NoteTarget = {
    scope: { type: 'Snippet', projectId: null, key: { column: 'noteable_id', value: snippet.id } },
    url,
    user: ctx.user,
    mayComment: !!ctx.user && canReadSnippet(ctx.user, snippet, null),
    resolvable: false,
    mayResolveAny: false,
    authorId: snippet.author_id,
    locked: false,
  };
  return { snippet, url, target };
}

/** A snippet of the project the visitor may read: the notes API's own finder (snippetNoteable). */
async function loadProjectSnippet(ctx: PageContext, page: ProjectPage): Promise<LoadedSnippet> {
  requireAbility(ctx, page, 'read_snippet');
  const id = snippetId(ctx);
  const url = `${projectPath(page)}/-/snippets/${id}`;
  const { target, found } = await loadNoteTarget(ctx, page, snippetNoteable, { snippet_id: id }, url);
  return { snippet: found.record, url, target, page };
}

function visibilityBadge(level: number): SafeHtml {
  const name = VISIBILITY_NAMES[level] ?? 'private';
  return html`<span class="badge" title="Visibility">${name[0].toUpperCase() + name.slice(1)}</span>`;
}

/** Each file of the snippet at its default branch: highlighted lines, its raw link. */
async function filesHtml(ctx: PageContext, loaded: LoadedSnippet): Promise<SafeHtml> {
  const paths = await snippetFiles(ctx.cairn, loaded.snippet);
  if (!paths.length) return html`<div class="card empty">This snippet has no files.</div>`;
  const blobs = await Promise.all(paths.map((p) => readSnippetFile(ctx.cairn, loaded.snippet, SNIPPET_DEFAULT_BRANCH, p).catch(() => null)));
  const parts: SafeHtml[] = [];
  for (let i = 0; i < paths.length; i++) {
    const path = paths[i];
    const blob = blobs[i];
    const raw = `${loaded.url}/raw/${SNIPPET_DEFAULT_BRANCH}/${pathUrl(path)}`;
    let content: SafeHtml;
    if (!blob) content = html`<div class="pad muted">The file could not be read.</div>`;
    else if (blob.content.subarray(0, 8000).includes(0)) content = html`<div class="pad muted">Binary file. <a href="${raw}">Download it</a>.</div>`;
    else if (blob.content.length > SHOW_MAX_BYTES) content = html`<div class="pad muted">The file is too large to show. <a href="${raw}">View it raw</a>.</div>`;
    else {
      const lines = await highlightLines(blob.content.toString('utf8'), path);
      const anchor = `file${i + 1}-L`;
      content = html`<div class="code"><table class="code"><tbody>${lines.map((l, n) =>
        html`<tr id="${anchor}${n + 1}"><td class="ln"><a href="#${anchor}${n + 1}">${n + 1}</a></td><td>${trusted(l)}</td></tr>`)}</tbody></table></div>`;
    }
    parts.push(html`<section class="card flush snippet-file" aria-label="${path}"><header><h2 class="card-title mono">${path}</h2><a class="button secondary small" href="${raw}">Open raw</a></header>${content}</section>`);
  }
  return html`${parts}`;
}

async function renderSnippet(ctx: PageContext, loaded: LoadedSnippet, draft?: { error: string; text: string }) {
  const s = loaded.snippet;
  const [author, files, discussions] = await Promise.all([
    findUserById(ctx.cairn.db, s.author_id),
    filesHtml(ctx, loaded),
    loadDiscussions(ctx, loaded.target.scope),
  ]);
  const awards = await loadNoteAwards(ctx, discussions);
  const body = html`<div class="spread issue-head"><div class="row">${visibilityBadge(s.visibility_level)}
<span class="muted small">Snippet $${s.id} created ${timeAgo(s.created_at)} by ${author ? html`<a href="/${pathUrl(author.username)}">${author.name || author.username}</a>` : 'Ghost user'}
${s.updated_at.getTime() - s.created_at.getTime() > 1000 ? html` · updated ${timeAgo(s.updated_at)}` : ''}</span></div></div>
<h1>${s.title}</h1>
${s.description ? html`<div class="md description">${trusted(renderMarkdown(s.description))}</div>` : ''}
${files}
<h2 id="activity">Comments</h2>
${renderDiscussions(ctx, discussions, { target: loaded.target, awards })}
${renderCommentForm(ctx, loaded.target, draft ? { draft: draft.text, error: draft.error } : {})}`;
  const opts: PageOptions & { status?: number } = loaded.page
    ? { title: s.title, project: loaded.page, section: 'snippets', breadcrumbs: projectCrumbs(loaded.page, ['Snippets', `${projectPath(loaded.page)}/-/snippets`], [`$${s.id}`]), body }
    : { title: s.title, breadcrumbs: [['Snippets', ctx.user ? '/-/snippets' : '/explore/snippets'], [`$${s.id}`]], body };
  return sendPage(ctx, { ...opts, status: draft ? 400 : 200 });
}

/** GET <snippet>/raw/:ref/*path: the file as text (never rendered), as the API's raw endpoint serves it. */
async function sendSnippetRaw(ctx: PageContext, loaded: LoadedSnippet) {
  const path = ctx.params['*'] ?? '';
  if (!validSnippetPath(path)) throw pageNotFound();
  let blob;
  try {
    blob = await readSnippetFile(ctx.cairn, loaded.snippet, ctx.params.ref, path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw pageNotFound('No such file in this snippet.');
    throw e;
  }
  ctx.reply.header('content-security-policy', "default-src 'none'; sandbox");
  return sendRaw(ctx.reply, blob);
}

// ---------------------------------------------------------------------------------------------
// Lists

function snippetRow(s: Snippet, author: { name: string; username: string } | undefined, projectPathOf: string | null): SafeHtml {
  const url = projectPathOf ? `/${pathUrl(projectPathOf)}/-/snippets/${s.id}` : `/-/snippets/${s.id}`;
  return html`<li><div class="grow"><a class="title" href="${url}">${s.title}</a>
<div class="meta">$${s.id}${projectPathOf ? html` · in <a href="/${pathUrl(projectPathOf)}">${projectPathOf}</a>` : ''} · created ${timeAgo(s.created_at)} by ${author ? author.name || author.username : 'Ghost user'}</div></div>
<div class="meta row">${visibilityBadge(s.visibility_level)}<span>updated ${timeAgo(s.updated_at)}</span></div></li>`;
}

async function snippetList(ctx: PageContext, filter: SnippetFilter, path: string, empty: string): Promise<SafeHtml> {
  const pageNo = pageNumber(ctx);
  const { rows, total } = await listSnippets(ctx.cairn.db, ctx.user, filter, { offset: (pageNo - 1) * PER_PAGE, limit: PER_PAGE });
  const { authors, projectPaths } = await snippetRelations(ctx.cairn.db, rows);
  const list = rows.length
    ? html`<ul class="list snippets">${rows.map((s) => snippetRow(s, authors.get(s.author_id), s.project_id !== null ? projectPaths.get(s.project_id) ?? null : null))}</ul>`
    : html`<div class="card empty">${empty}</div>`;
  return html`${list}${pagination({ path, query: {} }, pageNo, total)}`;
}

const SNIPPET_TABS = (current: string, signedIn: boolean) => html`<nav class="tabs" aria-label="Snippets">${[
  ...(signedIn ? [['mine', '/-/snippets', 'Your snippets']] : []),
  ['explore', '/explore/snippets', 'Explore snippets'],
].map(([key, href, text]) => html`<a href="${href}"${key === current ? trusted(' aria-current="page"') : ''}>${text}</a>`)}</nav>`;

async function mySnippets(ctx: PageContext) {
  const user = requireUser(ctx);
  const list = await snippetList(ctx, { authorId: user.id }, ctx.path, 'You have no snippets yet.');
  return sendPage(ctx, {
    title: 'Snippets',
    breadcrumbs: [['Your work', '/'], ['Snippets']],
    body: html`<div class="spread"><h1>Snippets</h1>${canCreatePersonalSnippet(user) ? html`<a class="button" href="/-/snippets/new">New snippet</a>` : ''}</div>${SNIPPET_TABS('mine', true)}${list}`,
  });
}

async function exploreSnippets(ctx: PageContext) {
  const list = await snippetList(ctx, { onlyPersonal: true, minVisibility: ctx.user ? Visibility.INTERNAL : Visibility.PUBLIC }, '/explore/snippets', 'There are no snippets to show.');
  return sendPage(ctx, {
    title: 'Explore snippets',
    breadcrumbs: [['Explore', '/explore'], ['Snippets']],
    body: html`<h1>Explore snippets</h1>${SNIPPET_TABS('explore', !!ctx.user)}${list}`,
  });
}

async function projectSnippets(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_snippet');
  const path = `${projectPath(page)}/-/snippets`;
  const list = await snippetList(ctx, { projectId: page.project.id }, path, 'There are no snippets in this project.');
  return sendPage(ctx, {
    title: 'Snippets',
    project: page,
    section: 'snippets',
    breadcrumbs: projectCrumbs(page, ['Snippets']),
    body: html`<div class="spread"><h1>Snippets</h1>${page.can('create_snippet') ? html`<a class="button" href="${path}/new">New snippet</a>` : ''}</div>${list}`,
  });
}

// ---------------------------------------------------------------------------------------------
// New snippet

interface SnippetDraft {
  title: string;
  description: string;
  visibility: number;
  fileName: string;
  content: string;
}

function snippetField(ctx: PageContext, name: string): string {
  const nested = ctx.body.snippet;
  if (nested && typeof nested === 'object' && !Array.isArray(nested)) {
    const v = (nested as Record<string, unknown>)[name];
    if (typeof v === 'string') return v;
  }
  return field(ctx, name);
}

function renderNewSnippet(ctx: PageContext, action: string, maxVisibility: number, draft: SnippetDraft, frame: Pick<PageOptions, 'project' | 'section' | 'breadcrumbs'>, error?: string) {
  const levels = [Visibility.PRIVATE, Visibility.INTERNAL, Visibility.PUBLIC].filter((l) => l <= maxVisibility);
  return sendPage(ctx, {
    ...frame,
    status: error ? 400 : 200,
    title: 'New snippet',
    body: html`<h1>New snippet</h1>
<form method="post" action="${action}" class="card">${csrfField(ctx)}
${error ? html`<div class="alert error" role="alert">${error}</div>` : ''}
<label for="snippet_title">Title (required)</label><input type="text" id="snippet_title" name="snippet[title]" value="${draft.title}" required maxlength="255">
<label for="snippet_description">Description (optional)</label><textarea id="snippet_description" name="snippet[description]">${draft.description}</textarea>
<fieldset class="plain"><legend>Visibility</legend>${levels.map((l) =>
      html`<label class="check"><input type="radio" name="snippet[visibility]" value="${VISIBILITY_NAMES[l]}"${l === draft.visibility ? trusted(' checked') : ''}> ${VISIBILITY_NAMES[l]}</label>`)}</fieldset>
<label for="snippet_file_name">File name</label><input type="text" id="snippet_file_name" name="snippet[file_name]" value="${draft.fileName}" placeholder="example.rb" maxlength="255">
<label for="snippet_content">Content (required)</label><textarea id="snippet_content" name="snippet[content]" required class="tall">${draft.content}</textarea>
<div class="row form-actions"><button type="submit">Create snippet</button></div>
</form>`,
  });
}

function readDraft(ctx: PageContext): SnippetDraft {
  const level = VISIBILITY_LEVELS[snippetField(ctx, 'visibility')];
  return {
    title: snippetField(ctx, 'title'),
    description: snippetField(ctx, 'description'),
    visibility: level ?? Visibility.PRIVATE,
    fileName: snippetField(ctx, 'file_name').trim(),
    content: snippetField(ctx, 'content'),
  };
}

/** The checks of the API's create (titleParam, file_name, content), in the form's words. */
function draftError(d: SnippetDraft): string | null {
  if (!d.title.trim()) return "Title can't be blank";
  if (d.title.length > 255) return 'Title is too long (maximum is 255 characters)';
  if (d.fileName && !validSnippetPath(d.fileName)) return 'File name is not a valid file path';
  if (!d.content) return "Content can't be blank";
  return null;
}

async function saveSnippet(ctx: PageContext, project: ProjectPage['project'] | null, d: SnippetDraft): Promise<Snippet | string> {
  const error = draftError(d);
  if (error) return error;
  try {
    return await createSnippet(ctx.cairn, {
      author: ctx.user!,
      project,
      title: d.title,
      description: d.description || null,
      visibilityLevel: d.visibility,
      files: [{ path: d.fileName, content: d.content }],
      userAgent: String(ctx.request.headers['user-agent'] ?? ''),
      ipAddress: ctx.request.ip,
    });
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) return apiErrorText(e);
    throw e;
  }
}

const PERSONAL_FRAME = { breadcrumbs: [['Snippets', '/-/snippets'], ['New']] as [string, string?][] };

async function newPersonalSnippet(ctx: PageContext) {
  const user = requireUser(ctx);
  if (!canCreatePersonalSnippet(user)) throw pageForbidden();
  return renderNewSnippet(ctx, '/-/snippets', Visibility.PUBLIC, { title: '', description: '', visibility: Visibility.PRIVATE, fileName: '', content: '' }, PERSONAL_FRAME);
}

async function createPersonalSnippet(ctx: PageContext) {
  const user = requireCsrf(ctx);
  if (!canCreatePersonalSnippet(user)) throw pageForbidden();
  const draft = readDraft(ctx);
  const saved = await saveSnippet(ctx, null, draft);
  if (typeof saved === 'string') return renderNewSnippet(ctx, '/-/snippets', Visibility.PUBLIC, draft, PERSONAL_FRAME, saved);
  return ctx.reply.redirect(`/-/snippets/${saved.id}`, 303);
}

function projectFrame(page: ProjectPage) {
  return { project: page, section: 'snippets' as const, breadcrumbs: projectCrumbs(page, ['Snippets', `${projectPath(page)}/-/snippets`], ['New']) };
}

async function newProjectSnippet(ctx: PageContext, page: ProjectPage) {
  requireUser(ctx);
  requireAbility(ctx, page, 'read_snippet');
  requireAbility(ctx, page, 'create_snippet', 'forbid');
  const draft = { title: '', description: '', visibility: Visibility.PRIVATE, fileName: '', content: '' };
  return renderNewSnippet(ctx, `${projectPath(page)}/-/snippets`, page.project.visibility_level, draft, projectFrame(page));
}

async function createProjectSnippet(ctx: PageContext, page: ProjectPage) {
  requireCsrf(ctx);
  requireAbility(ctx, page, 'read_snippet');
  requireAbility(ctx, page, 'create_snippet', 'forbid');
  const draft = readDraft(ctx);
  const action = `${projectPath(page)}/-/snippets`;
  if (!visibilityAllowedInProject(draft.visibility, page.project)) {
    return renderNewSnippet(ctx, action, page.project.visibility_level, draft, projectFrame(page), "Visibility level can not be more visible than the project's");
  }
  const saved = await saveSnippet(ctx, page.project, draft);
  if (typeof saved === 'string') return renderNewSnippet(ctx, action, page.project.visibility_level, draft, projectFrame(page), saved);
  return ctx.reply.redirect(`${action}/${saved.id}`, 303);
}

export function registerSnippetPages(pages: PageRegistry) {
  for (const path of ['/-/snippets', '/dashboard/snippets']) pages.globalPage('GET', path, mySnippets);
  pages.globalPage('GET', '/explore/snippets', exploreSnippets);
  pages.globalPage('GET', '/-/snippets/new', newPersonalSnippet);
  pages.globalPage('POST', '/-/snippets', createPersonalSnippet);
  pages.globalPage('GET', '/-/snippets/:id', async (ctx) => renderSnippet(ctx, await loadPersonalSnippet(ctx)));
  pages.globalPage('GET', '/-/snippets/:id/raw/:ref/*', async (ctx) => sendSnippetRaw(ctx, await loadPersonalSnippet(ctx)));
  pages.globalPage('POST', '/-/snippets/:id/notes', async (ctx) => {
    const loaded = await loadPersonalSnippet(ctx);
    return createNoteAction(ctx, loaded.target, { rerender: (error, text) => renderSnippet(ctx, loaded, { error, text }) });
  });

  pages.projectPage('GET', 'snippets', projectSnippets);
  pages.projectPage('POST', 'snippets', createProjectSnippet);
  pages.projectPage('GET', 'snippets/new', newProjectSnippet);
  pages.projectPage('GET', 'snippets/:id', async (ctx, page) => renderSnippet(ctx, await loadProjectSnippet(ctx, page)));
  pages.projectPage('GET', 'snippets/:id/raw/:ref/*', async (ctx, page) => sendSnippetRaw(ctx, await loadProjectSnippet(ctx, page)));
  registerNoteActions(pages, 'snippets/:id', async (ctx, page) => (await loadProjectSnippet(ctx, page)).target, {
    rerender: async (ctx, page, error, text) => renderSnippet(ctx, await loadProjectSnippet(ctx, page), { error, text }),
  });
}
