import type { User } from '../../db/schema/core.js';
import { pageNumber, pagination, PER_PAGE, withQuery } from '../components/pagination.js';
import type { Issue } from '../../db/schema/work_items.js';
import { listIssues, loadIssueExtras, type IssueFilters, type IssueOrder } from '../../finders/issues.js';
import { renderMarkdown } from '../../lib/markdown.js';
import { issueNoteable } from '../../noteables/index.js';
import { ApiError } from '../../plugins/errors.js';
import { findIssueOrFail, mayUpdateIssue, type IssueAccess } from '../../policies/issues.js';
import type { IssueExtras } from '../../presenters/issues.js';
import type { MilestoneView } from '../../presenters/milestones.js';
import { createIssue, issueScope, updateIssue } from '../../services/issues.js';
import {
  apiErrorText,
  csrfField,
  hidden,
  loadDiscussions,
  loadNoteAwards,
  noteTargetOf,
  registerNoteActions,
  renderCommentForm,
  renderDiscussions,
  type NoteTarget,
} from '../components/notes.js';
import { field, pageForbidden, requireAbility, requireCsrf, requireUser, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, trusted, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, sendPage } from '../layout.js';
import type { PageRegistry } from '../router.js';
import { capList } from '../../api/list_filters.js';

/**
 * Issues: a project's list (state tabs with counts, search, label/author/assignee filters as
 * GitLab's query parameters, sort, pages of 20), one issue (description, labels, milestone,
 * assignees, its discussions, close/reopen), the new issue form, and the dashboard's issues
 * assigned to the visitor. Lists go through the API's finder with the visitor (the confidential
 * rule holds); writes through the API's services with the API's rules.
 */


/** GitLab's sort values of issue lists, and the finder's order for each. */
export const ISSUE_SORTS: Record<string, { text: string; orderBy: IssueOrder; sort: 'asc' | 'desc' }> = {
  created_date: { text: 'Created date', orderBy: 'created_at', sort: 'desc' },
  created_asc: { text: 'Oldest created', orderBy: 'created_at', sort: 'asc' },
  updated_desc: { text: 'Updated date', orderBy: 'updated_at', sort: 'desc' },
  updated_asc: { text: 'Oldest updated', orderBy: 'updated_at', sort: 'asc' },
  due_date: { text: 'Due date', orderBy: 'due_date', sort: 'asc' },
  popularity: { text: 'Popularity', orderBy: 'popularity', sort: 'desc' },
  title_asc: { text: 'Title', orderBy: 'title', sort: 'asc' },
  title_desc: { text: 'Title, descending', orderBy: 'title', sort: 'desc' },
};

type State = 'opened' | 'closed' | 'all';
const STATES: [State, string][] = [['opened', 'Open'], ['closed', 'Closed'], ['all', 'All']];

export function stateOf(value: string | undefined): State {
  return value === 'closed' || value === 'all' ? value : 'opened';
}

/** All values of a query parameter given as `name[]` (repeated) or `name` (comma-separated). */
export function queryList(ctx: PageContext, name: string): string[] {
  const q = (ctx.request.query ?? {}) as Record<string, unknown>;
  const raw = [q[`${name}[]`], q[name]].flat().filter((v): v is string => typeof v === 'string');
  return [...new Set(raw.flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '' && v.length <= 255))];
}

const milestoneView = (m: MilestoneView) => m;

function labelsHtml(labels: IssueExtras['labels']): SafeHtml {
  return html`${labels.map((l) => html`<span class="badge label" title="${l.description ?? ''}">${l.name}</span> `)}`;
}

function issueUrl(page: ProjectPage, iid: number): string {
  return `${projectPath(page)}/-/issues/${iid}`;
}

