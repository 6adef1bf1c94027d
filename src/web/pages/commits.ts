import { latestPipelineForSha } from '../../ci/pipelines/lookup.js';
import { pageNumber, pagerNav } from '../components/pagination.js';
import type { ParsedCommit } from '../../git/catfile.js';
import { DIFF_LIMITS, type DiffFile } from '../../git/commits.js';
import type { DiffEntry } from '../../git/compare.js';
import { listRefs } from '../../git/refs.js';
import { ApiError } from '../../plugins/errors.js';
import { commitDiff, findCommit, listCommits } from '../../services/commits.js';
import { compare } from '../../services/repository.js';
import { PageRedirect, pageNotFound, requireAbility, type PageContext, type ProjectPage } from '../context.js';
import { diffViewOf, renderDiff, viewSwitch, type DiffView } from '../diff.js';
import { html, pathUrl, timeAgo, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, sendPage } from '../layout.js';
import { gitDirOf, splitRefAndPath } from '../refs.js';
import type { PageRegistry } from '../router.js';
import { renderCache } from '../../cache/lru.js';

/**
 * The commit list (`/-/commits/:ref/*path`, grouped by day, 40 a page), a commit with its diff
 * (`/-/commit/:sha`) and compare (`/-/compare`, `/-/compare/:from...:to`). Data comes from the
 * services behind the API's commits, commit diff and compare endpoints; nothing here runs git
 * once per commit.
 */
export const COMMITS_PER_PAGE = 40;
/** The compare page lists this many commits (the newest); the diff shows all of them. */
const COMPARE_COMMITS_SHOWN = 100;
/** Branches or tags offered in a switcher (the rest can be typed into the compare form). */
const SWITCHER_REFS = 200;
const COMMIT_ID = /^[0-9a-f]{7,64}$/i;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

function commitTitle(c: ParsedCommit): string {
  return (c.message.split('\n', 1)[0] ?? '').trim() || '(no commit message)';
}

/** The message after its title line (GitLab's description), without surrounding blank lines. */
function commitDescription(c: ParsedCommit): string {
  const nl = c.message.indexOf('\n');
  return nl < 0 ? '' : c.message.slice(nl + 1).replace(/^\s*\n/, '').trimEnd();
}

const dateOf = (time: number) => new Date(time * 1000);
const shortSha = (oid: string) => oid.slice(0, 8);

/** Commits grouped by the day (UTC) they were committed on, in the order given. */
export function groupByDay(commits: ParsedCommit[]): { day: string; label: string; commits: ParsedCommit[] }[] {
  const groups: { day: string; label: string; commits: ParsedCommit[] }[] = [];
  for (const c of commits) {
    const d = dateOf(c.committer.time);
    const day = Number.isNaN(d.getTime()) ? '' : d.toISOString().slice(0, 10);
    const last = groups[groups.length - 1];
    if (last && last.day === day) last.commits.push(c);
    else groups.push({ day, label: day ? `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}, ${d.getUTCFullYear()}` : 'Unknown date', commits: [c] });
  }
  return groups;
}

/** A list of commits as GitLab shows it: by day, each with its title, author, time and short id. */
export function commitListHtml(page: ProjectPage, commits: ParsedCommit[]): SafeHtml {
  const base = projectPath(page);
  const now = Date.now();
  return html`${groupByDay(commits).map(
    (g) => html`<section class="commit-day" aria-label="Commits on ${g.label}"><h2 class="commit-day-title"><time datetime="${g.day}">${g.label}</time> <span class="muted small">${g.commits.length} commit${g.commits.length === 1 ? '' : 's'}</span></h2>
<ul class="list commits">${g.commits.map((c) => {
      const href = `${base}/-/commit/${c.oid}`;
      const description = commitDescription(c);
      const committed = c.committer.name !== c.author.name || c.committer.email !== c.author.email;
      return html`<li><div class="grow commit-text"><a class="title" href="${href}">${commitTitle(c)}</a>${
        description ? html`<details class="commit-more"><summary><span class="sr-only">Show the description</span><span aria-hidden="true">…</span></summary><pre class="commit-description">${description}</pre></details>` : ''
      }<div class="meta">${avatar({ name: c.author.name, username: c.author.email })} <span class="who">${c.author.name}</span> authored ${timeAgo(dateOf(c.author.time), now)}${
        committed ? html` · ${c.committer.name} committed ${timeAgo(dateOf(c.committer.time), now)}` : ''
      }</div></div><div class="row commit-ids"><a class="sha" href="${href}" aria-label="Commit ${shortSha(c.oid)}">${shortSha(c.oid)}</a><a class="button secondary small" href="${base}/-/tree/${c.oid}">Browse files</a></div></li>`;
    })}</ul></section>`,
  )}`;
}

