import type { User } from '../../db/schema/core.js';
import type { DiffPosition, NoteWithAuthor } from '../../db/schema/notes.js';
import type { MergeRequest } from '../../db/schema/work_items.js';
import { labelListParam } from '../../api/list_filters.js';
import {
  countMergeRequests, findMergeRequest, findMergeRequestPage, loadMergeRequestExtras, MERGE_REQUEST_COUNT_CAP, type MergeRequestFilters,
} from '../../finders/merge_requests.js';
import { listNotes } from '../../finders/notes.js';
import type { DiffFile } from '../../git/commits.js';
import { commitsBetween, diffCommits, readCommitsOnce, type DiffEntry } from '../../git/compare.js';
import { changedPathCount } from '../../git/merge.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { mergeRequestNoteable } from '../../noteables/merge_request.js';
import { ApiError } from '../../plugins/errors.js';
import { AccessLevel } from '../../policies/access.js';
import type { ProjectAccess } from '../../policies/projects.js';
import { isDraftTitle, MR_STATES, type MergeRequestExtras } from '../../presenters/merge_requests.js';
import { acceptMergeRequest, approvalsOf, canAccept, mergeBlockers, reconcileLocked, type MergeBlocker } from '../../services/merge.js';
import { MR_STATE, mergeRequestNoteScope, refreshMergeRequest, updateMergeRequest } from '../../services/merge_requests.js';
import { createNote, isResolvableNote, noteText, replyToDiscussion, setDiscussionResolved } from '../../services/notes.js';
import { field, pageForbidden, pageNotFound, PageRedirect, requireAbility, requireCsrf, requireUser, type PageContext, type ProjectPage } from '../context.js';
import { diffViewOf, lineCode, renderDiff, viewSwitch, type DiffLineRef, type DiffView } from '../diff.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, sendPage } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';

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
    labels: labelListParam(p.labels.length ? p.labels : undefined),
    targetBranch: p.target_branch || undefined,
    orderBy: order.orderBy,
    sort: order.sort,
  };
}

export function stateBadge(mr: Pick<MergeRequest, 'state_id' | 'title'>): SafeHtml {
  const state = MR_STATES[mr.state_id] ?? 'opened';
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
    ? html`<nav class="row pager" aria-label="Pages">${p.page > 1 ? html`<a class="button secondary small" href="${href}${listQuery(p, { page: p.page - 1 })}" rel="prev">Previous</a>` : ''}<span class="muted small">Page ${p.page}</span>${more ? html`<a class="button secondary small" href="${href}${listQuery(p, { page: p.page + 1 })}" rel="next">Next</a>` : ''}</nav>`
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
  base: string;
}

