import type { ParsedCommit } from '../../git/catfile.js';
import { lastCommitForPath, pathEntry } from '../../git/commits.js';
import { listRefs, listTree, readCommit, type PathEntry } from '../../git/refs.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { blameFile, validFilePath } from '../../services/files.js';
import { ARCHIVE_FORMATS } from '../../git/archive.js';
import { checkRateLimit } from '../../plugins/rate_limit.js';
import { isTextBlob, projectArchive } from '../../services/repository.js';
import { pageNotFound, PageRedirect, requireAbility, type PageContext, type ProjectPage } from '../context.js';
import { highlightLines } from '../highlight.js';
import { esc, html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { projectCrumbs, projectPath, renderPage, sendPage, WEB_HEADERS, type PageOptions } from '../layout.js';
import { gitDirOf, splitRefAndPath } from '../refs.js';
import type { PageRegistry } from '../router.js';
import { renderCache } from '../../cache/lru.js';

/**
 * Browsing a repository (GitLab's paths): the file tree (`/-/tree/:ref/*path`), a file
 * (`/-/blob/:ref/*path`, highlighted, Markdown rendered), its raw bytes (`/-/raw/...`) and its
 * blame (`/-/blame/...`), and the branch/tag switcher (`/-/refs/switch`) they share with the
 * project page. Everything is read through the cat-file pool and the API's file services.
 */

/** Files above this size are not shown inline (a link to the raw file instead), as GitLab does. */
export const MAX_INLINE_BYTES = 1024 * 1024;
/** How many entries of a folder are listed (GitLab shows a thousand before loading more). */
const MAX_TREE_ENTRIES = 1000;
/** How many branches and tags the switcher lists (the current ref is always there). */
const SWITCHER_LIMIT = 200;

const MARKDOWN = /\.(md|markdown|mdown|mkd|mkdn)$/i;
const IMAGES: Record<string, string> = {
  png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', webp: 'image/webp', bmp: 'image/bmp', ico: 'image/x-icon', avif: 'image/avif',
};

export const isMarkdownName = (name: string) => MARKDOWN.test(name);

/** The image type of a file name (raster images only: an SVG is text and is served as text). */
export function imageTypeOf(name: string): string | null {
  const dot = name.lastIndexOf('.');
  return dot < 0 ? null : (IMAGES[name.slice(dot + 1).toLowerCase()] ?? null);
}

/** `12.3 KiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** The URL of a repository view: `<project>/-/<kind>/<ref>/<path>`. */
export function repoUrl(page: ProjectPage, kind: 'tree' | 'blob' | 'raw' | 'blame' | 'commits', ref: string, path = ''): string {
  return `${projectPath(page)}/-/${kind}/${pathUrl(ref)}${path ? '/' + pathUrl(path) : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The branch and tag switcher

export type SwitchDestination = 'tree' | 'blob' | 'blame' | 'commits';
const DESTINATIONS = new Set<SwitchDestination>(['tree', 'blob', 'blame', 'commits']);

/**
 * A GET form listing the branches and tags: choosing one (the script submits on change; the Go
 * button without script) goes through `/-/refs/switch` to the same view of the chosen ref.
 */
export async function refSwitcher(ctx: PageContext, page: ProjectPage, current: string, destination: SwitchDestination = 'tree', path = ''): Promise<SafeHtml> {
  const gitDir = gitDirOf(ctx, page);
  const [branches, tags] = await Promise.all([listRefs(gitDir, 'refs/heads/'), listRefs(gitDir, 'refs/tags/')]);
  const isBranch = branches.some((b) => b.name === current);
  const isTag = !isBranch && tags.some((t) => t.name === current);
  // The first names of each, and the current ref wherever it sorts.
  const names = (list: { name: string }[], mine: boolean) => {
    const out = list.slice(0, SWITCHER_LIMIT).map((r) => r.name);
    if (mine && !out.includes(current)) out.unshift(current);
    return out;
  };
  const option = (mine: boolean) => (name: string) => html`<option value="${name}"${mine && name === current ? trusted(' selected') : ''}>${name}</option>`;
  const branchNames = names(branches, isBranch);
  const tagNames = names(tags, isTag);
  const known = isBranch || isTag;
  return html`<form method="get" action="${projectPath(page)}/-/refs/switch" class="switcher row">
<label for="ref-switch" class="sr-only">Switch branch or tag</label>
<select id="ref-switch" name="ref" data-autosubmit>
${known ? '' : html`<option value="${current}" selected>${current.length === 40 || current.length === 64 ? current.slice(0, 8) : current}</option>`}
${branchNames.length ? html`<optgroup label="Branches">${branchNames.map(option(isBranch))}</optgroup>` : ''}
${tagNames.length ? html`<optgroup label="Tags">${tagNames.map(option(isTag))}</optgroup>` : ''}
</select>
<input type="hidden" name="destination" value="${destination}">
${path ? html`<input type="hidden" name="path" value="${path}">` : ''}
<button type="submit" class="secondary">Go</button>
</form>`;
}

async function switchRef(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const ref = ctx.query.ref ?? '';
  const destination = DESTINATIONS.has(ctx.query.destination as SwitchDestination) ? (ctx.query.destination as SwitchDestination) : 'tree';
  const path = ctx.query.path && validFilePath(ctx.query.path) ? ctx.query.path.replace(/\/+$/, '') : '';
  if (!ref || ref.length > 1024 || /[\u0000-\u001f\u007f]/.test(ref)) throw pageNotFound();
  throw new PageRedirect(repoUrl(page, destination, ref, path));
}

// ---------------------------------------------------------------------------------------------
// Trees

/** Folders first, then submodules, then files (each in git's order, which is by name). */
export function sortEntries<T extends { type: string }>(entries: T[]): T[] {
  const rank = (t: string) => (t === 'tree' ? 0 : t === 'commit' ? 1 : 2);
  return entries.slice().sort((a, b) => rank(a.type) - rank(b.type));
}

/** Small inline icons (SVG elements, not styles: the CSP allows them), coloured by the text. */
const ICONS: Record<string, SafeHtml> = {
  tree: trusted('<svg viewBox="0 0 16 16" aria-hidden="true"><path fill="currentColor" d="M1.5 3A1.5 1.5 0 0 1 3 1.5h3.1l1.5 1.5H13A1.5 1.5 0 0 1 14.5 4.5v8A1.5 1.5 0 0 1 13 14H3a1.5 1.5 0 0 1-1.5-1.5z"/></svg>'),
  blob: trusted('<svg viewBox="0 0 16 16" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="1.3" d="M3.5 1.5h6l3 3v10h-9zM9.5 1.5v3h3"/></svg>'),
  commit: trusted('<svg viewBox="0 0 16 16" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="1.3" d="M2 4.5 8 1.5l6 3v7l-6 3-6-3zM2 4.5l6 3 6-3M8 7.5v7"/></svg>'),
  link: trusted('<svg viewBox="0 0 16 16" aria-hidden="true"><path fill="none" stroke="currentColor" stroke-width="1.3" d="M6.5 9.5l3-3M7 4.5l1.5-1.5a2.5 2.5 0 0 1 3.5 3.5L10.5 8M9 11.5 7.5 13A2.5 2.5 0 0 1 4 9.5L5.5 8"/></svg>'),
};

/** The table of a tree's entries, each linked to its tree or blob page. */
export function treeTable(page: ProjectPage, ref: string, path: string, entries: PathEntry[]): SafeHtml {
  const parent = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
  const shown = sortEntries(entries).slice(0, MAX_TREE_ENTRIES);
  const rows = shown.map((e) => {
    const kind = e.type === 'tree' ? 'tree' : e.mode === '120000' ? 'link' : e.type === 'commit' ? 'commit' : 'blob';
    const label = e.type === 'tree' ? 'Folder' : e.type === 'commit' ? 'Submodule' : e.mode === '120000' ? 'Symbolic link' : 'File';
    const name = e.type === 'commit'
      ? html`${e.name} @ <span class="sha">${e.oid.slice(0, 8)}</span>`
      : html`<a href="${repoUrl(page, e.type === 'tree' ? 'tree' : 'blob', ref, e.path)}">${e.name}</a>`;
    return html`<tr><td class="name"><span class="icon" role="img" aria-label="${label}">${ICONS[kind]}</span>${name}</td></tr>`;
  });
  return html`<div class="card flush"><table class="tree">
<caption class="sr-only">Files of ${path || 'the root folder'}</caption>
<thead><tr><th scope="col">Name</th></tr></thead>
<tbody>${path ? html`<tr><td class="name"><span class="icon" aria-hidden="true"></span><a href="${repoUrl(page, 'tree', ref, parent)}" aria-label="Parent folder">..</a></td></tr>` : ''}
${rows.length ? rows : html`<tr><td class="empty">This folder is empty.</td></tr>`}
${entries.length > shown.length ? html`<tr><td class="muted">${entries.length - shown.length} more entries are not shown.</td></tr>` : ''}</tbody></table></div>`;
}

/** The path as links: the project (the ref's root), then each folder; the last part as text. */
export function pathCrumbs(page: ProjectPage, ref: string, path: string): SafeHtml {
  const parts = path ? path.split('/') : [];
  const links = parts.map((part, i) => {
    const sub = parts.slice(0, i + 1).join('/');
    return i === parts.length - 1 ? html` / <strong>${part}</strong>` : html` / <a href="${repoUrl(page, 'tree', ref, sub)}">${part}</a>`;
  });
  return html`<nav class="path-crumbs" aria-label="File path"><a href="${repoUrl(page, 'tree', ref)}">${page.project.path}</a>${links}</nav>`;
}

/** One commit as a box: title, author, when, short id. */
export function commitSummary(page: ProjectPage, commit: ParsedCommit, extra?: SafeHtml): SafeHtml {
  const base = projectPath(page);
  return html`<div class="card last-commit"><div class="spread"><div class="grow"><a href="${base}/-/commit/${commit.oid}" class="title">${commit.message.split('\n')[0]}</a>
<div class="muted small">${commit.author.name} authored ${timeAgo(new Date(commit.author.time * 1000))}</div></div>
<div class="row"><a class="sha" href="${base}/-/commit/${commit.oid}" title="${commit.oid}">${commit.oid.slice(0, 8)}</a>${extra ?? ''}</div></div></div>`;
}

/** The last commit that touched a path at a commit (one memoised walk), or the commit itself. */
async function lastCommitOf(ctx: PageContext, page: ProjectPage, commit: ParsedCommit, path: string): Promise<ParsedCommit> {
  if (!path) return commit;
  const gitDir = gitDirOf(ctx, page);
  const oid = await lastCommitForPath(gitDir, commit.oid, path).catch(() => null);
  return (oid && oid !== commit.oid ? await readCommit(ctx.cairn.catfile, gitDir, oid) : null) ?? commit;
}

// ---------------------------------------------------------------------------------------------
// READMEs and Markdown files: relative links point into the repository

/** The README of a tree: the first of GitLab's preferred names found among its entries. */
export function findReadme<T extends { name: string; type: string }>(entries: T[]): T | undefined {
  const blobs = entries.filter((e) => e.type === 'blob' && /^readme(\.[a-z0-9]+)?$/i.test(e.name));
  const rank = (name: string) => (MARKDOWN.test(name) ? 0 : /^readme$/i.test(name) ? 1 : /\.txt$/i.test(name) ? 2 : 3);
  return blobs.sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name))[0];
}

const ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };
const unescapeAttr = (s: string) => s.replace(/&(amp|lt|gt|quot|#39);/g, (m) => ENTITIES[m]);

/** The repository path a relative URL names from a file in `dir`, or null when it is no relative URL. */
export function resolveRelative(dir: string, url: string): { path: string; suffix: string } | null {
  if (!url || url.startsWith('#') || url.startsWith('//') || /^[a-z][a-z0-9+.-]*:/i.test(url)) return null;
  const cut = url.search(/[?#]/);
  const rawPath = cut < 0 ? url : url.slice(0, cut);
  const suffix = cut < 0 ? '' : url.slice(cut);
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawPath);
  } catch {
    return null;
  }
  if (/[\u0000-\u001f\u007f]/.test(decoded)) return null;
  const parts: string[] = decoded.startsWith('/') || !dir ? [] : dir.split('/');
  for (const seg of decoded.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return { path: parts.join('/'), suffix };
}

const LINK_ATTR = /(<a\s[^>]*?href=")([^"]*)(")|(<img\s[^>]*?src=")([^"]*)(")/g;

/**
 * Rendered Markdown of a repository file (`dir` is its folder) with relative links pointing at
 * the ref's files as GitLab's relative link filter does: images to `/-/raw/`, links to
 * `/-/tree/` for folders and `/-/blob/` for anything else, `/x` from the repository's root.
 * The renderer lets no raw HTML through, so every `<a href` and `<img src` in its output is one
 * it wrote; their values are decoded, resolved and escaped again.
 */
export async function renderRepositoryMarkdown(ctx: PageContext, page: ProjectPage, commit: ParsedCommit, ref: string, dir: string, text: string): Promise<string> {
  const rendered = renderMarkdown(text);
  const targets = new Map<string, string>();
  for (const m of rendered.matchAll(LINK_ATTR)) {
    if (m[2] === undefined) continue;
    const resolved = resolveRelative(dir, unescapeAttr(m[2]));
    if (resolved && resolved.path && !targets.has(resolved.path) && targets.size < 200) targets.set(resolved.path, 'blob');
  }
  const gitDir = gitDirOf(ctx, page);
  await Promise.all([...targets.keys()].map(async (p) => {
    const entry = await pathEntry(ctx.cairn.catfile, gitDir, commit.oid, p).catch(() => null);
    if (entry?.type === 'tree') targets.set(p, 'tree');
  }));
  return rendered.replace(LINK_ATTR, (whole, aOpen, aUrl, aClose, imgOpen, imgUrl, imgClose) => {
    const image = imgOpen !== undefined;
    const resolved = resolveRelative(dir, unescapeAttr(image ? imgUrl : aUrl));
    if (!resolved) return whole;
    const kind = image ? 'raw' : resolved.path ? ((targets.get(resolved.path) ?? 'blob') as 'tree' | 'blob') : 'tree';
    const url = repoUrl(page, kind, ref, resolved.path) + resolved.suffix;
    return image ? `${imgOpen}${esc(url)}${imgClose}` : `${aOpen}${esc(url)}${aClose}`;
  });
}

/** A README's content as a card: Markdown rendered (links into the repository), anything else as plain text. */
export async function readmeCard(ctx: PageContext, page: ProjectPage, commit: ParsedCommit, ref: string, entry: PathEntry): Promise<SafeHtml | null> {
  const gitDir = gitDirOf(ctx, page);
  const info = await ctx.cairn.catfile.info(gitDir, entry.oid).catch(() => null);
  if (!info || info.size > MAX_INLINE_BYTES) return null;
  const blob = await ctx.cairn.catfile.read(gitDir, entry.oid);
  if (!blob || !isTextBlob(blob.data)) return null;
  const text = blob.data.toString('utf8');
  const dir = entry.path.includes('/') ? entry.path.slice(0, entry.path.lastIndexOf('/')) : '';
  const body = MARKDOWN.test(entry.name)
    ? html`<div class="md">${trusted(await renderRepositoryMarkdown(ctx, page, commit, ref, dir, text))}</div>`
    : html`<pre class="readme-text">${text}</pre>`;
  return html`<section class="card flush" aria-labelledby="readme-title"><header><h2 id="readme-title" class="card-title"><a href="${repoUrl(page, 'blob', ref, entry.path)}">${entry.name}</a></h2></header><div class="pad">${body}</div></section>`;
}

// ---------------------------------------------------------------------------------------------
// Pages

async function treePage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const { ref, path, commit } = await splitRefAndPath(ctx, page, ctx.params['*']);
  const gitDir = gitDirOf(ctx, page);
  const entries = await listTree(ctx.cairn.catfile, gitDir, commit.oid, path, false);
  if (!entries) {
    // A file's path under /tree/ goes to its blob page, as GitLab does.
    const entry = path ? await pathEntry(ctx.cairn.catfile, gitDir, commit.oid, path).catch(() => null) : null;
    if (entry?.type === 'blob') throw new PageRedirect(repoUrl(page, 'blob', ref, path));
    throw pageNotFound('No such folder at this branch, tag or commit.');
  }
  const readme = findReadme(entries);
  const [switcher, last, readmeHtml] = await Promise.all([
    refSwitcher(ctx, page, ref, 'tree', path),
    lastCommitOf(ctx, page, commit, path),
    readme ? readmeCard(ctx, page, commit, ref, readme) : null,
  ]);
  const history = html`<a class="button secondary small" href="${repoUrl(page, 'commits', ref, path)}">History</a>`;
  return sendPage(ctx, {
    title: path ? `${path} · ${ref}` : `Files · ${ref}`,
    project: page,
    section: 'files',
    breadcrumbs: projectCrumbs(page, ['Repository']),
    body: html`<h1 class="sr-only">Files of ${page.project.name}</h1>
<div class="repo-bar">${switcher}${pathCrumbs(page, ref, path)}</div>
${commitSummary(page, last, history)}
${treeTable(page, ref, path, entries)}
${readmeHtml ?? ''}`,
  });
}

/** What a file view needs: the entry, its size and (when small enough) its bytes. */
async function loadFile(ctx: PageContext, page: ProjectPage, rest: string) {
  const split = await splitRefAndPath(ctx, page, rest);
  if (!split.path || !validFilePath(split.path)) throw pageNotFound();
  const gitDir = gitDirOf(ctx, page);
  const entry = await pathEntry(ctx.cairn.catfile, gitDir, split.commit.oid, split.path).catch(() => null);
  if (!entry) throw pageNotFound('No such file at this branch, tag or commit.');
  return { ...split, entry, gitDir };
}

/** Rows of code lines; end tags left implied (valid HTML) as a 2,000-line file has 4,000 of them. */
function lineRows(lines: string[]): SafeHtml {
  let out = '';
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    out += `<tr id="L${n}"><td class="ln"><a href="#L${n}">${n}</a><td>${lines[i]}`;
  }
  return trusted(out);
}

/** Highlighted lines as a table, one row per line with its anchor (#L12). */
export function codeTable(lines: string[], caption: string): SafeHtml {
  return html`<div class="code"><table class="code"><caption class="sr-only">${caption}</caption><tbody>${lineRows(lines)}</tbody></table></div>`;
}

/**
 * The code tables of files as UTF-8 bytes, by blob id and name (the highlighter's language
 * comes from the name): a 2,000-line file's table is some 600 KB of HTML, which a page would
 * otherwise rebuild and encode on every view. Content-addressed, so never stale; bounded by size.
 */
const codeBytes = renderCache.partition<Buffer>('code-table', { maxShare: 1 / 32 });

function codeTableBytes(text: string, name: string, blobOid: string): Promise<Buffer> {
  return codeBytes.getOrCompute(
    `${blobOid}\0${name}`,
    async () => Buffer.from(codeTable(await highlightLines(text, name, blobOid), `Lines of ${name}`).value, 'utf8'),
    (bytes) => bytes.length,
  );
}

/** Where a page's pre-encoded part goes: the last thing of its body, so found from the end (nothing a user wrote follows it). */
const SLOT = '\u0000cairn-slot\u0000';

/** Sends a page whose body holds SLOT once, with `bytes` in its place (no re-encoding of them). */
function sendPageWithBytes(ctx: PageContext, opts: PageOptions, bytes: Buffer) {
  const page = renderPage(ctx, opts);
  const at = page.lastIndexOf(SLOT);
  const body = at < 0 ? Buffer.from(page, 'utf8') : Buffer.concat([Buffer.from(page.slice(0, at), 'utf8'), bytes, Buffer.from(page.slice(at + SLOT.length), 'utf8')]);
  return ctx.reply.code(200).headers(WEB_HEADERS).send(body);
}

async function blobPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const { ref, path, commit, entry, gitDir } = await loadFile(ctx, page, ctx.params['*']);
  if (entry.type === 'tree') throw new PageRedirect(repoUrl(page, 'tree', ref, path));
  if (entry.type !== 'blob') throw pageNotFound();
  const name = path.split('/').pop()!;
  const dir = path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '';
  const info = await ctx.cairn.catfile.info(gitDir, entry.oid);
  if (!info) throw pageNotFound();
  const [switcher, last] = await Promise.all([refSwitcher(ctx, page, ref, 'blob', path), lastCommitOf(ctx, page, commit, path)]);

  const raw = repoUrl(page, 'raw', ref, path);
  const plain = ctx.query.plain === '1' || ctx.query.plain === 'true';
  let content: SafeHtml;
  let code: Buffer | null = null;
  let text = false;
  let toggle = html``;
  if (info.size > MAX_INLINE_BYTES) {
    content = html`<div class="empty">The file is too large to be shown here (${formatBytes(info.size)}). <a href="${raw}">View the raw file</a>.</div>`;
  } else {
    const blob = await ctx.cairn.catfile.read(gitDir, entry.oid);
    if (!blob) throw pageNotFound();
    const image = imageTypeOf(name);
    if (!isTextBlob(blob.data)) {
      content = image
        ? html`<div class="pad blob-image"><img src="${raw}" alt="${name}"></div>`
        : html`<div class="empty">This file is stored as binary (${formatBytes(info.size)}). <a href="${raw}?inline=false" download>Download it</a>.</div>`;
    } else if (blob.size === 0) {
      content = html`<div class="empty">Empty file.</div>`;
    } else {
      text = true;
      const source = blob.data.toString('utf8');
      if (isMarkdownName(name)) {
        const here = repoUrl(page, 'blob', ref, path);
        toggle = html`<nav class="toggle" aria-label="View"><a href="${here}"${plain ? '' : trusted(' aria-current="page"')}>Rendered</a><a href="${here}?plain=1"${plain ? trusted(' aria-current="page"') : ''}>Source</a></nav>`;
      }
      if (isMarkdownName(name) && !plain) {
        content = html`<div class="pad md">${trusted(await renderRepositoryMarkdown(ctx, page, commit, ref, dir, source))}</div>`;
      } else {
        code = await codeTableBytes(source, name, entry.oid);
        content = trusted(SLOT);
      }
    }
  }
  const actions = html`<div class="row file-actions">${toggle}
${text ? html`<a class="button secondary small" href="${repoUrl(page, 'blame', ref, path)}">Blame</a>` : ''}
<a class="button secondary small" href="${repoUrl(page, 'commits', ref, path)}">History</a>
<a class="button secondary small" href="${repoUrl(page, 'blob', commit.oid, path)}" title="A link to this file at commit ${commit.oid.slice(0, 8)}">Permalink</a>
<a class="button secondary small" href="${raw}">Raw</a>
<a class="button secondary small" href="${raw}?inline=false" download>Download</a></div>`;
  const opts: PageOptions = {
    title: `${path} · ${ref}`,
    project: page,
    section: 'files',
    breadcrumbs: projectCrumbs(page, ['Repository']),
    body: html`<h1 class="sr-only">${path}</h1>
<div class="repo-bar">${switcher}${pathCrumbs(page, ref, path)}</div>
${commitSummary(page, last)}
<section class="card flush file" aria-label="${name}"><header><div><strong>${name}</strong> <span class="muted small">${formatBytes(info.size)}</span></div>${actions}</header>
${content}</section>`,
  };
  return code ? sendPageWithBytes(ctx, opts, code) : sendPage(ctx, opts);
}

/** The filename parameter of a Content-Disposition (ASCII fallback and the UTF-8 form). */
function dispositionName(name: string): string {
  return `filename="${name.replace(/[^\x20-\x7e]|["\\]/g, '_')}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * The file's bytes: text as UTF-8 text/plain shown inline, raster images as themselves, anything
 * else as an attachment; never HTML, nothing sniffed, and sandboxed should a browser render it.
 */
