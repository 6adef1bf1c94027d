import { sql } from 'kysely';
import type { User } from '../../db/schema/core.js';
import type { DiffPosition, NoteWithAuthor } from '../../db/schema/notes.js';
import type { MergeRequest } from '../../db/schema/work_items.js';
import { labelListParam } from '../../api/list_filters.js';
import {
  countMergeRequests, findMergeRequest, findMergeRequestPage, loadMergeRequestExtras, MERGE_REQUEST_COUNT_CAP, type MergeRequestFilters,
} from '../../finders/merge_requests.js';
import { notesOfNoteable } from '../../finders/notes.js';
import type { DiffFile } from '../../git/commits.js';
import { commitsBetween, diffCommits, readCommitsOnce, type DiffEntry } from '../../git/compare.js';
import { changedPathCount } from '../../git/merge.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { mergeRequestNoteable } from '../../noteables/merge_request.js';
import type { FoundNoteable } from '../../noteables/registry.js';
import { parseCookies } from '../../oauth/sessions.js';
import { ApiError } from '../../plugins/errors.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { isDraftTitle, type MergeRequestExtras } from '../../presenters/merge_requests.js';
import { MR_STATE, MR_STATE_NAMES } from '../../db/work_item_states.js';
import { acceptMergeRequest, approvalsOf, canAccept, mergeBlockers, reconcileLocked, type MergeBlocker } from '../../services/merge.js';
import { refreshMergeRequest, updateMergeRequest } from '../../services/merge_requests.js';
import {
  apiErrorText, groupDiscussions, loadNoteAwards, MAX_NOTES, noteTargetOf, positionFields, registerNoteActions, renderCommentForm, renderDiscussion,
  type Discussion, type NoteTarget,
} from '../components/notes.js';
import { field, pageForbidden, pageNotFound, PageRedirect, requireAbility, requireCsrf, requireUser, signInLocation, type PageContext, type ProjectPage } from '../context.js';
import { diffStats, diffViewOf, fileHash, lineCode, renderDiffFile, viewSwitch, type DiffLineRef, type DiffView } from '../diff.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, renderPage, sendPage, WEB_HEADERS } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';
import { renderCache } from '../../cache/lru.js';
import { findUserById } from '../../finders/users.js';

/**
 * Merge requests at GitLab's paths: the project's list (`/-/merge_requests`, state tabs with
 * counts, GitLab's filters, 20 a page) and the dashboard's (`/dashboard/merge_requests`); a merge
 * request's Overview (`/-/merge_requests/:iid`: description, the merge widget, the discussions),
 * Commits (`.../commits`) and Changes (`.../diffs`, inline or side by side, threads on lines).
 * Reads go through the API's finders, writes through its services (merge, close/reopen, notes,
 * resolve) with the same policies: nothing here decides a business rule of its own.
 */

const PER_PAGE = 20;

// ---------------------------------------------------------------------------------------------
// Lists

type StateTab = 'opened' | 'merged' | 'closed' | 'all';
const STATE_TABS: [StateTab, string][] = [['opened', 'Open'], ['merged', 'Merged'], ['closed', 'Closed'], ['all', 'All']];

/** GitLab's sort names of the web lists, as the finder's order. */
const SORTS: Record<string, { label: string; orderBy: MergeRequestFilters['orderBy']; sort: 'asc' | 'desc' }> = {
  created_date: { label: 'Created date', orderBy: 'created_at', sort: 'desc' },
  created_asc: { label: 'Oldest created', orderBy: 'created_at', sort: 'asc' },
  updated_desc: { label: 'Last updated', orderBy: 'updated_at', sort: 'desc' },
  updated_asc: { label: 'Oldest updated', orderBy: 'updated_at', sort: 'asc' },
  merged_at_desc: { label: 'Merged date', orderBy: 'merged_at', sort: 'desc' },
  title_asc: { label: 'Title', orderBy: 'title', sort: 'asc' },
  title_desc: { label: 'Title, descending', orderBy: 'title', sort: 'desc' },
};

interface ListParams {
  state: StateTab;
  search: string;
  author_username: string;
  assignee_username: string;
  reviewer_username: string;
  labels: string[];
  target_branch: string;
  sort: string;
  page: number;
}

/** A query parameter as one string (the last one given), trimmed and bounded. */
function param(ctx: PageContext, name: string, max = 255): string {
  return (ctx.query[name] ?? '').trim().slice(0, max);
}

function listParams(ctx: PageContext): ListParams {
  const raw = (ctx.request.query ?? {}) as Record<string, unknown>;
  const labelValues = [raw.label_name].flat().filter((v): v is string => typeof v === 'string').map((v) => v.trim()).filter(Boolean).slice(0, 20);
  const state = param(ctx, 'state');
  const page = Number(param(ctx, 'page'));
  return {
    state: (['opened', 'merged', 'closed', 'all'] as const).find((s) => s === state) ?? 'opened',
    search: param(ctx, 'search'),
    author_username: param(ctx, 'author_username'),
    assignee_username: param(ctx, 'assignee_username'),
    reviewer_username: param(ctx, 'reviewer_username'),
    labels: labelValues,
    target_branch: param(ctx, 'target_branch'),
    sort: SORTS[param(ctx, 'sort')] ? param(ctx, 'sort') : 'created_date',
    page: Number.isSafeInteger(page) && page > 0 && page <= 10_000 ? page : 1,
  };
}

/** The query string of a list with some parameters changed ('' values left out). */
function listQuery(p: ListParams, change: Partial<ListParams> = {}): string {
  const q = { ...p, ...change };
  const out = new URLSearchParams();
  if (q.state !== 'opened') out.set('state', q.state);
  for (const name of ['search', 'author_username', 'assignee_username', 'reviewer_username', 'target_branch'] as const) if (q[name]) out.set(name, q[name]);
  for (const l of q.labels) out.append('label_name[]', l);
  if (q.sort !== 'created_date') out.set('sort', q.sort);
  if (q.page > 1) out.set('page', String(q.page));
  const s = out.toString();
  return s ? `?${s}` : '';
}