/** The merge request `:iid` of the project for the visitor: 404 unless they may read merge requests. */
async function loadMergeRequest(ctx: PageContext, page: ProjectPage): Promise<Loaded> {
  requireAbility(ctx, page, 'read_merge_request');
  const iid = Number(ctx.params.iid);
  if (!/^\d{1,9}$/.test(ctx.params.iid ?? '') || !Number.isSafeInteger(iid) || iid <= 0) throw pageNotFound();
  const access: ProjectAccess = { project: page.project, accessLevel: page.subject.accessLevel, user: ctx.user };
  let mr = await findMergeRequest(ctx.cairn.db, page.project.id, iid);
  if (!mr) throw pageNotFound();
  mr = await reconcileLocked(ctx.cairn, page.project, mr);
  return { mr, access, base: `${projectPath(page)}/-/merge_requests/${mr.iid}` };
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
function mrHeader(page: ProjectPage, l: Loaded, extras: MergeRequestExtras, tab: Tab, counts: { notes: number; commits: number | null; changes: number | null }): SafeHtml {
  const { mr, base } = l;
  const tree = (branch: string) => `${projectPath(page)}/-/tree/${pathUrl(branch)}`;
  const source = extras.sourceProjectFullPath ? html`${extras.sourceProjectFullPath}:${mr.source_branch}` : html`${mr.source_branch}`;
  const tabLink = (key: Tab, href: string, text: string, count: number | null) =>
    html`<a href="${href}"${key === tab ? trusted(' aria-current="page"') : ''}>${text}${count !== null ? html`<span class="count">${count}</span>` : ''}</a>`;
  return html`<div class="mr-head"><h1>${mr.title} <span class="muted">!${mr.iid}</span></h1>
<p class="row">${stateBadge(mr)}<span>${userLink(extras.author)} requested to merge <a class="mono branch" href="${extras.sourceProjectFullPath ? '#' : tree(mr.source_branch)}">${source}</a> into <a class="mono branch" href="${tree(mr.target_branch)}">${mr.target_branch}</a> ${timeAgo(mr.created_at)}</span></p>
<nav class="tabs" aria-label="Merge request">${tabLink('overview', base, 'Overview', counts.notes)}${tabLink('commits', `${base}/commits`, 'Commits', counts.commits)}${tabLink('diffs', `${base}/diffs`, 'Changes', counts.changes)}</nav></div>`;
}

async function extrasOf(ctx: PageContext, mr: MergeRequest): Promise<MergeRequestExtras> {
  return (await loadMergeRequestExtras(ctx.cairn.db, [mr], () => null)).get(mr.id)!;
}

/** How many commits and changed files the merge request has (git, two short calls). */
async function gitCounts(ctx: PageContext, page: ProjectPage, mr: MergeRequest): Promise<{ commits: number | null; changes: number | null }> {
  if (!mr.head_sha) return { commits: 0, changes: 0 };
  const gitDir = gitDirOf(ctx, page);
  const [commits, changes] = await Promise.all([
    commitsBetween(gitDir, mr.base_sha ?? mr.start_sha, mr.head_sha, { limit: 10_000 }).then((l) => l.length).catch(() => null),
    mr.base_sha ? changedPathCount(gitDir, mr.base_sha, mr.head_sha).catch(() => null) : Promise.resolve(0),
  ]);
  return { commits, changes };
}

/** All notes of the merge request with their authors, in threads (oldest first), in one statement. */
async function threadsOf(ctx: PageContext, mr: MergeRequest): Promise<NoteWithAuthor[][]> {
  const { notes } = await listNotes(ctx.cairn.db, mergeRequestNoteScope(mr), { orderBy: 'created_at', sort: 'asc', activity: 'all_notes' }, { offset: 0, limit: 5000 });
  const byThread = new Map<string, NoteWithAuthor[]>();
  for (const n of notes) {
    const list = byThread.get(n.discussion_id);
    if (list) list.push(n);
    else byThread.set(n.discussion_id, [n]);
  }
  return [...byThread.values()];
}

// ---- who may do what (the rules of the API's routes)

/** Comment: signed in, read the merge request; on a locked discussion, members only (api/notes/routes.ts). */
function mayComment(ctx: PageContext, page: ProjectPage, mr: MergeRequest): boolean {
  if (!ctx.user || !page.can('read_merge_request')) return false;
  if (mr.discussion_locked === true) return ctx.user.admin || page.subject.accessLevel >= AccessLevel.GUEST;
  return true;
}

/** Resolve a thread: the merge request's author or resolve_note (GitLab's Discussion#can_resolve?). */
function mayResolve(ctx: PageContext, page: ProjectPage, mr: MergeRequest, thread: NoteWithAuthor[]): boolean {
  if (!ctx.user || !thread.some((n) => isResolvableNote(n))) return false;
  return mr.author_id === ctx.user.id || page.can('resolve_note');
}

/** Close and reopen: the author, or update_merge_request (the API's PUT). */
function mayUpdate(ctx: PageContext, page: ProjectPage, mr: MergeRequest): boolean {
  return !!ctx.user && (mr.author_id === ctx.user.id || page.can('update_merge_request'));
}

// ---- discussions

/** Where a form goes back to after its post: one of the merge request's tabs, never a URL from the form. */
function backTo(l: Loaded, value: string, anchor: string): string {
  if (value === 'diffs' || value === 'diffs:inline') return `${l.base}/diffs#${anchor}`;
  if (value === 'diffs:parallel') return `${l.base}/diffs?view=parallel#${anchor}`;
  return `${l.base}#${anchor}`;
}

interface ThreadView {
  ctx: PageContext;
  page: ProjectPage;
  l: Loaded;
  /** The tab the thread is shown on ('overview', 'diffs:inline', 'diffs:parallel'). */
  back: string;
}

function noteHtml(n: NoteWithAuthor): SafeHtml {
  if (n.system) {
    return html`<div class="note system" id="note_${n.id}">${userLink(n.author)} <span class="md inline">${trusted(renderMarkdown(n.body))}</span> · ${timeAgo(n.created_at)}</div>`;
  }
  return html`<article class="note" id="note_${n.id}"><div class="row small">${n.author ? avatar(n.author) : ''}<span class="who">${userLink(n.author)}</span>${n.author ? html`<span class="muted">@${n.author.username}</span>` : ''}<span class="muted">· ${timeAgo(n.created_at)}</span></div>
<div class="md">${trusted(renderMarkdown(n.body))}</div></article>`;
}

function positionOf(n: NoteWithAuthor): DiffPosition | null {
  const p = n.position as DiffPosition | null;
  return n.type === 'DiffNote' && p && typeof p === 'object' && 'position_type' in p ? p : null;
}

/** A diff thread sits on the merge request's current diff (its diff refs are the merge request's). */
function isActive(p: DiffPosition, mr: MergeRequest): boolean {
  return p.head_sha === mr.head_sha && p.base_sha === mr.base_sha;
}

function csrf(ctx: PageContext): SafeHtml {
  return html`<input type="hidden" name="authenticity_token" value="${ctx.csrfToken}">`;
}

/** One thread: its notes, who resolved it, a reply form and the Resolve/Unresolve button. */
function renderThread(v: ThreadView, thread: NoteWithAuthor[], opts: { context?: SafeHtml } = {}): SafeHtml {
  const first = thread[0];
  if (first.system && thread.length === 1) return noteHtml(first);
  const { ctx, page, l } = v;
  const resolvable = thread.some((n) => isResolvableNote(n));
  const resolved = resolvable && thread.filter((n) => isResolvableNote(n)).every((n) => n.resolved_at);
  const resolver = resolved ? thread.find((n) => n.resolved_by)?.resolved_by : null;
  const action = `${l.base}/discussions/${first.discussion_id}`;
  const canReply = mayComment(ctx, page, l.mr) && !first.system;
  const canResolve = mayResolve(ctx, page, l.mr, thread);
  const reply = canReply
    ? html`<details class="reply"><summary>Reply…</summary><form method="post" action="${action}/notes">${csrf(ctx)}<input type="hidden" name="back" value="${v.back}">
<label for="reply-${first.discussion_id}-${v.back}">Reply</label><textarea id="reply-${first.discussion_id}-${v.back}" name="note[note]" required></textarea>
<div class="row"><button type="submit">Reply</button></div></form></details>`
    : html``;
  const resolve = canResolve
    ? html`<form method="post" action="${action}/${resolved ? 'unresolve' : 'resolve'}" class="inline">${csrf(ctx)}<input type="hidden" name="back" value="${v.back}"><button type="submit" class="secondary small">${resolved ? 'Unresolve thread' : 'Resolve thread'}</button></form>`
    : html``;
  const status = resolvable
    ? html`<div class="row small thread-status">${resolved ? html`<span class="badge success">Resolved</span>${resolver ? html`<span class="muted">by ${resolver.name}</span>` : ''}` : html`<span class="badge warn">Unresolved</span>`}${resolve}</div>`
    : html``;
  return html`<section class="discussion${resolved ? ' resolved' : ''}" id="discussion_${first.discussion_id}" aria-label="Thread">${opts.context ?? ''}${thread.map(noteHtml)}<div class="thread-foot">${status}${reply}</div></section>`;
}

function diffContext(v: ThreadView, p: DiffPosition, active: boolean): SafeHtml {
  const path = p.new_path ?? p.old_path ?? '';
  const line = p.new_line ?? p.old_line;
  const code = lineCode(path, p.old_line ?? null, p.new_line ?? null);
  const where = html`<span class="mono">${path}</span>${line ? html`, line ${line}` : ''}`;
  return html`<header class="thread-context row small">${active ? html`Started a thread on <a href="${v.l.base}/diffs#${code}">${where}</a>` : html`<span class="badge">Outdated</span> Started a thread on an old version of the diff: ${where}`}</header>`;
}

function commentForm(ctx: PageContext, l: Loaded): SafeHtml {
  return html`<form method="post" action="${l.base}/discussions" class="card comment-form">${csrf(ctx)}<input type="hidden" name="back" value="overview">
<label for="note-body" class="mt0">Comment</label><textarea id="note-body" name="note[note]" required placeholder="Write a comment (Markdown)"></textarea>
<label class="check"><input type="checkbox" name="note[type]" value="DiscussionNote"> Start a thread (resolvable)</label>
<div class="row"><button type="submit">Comment</button></div></form>`;
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
    const removeDefault = (mr.merge_params as Record<string, unknown>)?.force_remove_source_branch === true;
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
    parts.push(html`<div class="widget-row"><p class="mt0"><strong>This merge request cannot be merged now.</strong></p><ul class="blockers">${shown.map((b) => html`<li data-blocker="${b}">${BLOCKER_TEXT[b]}</li>`)}${ctx.user ? '' : html`<li><a href="/users/sign_in?redirect_to=${encodeURIComponent(l.base)}">Sign in</a> to merge.</li>`}</ul></div>`);
  }
  if (mr.merge_error && mr.state_id === MR_STATE.opened) parts.push(html`<p class="alert warn">${mr.merge_error}</p>`);
  return html`<section class="card merge-widget" aria-label="Merge">${parts}</section>`;
}