async function rawPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const { path, entry, gitDir } = await loadFile(ctx, page, ctx.params['*']);
  if (entry.type !== 'blob') throw pageNotFound();
  const blob = await ctx.cairn.catfile.read(gitDir, entry.oid);
  if (!blob) throw pageNotFound();
  const name = path.split('/').pop()!;
  const text = isTextBlob(blob.data);
  const image = text ? null : imageTypeOf(name);
  const inline = ctx.query.inline !== 'false' && (text || image !== null);
  return ctx.reply
    .code(200)
    .headers({
      'content-type': text ? 'text/plain; charset=utf-8' : (image ?? 'application/octet-stream'),
      'content-disposition': `${inline ? 'inline' : 'attachment'}; ${dispositionName(name)}`,
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
      'x-frame-options': 'DENY',
      'cache-control': 'private, no-cache',
      etag: `"${entry.oid}"`,
    })
    .send(blob.data);
}

/**
 * GitLab's source archive URL, `/-/archive/<ref>/<project>-<ref>.<format>` (a release's source
 * assets link here): the API's archive of that ref, under the same per-user rate limit.
 */
async function archivePage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const parts = ctx.params['*'].split('/');
  const file = parts.pop()!;
  const ref = parts.join('/');
  const suffix = Object.keys(ARCHIVE_FORMATS).sort((a, b) => b.length - a.length).find((ext) => file.endsWith(`.${ext}`));
  if (!ref || !suffix || ref.length > 1024 || /[\u0000-\u001f\u007f]/.test(ref)) throw pageNotFound();
  await checkRateLimit(ctx.request, { name: 'archive', limit: ctx.cairn.config.archiveRateLimit });
  const { stream, filename } = await projectArchive(ctx.cairn, page.project, { sha: ref, format: ARCHIVE_FORMATS[suffix] });
  return ctx.reply
    .code(200)
    .headers({ 'content-type': 'application/octet-stream', 'content-disposition': `attachment; ${dispositionName(filename)}`, 'x-content-type-options': 'nosniff', 'cache-control': 'private, no-cache' })
    .send(stream);
}