function issueRow(issue: Issue, extras: IssueExtras, url: string, showState: boolean, reference: string): SafeHtml {
  const milestone = extras.milestone as MilestoneView | null;
  return html`<li><div class="grow"><div><a class="title" href="${url}">${issue.title}</a>
${issue.confidential ? html`<span class="badge warn">Confidential</span>` : ''} ${labelsHtml(extras.labels)}</div>
<div class="meta">${reference} · opened ${timeAgo(issue.created_at)} by ${extras.author ? extras.author.name || extras.author.username : 'Ghost user'}
${milestone ? html` · milestone ${milestone.title}` : ''}${issue.due_date ? html` · due ${issue.due_date}` : ''}</div></div>
<div class="meta row">${showState ? html`<span class="badge ${issue.state_id === 2 ? 'closed' : 'opened'}">${issue.state_id === 2 ? 'Closed' : 'Open'}</span>` : ''}
${extras.assignees.map((u) => html`<span title="Assigned to ${u.name}">${avatar(u)}</span>`)}
${extras.userNotesCount ? html`<span>${extras.userNotesCount} comment${extras.userNotesCount === 1 ? '' : 's'}</span>` : ''}<span>updated ${timeAgo(issue.updated_at)}</span></div></li>`;
}

// ---------------------------------------------------------------------------------------------
// The project's list

async function issueList(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_issue');
  const state = stateOf(ctx.query.state);
  const search = (ctx.query.search ?? '').slice(0, 255);
  const labels = capList(queryList(ctx, 'label_name'), 'label_name');
  const author = (ctx.query.author_username ?? '').trim().slice(0, 255);
  const assignee = (ctx.query.assignee_username ?? '').trim().slice(0, 255);
  const sortKey = ISSUE_SORTS[ctx.query.sort ?? ''] ? ctx.query.sort! : 'created_date';
  const sort = ISSUE_SORTS[sortKey];
  const pageNo = pageNumber(ctx);
  const base: IssueFilters = {
    projectId: page.project.id,
    allConfidential: page.can('read_confidential_issues'),
    search: search || undefined,
    labels: labels.length ? labels : undefined,
    authorUsername: author || undefined,
    assigneeUsernames: assignee ? [assignee] : undefined,
    orderBy: sort.orderBy,
    sort: sort.sort,
  };
  const db = ctx.cairn.db;
  const [list, opened, closed] = await Promise.all([
    listIssues(db, ctx.user, { ...base, state }, { limit: PER_PAGE, offset: (pageNo - 1) * PER_PAGE }),
    listIssues(db, ctx.user, { ...base, state: 'opened' }, { limit: 1, offset: 0 }),
    listIssues(db, ctx.user, { ...base, state: 'closed' }, { limit: 1, offset: 0 }),
  ]);
  const counts: Record<State, number> = { opened: opened.total, closed: closed.total, all: opened.total + closed.total };
  const rows = list.rows as Issue[];
  const extras = await loadIssueExtras(db, rows, milestoneView);
  const path = `${projectPath(page)}/-/issues`;
  const query: Record<string, string | string[]> = { state, search, author_username: author, assignee_username: assignee, sort: sortKey === 'created_date' ? '' : sortKey };
  if (labels.length) query['label_name[]'] = labels;
  const tabs = html`<nav class="tabs" aria-label="Issue state">${STATES.map(([s, text]) =>
    html`<a href="${withQuery(path, query, { state: s === 'opened' ? null : s, page: null })}"${s === state ? trusted(' aria-current="page"') : ''}>${text}<span class="count">${counts[s]}</span></a>`)}</nav>`;
  const filters = html`<form method="get" action="${path}" class="filters" role="search">
${state !== 'opened' ? html`<input type="hidden" name="state" value="${state}">` : ''}
<div><label for="f-search">Search</label><input type="search" id="f-search" name="search" value="${search}" placeholder="Search or filter results"></div>
<div><label for="f-author">Author</label><input type="text" id="f-author" name="author_username" value="${author}" placeholder="username"></div>
<div><label for="f-assignee">Assignee</label><input type="text" id="f-assignee" name="assignee_username" value="${assignee}" placeholder="username"></div>
<div><label for="f-label">Labels</label><input type="text" id="f-label" name="label_name[]" value="${labels.join(',')}" placeholder="bug,backend"></div>
<div><label for="f-sort">Sort</label><select id="f-sort" name="sort" data-autosubmit>${Object.entries(ISSUE_SORTS).map(([k, v]) =>
    html`<option value="${k}"${k === sortKey ? trusted(' selected') : ''}>${v.text}</option>`)}</select></div>
<div><button type="submit" class="secondary">Filter</button></div></form>`;
  const body = rows.length
    ? html`<ul class="list issues">${rows.map((r) => issueRow(r, extras.get(r.id)!, issueUrl(page, r.iid), state !== 'opened', `#${r.iid}`))}</ul>`
    : html`<div class="empty card">${counts.all === 0 && !search && !labels.length && !author && !assignee ? 'There are no issues in this project yet.' : 'No issues match these filters.'}</div>`;
  return sendPage(ctx, {
    title: 'Issues',
    project: page,
    section: 'issues',
    breadcrumbs: projectCrumbs(page, ['Issues']),
    body: html`<div class="spread"><h1>Issues</h1>${page.can('create_issue') ? html`<a class="button" href="${path}/new">New issue</a>` : ''}</div>
${tabs}${filters}${body}${pagination({ path, query }, pageNo, list.total)}`,
  });
}