function stateButtons(ctx: PageContext, page: ProjectPage, l: Loaded): SafeHtml {
  const { mr } = l;
  if (!mayUpdate(ctx, page, mr)) return html``;
  const button = (event: 'close' | 'reopen', text: string, cls: string) =>
    html`<form method="post" action="${l.base}" class="inline">${csrf(ctx)}<input type="hidden" name="merge_request[state_event]" value="${event}"><button type="submit" class="${cls}">${text}</button></form>`;
  if (mr.state_id === MR_STATE.opened) return button('close', 'Close merge request', 'secondary');
  if (mr.state_id === MR_STATE.closed) return button('reopen', 'Reopen merge request', 'secondary');
  return html``;
}

function detailsCard(extras: MergeRequestExtras): SafeHtml {
  const people = (users: User[]) => (users.length ? html`${users.map((u, i) => html`${i ? ', ' : ''}${userLink(u)}`)}` : html`<span class="muted">None</span>`);
  return html`<dl class="facts card mr-facts"><dt>Assignees</dt><dd>${people(extras.assignees)}</dd><dt>Reviewers</dt><dd>${people(extras.reviewers)}</dd>
<dt>Labels</dt><dd>${extras.labels.length ? labelBadges(extras) : html`<span class="muted">None</span>`}</dd>
${extras.milestone ? html`<dt>Milestone</dt><dd>${(extras.milestone as { title?: string }).title ?? ''}</dd>` : ''}</dl>`;
}