function filtersOf(p: ListParams): MergeRequestFilters {
  const order = SORTS[p.sort];
  return {
    search: p.search || undefined,
    authorUsername: p.author_username || undefined,
    assigneeUsername: p.assignee_username || undefined,
    reviewerUsername: p.reviewer_username || undefined,
    labels: labelListParam(p.labels.length ? p.labels : undefined, 'label_name'),
    targetBranch: p.target_branch || undefined,
    orderBy: order.orderBy,
    sort: order.sort,
  };
}

export function stateBadge(mr: Pick<MergeRequest, 'state_id' | 'title'>): SafeHtml {
  const state = MR_STATE_NAMES[mr.state_id] ?? 'opened';
  const text = { opened: 'Open', merged: 'Merged', closed: 'Closed', locked: 'Merging' }[state];
  return html`<span class="badge ${state === 'locked' ? 'running' : state}">${text}</span>${isDraftTitle(mr.title) && state === 'opened' ? html` <span class="badge">Draft</span>` : ''}`;
}

function labelBadges(extras: MergeRequestExtras): SafeHtml {
  return html`${extras.labels.map((l) => html` <span class="badge label">${l.name}</span>`)}`;
}

function userLink(user: Pick<User, 'username' | 'name'> | null | undefined): SafeHtml {
  if (!user) return html`<span class="muted">a deleted user</span>`;
  return html`<a href="/${pathUrl(user.username)}">${user.name || user.username}</a>`;
}

/** The rows, state tabs, filters and pages of a list (a project's or the dashboard's). */
async function renderList(ctx: PageContext, opts: { base: MergeRequestFilters; href: string; p: ListParams; showProject: boolean }): Promise<SafeHtml> {
  const { p, href } = opts;
  const db = ctx.cairn.db;
  const filters: MergeRequestFilters = { ...opts.base, ...filtersOf(p) };
  const [rows, ...counts] = await Promise.all([
    findMergeRequestPage(db, ctx.user, { ...filters, state: p.state }, { limit: PER_PAGE + 1, offset: (p.page - 1) * PER_PAGE }),
    ...STATE_TABS.map(([state]) => countMergeRequests(db, ctx.user, { ...filters, state })),
  ]);
  const more = rows.length > PER_PAGE;
  const shown = rows.slice(0, PER_PAGE);
  const extras = await loadMergeRequestExtras(db, shown, () => null);
  const countText = (n: number) => (n > MERGE_REQUEST_COUNT_CAP ? `${MERGE_REQUEST_COUNT_CAP}+` : String(n));
  const tabs = html`<nav class="tabs" aria-label="Merge request states">${STATE_TABS.map(([state, text], i) =>
    html`<a href="${href}${listQuery(p, { state, page: 1 })}"${state === p.state ? trusted(' aria-current="page"') : ''}>${text}<span class="count">${countText(counts[i])}</span></a>`)}</nav>`;
  const hidden = (name: string, value: string) => (value ? html`<input type="hidden" name="${name}" value="${value}">` : '');
  const filterForm = html`<form class="filters" method="get" action="${href}" role="search">
${hidden('state', p.state === 'opened' ? '' : p.state)}
<div><label for="mr-search">Search</label><input type="search" id="mr-search" name="search" value="${p.search}" placeholder="Title or description"></div>
<div><label for="mr-author">Author</label><input type="text" id="mr-author" name="author_username" value="${p.author_username}" placeholder="username"></div>
<div><label for="mr-assignee">Assignee</label><input type="text" id="mr-assignee" name="assignee_username" value="${p.assignee_username}" placeholder="username"></div>
${hidden('reviewer_username', p.reviewer_username)}
<div><label for="mr-label">Label</label><input type="text" id="mr-label" name="label_name[]" value="${p.labels[0] ?? ''}"></div>
${p.labels.slice(1).map((l) => hidden('label_name[]', l))}
<div><label for="mr-target">Target branch</label><input type="text" id="mr-target" name="target_branch" value="${p.target_branch}"></div>
<div><label for="mr-sort">Sort by</label><select id="mr-sort" name="sort" data-autosubmit>${Object.entries(SORTS).map(([value, s]) =>
    html`<option value="${value}"${value === p.sort ? trusted(' selected') : ''}>${s.label}</option>`)}</select></div>
<div><button type="submit" class="secondary">Filter</button></div>
</form>`;
  const items = shown.map((mr) => {
    const x = extras.get(mr.id)!;
    const url = `/${pathUrl(x.targetProjectFullPath)}/-/merge_requests/${mr.iid}`;
    return html`<li><div><a class="title" href="${url}">${mr.title}</a>${labelBadges(x)}
<div class="meta">${opts.showProject ? html`${x.targetProjectFullPath}` : ''}!${mr.iid} · opened ${timeAgo(mr.created_at)} by ${userLink(x.author)} · <span class="mono">${mr.source_branch}</span> → <span class="mono">${mr.target_branch}</span></div></div>
<div class="meta row">${p.state === 'opened' && mr.state_id === MR_STATE.opened ? '' : stateBadge(mr)}${x.assignees.map((u) => html`<span title="Assigned to ${u.name}">${avatar(u)}</span>`)}<span title="Comments">${x.userNotesCount} comment${x.userNotesCount === 1 ? '' : 's'}</span></div></li>`;
  });
  const pager = p.page > 1 || more
    ? html`<nav class="pagination row" aria-label="Pages">${p.page > 1 ? html`<a class="button secondary small" href="${href}${listQuery(p, { page: p.page - 1 })}" rel="prev">Previous</a>` : ''}<span class="muted small">Page ${p.page}</span>${more ? html`<a class="button secondary small" href="${href}${listQuery(p, { page: p.page + 1 })}" rel="next">Next</a>` : ''}</nav>`
    : html``;
  return html`${tabs}${filterForm}${shown.length ? html`<ul class="list mr-list">${items}</ul>` : html`<p class="empty">There are no merge requests to show.</p>`}${pager}`;
}