// ---------------------------------------------------------------------------------------------
// One issue

interface LoadedIssue {
  access: IssueAccess;
  target: NoteTarget;
  url: string;
}

/** The issue `:iid` for the visitor: the API's finder and confidential rule; hidden → 404 (anonymous: sign in). */
async function loadIssue(ctx: PageContext, page: ProjectPage): Promise<LoadedIssue> {
  requireAbility(ctx, page, 'read_issue');
  const iid = Number(ctx.params.iid);
  if (!Number.isInteger(iid) || iid < 1 || iid > 2147483647) throw hidden(ctx);
  let access: IssueAccess;
  try {
    access = await findIssueOrFail(ctx.cairn.db, { project: page.project, accessLevel: page.subject.accessLevel }, ctx.user, iid);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) throw hidden(ctx);
    throw e;
  }
  const url = issueUrl(page, iid);
  const issue = access.issue;
  const target = noteTargetOf(ctx, page, issueNoteable, { record: access, id: issue.id, iid: issue.iid, scope: issueScope(issue), locked: issue.discussion_locked === true }, url);
  return { access, target, url };
}

function people(users: User[], none: string): SafeHtml {
  if (!users.length) return html`<span class="muted">${none}</span>`;
  return html`${users.map((u) => html`<div>${avatar(u)} <a href="/${pathUrl(u.username)}">${u.name || u.username}</a></div>`)}`;
}

async function renderIssue(ctx: PageContext, page: ProjectPage, loaded: LoadedIssue, draft?: { error: string; text: string }) {
  const { issue } = loaded.access;
  const db = ctx.cairn.db;
  const [extrasMap, discussions] = await Promise.all([loadIssueExtras(db, [issue], milestoneView), loadDiscussions(ctx, loaded.target.scope)]);
  const awards = await loadNoteAwards(ctx, discussions);
  const extras = extrasMap.get(issue.id)!;
  const milestone = extras.milestone as MilestoneView | null;
  const closed = issue.state_id === 2;
  const mayUpdate = mayUpdateIssue(ctx.user, page.subject, loaded.access);
  const stateButton = mayUpdate
    ? html`<form method="post" action="${loaded.url}/${closed ? 'reopen' : 'close'}" class="inline">${csrfField(ctx)}<button type="submit" class="${closed ? 'secondary' : 'danger'}">${closed ? 'Reopen issue' : 'Close issue'}</button></form>`
    : html``;
  const author = extras.author;
  const body = html`<div class="spread issue-head"><div class="row"><span class="badge ${closed ? 'closed' : 'opened'}" data-issue-state>${closed ? 'Closed' : 'Open'}</span>
${issue.confidential ? html`<span class="badge warn">Confidential</span>` : ''}${loaded.target.locked ? html`<span class="badge">Locked</span>` : ''}
<span class="muted small">Issue #${issue.iid} opened ${timeAgo(issue.created_at)} by ${author ? html`<a href="/${pathUrl(author.username)}">${author.name || author.username}</a>` : 'Ghost user'}
${closed && extras.closedBy ? html` · closed ${timeAgo(issue.closed_at)} by ${extras.closedBy.name || extras.closedBy.username}` : ''}</span></div>
<div class="row">${stateButton}${page.can('create_issue') ? html`<a class="button secondary" href="${projectPath(page)}/-/issues/new">New issue</a>` : ''}</div></div>
<div class="issuable">
<div class="issuable-main">
<h1 class="issue-title">${issue.title}</h1>
${issue.description ? html`<div class="md description card">${trusted(renderMarkdown(issue.description))}</div>` : html`<p class="muted">No description.</p>`}
<h2 id="activity">Activity</h2>
${renderDiscussions(ctx, discussions, { target: loaded.target, awards })}
${renderCommentForm(ctx, loaded.target, draft ? { draft: draft.text, error: draft.error } : {})}
</div>
<aside class="issuable-side card" aria-label="Issue details"><dl class="side-facts">
<dt>Assignees</dt><dd>${people(extras.assignees, 'None')}</dd>
<dt>Labels</dt><dd>${extras.labels.length ? labelsHtml(extras.labels) : html`<span class="muted">None</span>`}</dd>
<dt>Milestone</dt><dd>${milestone ? milestone.title : html`<span class="muted">None</span>`}</dd>
<dt>Due date</dt><dd>${issue.due_date ?? html`<span class="muted">None</span>`}</dd>
<dt>Participants</dt><dd>${participants(extras, discussions.flatMap((d) => d.notes.map((n) => n.author)))}</dd>
</dl></aside></div>`;
  return sendPage(ctx, {
    status: draft ? 400 : 200,
    title: `${issue.title} (#${issue.iid})`,
    project: page,
    section: 'issues',
    breadcrumbs: projectCrumbs(page, ['Issues', `${projectPath(page)}/-/issues`], [`#${issue.iid}`]),
    body,
  });
}

