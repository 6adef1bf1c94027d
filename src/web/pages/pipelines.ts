import { cancelPipeline, CANCELABLE_STATUSES, retryPipeline } from '../../ci/jobs/state.js';
import { RUNNER_INSTALL_HINT, stuckJobIds } from '../../ci/jobs/stuck.js';
import { pageOf, pagination } from '../components/pagination.js';
import type { CiBuild, CiPipeline } from '../../db/schema/ci.js';
import type { User } from '../../db/schema/core.js';
import { pipelinesQuery, type PipelineFilters } from '../../finders/pipelines.js';
import { findUserById, findUsersByIds } from '../../finders/users.js';
import { readCommits } from '../../git/refs.js';
import { clearProjectCaches } from '../../services/ci_caches.js';
import { actionButton, formatDuration, idParam, jobDuration, jobHref, loadPipeline, pipelineHref, statusBadge } from '../ci.js';
import { canUpdateRef } from '../../policies/branches.js';
import { PageRedirect, pageForbidden, requireAbility, requireCsrf, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo, type SafeHtml } from '../html.js';
import { avatar, projectCrumbs, projectPath, sendPage } from '../layout.js';
import { gitDirOf } from '../refs.js';
import type { PageRegistry } from '../router.js';

/**
 * Pipelines: the list (/-/pipelines, GitLab's scope tabs), a pipeline (/-/pipelines/:id: its
 * header, the stage graph with each job's status linking to the job, the jobs table), and its
 * retry and cancel buttons, which post to the same state machine as the API's
 * POST /projects/:id/pipelines/:id/retry|cancel (src/ci/jobs/state.ts), and GitLab's "Clear
 * runner caches" button.
 */
const PER_PAGE = 20;
const TABS: { key: string; text: string; scope?: PipelineFilters['scope'] }[] = [
  { key: 'all', text: 'All' },
  { key: 'finished', text: 'Finished', scope: 'finished' },
  { key: 'branches', text: 'Branches', scope: 'branches' },
  { key: 'tags', text: 'Tags', scope: 'tags' },
];

function triggerer(user: User | undefined): SafeHtml {
  if (!user) return html`<span class="muted">API</span>`;
  return html`<a href="/${pathUrl(user.username)}" title="${user.name}">${avatar(user)} <span class="sr-only">${user.name}</span></a>`;
}

function refLink(page: ProjectPage, p: Pick<CiPipeline, 'ref' | 'tag'>): SafeHtml {
  const base = projectPath(page);
  return html`<a class="ref" href="${base}/-/${p.tag ? 'tags' : 'commits'}/${pathUrl(p.ref)}">${p.ref}</a>`;
}