async function projectList(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_merge_request');
  const p = listParams(ctx);
  const href = `${projectPath(page)}/-/merge_requests`;
  const body = await renderList(ctx, { base: { projectId: page.project.id }, href, p, showProject: false });
  return sendPage(ctx, {
    title: 'Merge requests',
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests']),
    body: html`<h1>Merge requests</h1>${body}`,
  });
}

async function dashboardList(ctx: PageContext) {
  const user = requireUser(ctx);
  const p = listParams(ctx);
  // GitLab's dashboard list needs a person to filter on: without one, the merge requests assigned to you.
  if (!p.author_username && !p.assignee_username && !p.reviewer_username) p.assignee_username = user.username;
  const me = user.username;
  const current = p.author_username === me ? 'author' : p.reviewer_username === me ? 'reviewer' : p.assignee_username === me ? 'assignee' : undefined;
  const body = await renderList(ctx, { base: {}, href: '/dashboard/merge_requests', p, showProject: true });
  return sendPage(ctx, {
    title: 'Merge requests',
    breadcrumbs: [['Your work', '/dashboard/projects'], ['Merge requests']],
    side: {
      title: 'Merge requests',
      current,
      links: [
        { key: 'assignee', text: 'Assigned to you', href: `/dashboard/merge_requests?assignee_username=${encodeURIComponent(me)}` },
        { key: 'reviewer', text: 'Review requests', href: `/dashboard/merge_requests?reviewer_username=${encodeURIComponent(me)}` },
        { key: 'author', text: 'Created by you', href: `/dashboard/merge_requests?author_username=${encodeURIComponent(me)}` },
      ],
    },
    body: html`<h1>Merge requests</h1>${body}`,
  });
}

// ---------------------------------------------------------------------------------------------
// One merge request

interface Loaded {
  mr: MergeRequest;
  access: ProjectAccess;
  /** The merge request's page (`/group/project/-/merge_requests/3`). */
  base: string;
  /** Its notes as the discussions component sees them, with forms posting below `base`. */
  target: NoteTarget;
  /** The same, with forms posting below `base/diffs` (and coming back to the changes). */
  diffsTarget: NoteTarget;
}

/**
 * The merge request `:iid` of the project for the visitor, found by the notes API's registration
 * (src/noteables/merge_request.ts): 404 unless they may read merge requests. Anonymous visitors
 * see public projects' merge requests, as on GitLab (the API's signed-in rule is the API's).
 */
async function loadMergeRequest(ctx: PageContext, page: ProjectPage): Promise<Loaded> {
  requireAbility(ctx, page, 'read_merge_request');
  const raw = ctx.params.iid ?? '';
  if (!/^\d{1,9}$/.test(raw) || Number(raw) <= 0) throw pageNotFound();
  const access: ProjectAccess = { project: page.project, accessLevel: page.subject.accessLevel, user: ctx.user };
  let found: FoundNoteable<MergeRequest>;
  try {
    found = await mergeRequestNoteable.find({ cairn: ctx.cairn, access, params: { merge_request_iid: Number(raw) } });
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw pageNotFound();
    throw e;
  }
  const mr = await reconcileLocked(ctx.cairn, page.project, found.record);
  const base = `${projectPath(page)}/-/merge_requests/${mr.iid}`;
  return {
    mr,
    access,
    base,
    target: noteTargetOf(ctx, page, mergeRequestNoteable, found, base),
    diffsTarget: noteTargetOf(ctx, page, mergeRequestNoteable, found, `${base}/diffs`),
  };
}

/** The merge request as the API's single view shows it: its git facts checked again when its branches moved. */
async function freshMergeRequest(ctx: PageContext, page: ProjectPage, mr: MergeRequest): Promise<MergeRequest> {
  if (mr.state_id === MR_STATE.opened && (mr.merge_status === 'unchecked' || mr.merge_status === 'cannot_be_merged_recheck')) {
    return refreshMergeRequest(ctx.cairn, mr, page.project);
  }
  return mr;
}

type Tab = 'overview' | 'commits' | 'diffs';

/** The title, state, branches and tabs shared by the three tabs. */
function mrHeader(page: ProjectPage, l: Loaded, extras: HeaderFacts, tab: Tab, counts: { notes: number; commits: number | null; changes: number | null }): SafeHtml {
  const { mr, base } = l;
  const tree = (branch: string) => `${projectPath(page)}/-/tree/${pathUrl(branch)}`;
  const source = extras.sourceProjectFullPath
    ? html`<span class="mono branch">${extras.sourceProjectFullPath}:${mr.source_branch}</span>`
    : html`<a class="mono branch" href="${tree(mr.source_branch)}">${mr.source_branch}</a>`;
  const tabLink = (key: Tab, href: string, text: string, count: number | null) =>
    html`<a href="${href}"${key === tab ? trusted(' aria-current="page"') : ''}>${text}${count !== null ? html`<span class="count">${count}</span>` : ''}</a>`;
  return html`<div class="mr-head"><h1>${mr.title} <span class="muted">!${mr.iid}</span></h1>
<p class="row">${stateBadge(mr)}<span>${userLink(extras.author)} requested to merge ${source} into <a class="mono branch" href="${tree(mr.target_branch)}">${mr.target_branch}</a> ${timeAgo(mr.created_at)}</span></p>
<nav class="tabs" aria-label="Merge request">${tabLink('overview', base, 'Overview', counts.notes)}${tabLink('commits', `${base}/commits`, 'Commits', counts.commits)}${tabLink('diffs', `${base}/diffs`, 'Changes', counts.changes)}</nav></div>`;
}