function participants(extras: IssueExtras, noteAuthors: (User | null)[]): SafeHtml {
  const seen = new Map<number, User>();
  for (const u of [extras.author, ...extras.assignees, ...noteAuthors]) if (u && !seen.has(u.id)) seen.set(u.id, u);
  return html`<span class="row">${[...seen.values()].slice(0, 20).map((u) => html`<span title="${u.name}">${avatar(u)}</span>`)}</span>`;
}

async function issuePage(ctx: PageContext, page: ProjectPage) {
  return renderIssue(ctx, page, await loadIssue(ctx, page));
}

/** POST issues/:iid/close and /reopen: who may update it (the API's rule), through the issues service. */
function stateAction(event: 'close' | 'reopen') {
  return async (ctx: PageContext, page: ProjectPage) => {
    const user = requireCsrf(ctx);
    const loaded = await loadIssue(ctx, page);
    if (!mayUpdateIssue(user, page.subject, loaded.access)) throw pageForbidden('You cannot close or reopen this issue.');
    await updateIssue(ctx.cairn, page.project, loaded.access.issue, user, { state_event: event });
    return ctx.reply.redirect(loaded.url, 303);
  };
}

// ---------------------------------------------------------------------------------------------
// New issue

interface IssueDraft {
  title: string;
  description: string;
  confidential: boolean;
}

function renderNewIssue(ctx: PageContext, page: ProjectPage, draft: IssueDraft, error?: string) {
  const path = `${projectPath(page)}/-/issues`;
  return sendPage(ctx, {
    status: error ? 400 : 200,
    title: 'New issue',
    project: page,
    section: 'issues',
    breadcrumbs: projectCrumbs(page, ['Issues', path], ['New']),
    body: html`<h1>New issue</h1>
<form method="post" action="${path}" class="card issue-form">${csrfField(ctx)}
${error ? html`<div class="alert error" role="alert">${error}</div>` : ''}
<label for="issue_title">Title (required)</label><input type="text" id="issue_title" name="issue[title]" value="${draft.title}" required maxlength="255" autofocus>
<label for="issue_description">Description</label><textarea id="issue_description" name="issue[description]" placeholder="Write a description (Markdown)">${draft.description}</textarea>
<label class="check"><input type="checkbox" name="issue[confidential]" value="1"${draft.confidential ? trusted(' checked') : ''}> This issue is confidential and should only be visible to team members with at least the Reporter role.</label>
<div class="row form-actions"><button type="submit">Create issue</button><a class="button secondary" href="${path}">Cancel</a></div>
</form>`,
  });
}

async function newIssuePage(ctx: PageContext, page: ProjectPage) {
  requireUser(ctx);
  requireAbility(ctx, page, 'read_issue');
  requireAbility(ctx, page, 'create_issue', 'forbid');
  return renderNewIssue(ctx, page, { title: ctx.query['issue[title]'] ?? '', description: ctx.query['issue[description]'] ?? '', confidential: false });
}