async function overview(ctx: PageContext, page: ProjectPage, opts: { error?: string; status?: number; loaded?: Loaded } = {}) {
  const loaded = opts.loaded ?? (await loadMergeRequest(ctx, page));
  const l = { ...loaded, mr: await freshMergeRequest(ctx, page, loaded.mr) };
  const { mr } = l;
  const [extras, counts, threads] = await Promise.all([extrasOf(ctx, mr), gitCounts(ctx, page, mr), threadsOf(ctx, mr)]);
  const widget = await mergeWidget(ctx, page, l, extras, opts.error);
  const v: ThreadView = { ctx, page, l, back: 'overview' };
  const activity = threads.map((thread) => {
    const p = positionOf(thread[0]);
    return renderThread(v, thread, p ? { context: diffContext(v, p, isActive(p, mr)) } : {});
  });
  const outdated = threads.filter((t) => {
    const p = positionOf(t[0]);
    return p && !isActive(p, mr);
  }).length;
  return sendPage(ctx, {
    status: opts.status,
    title: `${mr.title} (!${mr.iid})`,
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests', `${projectPath(page)}/-/merge_requests`], [`!${mr.iid}`]),
    body: html`${mrHeader(page, l, extras, 'overview', { notes: extras.userNotesCount, ...counts })}
${detailsCard(extras)}
${mr.description ? html`<section class="card md description" aria-label="Description">${trusted(renderMarkdown(mr.description))}</section>` : ''}
${widget}
<div class="row state-actions">${stateButtons(ctx, page, l)}</div>
<h2 id="activity">Activity${outdated ? html` <span class="muted small">(${outdated} outdated thread${outdated === 1 ? '' : 's'})</span>` : ''}</h2>
<div class="discussions">${activity.length ? activity : html`<p class="muted">No comments yet.</p>`}</div>
${mayComment(ctx, page, mr) ? commentForm(ctx, l) : ctx.user ? '' : html`<p class="muted"><a href="/users/sign_in?redirect_to=${encodeURIComponent(l.base)}">Sign in</a> to comment.</p>`}`,
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

/** The key of a diff line: its file (new path) and its old and new numbers, as a DiffNote's position names it. */
const lineKey = (path: string, oldLine: number | null | undefined, newLine: number | null | undefined) => `${path}\u0000${oldLine ?? ''}\u0000${newLine ?? ''}`;

interface DiffsOptions {
  status?: number;
  error?: string;
  /** The text of a comment that was refused, shown again in its form. */
  draft?: string;
  lineCode?: string;
}

async function diffsTab(ctx: PageContext, page: ProjectPage, opts: DiffsOptions = {}, loaded?: Loaded) {
  const l = loaded ?? (await loadMergeRequest(ctx, page));
  const { mr } = l;
  const view: DiffView = diffViewOf(ctx.query);
  const back = `diffs:${view}`;
  const [extras, diff, threads] = await Promise.all([
    extrasOf(ctx, mr),
    mr.head_sha && mr.base_sha ? diffCommits(gitDirOf(ctx, page), mr.base_sha, mr.head_sha) : Promise.resolve({ diffs: [], overflow: false }),
    threadsOf(ctx, mr),
  ]);
  const files = diff.diffs.map(diffFileOf);
  // The threads on the current diff, by line: loaded once for every file.
  const onLine = new Map<string, NoteWithAuthor[][]>();
  for (const thread of threads) {
    const p = positionOf(thread[0]);
    if (!p || p.position_type !== 'text' || !isActive(p, mr)) continue;
    const key = lineKey(p.new_path ?? p.old_path ?? '', p.old_line, p.new_line);
    const list = onLine.get(key);
    if (list) list.push(thread);
    else onLine.set(key, [thread]);
  }
  const commenting = mayComment(ctx, page, mr) && !!mr.head_sha && !!mr.base_sha;
  const selected = opts.lineCode ?? (commenting ? param(ctx, 'line_code', 200) : '');
  const v: ThreadView = { ctx, page, l, back };
  const viewParam = view === 'parallel' ? 'view=parallel&' : '';
  const lineAction = commenting
    ? (ref: DiffLineRef) => {
        const n = ref.row.newLine ?? ref.row.oldLine;
        return html`<a class="comment-here" href="${l.base}/diffs?${viewParam}line_code=${ref.lineCode}#note-form-${ref.lineCode}" aria-label="Comment on line ${n}" title="Comment on this line">+</a>`;
      }
    : undefined;
  const lineExtras = (ref: DiffLineRef): SafeHtml | null => {
    const list = onLine.get(lineKey(ref.file.newPath, ref.row.oldLine, ref.row.newLine)) ?? [];
    const form = commenting && selected === ref.lineCode ? newDiffNoteForm(ctx, l, ref, back, opts) : null;
    if (!list.length && !form) return null;
    return html`${list.map((t) => renderThread(v, t))}${form ?? ''}`;
  };
  const body = await renderDiff(files, { view, lineAction, lineExtras });
  const href = (to: DiffView) => `${l.base}/diffs${to === 'parallel' ? '?view=parallel' : ''}`;
  return sendPage(ctx, {
    status: opts.status,
    title: `Changes · ${mr.title} (!${mr.iid})`,
    project: page,
    section: 'merge_requests',
    breadcrumbs: projectCrumbs(page, ['Merge requests', `${projectPath(page)}/-/merge_requests`], [`!${mr.iid}`, l.base], ['Changes']),
    body: html`${mrHeader(page, l, extras, 'diffs', { notes: extras.userNotesCount, commits: null, changes: files.length })}
${opts.error ? html`<div class="alert error" role="alert">${opts.error}</div>` : ''}
<div class="spread">${viewSwitch(view, href)}${mr.head_sha ? html`<span class="muted small">Compared <span class="mono">${mr.target_branch}</span> with <span class="sha">${mr.head_sha.slice(0, 8)}</span></span>` : ''}</div>
${diff.overflow ? html`<p class="alert warn">This diff is too large to show in full: some files are collapsed or left out.</p>` : ''}
${files.length ? body : html`<p class="empty">No changes.</p>`}`,
  });
}

/** The form of a new thread on one diff line, with the position GitLab's API takes. */
function newDiffNoteForm(ctx: PageContext, l: Loaded, ref: DiffLineRef, back: string, opts: DiffsOptions): SafeHtml {
  const { mr } = l;
  const { row, file } = ref;
  const hidden = (name: string, value: string | number | null) => html`<input type="hidden" name="position[${name}]" value="${value ?? ''}">`;
  const n = row.newLine ?? row.oldLine;
  return html`<form method="post" action="${l.base}/discussions" class="diff-note-form" id="note-form-${ref.lineCode}">${csrf(ctx)}
<input type="hidden" name="back" value="${back}"><input type="hidden" name="line_code" value="${ref.lineCode}">
${hidden('base_sha', mr.base_sha)}${hidden('start_sha', mr.start_sha)}${hidden('head_sha', mr.head_sha)}${hidden('position_type', 'text')}
${hidden('old_path', file.oldPath)}${hidden('new_path', file.newPath)}${hidden('old_line', row.oldLine)}${hidden('new_line', row.newLine)}
${opts.error && opts.lineCode === ref.lineCode ? html`<p class="alert error" role="alert">${opts.error}</p>` : ''}
<label for="diff-note-${ref.lineCode}">Comment on line ${n} of <span class="mono">${file.newPath}</span></label>
<textarea id="diff-note-${ref.lineCode}" name="note[note]" required>${opts.draft ?? ''}</textarea>
<div class="row"><button type="submit">Start a thread</button><a href="${l.base}/diffs${back === 'diffs:parallel' ? '?view=parallel' : ''}#${ref.lineCode}">Cancel</a></div></form>`;
}

// ---- writes

/** The text of a note form (`note[note]`, or `body`). */
function noteBody(ctx: PageContext): string {
  const note = ctx.body.note;
  if (note && typeof note === 'object' && !Array.isArray(note) && typeof (note as Record<string, unknown>).note === 'string') return (note as Record<string, string>).note;
  return field(ctx, 'body');
}

function noteTypeField(ctx: PageContext): string {
  const note = ctx.body.note;
  return note && typeof note === 'object' && !Array.isArray(note) && typeof (note as Record<string, unknown>).type === 'string' ? (note as Record<string, string>).type : '';
}

/** `position[...]` of the form as the API's DiffPosition; null when the form has none. */
function positionField(ctx: PageContext): DiffPosition | null {
  const raw = ctx.body.position;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return null;
  const p = raw as Record<string, unknown>;
  const str = (k: string) => (typeof p[k] === 'string' && p[k] !== '' ? (p[k] as string) : null);
  const num = (k: string) => {
    const s = str(k);
    return s !== null && /^\d{1,9}$/.test(s) ? Number(s) : null;
  };
  return {
    base_sha: str('base_sha'), start_sha: str('start_sha'), head_sha: str('head_sha'),
    old_path: str('old_path'), new_path: str('new_path'), position_type: 'text', old_line: num('old_line'), new_line: num('new_line'),
  };
}

/** The message of an API error for a page (GitLab's bodies: message as text, list or fields). */
function errorText(e: ApiError): string {
  const body = e.body as { message?: unknown; error?: unknown };
  const m = body.message ?? body.error;
  if (Array.isArray(m)) return m.join(', ');
  if (m && typeof m === 'object') return Object.entries(m).map(([k, v]) => `${k} ${[v].flat().join(', ')}`).join('; ');
  return String(m ?? e.message);
}

function assertMayComment(ctx: PageContext, page: ProjectPage, mr: MergeRequest) {
  if (!mayComment(ctx, page, mr)) throw pageForbidden();
}

/** POST .../discussions: a comment, a thread, or a thread on a diff line (the API's POST .../discussions and .../notes). */
async function createDiscussion(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  const l = await loadMergeRequest(ctx, page);
  assertMayComment(ctx, page, l.mr);
  const position = positionField(ctx);
  const back = field(ctx, 'back');
  const code = field(ctx, 'line_code').slice(0, 200);
  const text = noteBody(ctx);
  const refuse = async (message: string) => {
    if (position) return diffsTab(ctx, page, { status: 400, error: message, draft: text, lineCode: code }, l);
    return overview(ctx, page, { status: 400, error: message, loaded: l });
  };
  let body: string;
  try {
    body = noteText(text);
  } catch (e) {
    if (e instanceof ApiError) return refuse(text.trim() ? errorText(e) : 'The comment is empty.');
    throw e;
  }
  let note: NoteWithAuthor;
  const scope = mergeRequestNoteScope(l.mr);
  if (position) {
    // The same check of the position as the API's (the noteable's registration).
    const found = await mergeRequestNoteable.find({ cairn: ctx.cairn, access: l.access, params: { merge_request_iid: l.mr.iid } });
    let checked: { position: DiffPosition; lineCode: string | null };
    try {
      checked = await found.checkPosition!(position);
    } catch (e) {
      if (e instanceof ApiError) return refuse(`The comment could not be placed on that line (${errorText(e)}). The diff may have changed: reload it.`);
      throw e;
    }
    note = await createNote(ctx.cairn, scope, { author: user, body, type: 'DiffNote', position: checked.position, lineCode: checked.lineCode });
  } else {
    note = await createNote(ctx.cairn, scope, { author: user, body, type: noteTypeField(ctx) === 'DiscussionNote' ? 'DiscussionNote' : null });
  }
  throw new PageRedirect(backTo(l, back, `note_${note.id}`), 303);
}

async function threadOf(ctx: PageContext, l: Loaded): Promise<NoteWithAuthor[]> {
  const id = ctx.params.discussion_id ?? '';
  if (!/^[0-9a-f]{1,64}$/i.test(id)) throw pageNotFound();
  const { notes } = await listNotes(ctx.cairn.db, mergeRequestNoteScope(l.mr), { orderBy: 'created_at', sort: 'asc', activity: 'all_notes' }, { offset: 0, limit: 5000 });
  const thread = notes.filter((n) => n.discussion_id === id);
  if (!thread.length) throw pageNotFound();
  return thread;
}

/** POST .../discussions/:id/notes: a reply (the API's POST .../discussions/:id/notes). */
async function replyPost(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  const l = await loadMergeRequest(ctx, page);
  const thread = await threadOf(ctx, l);
  assertMayComment(ctx, page, l.mr);
  if (thread[0].system) throw pageForbidden('System notes take no replies.');
  const text = noteBody(ctx);
  let body: string;
  try {
    body = noteText(text);
  } catch (e) {
    if (e instanceof ApiError) return overview(ctx, page, { status: 400, error: text.trim() ? errorText(e) : 'The reply is empty.', loaded: l });
    throw e;
  }
  const note = await replyToDiscussion(ctx.cairn, mergeRequestNoteScope(l.mr), thread, { author: user, body });
  throw new PageRedirect(backTo(l, field(ctx, 'back'), `note_${note.id}`), 303);
}

/** POST .../discussions/:id/resolve and /unresolve (the API's PUT .../discussions/:id?resolved=). */
function resolvePost(resolved: boolean) {
  return async (ctx: PageContext, page: ProjectPage) => {
    const user = requireCsrf(ctx);
    const l = await loadMergeRequest(ctx, page);
    const thread = await threadOf(ctx, l);
    if (!mayResolve(ctx, page, l.mr, thread)) throw pageForbidden();
    await setDiscussionResolved(ctx.cairn, mergeRequestNoteScope(l.mr), thread[0].discussion_id, user, resolved);
    throw new PageRedirect(backTo(l, field(ctx, 'back'), `discussion_${thread[0].discussion_id}`), 303);
  };
}

const truthy = (v: string) => v === 'true' || v === '1' || v === 'on';

/** POST .../merge: the API's PUT .../merge (the same service, the same checks). */
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
  pages.projectPage('POST', 'merge_requests/:iid/discussions', createDiscussion);
  pages.projectPage('POST', 'merge_requests/:iid/discussions/:discussion_id/notes', replyPost);
  pages.projectPage('POST', 'merge_requests/:iid/discussions/:discussion_id/resolve', resolvePost(true));
  pages.projectPage('POST', 'merge_requests/:iid/discussions/:discussion_id/unresolve', resolvePost(false));
}