/** What the header shows of the people and projects: the author, and the source project of a fork. */
type HeaderFacts = Pick<MergeRequestExtras, 'author' | 'sourceProjectFullPath'>;

/** The header's facts alone (the changes tab needs no more): one statement, two for a fork's merge request. */
async function headerFactsOf(ctx: PageContext, mr: MergeRequest): Promise<HeaderFacts> {
  const db = ctx.cairn.db;
  const [author, source] = await Promise.all([
    mr.author_id === null ? undefined : findUserById(db, mr.author_id),
    mr.source_project_id === null || mr.source_project_id === mr.target_project_id
      ? undefined
      : db.selectFrom('projects as p').innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
        .select(sql<string>`n.full_path || '/' || p.path`.as('full_path')).where('p.id', '=', mr.source_project_id).executeTakeFirst(),
  ]);
  return { author: author ?? null, sourceProjectFullPath: source?.full_path ?? null };
}

/** Every thread of the merge request with its notes, in one statement. */
async function threadsOf(ctx: PageContext, target: NoteTarget): Promise<Discussion[]> {
  return groupDiscussions(await notesOfNoteable(ctx.cairn.db, target.scope, MAX_NOTES));
}

/** How many comments (not system notes) the threads hold: the Overview tab's count. */
const commentCount = (discussions: Discussion[]) => discussions.reduce((n, d) => n + d.notes.filter((x) => !x.system).length, 0);

async function extrasOf(ctx: PageContext, mr: MergeRequest): Promise<MergeRequestExtras> {
  return (await loadMergeRequestExtras(ctx.cairn.db, [mr], () => null)).get(mr.id)!;
}

/** How many commits and changed files the merge request has (git, two short calls). */
async function gitCounts(ctx: PageContext, page: ProjectPage, mr: MergeRequest): Promise<{ commits: number | null; changes: number | null }> {
  if (!mr.head_sha) return { commits: 0, changes: 0 };
  const gitDir = gitDirOf(ctx, page);
  const [from, head] = [mr.base_sha ?? mr.start_sha, mr.head_sha];
  return cachedByContent(`counts\u0000${gitDir}\u0000${from}\u0000${head}`, async () => {
    const [commits, changes] = await Promise.all([
      commitsBetween(gitDir, from, head, { limit: 10_000 }).then((l) => l.length).catch(() => null),
      mr.base_sha ? changedPathCount(gitDir, mr.base_sha, head).catch(() => null) : Promise.resolve(0),
    ]);
    return { commits, changes };
  }, () => 64, (c) => c.commits !== null && c.changes !== null);
}

/** Close and reopen: the author, or update_merge_request (the API's PUT). */
function mayUpdate(ctx: PageContext, page: ProjectPage, mr: MergeRequest): boolean {
  return !!ctx.user && (mr.author_id === ctx.user.id || page.can('update_merge_request'));
}