function issueField(ctx: PageContext, name: string): string {
  const nested = ctx.body.issue;
  if (nested && typeof nested === 'object' && !Array.isArray(nested)) {
    const v = (nested as Record<string, unknown>)[name];
    if (typeof v === 'string') return v;
  }
  return field(ctx, name);
}

/** POST issues: title, description, confidential, through createIssue as POST /projects/:id/issues does. */
async function createIssueAction(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  requireAbility(ctx, page, 'read_issue');
  requireAbility(ctx, page, 'create_issue', 'forbid');
  const draft: IssueDraft = {
    title: issueField(ctx, 'title'),
    description: issueField(ctx, 'description'),
    confidential: ['1', 'true', 'on'].includes(issueField(ctx, 'confidential')),
  };
  try {
    const issue = await createIssue(ctx.cairn, page.project, user, {
      title: draft.title,
      description: draft.description || null,
      confidential: draft.confidential,
    });
    return ctx.reply.redirect(issueUrl(page, issue.iid), 303);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 400) throw e;
    return renderNewIssue(ctx, page, draft, apiErrorText(e).replace(/^title /, 'Title '));
  }
}

// ---------------------------------------------------------------------------------------------
// The dashboard: issues assigned to the visitor

async function dashboardIssues(ctx: PageContext) {
  const user = requireUser(ctx);
  const state = stateOf(ctx.query.state);
  const pageNo = pageNumber(ctx);
  const db = ctx.cairn.db;
  const base: IssueFilters = { scope: 'assigned_to_me', nonArchived: true, orderBy: 'created_at', sort: 'desc' };
  const [list, opened, closed] = await Promise.all([
    listIssues(db, user, { ...base, state }, { limit: PER_PAGE, offset: (pageNo - 1) * PER_PAGE }),
    listIssues(db, user, { ...base, state: 'opened' }, { limit: 1, offset: 0 }),
    listIssues(db, user, { ...base, state: 'closed' }, { limit: 1, offset: 0 }),
  ]);
  const counts: Record<State, number> = { opened: opened.total, closed: closed.total, all: opened.total + closed.total };
  const rows = list.rows as Issue[];
  const extras = await loadIssueExtras(db, rows, milestoneView);
  const path = '/dashboard/issues';
  const query = { state };
  const tabs = html`<nav class="tabs" aria-label="Issue state">${STATES.map(([s, text]) =>
    html`<a href="${withQuery(path, {}, { state: s === 'opened' ? null : s })}"${s === state ? trusted(' aria-current="page"') : ''}>${text}<span class="count">${counts[s]}</span></a>`)}</nav>`;
  const body = rows.length
    ? html`<ul class="list issues">${rows.map((r) => {
        const x = extras.get(r.id)!;
        return issueRow(r, x, `/${pathUrl(x.projectFullPath)}/-/issues/${r.iid}`, state !== 'opened', `${x.projectFullPath}#${r.iid}`);
      })}</ul>`
    : html`<div class="empty card">No issues are assigned to you${state === 'all' ? '' : state === 'closed' ? ' that are closed' : ' that are open'}.</div>`;
  return sendPage(ctx, {
    title: 'Issues',
    breadcrumbs: [['Your work', '/'], ['Issues']],
    body: html`<h1>Issues assigned to you</h1>${tabs}${body}${pagination({ path, query }, pageNo, list.total)}`,
  });
}

export function registerIssuePages(pages: PageRegistry) {
  pages.projectPage('GET', 'issues', issueList);
  pages.projectPage('POST', 'issues', createIssueAction);
  pages.projectPage('GET', 'issues/new', newIssuePage);
  pages.projectPage('GET', 'issues/:iid', issuePage);
  pages.projectPage('POST', 'issues/:iid/close', stateAction('close'));
  pages.projectPage('POST', 'issues/:iid/reopen', stateAction('reopen'));
  registerNoteActions(pages, 'issues/:iid', async (ctx, page) => (await loadIssue(ctx, page)).target, {
    rerender: async (ctx, page, error, text) => renderIssue(ctx, page, await loadIssue(ctx, page), { error, text }),
  });
  pages.globalPage('GET', '/dashboard/issues', dashboardIssues);
}
