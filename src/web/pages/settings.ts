import { listMembers, type MemberSource } from '../../finders/members.js';
import { pageOf, pagination } from '../components/pagination.js';
import { findUserByIdOrUsername } from '../../finders/users.js';
import { listRefs } from '../../git/refs.js';
import { ApiError } from '../../plugins/errors.js';
import { accessLevelName } from '../../policies/access.js';
import { fullMessages, isPersonalProjectOwner, validateMembership, validMemberLevels } from '../../policies/members.js';
import { presentProtectedBranch } from '../../presenters/protected_branches.js';
import { addMember, destroyMember, memberValidationErrors, updateMemberRow } from '../../services/members.js';
import { accessLevelNames, listProtectedBranches, protectBranch, unprotectBranch } from '../../services/protected_branches.js';
import { idParam } from '../ci.js';
import { field, pageForbidden, pageNotFound, PageRedirect, requireAbility, requireCsrf, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, sendPage } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';

/**
 * Settings pages: the members of a project (/-/project_members: list for those who see the
 * project; add, change, remove for those with admin_project_member, as the members API, and
 * leaving for members themselves) and protected branches (/-/settings/repository, maintainers:
 * protect a branch or wildcard with who may push and merge, unprotect), each through the same
 * policies and services as their API. Forms post (HTML has no PUT/DELETE): `_method` says which.
 */
const MEMBERS_PER_PAGE = 50;

function sourceOf(page: ProjectPage): MemberSource {
  return { type: 'Project', project: page.project };
}

interface FormState {
  error?: string;
  status?: number;
  values?: Record<string, string>;
}

function errorAlert(state: FormState): SafeHtml {
  return state.error ? html`<div class="alert error" role="alert">${state.error}</div>` : html``;
}

function levelOptions(levels: number[], selected: number): SafeHtml {
  return html`${levels.map((l) => html`<option value="${l}"${l === selected ? html` selected` : ''}>${accessLevelName(l)}</option>`)}`;
}

/** A date field: '' → null, YYYY-MM-DD → itself, anything else → undefined (invalid). */
function dateField(value: string): string | null | undefined {
  const v = value.trim();
  if (!v) return null;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v)) return undefined;
  const d = new Date(`${v}T00:00:00Z`);
  return Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== v ? undefined : v;
}

function levelField(value: string, allowed: readonly number[]): number | undefined {
  return /^\d{1,3}$/.test(value) && allowed.includes(Number(value)) ? Number(value) : undefined;
}

// ---- members ------------------------------------------------------------------------------