function csrf(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="authenticity_token" value="${ctx.csrfToken}">`;
}

// ---- diff threads

function positionOf(n: NoteWithAuthor): DiffPosition | null {
  const p = n.position as DiffPosition | null;
  return n.type === 'DiffNote' && p && typeof p === 'object' && 'position_type' in p ? p : null;
}

/**
 * A diff thread is on the merge request's current diff when it was made on the same diff refs
 * (base and head); others are outdated (the source branch moved since), listed on the overview.
 */
function isActive(p: DiffPosition, mr: MergeRequest): boolean {
  return p.head_sha === mr.head_sha && p.base_sha === mr.base_sha;
}

/** Where a diff thread was started, above it on the overview: a link to its line, or "outdated". */
function diffContext(l: Loaded, p: DiffPosition, active: boolean): SafeHtml {
  const path = p.new_path ?? p.old_path ?? '';
  const line = p.new_line ?? p.old_line;
  const code = lineCode(path, p.old_line ?? null, p.new_line ?? null);
  const where = html`<span class="mono">${path}</span>${line ? html`, line ${line}` : ''}`;
  return html`<p class="thread-context small">${active
    ? html`Started a thread on <a href="${l.base}/diffs#${code}">${where}</a>`
    : html`<span class="badge">Outdated</span> Started a thread on an old version of the diff: ${where}`}</p>`;
}

// ---- overview

const BLOCKER_TEXT: Record<MergeBlocker, string> = {
  not_open: 'This merge request is not open.',
  not_allowed: 'You do not have the permission to merge into the target branch.',
  draft_status: 'Merge blocked: this merge request is a draft. Remove "Draft:" from its title to mark it ready.',
  checking: 'Checking whether the branches merge…',
  conflict: 'Merge blocked: the source branch has conflicts with the target branch. Resolve them locally and push.',
  discussions_not_resolved: 'Merge blocked: all threads must be resolved.',
  ci_must_pass: 'Merge blocked: the pipeline must succeed.',
  need_rebase: 'Merge blocked: fast-forward merge is not possible. Rebase the source branch onto the target branch.',
};

async function headPipeline(ctx: PageContext, page: ProjectPage, mr: MergeRequest) {
  if (mr.head_pipeline_id === null || !page.can('read_pipeline')) return null;
  const p = await ctx.cairn.db.selectFrom('ci_pipelines').select(['id', 'status', 'sha', 'project_id']).where('id', '=', mr.head_pipeline_id).executeTakeFirst();
  return p && p.sha === mr.head_sha ? p : null;
}

/** The merge widget: the head pipeline, approvals, and the merge form or why there is none. */
async function mergeWidget(ctx: PageContext, page: ProjectPage, l: Loaded, extras: MergeRequestExtras, error?: string): Promise<SafeHtml> {
  const { mr } = l;
  const [pipeline, approvers, blockers] = await Promise.all([
    headPipeline(ctx, page, mr),
    approvalsOf(ctx.cairn, mr),
    mergeBlockers(ctx.cairn, l.access, ctx.user, mr),
  ]);
  const parts: SafeHtml[] = [];
  if (pipeline) {
    const href = pipeline.project_id === page.project.id ? `${projectPath(page)}/-/pipelines/${pipeline.id}` : null;
    parts.push(html`<div class="row widget-row"><strong>Pipeline</strong>${href ? html`<a href="${href}">#${pipeline.id}</a>` : html`#${pipeline.id}`}<span class="badge ${pipeline.status}" data-pipeline-status>${pipeline.status}</span><span class="muted small">for <span class="sha">${mr.head_sha?.slice(0, 8)}</span></span></div>`);
  }
  if (approvers.length) {
    parts.push(html`<div class="row widget-row"><strong>Approved by</strong>${approvers.map((u) => html`<span>${avatar(u)} ${userLink(u)}</span>`)}</div>`);
  }
  if (error) parts.push(html`<div class="alert error" role="alert">${error}</div>`);
  if (mr.state_id === MR_STATE.merged) {
    parts.push(html`<div class="widget-row"><p class="mt0"><span class="badge merged">Merged</span> by ${userLink(extras.mergeUser)} ${timeAgo(mr.merged_at)}</p>
${mr.merge_commit_sha ? html`<p class="small">The changes were merged into <span class="mono">${mr.target_branch}</span> with <a class="sha" href="${projectPath(page)}/-/commit/${mr.merge_commit_sha}">${mr.merge_commit_sha.slice(0, 8)}</a>.</p>` : ''}</div>`);
  } else if (mr.state_id === MR_STATE.closed) {
    parts.push(html`<div class="widget-row"><p class="mt0"><span class="badge closed">Closed</span> by ${userLink(extras.closedBy)} ${timeAgo(mr.closed_at)}. The changes were not merged into <span class="mono">${mr.target_branch}</span>.</p></div>`);
  } else if (mr.state_id === MR_STATE.locked) {
    parts.push(html`<div class="widget-row"><p class="mt0"><span class="badge running">Merging</span> This merge request is being merged.</p></div>`);
  } else if (blockers.length === 0) {
    const s = (page.project.settings ?? {}) as Record<string, unknown>;
    const squashOption = String(s.squash_option ?? 'default_off');
    const removeDefault = (mr.merge_params as Record<string, unknown> | null)?.force_remove_source_branch === true;
    const squash = squashOption === 'never'
      ? html``
      : squashOption === 'always'
        ? html`<label class="check"><input type="checkbox" name="squash" value="true" checked disabled> Squash commits (required by this project)</label>`
        : html`<label class="check"><input type="checkbox" name="squash" value="true"${mr.squash ? trusted(' checked') : ''}> Squash commits</label>`;
    parts.push(html`<form method="post" action="${l.base}/merge" class="widget-row merge-form">${csrf(ctx)}<input type="hidden" name="sha" value="${mr.head_sha ?? ''}">
<p class="mt0"><span class="badge success">Ready to merge</span></p>
<label class="check"><input type="checkbox" name="should_remove_source_branch" value="true"${removeDefault ? trusted(' checked') : ''}> Delete source branch</label>
${squash}
<div class="row"><button type="submit" class="ok" data-merge>Merge</button></div></form>`);
  } else {
    const shown = ctx.user ? blockers : blockers.filter((b) => b !== 'not_allowed');
    parts.push(html`<div class="widget-row"><p class="mt0"><strong>This merge request cannot be merged now.</strong></p><ul class="blockers">${shown.map((b) => html`<li data-blocker="${b}">${BLOCKER_TEXT[b]}</li>`)}${ctx.user ? '' : html`<li><a href="${signInLocation(ctx)}">Sign in</a> to merge.</li>`}</ul></div>`);
  }
  if (mr.merge_error && mr.state_id === MR_STATE.opened) parts.push(html`<p class="alert warn">${mr.merge_error}</p>`);
  return html`<section class="card merge-widget" aria-label="Merge">${parts}</section>`;
}

function stateButtons(ctx: PageContext, page: ProjectPage, l: Loaded): SafeHtml {
  const { mr } = l;
  if (!mayUpdate(ctx, page, mr)) return html``;
  const button = (event: 'close' | 'reopen', text: string) =>
    html`<form method="post" action="${l.base}" class="inline">${csrf(ctx)}<input type="hidden" name="merge_request[state_event]" value="${event}"><button type="submit" class="secondary">${text}</button></form>`;
  if (mr.state_id === MR_STATE.opened) return button('close', 'Close merge request');
  if (mr.state_id === MR_STATE.closed) return button('reopen', 'Reopen merge request');
  return html``;
}

function detailsCard(extras: MergeRequestExtras): SafeHtml {
  const people = (users: User[]) => (users.length ? html`${users.map((u, i) => html`${i ? ', ' : ''}${userLink(u)}`)}` : html`<span class="muted">None</span>`);
  return html`<aside class="issuable-side card" aria-label="Merge request details"><dl class="side-facts"><dt>Assignees</dt><dd>${people(extras.assignees)}</dd><dt>Reviewers</dt><dd>${people(extras.reviewers)}</dd>
<dt>Labels</dt><dd>${extras.labels.length ? labelBadges(extras) : html`<span class="muted">None</span>`}</dd>
${extras.milestone ? html`<dt>Milestone</dt><dd>${(extras.milestone as { title?: string }).title ?? ''}</dd>` : ''}</dl></aside>`;
}

interface OverviewOptions {
  status?: number;
  /** A refused merge or state change, shown in the merge widget. */
  error?: string;
  /** A refused comment and its text, shown in the comment form. */
  commentError?: string;
  draft?: string;
  loaded?: Loaded;
}

async function overview(ctx: PageContext, page: ProjectPage, opts: OverviewOptions = {}) {
  const loaded = opts.loaded ?? (await loadMergeRequest(ctx, page));
  const l = { ...loaded, mr: await freshMergeRequest(ctx, page, loaded.mr) };
  const { mr } = l;
  const [extras, counts, discussions] = await Promise.all([extrasOf(ctx, mr), gitCounts(ctx, page, mr), threadsOf(ctx, l.target)]);
  const [widget, awards] = await Promise.all([mergeWidget(ctx, page, l, extras, opts.error), loadNoteAwards(ctx, discussions)]);
  let outdated = 0;
  const activity = discussions.map((d) => {
    const p = positionOf(d.notes[0]);
    if (!p) return renderDiscussion(ctx, d, { target: l.target, awards });
    const active = isActive(p, mr);
    if (!active) outdated++;
    return html`<div class="diff-thread${active ? '' : ' outdated'}">${diffContext(l, p, active)}${renderDiscussion(ctx, d, { target: l.target, awards, showPosition: false })}</div>`;
  });
  return sendPage(ctx, {
    status: opts.status,
    title: `${mr.title} (!${mr.iid})`,
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests', `${projectPath(page)}/-/merge_requests`], [`!${mr.iid}`]),
    body: html`${mrHeader(page, l, extras, 'overview', { notes: extras.userNotesCount, ...counts })}
<div class="issuable"><div class="issuable-main">
${mr.description ? html`<section class="card md description" aria-label="Description">${trusted(renderMarkdown(mr.description))}</section>` : ''}
${widget}
<div class="row state-actions">${stateButtons(ctx, page, l)}</div>
<h2 id="activity">Activity${outdated ? html` <span class="muted small">(${outdated} outdated thread${outdated === 1 ? '' : 's'})</span>` : ''}</h2>
${activity.length ? html`<div class="discussions">${activity}</div>` : html`<p class="muted">No comments yet.</p>`}
${renderCommentForm(ctx, l.target, { error: opts.commentError, draft: opts.draft })}
</div>${detailsCard(extras)}</div>`,
  });
}

// ---- commits

async function commitsTab(ctx: PageContext, page: ProjectPage) {
  const l = await loadMergeRequest(ctx, page);
  const { mr } = l;
  const gitDir = gitDirOf(ctx, page);
  const oids = mr.head_sha ? (await commitsBetween(gitDir, mr.base_sha ?? mr.start_sha, mr.head_sha, { limit: 10_000 }).catch(() => [] as string[])).reverse() : [];
  const shown = oids.slice(0, 100);
  const [extras, commits, changes] = await Promise.all([
    extrasOf(ctx, mr),
    readCommitsOnce(gitDir, shown),
    mr.head_sha && mr.base_sha ? changedPathCount(gitDir, mr.base_sha, mr.head_sha).catch(() => null) : Promise.resolve(0),
  ]);
  const items = commits.map((c) => html`<li><div><a class="title" href="${projectPath(page)}/-/commit/${c.oid}">${c.message.split('\n')[0]}</a>
<div class="meta">${c.author.name} authored ${timeAgo(new Date(c.author.time * 1000))}</div></div><a class="sha" href="${projectPath(page)}/-/commit/${c.oid}">${c.oid.slice(0, 8)}</a></li>`);
  return sendPage(ctx, {
    title: `Commits · ${mr.title} (!${mr.iid})`,
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests', `${projectPath(page)}/-/merge_requests`], [`!${mr.iid}`, l.base], ['Commits']),
    body: html`${mrHeader(page, l, extras, 'commits', { notes: extras.userNotesCount, commits: oids.length, changes })}
${items.length ? html`<ul class="list">${items}</ul>` : html`<p class="empty">No commits.</p>`}
${oids.length > shown.length ? html`<p class="muted">${oids.length - shown.length} more commits are not shown.</p>` : ''}`,
  });
}

// ---- changes

function diffFileOf(e: DiffEntry): DiffFile {
  return {
    oldPath: e.old_path, newPath: e.new_path, aMode: e.a_mode, bMode: e.b_mode, newFile: e.new_file, renamedFile: e.renamed_file,
    deletedFile: e.deleted_file, diff: e.diff, tooLarge: e.too_large, collapsed: e.collapsed,
  };
}

/** The key of a diff line: its file (new path) and its old and new numbers, as a DiffNote's position names them. */
const lineKey = (path: string, oldLine: number | null | undefined, newLine: number | null | undefined) => `${path}\u0000${oldLine ?? ''}\u0000${newLine ?? ''}`;

const DIFF_VIEW_COOKIE = 'diff_view';

/**
 * The diff view: `?view=inline|parallel` (remembered in GitLab's `diff_view` cookie, so a form's
 * redirect comes back to the same view), else the cookie's, else inline.
 */
function diffViewFor(ctx: PageContext): DiffView {
  const asked = ctx.query.view;
  if (asked === 'inline' || asked === 'parallel') {
    if (parseCookies(ctx.request.headers.cookie)[DIFF_VIEW_COOKIE] !== asked) {
      ctx.reply.header('set-cookie', `${DIFF_VIEW_COOKIE}=${asked}; Path=/; SameSite=Lax; Max-Age=31536000`);
    }
    return asked;
  }
  return diffViewOf({ view: parseCookies(ctx.request.headers.cookie)[DIFF_VIEW_COOKIE] ?? '' });
}

/**
 * Diffs and counts between two commits never change, nor does the HTML of a diff file without
 * threads, so they are kept by the repository and the two commit ids (content-addressed: every
 * process computes the same, nothing goes stale), in a small LRU bounded by their size. Viewing a
 * merge request again runs no git and renders only the files that have threads.
 */
const contentCache = renderCache.partition<unknown>('merge-request', { maxShare: 1 / 8 });

function cachedByContent<T>(key: string, compute: () => Promise<T>, sizeOf: (value: T) => number, keep: (value: T) => boolean = () => true): Promise<T> {
  return contentCache.getOrCompute(key, compute, sizeOf as (value: unknown) => number, keep as (value: unknown) => boolean) as Promise<T>;
}

interface MergeRequestDiff {
  files: DiffFile[];
  overflow: boolean;
  additions: number;
  deletions: number;
  /** What identifies this diff for good: the repository and the two commits. */
  key: string;
}

/** The merge request's diff (its latest version: base_sha..head_sha, as GET .../diffs and .../changes). */
function mergeRequestDiff(ctx: PageContext, page: ProjectPage, mr: MergeRequest): Promise<MergeRequestDiff> {
  if (!mr.head_sha || !mr.base_sha) return Promise.resolve({ files: [], overflow: false, additions: 0, deletions: 0, key: '' });
  const gitDir = gitDirOf(ctx, page);
  const [base, head] = [mr.base_sha, mr.head_sha];
  const key = `diff\u0000${gitDir}\u0000${base}\u0000${head}`;
  return cachedByContent(key, async () => {
    const d = await diffCommits(gitDir, base, head);
    const files = d.diffs.map(diffFileOf);
    let additions = 0;
    let deletions = 0;
    for (const f of files) {
      const n = diffStats(f);
      additions += n.additions;
      deletions += n.deletions;
    }
    return { files, overflow: d.overflow, additions, deletions, key };
  }, (d) => d.files.reduce((n, f) => n + f.diff.length + f.newPath.length * 2 + 64, 0));
}

interface DiffsOptions {
  status?: number;
  /** A refused comment: why, its text, and the line it was for. */
  error?: string;
  draft?: string;
  lineCode?: string;
}

async function diffsTab(ctx: PageContext, page: ProjectPage, opts: DiffsOptions = {}, loaded?: Loaded) {
  const l = loaded ?? (await loadMergeRequest(ctx, page));
  const { mr } = l;
  const view = diffViewFor(ctx);
  // Few statements: the header's facts and the threads, each once (none per file or line).
  const [header, diff, discussions] = await Promise.all([
    headerFactsOf(ctx, mr),
    mergeRequestDiff(ctx, page, mr),
    threadsOf(ctx, l.diffsTarget),
  ]);
  const files = diff.files;
  // The threads on the current diff, by line.
  const onLine = new Map<string, Discussion[]>();
  for (const d of discussions) {
    const p = positionOf(d.notes[0]);
    if (!p || p.position_type !== 'text' || !isActive(p, mr)) continue;
    const key = lineKey(p.new_path ?? p.old_path ?? '', p.old_line, p.new_line);
    const list = onLine.get(key);
    if (list) list.push(d);
    else onLine.set(key, [d]);
  }
  const target = l.diffsTarget;
  const commenting = target.mayComment && !!mr.head_sha && !!mr.base_sha;
  const selected = opts.lineCode ?? (commenting ? param(ctx, 'line_code', 200) : '');
  // A link on every line, so kept short: relative to the changes tab (absolute on a form's answer, whose URL is another).
  const linkBase = ctx.request.method === 'GET' ? '' : `${l.base}/diffs`;
  const lineAction = commenting
    ? (ref: DiffLineRef) => html`<a class="comment-here" href="${linkBase}?line_code=${ref.lineCode}#${NEW_NOTE_ID}" aria-label="Comment on line ${ref.row.newLine ?? ref.row.oldLine}">+</a>`
    : undefined;
  let formShown = false;
  const lineExtras = (ref: DiffLineRef): SafeHtml | null => {
    const list = onLine.get(lineKey(ref.file.newPath, ref.row.oldLine, ref.row.newLine));
    // One form, under the first cell of its line (side by side shows a changed pair's extras once).
    const form = commenting && selected === ref.lineCode && !formShown ? newDiffNoteForm(ctx, l, ref, opts) : null;
    if (form) formShown = true;
    if (!list && !form) return null;
    return html`${list?.map((d) => renderDiscussion(ctx, d, { target, showPosition: false })) ?? ''}${form ?? ''}`;
  };
  // Files with no thread and no form look the same to every visitor who may (or may not) comment:
  // their HTML is kept with the diff's key; the others are rendered for this view.
  const threadPaths = new Set([...onLine.keys()].map((k) => k.split('\u0000')[0]));
  const selectedFile = selected.split('_')[0];
  const renderOpts = { view, lineAction, lineExtras };
  // Kept encoded (UTF-8), so a second view neither renders nor encodes them again.
  const rendered = await Promise.all(files.map((f, i) =>
    threadPaths.has(f.newPath) || fileHash(f.newPath) === selectedFile || linkBase || !diff.key
      ? renderDiffFile(f, renderOpts).then((h) => Buffer.from(h.value))
      : cachedByContent(`html\u0000${diff.key}\u0000${i}\u0000${view}\u0000${commenting}`, () => renderDiffFile(f, renderOpts).then((h) => Buffer.from(h.value)), (b) => b.length)));
  const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  const summary = html`<p class="muted">Showing <strong>${plural(files.length, 'changed file')}</strong> with <span class="added">${plural(diff.additions, 'addition')}</span> and <span class="removed">${plural(diff.deletions, 'deletion')}</span></p>`;
  const href = (to: DiffView) => `${l.base}/diffs?view=${to}`;
  // The page around the files, then the files' bytes in its place (a megabyte of diff is not
  // turned into one string and encoded again on every view).
  const page_ = renderPage(ctx, {
    title: `Changes · ${mr.title} (!${mr.iid})`,
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests', `${projectPath(page)}/-/merge_requests`], [`!${mr.iid}`, l.base], ['Changes']),
    body: html`${mrHeader(page, l, header, 'diffs', { notes: commentCount(discussions), commits: null, changes: files.length })}
${opts.error && !formShown ? html`<div class="alert error" role="alert">${opts.error}</div>` : ''}
<div class="spread">${viewSwitch(view, href)}${mr.head_sha ? html`<span class="muted small">Compared <span class="mono">${mr.target_branch}</span> with <span class="sha">${mr.head_sha.slice(0, 8)}</span></span>` : ''}</div>
${diff.overflow ? html`<p class="alert warn">This diff is too large to show in full: some files are collapsed or left out.</p>` : ''}
${files.length ? html`${summary}${trusted(FILES_MARK)}` : html`<p class="empty">No changes.</p>`}`,
  });
  const at = page_.indexOf(FILES_MARK);
  const bytes = at < 0
    ? Buffer.from(page_)
    : Buffer.concat([Buffer.from(page_.slice(0, at)), ...rendered, Buffer.from(page_.slice(at + FILES_MARK.length))]);
  return ctx.reply.code(opts.status ?? 200).headers(WEB_HEADERS).send(bytes);
}

/** Where the diff files go in the changes tab's page (a comment no escaped text can form). */
const FILES_MARK = '<!--cairn:diff-files-->';

/** The anchor of the (one) new thread form of the changes tab. */
const NEW_NOTE_ID = 'new-diff-note';

/** The form of a new thread on one diff line, with the position GitLab's API takes (the merge request's diff refs). */
function newDiffNoteForm(ctx: PageContext, l: Loaded, ref: DiffLineRef, opts: DiffsOptions): SafeHtml {
  const { mr } = l;
  const { row, file } = ref;
  const position: DiffPosition = {
    position_type: 'text', base_sha: mr.base_sha, start_sha: mr.start_sha, head_sha: mr.head_sha,
    old_path: file.oldPath, new_path: file.newPath, old_line: row.oldLine, new_line: row.newLine,
  };
  const mine = opts.lineCode === ref.lineCode;
  const form = renderCommentForm(ctx, l.diffsTarget, {
    hidden: { ...positionFields(position), line_code: ref.lineCode },
    thread: true,
    id: `diff-note-${ref.lineCode}`,
    label: `Comment on line ${row.newLine ?? row.oldLine} of ${file.newPath}`,
    error: mine ? opts.error : undefined,
    draft: mine ? opts.draft : undefined,
  });
  return html`<div class="diff-note-form" id="${NEW_NOTE_ID}">${form}<p class="small"><a href="${l.base}/diffs#${ref.lineCode}">Cancel</a></p></div>`;
}

// ---- writes

/** The message of an API error for a page (GitLab's bodies: message as text, list or fields). */
function errorText(e: ApiError): string {
  const body = e.body as { message?: unknown; error?: unknown };
  const m = body.message ?? body.error;
  if (Array.isArray(m)) return m.join(', ');
  return apiErrorText(e);
}

const truthy = (v: string) => v === 'true' || v === '1' || v === 'on';

/** POST .../merge: the API's PUT .../merge (the same service, the same checks and refusals). */
async function mergePost(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  const l = await loadMergeRequest(ctx, page);
  if (!(await canAccept(ctx.cairn, l.access, user, l.mr))) throw pageForbidden('You do not have the permission to merge into the target branch.');
  const sha = field(ctx, 'sha');
  try {
    await acceptMergeRequest(ctx.cairn, l.access, user, l.mr, {
      sha: sha || undefined,
      squash: truthy(field(ctx, 'squash')) || undefined,
      should_remove_source_branch: truthy(field(ctx, 'should_remove_source_branch')),
    });
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const fresh = (await findMergeRequest(ctx.cairn.db, page.project.id, l.mr.iid)) ?? l.mr;
    const message = e.status === 409
      ? 'The source branch changed since the page was loaded: review the changes, then merge again.'
      : `The merge request could not be merged (${errorText(e)}).`;
    return overview(ctx, page, { status: e.status === 409 ? 409 : 422, error: message, loaded: { ...l, mr: fresh } });
  }
  throw new PageRedirect(l.base, 303);
}

/** POST .../:iid with merge_request[state_event]=close|reopen: the API's PUT with state_event. */
async function updatePost(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  const l = await loadMergeRequest(ctx, page);
  if (!mayUpdate(ctx, page, l.mr)) throw pageForbidden();
  const fields = ctx.body.merge_request;
  const event = fields && typeof fields === 'object' && !Array.isArray(fields) ? (fields as Record<string, unknown>).state_event : undefined;
  if (event !== 'close' && event !== 'reopen') return overview(ctx, page, { status: 400, error: 'Nothing to change.', loaded: l });
  try {
    await updateMergeRequest(ctx.cairn, page.project, l.mr, user, { state_event: event });
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return overview(ctx, page, { status: e.status === 409 ? 409 : 422, error: errorText(e), loaded: l });
  }
  throw new PageRedirect(l.base, 303);
}

export function registerMergeRequestPages(pages: PageRegistry) {
  pages.globalPage('GET', '/dashboard/merge_requests', dashboardList);
  pages.projectPage('GET', 'merge_requests', projectList);
  pages.projectPage('GET', 'merge_requests/:iid', (ctx, page) => overview(ctx, page));
  pages.projectPage('GET', 'merge_requests/:iid/commits', commitsTab);
  pages.projectPage('GET', 'merge_requests/:iid/diffs', (ctx, page) => diffsTab(ctx, page));
  pages.projectPage('POST', 'merge_requests/:iid', updatePost);
  pages.projectPage('POST', 'merge_requests/:iid/merge', mergePost);
  // Comments, replies, threads on diff lines, resolve/unresolve: the discussions component's
  // actions (the notes services), posted from the overview or from the changes (and back there).
  registerNoteActions(pages, 'merge_requests/:iid', async (ctx, page) => (await loadMergeRequest(ctx, page)).target, {
    rerender: (ctx, page, error, draft) => overview(ctx, page, { status: 400, commentError: error, draft }),
  });
  registerNoteActions(pages, 'merge_requests/:iid/diffs', async (ctx, page) => (await loadMergeRequest(ctx, page)).diffsTarget, {
    rerender: (ctx, page, error, draft) =>
      diffsTab(ctx, page, { status: 400, error: `The comment could not be saved: ${error}`, draft, lineCode: field(ctx, 'line_code').slice(0, 200) }),
  });
}