/** The branches and tags (at most SWITCHER_REFS of each), for switchers and the compare form. */
async function refNames(ctx: PageContext, page: ProjectPage): Promise<{ branches: string[]; tags: string[] }> {
  const gitDir = gitDirOf(ctx, page);
  const [branches, tags] = await Promise.all([listRefs(gitDir, 'refs/heads/'), listRefs(gitDir, 'refs/tags/')]);
  return { branches: branches.slice(0, SWITCHER_REFS).map((r) => r.name), tags: tags.slice(0, SWITCHER_REFS).map((r) => r.name) };
}

function refOptions(refs: { branches: string[]; tags: string[] }, current: string): SafeHtml {
  const known = refs.branches.includes(current) || refs.tags.includes(current);
  const option = (name: string) => html`<option value="${name}"${name === current ? html` selected` : ''}>${name}</option>`;
  return html`${known ? '' : html`<option value="${current}" selected>${current}</option>`}<optgroup label="Branches">${refs.branches.map(option)}</optgroup>${
    refs.tags.length ? html`<optgroup label="Tags">${refs.tags.map(option)}</optgroup>` : ''
  }`;
}

/** `/-/commits` (and the switcher's form, `?ref=&path=`): the list of a ref, the default branch by default. */
async function commitsIndex(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const ref = ctx.query.ref || page.project.default_branch || 'main';
  const path = (ctx.query.path ?? '').split('/').filter((s) => s !== '' && s !== '.' && s !== '..').join('/');
  throw new PageRedirect(`${projectPath(page)}/-/commits/${pathUrl(ref)}${path ? `/${pathUrl(path)}` : ''}`);
}

/** `/-/commits/:ref/*path`: the history of a ref (of a path in it), newest first, 40 a page. */
async function commitsPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const { ref, path, commit } = await splitRefAndPath(ctx, page, ctx.params['*']);
  const current = pageNumber(ctx);
  const [{ commits, total }, refs] = await Promise.all([
    listCommits(ctx.cairn, page.project, { ref: commit.oid, path: path || null }, { offset: (current - 1) * COMMITS_PER_PAGE, limit: COMMITS_PER_PAGE }),
    refNames(ctx, page),
  ]);
  const base = projectPath(page);
  const listUrl = `${base}/-/commits/${pathUrl(ref)}${path ? `/${pathUrl(path)}` : ''}`;
  const pages = Math.max(1, Math.ceil(total / COMMITS_PER_PAGE));
  const parts = path ? path.split('/') : [];
  const pathCrumbs = parts.map((p, i) => html` / <a href="${base}/-/commits/${pathUrl(ref)}/${pathUrl(parts.slice(0, i + 1).join('/'))}">${p}</a>`);
  return sendPage(ctx, {
    title: path ? `Commits · ${ref} · ${path}` : `Commits · ${ref}`,
    project: page,
    section: 'commits',
    breadcrumbs: projectCrumbs(page, ['Commits']),
    body: html`<div class="spread"><h1>Commits</h1>
<form method="get" action="${base}/-/commits" class="row switcher"><label for="commits-ref" class="sr-only">Branch or tag</label><select id="commits-ref" name="ref" autocomplete="off" data-autosubmit>${refOptions(refs, ref)}</select>${
      path ? html`<input type="hidden" name="path" value="${path}">` : ''
    }<button type="submit" class="secondary small">Show</button></form></div>
<p class="muted small commits-path"><a href="${base}/-/commits/${pathUrl(ref)}">${ref}</a>${pathCrumbs} · ${total} commit${total === 1 ? '' : 's'}</p>
${commits.length ? commitListHtml(page, commits) : html`<p class="empty">${current > 1 ? 'No more commits.' : 'No commits to show.'}</p>`}
${pagerNav(current, pages, (n) => (n === 1 ? listUrl : `${listUrl}?page=${n}`), ['Newer', 'Older'])}`,
  });
}