async function membersPage(ctx: PageContext, page: ProjectPage, state: FormState = {}) {
  requireAbility(ctx, page, 'read_project_member');
  const db = ctx.cairn.db;
  const source = sourceOf(page);
  const admin = page.can('admin_project_member');
  const paging = pageOf(ctx, MEMBERS_PER_PAGE);
  const search = (ctx.query.search ?? '').trim().slice(0, 100);
  const { members, total } = await listMembers(db, source, {
    deep: true,
    viewer: { userId: ctx.user?.id ?? null, admin: !!ctx.user?.admin },
    filters: { query: search || undefined },
    limit: paging.perPage,
    offset: paging.offset,
  });
  // Which of them are direct members of the project (the others come from its groups).
  const userIds = members.map((m) => m.user.id);
  const direct = userIds.length
    ? await db.selectFrom('members').select(['id', 'user_id']).where('source_type', '=', 'Project').where('source_id', '=', page.project.id)
        .where('user_id', 'in', userIds).where('requested_at', 'is', null).execute()
    : [];
  const directByUser = new Map(direct.map((d) => [d.user_id, d.id]));
  const base = projectPath(page);
  const levels = validMemberLevels(source);
  const me = ctx.user?.id;

  const rows = members.map((m) => {
    const owner = isPersonalProjectOwner(source, m.user.id);
    const rowId = directByUser.get(m.user.id);
    const from = owner ? 'Owner of the personal namespace' : rowId ? 'Direct member' : 'Inherited from a group';
    const editable = !!rowId && !owner;
    const action = rowId ? `${base}/-/project_members/${rowId}` : '';
    const levelCell = editable && admin
      ? html`<form method="post" action="${action}" class="row member-edit"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}"><input type="hidden" name="_method" value="put">
<label class="sr-only" for="level-${rowId}">Access level of ${m.user.username}</label><select id="level-${rowId}" name="access_level">${levelOptions(levels, m.access_level)}</select>
<label class="sr-only" for="expires-${rowId}">Expires</label><input type="date" id="expires-${rowId}" name="expires_at" value="${m.expires_at ?? ''}">
<button type="submit" class="secondary small">Save</button></form>`
      : html`${accessLevelName(owner ? 50 : m.access_level)}${m.expires_at ? html` <span class="muted small">until ${m.expires_at}</span>` : ''}`;
    const remove = editable && (admin || m.user.id === me)
      ? html`<form method="post" action="${action}" class="inline"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}"><input type="hidden" name="_method" value="delete"><button type="submit" class="danger small">${m.user.id === me ? 'Leave' : 'Remove'}</button></form>`
      : html``;
    return html`<tr><td>${avatar(m.user)} <a href="/${pathUrl(m.user.username)}">${m.user.name}</a> <span class="muted small">@${m.user.username}</span>${m.user.id === me ? html` <span class="badge">It's you</span>` : ''}${m.user.state !== 'active' ? html` <span class="badge warn">${m.user.state}</span>` : ''}</td>
<td class="small">${from}</td><td>${levelCell}</td><td class="small">${timeAgo(m.created_at as any)}</td><td>${remove}</td></tr>`;
  });

  const v = state.values ?? {};
  const addForm = admin
    ? html`<section class="card" aria-labelledby="add-member"><h2 id="add-member" class="mt0">Add a member</h2>
<form method="post" action="${base}/-/project_members"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}">
<div class="filters"><div><label for="member-username">Username</label><input type="text" id="member-username" name="username" required autocomplete="off" value="${v.username ?? ''}"></div>
<div><label for="member-level">Role</label><select id="member-level" name="access_level">${levelOptions(levels, Number(v.access_level ?? 30))}</select></div>
<div><label for="member-expires">Access expiration date (optional)</label><input type="date" id="member-expires" name="expires_at" value="${v.expires_at ?? ''}"></div>
<div><button type="submit">Add member</button></div></div></form></section>`
    : html``;

  return sendPage(ctx, {
    status: state.status,
    title: 'Members',
    project: page,
    section: 'members',
    breadcrumbs: projectCrumbs(page, ['Members']),
    body: html`<h1>Project members</h1>
${errorAlert(state)}${addForm}
<form method="get" action="${base}/-/project_members" class="filters" role="search"><div><label for="member-search">Search members</label><input type="search" id="member-search" name="search" value="${search}"></div><div><button type="submit" class="secondary">Search</button></div></form>
${members.length
      ? html`<div class="scroll-x"><table class="members"><thead><tr><th scope="col">Account</th><th scope="col">Source</th><th scope="col">Role</th><th scope="col">Joined</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table></div>`
      : html`<div class="empty card">No members found.</div>`}
${pagination(ctx, paging.page, total, paging.perPage)}`,
  });
}

async function postMember(ctx: PageContext, page: ProjectPage) {
  const caller = requireCsrf(ctx);
  requireAbility(ctx, page, 'read_project_member');
  requireAbility(ctx, page, 'admin_project_member', 'forbid');
  const db = ctx.cairn.db;
  const source = sourceOf(page);
  const values = { username: field(ctx, 'username'), access_level: field(ctx, 'access_level'), expires_at: field(ctx, 'expires_at') };
  const fail = (error: string) => membersPage(ctx, page, { error, status: 422, values });
  const username = values.username.trim().replace(/^@/, '');
  const target = username && !/^\d+$/.test(username) ? await findUserByIdOrUsername(db, username) : undefined;
  if (!target) return fail(`No user with the username "${username}".`);
  const level = levelField(values.access_level, validMemberLevels(source));
  if (level === undefined) return fail('Choose a role from the list.');
  const expiresAt = dateField(values.expires_at);
  if (expiresAt === undefined) return fail('The expiration date is not a valid date.');
  try {
    await addMember(db, source, target.id, { accessLevel: level, expiresAt, inviteSource: 'members-page', createdById: caller.id });
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return fail(`${target.username} is already a member of this project.`);
    const errors = memberValidationErrors(e);
    if (errors) return fail(fullMessages(errors).join('. ') + '.');
    throw e;
  }
  throw new PageRedirect(`${projectPath(page)}/-/project_members`, 303);
}

/** POST /-/project_members/:id with _method put (change the role and expiry) or delete (remove, or leave). */
async function changeMember(ctx: PageContext, page: ProjectPage) {
  const caller = requireCsrf(ctx);
  requireAbility(ctx, page, 'read_project_member');
  const db = ctx.cairn.db;
  const source = sourceOf(page);
  const method = field(ctx, '_method').toLowerCase();
  if (method !== 'put' && method !== 'patch' && method !== 'delete') throw pageNotFound();
  const row = await db.selectFrom('members').selectAll().where('id', '=', idParam(ctx))
    .where('source_type', '=', 'Project').where('source_id', '=', page.project.id).where('requested_at', 'is', null).executeTakeFirst();
  if (!row) throw pageNotFound();
  const admin = page.can('admin_project_member');
  const leaving = method === 'delete' && row.user_id === caller.id;
  if (!admin && !leaving) requireAbility(ctx, page, 'admin_project_member', 'forbid');
  // As the API: the owner of a personal namespace can be neither changed nor removed.
  if (isPersonalProjectOwner(source, row.user_id)) throw pageForbidden();
  const base = projectPath(page);
  if (method === 'delete') {
    await destroyMember(db, source, row, false);
    throw new PageRedirect(leaving ? '/dashboard/projects' : `${base}/-/project_members`, 303);
  }
  const level = levelField(field(ctx, 'access_level'), validMemberLevels(source));
  if (level === undefined) return membersPage(ctx, page, { error: 'Choose a role from the list.', status: 422 });
  const expiresAt = 'expires_at' in ctx.body ? dateField(field(ctx, 'expires_at')) : row.expires_at;
  if (expiresAt === undefined) return membersPage(ctx, page, { error: 'The expiration date is not a valid date.', status: 422 });
  const errors = await validateMembership(db, source, row.user_id, level, expiresAt);
  if (Object.keys(errors).length) return membersPage(ctx, page, { error: fullMessages(errors).join('. ') + '.', status: 422 });
  await updateMemberRow(db, row.id, { access_level: level, expires_at: expiresAt });
  throw new PageRedirect(`${base}/-/project_members`, 303);
}

// ---- protected branches -------------------------------------------------------------------

const BRANCH_LEVELS: [number, string][] = [[40, 'Maintainers'], [30, 'Developers + Maintainers'], [0, 'No one']];

async function repositorySettings(ctx: PageContext, page: ProjectPage, state: FormState = {}) {
  requireAbility(ctx, page, 'admin_project');
  const cairn = ctx.cairn;
  const [rules, branches] = await Promise.all([
    listProtectedBranches(cairn, page.project.id),
    listRefs(gitDirOf(ctx, page), 'refs/heads/').catch(() => []),
  ]);
  const names = await accessLevelNames(cairn, rules.flatMap((r) => r.levels));
  const shown = rules.map((r) => presentProtectedBranch(r.rule, r.levels, names));
  const base = projectPath(page);
  const v = state.values ?? {};
  const select = (id: string, name: string, selected: number) =>
    html`<select id="${id}" name="${name}">${BRANCH_LEVELS.map(([l, text]) => html`<option value="${l}"${l === selected ? html` selected` : ''}>${text}</option>`)}</select>`;
  const who = (levels: { access_level_description: string }[]) => levels.map((l) => l.access_level_description).join(', ') || 'No one';
  const table = shown.length
    ? html`<div class="scroll-x"><table class="protected-branches"><thead><tr><th scope="col">Branch</th><th scope="col">Allowed to merge</th><th scope="col">Allowed to push and merge</th><th scope="col">Allowed to force push</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
<tbody>${shown.map((r) => html`<tr><td><code>${r.name}</code>${r.name.includes('*') ? html` <span class="badge">wildcard</span>` : ''}</td>
<td>${who(r.merge_access_levels)}</td><td>${who(r.push_access_levels)}</td><td>${r.allow_force_push ? 'Yes' : 'No'}</td>
<td><form method="post" action="${base}/-/protected_branches/${r.id}" class="inline"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}"><input type="hidden" name="_method" value="delete"><button type="submit" class="danger small">Unprotect <span class="sr-only">${r.name}</span></button></form></td></tr>`)}</tbody></table></div>`
    : html`<div class="empty card">No branches are protected.</div>`;
  return sendPage(ctx, {
    status: state.status,
    title: 'Repository settings',
    project: page,
    section: 'settings',
    breadcrumbs: projectCrumbs(page, ['Settings'], ['Repository']),
    body: html`<h1>Repository settings</h1>
<section aria-labelledby="protected-branches"><h2 id="protected-branches">Protected branches</h2>
<p class="muted">Keep stable branches secure: choose who may push to them and merge into them. A name may hold wildcards (<code>release/*</code>).</p>
${errorAlert(state)}
<div class="card"><h3 class="mt0">Protect a branch</h3>
<form method="post" action="${base}/-/protected_branches"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}">
<div class="filters"><div><label for="pb-name">Branch or wildcard</label><input type="text" id="pb-name" name="name" required list="pb-branches" autocomplete="off" value="${v.name ?? ''}">
<datalist id="pb-branches">${branches.slice(0, 500).map((b) => html`<option value="${b.name}"></option>`)}</datalist></div>
<div><label for="pb-merge">Allowed to merge</label>${select('pb-merge', 'merge_access_level', Number(v.merge_access_level ?? 40))}</div>
<div><label for="pb-push">Allowed to push and merge</label>${select('pb-push', 'push_access_level', Number(v.push_access_level ?? 40))}</div>
<div><label class="check" for="pb-force"><input type="checkbox" id="pb-force" name="allow_force_push" value="true"${v.allow_force_push === 'true' ? html` checked` : ''}> Allowed to force push</label></div>
<div><button type="submit">Protect</button></div></div></form></div>
${table}</section>
<p class="muted small">Personal access tokens are on <a href="/-/user_settings/personal_access_tokens">your access tokens page</a>.</p>`,
  });
}

async function protect(ctx: PageContext, page: ProjectPage) {
  requireCsrf(ctx);
  requireAbility(ctx, page, 'admin_project');
  const values = {
    name: field(ctx, 'name').trim(),
    merge_access_level: field(ctx, 'merge_access_level'),
    push_access_level: field(ctx, 'push_access_level'),
    allow_force_push: field(ctx, 'allow_force_push') === 'true' ? 'true' : 'false',
  };
  const levels = BRANCH_LEVELS.map(([l]) => l);
  const merge = levelField(values.merge_access_level, levels);
  const push = levelField(values.push_access_level, levels);
  const fail = (error: string, status = 422) => repositorySettings(ctx, page, { error, status, values });
  if (!values.name) return fail('Enter a branch name or a wildcard.');
  if (merge === undefined || push === undefined) return fail('Choose who may merge and push from the lists.');
  try {
    await protectBranch(ctx.cairn, page.project.id, { name: values.name, merge_access_level: merge, push_access_level: push, allow_force_push: values.allow_force_push === 'true' });
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) return fail(`The branch ${values.name} is already protected.`, 409);
    if (e instanceof ApiError && e.status < 500 && e.status !== 403 && e.status !== 404) return fail(`The branch could not be protected: ${e.message}.`);
    throw e;
  }
  throw new PageRedirect(`${projectPath(page)}/-/settings/repository`, 303);
}

/** POST /-/protected_branches/:id with _method delete: unprotect (the rule's unprotect levels apply, as the API). */
async function unprotect(ctx: PageContext, page: ProjectPage) {
  const user = requireCsrf(ctx);
  requireAbility(ctx, page, 'admin_project');
  if (field(ctx, '_method').toLowerCase() !== 'delete') throw pageNotFound();
  const rule = await ctx.cairn.db.selectFrom('protected_branches').select(['id', 'name'])
    .where('id', '=', idParam(ctx)).where('project_id', '=', page.project.id).executeTakeFirst();
  if (!rule) throw pageNotFound();
  await unprotectBranch(ctx.cairn, page.project.id, rule.name, user, page.subject.accessLevel);
  throw new PageRedirect(`${projectPath(page)}/-/settings/repository`, 303);
}

export function registerSettingsPages(pages: PageRegistry) {
  pages.projectPage('GET', 'project_members', (ctx, page) => membersPage(ctx, page));
  pages.projectPage('POST', 'project_members', postMember);
  pages.projectPage('POST', 'project_members/:id', changeMember);
  pages.projectPage('GET', 'settings/repository', (ctx, page) => repositorySettings(ctx, page));
  pages.projectPage('POST', 'protected_branches', protect);
  pages.projectPage('POST', 'protected_branches/:id', unprotect);
}