async function blamePage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const { ref, path, commit, entry, gitDir } = await loadFile(ctx, page, ctx.params['*']);
  if (entry.type !== 'blob') throw pageNotFound();
  const name = path.split('/').pop()!;
  const info = await ctx.cairn.catfile.info(gitDir, entry.oid);
  if (!info) throw pageNotFound();
  const base = projectPath(page);
  const switcher = await refSwitcher(ctx, page, ref, 'blame', path);
  let content: SafeHtml;
  if (info.size > MAX_INLINE_BYTES) {
    content = html`<div class="empty">The file is too large to blame here (${formatBytes(info.size)}). <a href="${repoUrl(page, 'raw', ref, path)}">View the raw file</a>.</div>`;
  } else {
    const { file, ranges } = await blameFile(ctx.cairn, page.project, commit.oid, path);
    if (!isTextBlob(file.content)) {
      content = html`<div class="empty">A binary file cannot be blamed. <a href="${repoUrl(page, 'raw', ref, path)}?inline=false">Download it</a>.</div>`;
    } else if (!ranges.length) {
      content = html`<div class="empty">Empty file.</div>`;
    } else {
      const lines = await highlightLines(file.content.toString('utf8'), name, entry.oid);
      let out = '';
      let n = 0;
      for (const { range, commit: c } of ranges) {
        const when = timeAgo(new Date(c.author.time * 1000)).value;
        const who = html`<a href="${base}/-/commit/${c.oid}" class="title" title="${c.message.split('\n')[0]}">${c.message.split('\n')[0]}</a>
<div class="muted">${c.author.name} · ${trusted(when)} · <a class="sha" href="${base}/-/commit/${c.oid}">${c.oid.slice(0, 8)}</a></div>`;
        range.lines.forEach((_, i) => {
          n++;
          const cell = i === 0 ? `<td class="blame" rowspan="${range.lines.length}">${who.value}</td>` : '';
          out += `<tr id="L${n}"${i === 0 ? ' class="blame-start"' : ''}>${cell}<td class="ln"><a href="#L${n}">${n}</a><td>${lines[n - 1] ?? ''}`;
        });
      }
      content = html`<div class="code"><table class="code blame"><caption class="sr-only">Blame of ${name}</caption><tbody>${trusted(out)}</tbody></table></div>`;
    }
  }
  return sendPage(ctx, {
    title: `Blame · ${path} · ${ref}`,
    project: page,
    section: 'files',
    breadcrumbs: projectCrumbs(page, ['Repository']),
    body: html`<h1 class="sr-only">Blame of ${path}</h1>
<div class="repo-bar">${switcher}${pathCrumbs(page, ref, path)}</div>
<section class="card flush file" aria-label="Blame of ${name}"><header><div><strong>${name}</strong> <span class="muted small">${formatBytes(info.size)}</span></div>
<div class="row file-actions"><a class="button secondary small" href="${repoUrl(page, 'blob', ref, path)}">Normal view</a>
<a class="button secondary small" href="${repoUrl(page, 'commits', ref, path)}">History</a>
<a class="button secondary small" href="${repoUrl(page, 'blame', commit.oid, path)}">Permalink</a>
<a class="button secondary small" href="${repoUrl(page, 'raw', ref, path)}">Raw</a></div></header>
${content}</section>`,
  });
}

export function registerFilesPages(pages: PageRegistry) {
  pages.projectPage('GET', 'refs/switch', switchRef);
  pages.projectPage('GET', 'tree/*', treePage);
  pages.projectPage('GET', 'blob/*', blobPage);
  pages.projectPage('GET', 'raw/*', rawPage);
  pages.projectPage('GET', 'blame/*', blamePage);
  pages.projectPage('GET', 'archive/*', archivePage);
}