/** "View file @ <rev>" in each file's header: the new side at `rev`, a deleted file at `oldRev`. */
function fileLinks(page: ProjectPage, rev: string, oldRev: string | null) {
  const base = projectPath(page);
  const label = (r: string) => (COMMIT_ID.test(r) ? shortSha(r) : r);
  return (file: DiffFile) => {
    if (file.deletedFile) return oldRev ? html`<a class="small" href="${base}/-/blob/${pathUrl(oldRev)}/${pathUrl(file.oldPath)}">View file @ ${label(oldRev)}</a>` : null;
    return html`<a class="small" href="${base}/-/blob/${pathUrl(rev)}/${pathUrl(file.newPath)}">View file @ ${label(rev)}</a>`;
  };
}

function withQuery(url: string, query: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${url}?${s}` : url;
}

/**
 * Rendered diffs of commits, by project path, commit id and view: what they show depends on
 * nothing else (a commit never changes, and the links are the project's), so a commit's page asked
 * for again renders no diff. Least recently used out first, within a bound on their size.
 */
const keptDiffs = renderCache.partition<SafeHtml>('commit-diff', { maxShare: 1 / 32 });

function keptDiff(key: string, render: () => Promise<SafeHtml>): Promise<SafeHtml> {
  return keptDiffs.getOrCompute(key, render, (rendered) => rendered.value.length);
}

/** `/-/commit/:sha`: a commit's message, people, parents and its diff against its first parent. */
async function commitPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const sha = ctx.params.sha;
  // Commit ids only (GitLab's route takes a hex id): never a ref expression or an option.
  if (!COMMIT_ID.test(sha)) throw pageNotFound();
  const commit = await findCommit(ctx.cairn, page.project, sha);
  if (!commit) throw pageNotFound('No such commit.');
  const view = diffViewOf(ctx.query);
  const base = projectPath(page);
  const url = `${base}/-/commit/${commit.oid}`;
  const [diff, pipeline] = await Promise.all([
    keptDiff(`${base}\0${commit.oid}\0${view}`, async () =>
      renderDiff(await commitDiff(ctx.cairn, page.project, commit), { view, fileLinks: fileLinks(page, commit.oid, commit.parents[0] ?? null) }),
    ),
    page.can('read_pipeline') ? latestPipelineForSha(ctx.cairn.db, page.project.id, commit.oid) : null,
  ]);
  const description = commitDescription(commit);
  const committed = commit.committer.name !== commit.author.name || commit.committer.email !== commit.author.email || commit.committer.time !== commit.author.time;
  return sendPage(ctx, {
    title: `${commitTitle(commit)} (${shortSha(commit.oid)})`,
    project: page,
    section: 'commits',
    breadcrumbs: projectCrumbs(page, ['Commits', `${base}/-/commits/${pathUrl(page.project.default_branch ?? 'main')}`], [shortSha(commit.oid)]),
    body: html`<div class="spread"><h1 class="commit-heading">Commit <span class="sha">${shortSha(commit.oid)}</span></h1><div class="row"><a class="button secondary" href="${base}/-/tree/${commit.oid}">Browse files</a></div></div>
<div class="card">
<p class="muted small mt0">${avatar({ name: commit.author.name, username: commit.author.email })} Authored by <strong>${commit.author.name}</strong> ${timeAgo(dateOf(commit.author.time))}${
      committed ? html` · committed by <strong>${commit.committer.name}</strong> ${timeAgo(dateOf(commit.committer.time))}` : ''
    }</p>
<h2 class="commit-title">${commitTitle(commit)}</h2>
${description ? html`<pre class="commit-description">${description}</pre>` : ''}
<dl class="facts small">
<dt>Commit</dt><dd class="sha">${commit.oid}</dd>
<dt>${commit.parents.length === 1 ? 'Parent' : 'Parents'}</dt><dd>${
      commit.parents.length ? commit.parents.map((p, i) => html`${i ? ' + ' : ''}<a class="sha" href="${base}/-/commit/${p}">${shortSha(p)}</a>`) : html`<span class="muted">none (root commit)</span>`
    }</dd>
<dt>Author</dt><dd>${commit.author.name} &lt;${commit.author.email}&gt;</dd>
<dt>Committer</dt><dd>${commit.committer.name} &lt;${commit.committer.email}&gt;</dd>
${pipeline ? html`<dt>Pipeline</dt><dd><a href="${base}/-/pipelines/${pipeline.id}">#${pipeline.id}</a> <span class="badge ${pipeline.status}">${pipeline.status}</span></dd>` : ''}
</dl>
</div>
<div class="spread diff-bar"><h2 class="mt0">Changes</h2>${viewSwitch(view, (v) => withQuery(url, { view: v }))}</div>
${diff}`,
  });
}

// ---------------------------------------------------------------------------------------------
// Compare

/** The API's diff entries as the diff renderer takes them, with GitLab's safe limits for a page (later files collapsed). */
export function pageDiffFiles(entries: DiffEntry[]): DiffFile[] {
  let lines = 0;
  let bytes = 0;
  return entries.map((e, i) => {
    let diff = e.diff;
    let collapsed = e.collapsed;
    if (diff) {
      const fileLines = diff.split('\n').length;
      if (i >= DIFF_LIMITS.safeMaxFiles || lines + fileLines > DIFF_LIMITS.safeMaxLines || bytes + diff.length > DIFF_LIMITS.safeMaxBytes) {
        collapsed = true;
        diff = '';
      }
      lines += fileLines;
      bytes += diff.length;
    }
    return {
      oldPath: e.old_path,
      newPath: e.new_path,
      aMode: e.a_mode,
      bMode: e.b_mode,
      newFile: e.new_file,
      renamedFile: e.renamed_file,
      deletedFile: e.deleted_file,
      diff,
      tooLarge: e.too_large,
      collapsed,
    };
  });
}

function compareUrl(page: ProjectPage, from: string, to: string, straight: boolean, view?: DiffView): string {
  return withQuery(`${projectPath(page)}/-/compare/${pathUrl(from)}...${pathUrl(to)}`, { straight: straight ? 'true' : undefined, view });
}

function compareForm(ctx: PageContext, page: ProjectPage, refs: { branches: string[]; tags: string[] }, values: { from: string; to: string; straight: boolean }): SafeHtml {
  const base = projectPath(page);
  const checked = (on: boolean) => (on ? html` checked` : '');
  return html`<form method="get" action="${base}/-/compare" class="card compare-form">
<p class="muted mt0">Changes are shown as if the <strong>source</strong> revision was being merged into the <strong>target</strong> revision.</p>
<div class="compare-fields">
<div><label for="compare-to">Source (branch, tag or commit)</label><input type="text" id="compare-to" name="to" value="${values.to}" list="compare-refs" required class="mono"></div>
<div><label for="compare-from">Target (branch, tag or commit)</label><input type="text" id="compare-from" name="from" value="${values.from}" list="compare-refs" required class="mono"></div>
</div>
<datalist id="compare-refs">${refs.branches.map((b) => html`<option value="${b}"></option>`)}${refs.tags.map((t) => html`<option value="${t}"></option>`)}</datalist>
<fieldset class="compare-mode"><legend>Show changes</legend>
<label class="check"><input type="radio" name="straight" value="false"${checked(!values.straight)}> Only incoming changes from source (since their merge base)</label>
<label class="check"><input type="radio" name="straight" value="true"${checked(values.straight)}> Include changes to target since source was created (straight diff)</label>
</fieldset>
<button type="submit">Compare</button>
</form>`;
}

/** `/-/compare`: the form; submitted (`?from=&to=`), it leads to GitLab's three-dot URL. */
async function comparePage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const from = (ctx.query.from ?? '').trim();
  const to = (ctx.query.to ?? '').trim();
  const straight = ctx.query.straight === 'true';
  if (from && to) throw new PageRedirect(compareUrl(page, from, to, straight));
  const refs = await refNames(ctx, page);
  const defaultBranch = page.project.default_branch ?? 'main';
  return sendPage(ctx, {
    title: 'Compare revisions',
    project: page,
    section: 'commits',
    breadcrumbs: projectCrumbs(page, ['Compare revisions']),
    body: html`<h1>Compare revisions</h1>${compareForm(ctx, page, refs, { from: from || defaultBranch, to, straight })}`,
  });
}

/** `/-/compare/:from...:to` (refs may hold slashes: the rest is split at its first `...`). */
async function comparisonPage(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'download_code');
  const rest = ctx.params['*'];
  const at = rest.indexOf('...');
  if (at <= 0 || at + 3 >= rest.length) throw pageNotFound();
  const from = rest.slice(0, at);
  const to = rest.slice(at + 3);
  const straight = ctx.query.straight === 'true';
  const view = diffViewOf(ctx.query);
  const [refs, result] = await Promise.all([
    refNames(ctx, page),
    compare(ctx.cairn, page.project, { from, to, straight }).catch((e) => {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }),
  ]);
  const form = compareForm(ctx, page, refs, { from, to, straight });
  const opts = {
    title: `Compare ${from}...${to}`,
    project: page,
    section: 'commits' as const,
    breadcrumbs: projectCrumbs(page, ['Compare revisions', `${projectPath(page)}/-/compare`], [`${from}...${to}`]),
  };
  if (!result) {
    return sendPage(ctx, {
      ...opts,
      status: 404,
      body: html`<h1>Compare revisions</h1><div class="alert error" role="alert">Either ${from} or ${to} is not a branch, tag or commit of this project.</div>${form}`,
    });
  }
  const commits = [...result.commits].reverse();
  const shown = commits.slice(0, COMPARE_COMMITS_SHOWN);
  const files = pageDiffFiles(result.diffs);
  const diff = files.length
    ? await renderDiff(files, { view, fileLinks: fileLinks(page, to, straight ? from : null) })
    : html`<p class="empty">No changes between these revisions.</p>`;
  const nothing = result.sameRef || (!commits.length && !files.length);
  return sendPage(ctx, {
    ...opts,
    body: html`<h1>Compare revisions</h1>${form}
${result.overflow ? html`<div class="alert warn" role="status">Too many changes to show them all: some commits or files are left out.</div>` : ''}
${
  nothing
    ? html`<p class="empty">There isn't anything to compare: <span class="mono">${from}</span> and <span class="mono">${to}</span> are the same${straight ? '' : ', or the source is already in the target'}.</p>`
    : html`<h2>Commits <span class="badge">${commits.length}</span></h2>
${commits.length ? commitListHtml(page, shown) : html`<p class="empty">No commits: the source adds nothing to the target's history.</p>`}
${commits.length > shown.length ? html`<p class="muted small">…and ${commits.length - shown.length} older commits.</p>` : ''}
<div class="spread diff-bar"><h2>Changes</h2>${viewSwitch(view, (v) => compareUrl(page, from, to, straight, v))}</div>
${diff}`
}`,
  });
}

export function registerCommitPages(pages: PageRegistry) {
  pages.projectPage('GET', 'commits', commitsIndex);
  pages.projectPage('GET', 'commits/*', commitsPage);
  pages.projectPage('GET', 'commit/:sha', commitPage);
  pages.projectPage('GET', 'compare', comparePage);
  pages.projectPage('GET', 'compare/*', comparisonPage);
}