async function pipelinesList(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_pipeline');
  const db = ctx.cairn.db;
  const tab = TABS.find((t) => t.key === ctx.query.scope) ?? TABS[0];
  const paging = pageOf(ctx, PER_PAGE);
  const query = pipelinesQuery(db, page.project.id, { scope: tab.scope, ref: ctx.query.ref || undefined });
  const [rows, count] = await Promise.all([
    query.selectAll('p').orderBy('p.id', 'desc').limit(paging.perPage).offset(paging.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  const ids = rows.map((r) => r.id);
  const [users, commits, stages] = await Promise.all([
    findUsersByIds(db, rows.flatMap((r) => (r.user_id ? [r.user_id] : []))),
    page.can('download_code') ? readCommits(ctx.cairn.catfile, gitDirOf(ctx, page), [...new Set(rows.map((r) => r.sha))]) : new Map(),
    ids.length ? db.selectFrom('ci_stages').select(['pipeline_id', 'name', 'status']).where('pipeline_id', 'in', ids).orderBy('position').orderBy('id').execute() : [],
  ]);
  const base = projectPath(page);
  const tabs = html`<nav class="tabs" aria-label="Pipeline scopes">${TABS.map(
    (t) => html`<a href="${base}/-/pipelines${t.key === 'all' ? '' : `?scope=${t.key}`}"${t === tab ? html` aria-current="page"` : ''}>${t.text}</a>`,
  )}</nav>`;
  const body = rows.length
    ? html`<table class="pipelines">
<thead><tr><th scope="col">Status</th><th scope="col">Pipeline</th><th scope="col">Triggerer</th><th scope="col">Stages</th><th scope="col">Duration</th><th scope="col">Created</th></tr></thead>
<tbody>${rows.map((p) => {
        const commit = commits.get(p.sha);
        const title = commit ? commit.message.split('\n')[0] : '';
        return html`<tr>
<td>${statusBadge(p.status)}</td>
<td><a href="${pipelineHref(page, p.id)}" class="title">#${p.id}</a>${title ? html` <span class="commit-title">${title}</span>` : ''}
<div class="meta muted small">${refLink(page, p)} · <a class="sha" href="${base}/-/commit/${p.sha}">${p.sha.slice(0, 8)}</a>${p.source !== 'push' ? html` · ${p.source.replace(/_/g, ' ')}` : ''}${p.yaml_errors ? html` · <span class="badge failed">yaml invalid</span>` : ''}</div></td>
<td>${triggerer(p.user_id ? users.get(p.user_id) : undefined)}</td>
<td><span class="mini-stages">${stages.filter((s) => s.pipeline_id === p.id).map((s) => html`<span class="badge ${s.status}" title="${s.name}: ${s.status}">${s.name}</span>`)}</span></td>
<td>${formatDuration(p.duration)}</td>
<td>${timeAgo(p.created_at as any)}</td>
</tr>`;
      })}</tbody></table>`
    : html`<div class="empty card">There are no pipelines to show here.</div>`;
  return sendPage(ctx, {
    title: 'Pipelines',
    project: page,
    section: 'pipelines',
    breadcrumbs: projectCrumbs(page, ['Pipelines']),
    body: html`<div class="spread"><h1>Pipelines</h1><span>${page.can('admin_project') ? actionButton(ctx, `${base}/-/settings/ci_cd/reset_cache`, 'Clear runner caches') : ''} <a class="button secondary" href="${base}/-/jobs">Jobs</a></span></div>
${ctx.query.cache_cleared === '1' ? html`<div class="alert" role="status">Project cache successfully reset.</div>` : ''}
${tabs}
<div class="scroll-x">${body}</div>
${pagination(ctx, paging.page, Number(count.n), paging.perPage)}`,
  });
}

/** The jobs of a pipeline a page shows: the latest attempt of each, in stage order. */
async function pipelineJobs(ctx: PageContext, pipelineId: number) {
  return ctx.cairn.db.selectFrom('ci_builds').selectAll()
    .where('pipeline_id', '=', pipelineId).where('retried', '=', false)
    .orderBy('stage_idx').orderBy('id').execute();
}

function jobNode(page: ProjectPage, b: CiBuild): SafeHtml {
  const type = b.type as string;
  if (type === 'Ci::Bridge') {
    return html`<li>${b.downstream_pipeline_id ? html`<a href="${pipelineHref(page, b.downstream_pipeline_id)}">${b.name}</a>` : b.name}${statusBadge(b.status)}</li>`;
  }
  if (type !== 'Ci::Build') {
    // An external status (POST /statuses): its link, when it has a web one.
    const url = (b as CiBuild & { target_url?: string | null }).target_url;
    return html`<li>${url && /^https?:\/\//i.test(url) ? html`<a href="${url}" rel="noopener noreferrer">${b.name}</a>` : b.name}${statusBadge(b.status)}</li>`;
  }
  return html`<li><a href="${jobHref(page, b.id)}">${b.name}</a>${statusBadge(b.status)}</li>`;
}

async function pipelineShow(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_pipeline');
  const db = ctx.cairn.db;
  const p = await loadPipeline(ctx, page, idParam(ctx));
  const [stages, jobs, user, commits, children] = await Promise.all([
    db.selectFrom('ci_stages').selectAll().where('pipeline_id', '=', p.id).orderBy('position').orderBy('id').execute(),
    pipelineJobs(ctx, p.id),
    p.user_id ? findUserById(db, p.user_id) : undefined,
    page.can('download_code') ? readCommits(ctx.cairn.catfile, gitDirOf(ctx, page), [p.sha]) : new Map(),
    db.selectFrom('ci_pipelines').select(['id', 'status', 'ref']).where('parent_pipeline_id', '=', p.id).orderBy('id').execute(),
  ]);
  const commit = commits.get(p.sha);
  const base = projectPath(page);
  const mayUpdate = !!ctx.user && page.can('update_pipeline');
  const retryable = jobs.some((b) => (b.status === 'failed' || b.status === 'canceled') && (b.type as string) !== 'GenericCommitStatus');
  const cancelable = jobs.some((b) => CANCELABLE_STATUSES.includes(b.status));
  const actions = mayUpdate
    ? html`<div class="row">${retryable ? actionButton(ctx, `${pipelineHref(page, p.id)}/retry`, 'Retry') : ''}${cancelable ? actionButton(ctx, `${pipelineHref(page, p.id)}/cancel`, 'Cancel pipeline', 'danger') : ''}</div>`
    : html``;

  const byStage = new Map<string, CiBuild[]>();
  for (const b of jobs) byStage.set(b.stage, [...(byStage.get(b.stage) ?? []), b]);
  const stageList = stages.length ? stages.map((s) => ({ name: s.name, status: s.status as string })) : [...byStage.keys()].map((name) => ({ name, status: '' }));
  const graph = jobs.length
    ? html`<div class="stages" role="list" aria-label="Stages">${stageList.filter((s) => byStage.has(s.name)).map(
        (s) => html`<section class="stage" role="listitem" aria-label="Stage ${s.name}"><h3>${s.name}${s.status ? html` ${statusBadge(s.status)}` : ''}</h3><ul>${byStage.get(s.name)!.map((b) => jobNode(page, b))}</ul></section>`,
      )}</div>`
    : html`<p class="muted">This pipeline has no jobs.</p>`;

  const builds = jobs.filter((b) => (b.type as string) === 'Ci::Build');
  const stuck = await stuckJobIds(db, builds.filter((b) => b.status === 'pending').map((b) => b.id));
  const table = builds.length
    ? html`<div class="scroll-x"><table class="jobs">
<thead><tr><th scope="col">Status</th><th scope="col">Job</th><th scope="col">Stage</th><th scope="col">Duration</th><th scope="col">Coverage</th></tr></thead>
<tbody>${builds.map((b) => {
        const needs = ((b.options as { needs?: { name: string }[] | null }).needs ?? []).map((n) => n.name);
        return html`<tr><td>${statusBadge(b.status)}</td>
<td><a href="${jobHref(page, b.id)}">${b.name}</a> <span class="muted small">#${b.id}</span>${stuck.has(b.id) ? html` <span class="badge warn" title="no online runner can take this job">stuck</span>` : ''}${b.allow_failure ? html` <span class="badge warn">allowed to fail</span>` : ''}${needs.length ? html`<div class="muted small">needs: ${needs.join(', ')}</div>` : ''}</td>
<td>${b.stage}</td><td>${formatDuration(jobDuration(b))}</td><td>${b.coverage === null ? '' : `${Number(b.coverage).toFixed(2)}%`}</td></tr>`;
      })}</tbody></table></div>`
    : html``;

  return sendPage(ctx, {
    title: `Pipeline #${p.id}`,
    project: page,
    section: 'pipelines',
    breadcrumbs: projectCrumbs(page, ['Pipelines', `${base}/-/pipelines`], [`#${p.id}`]),
    body: html`<div class="spread"><h1>${statusBadge(p.status, { live: false })} Pipeline #${p.id}</h1>${actions}</div>
<div class="card"><dl class="facts">
${commit ? html`<dt>Commit</dt><dd><a href="${base}/-/commit/${p.sha}">${commit.message.split('\n')[0]}</a></dd>` : ''}
<dt>Ref</dt><dd>${refLink(page, p)} · <a class="sha" href="${base}/-/commit/${p.sha}">${p.sha.slice(0, 8)}</a></dd>
<dt>Triggered</dt><dd>${timeAgo(p.created_at as any)}${user ? html` by <a href="/${pathUrl(user.username)}">${user.name}</a>` : ''} · ${p.source.replace(/_/g, ' ')}</dd>
${p.duration !== null ? html`<dt>Duration</dt><dd>${formatDuration(p.duration)}${p.queued_duration !== null ? html` <span class="muted">(queued for ${formatDuration(p.queued_duration)})</span>` : ''}</dd>` : ''}
${p.parent_pipeline_id ? html`<dt>Parent</dt><dd><a href="${pipelineHref(page, p.parent_pipeline_id)}">#${p.parent_pipeline_id}</a></dd>` : ''}
${children.length ? html`<dt>Downstream</dt><dd>${children.map((c, i) => html`${i ? ', ' : ''}<a href="${pipelineHref(page, c.id)}">#${c.id}</a> ${statusBadge(c.status)}`)}</dd>` : ''}
</dl></div>
${p.yaml_errors ? html`<div class="alert error" role="alert"><strong>This pipeline's configuration is invalid:</strong> ${p.yaml_errors}</div>` : ''}
${stuck.size ? html`<div class="alert warn" role="status"><p><strong>${stuck.size === 1 ? 'A job of this pipeline is' : `${stuck.size} jobs of this pipeline are`} stuck: no online runner can take ${stuck.size === 1 ? 'it' : 'them'}.</strong></p><p>${RUNNER_INSTALL_HINT}</p></div>` : ''}
<h2>Stages</h2>
${graph}
${builds.length ? html`<h2>Jobs <span class="count muted">${builds.length}</span></h2>${table}` : ''}`,
  });
}

async function pipelineAction(ctx: PageContext, page: ProjectPage, action: 'retry' | 'cancel') {
  const user = requireCsrf(ctx);
  requireAbility(ctx, page, 'read_pipeline');
  const p = await loadPipeline(ctx, page, idParam(ctx));
  requireAbility(ctx, page, 'update_pipeline', 'forbid');
  // As the API: a pipeline of a ref the user may not push or merge to is not theirs to rerun or stop.
  if (!(await canUpdateRef(ctx.cairn.db, page.project, user, page.subject.accessLevel, p.ref, p.tag))) throw pageForbidden();
  if (action === 'retry') await retryPipeline(ctx.cairn, p.id, user.id);
  else await cancelPipeline(ctx.cairn, p.id);
  throw new PageRedirect(pipelineHref(page, p.id), 303);
}

/**
 * GitLab's "Clear runner caches" (POST /-/settings/ci_cd/reset_cache, maintainers): every cache
 * key of the jobs created from now on changes (the project's jobs_cache_index), and the stored
 * archives are deleted (src/services/ci_caches.ts).
 */
async function resetRunnerCaches(ctx: PageContext, page: ProjectPage) {
  requireCsrf(ctx);
  requireAbility(ctx, page, 'read_pipeline');
  requireAbility(ctx, page, 'admin_project', 'forbid');
  await clearProjectCaches(ctx.cairn, page.project.id);
  throw new PageRedirect(`${projectPath(page)}/-/pipelines?cache_cleared=1`, 303);
}

export function registerPipelinePages(pages: PageRegistry) {
  pages.projectPage('POST', 'settings/ci_cd/reset_cache', resetRunnerCaches);
  pages.projectPage('GET', 'pipelines', pipelinesList);
  pages.projectPage('GET', 'pipelines/:id', pipelineShow);
  pages.projectPage('POST', 'pipelines/:id/retry', (ctx, page) => pipelineAction(ctx, page, 'retry'));
  pages.projectPage('POST', 'pipelines/:id/cancel', (ctx, page) => pipelineAction(ctx, page, 'cancel'));
}
