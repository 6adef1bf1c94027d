import { cancelBuild, CANCELABLE_STATUSES, COMPLETED_STATUSES, isPlayable, isRetryable, playBuild, retryBuild } from '../../ci/jobs/state.js';
import { pageOf, pagination } from '../components/pagination.js';
import { readTrace, readTraceFrom, traceLength } from '../../ci/trace.js';
import { RUNNER_INSTALL_HINT, stuckExplanation, stuckJobIds } from '../../ci/jobs/stuck.js';
import type { CiBuild } from '../../db/schema/ci.js';
import { projectJobsQuery } from '../../finders/pipelines.js';
import { canUpdateRef } from '../../policies/branches.js';
import { canDeployTo } from '../../policies/environments.js';
import { actionButton, formatDuration, idParam, jobDuration, jobHref, LIVE_STATUSES, loadJob, pipelineHref, statusBadge } from '../ci.js';
import { PageRedirect, pageBadRequest, pageForbidden, requireAbility, requireCsrf, type PageContext, type ProjectPage } from '../context.js';
import { html, pathUrl, timeAgo } from '../html.js';
import { LogText } from '../job_log.js';
import { jobLogStream } from '../log_stream.js';
import { projectCrumbs, projectPath, sendPage } from '../layout.js';
import type { PageRegistry } from '../router.js';

/**
 * Jobs: the list (/-/jobs), a job (/-/jobs/:id, GitLab's web_url of a job) with its log — live
 * while the job runs (src/web/log_stream.ts) — its raw log (/-/jobs/:id/raw), and the retry,
 * cancel and play buttons, which go through the same state machine and checks as the API's
 * POST /projects/:id/jobs/:job_id/retry|cancel|play.
 */
const PER_PAGE = 30;
/** The end of a longer log is shown (the raw log has all of it). */
const SHOWN_LOG_BYTES = 1024 * 1024;

const TABS: { key: string; text: string; statuses: readonly string[] | null }[] = [
  { key: 'all', text: 'All', statuses: null },
  { key: 'pending', text: 'Pending', statuses: ['pending'] },
  { key: 'running', text: 'Running', statuses: ['running'] },
  { key: 'finished', text: 'Finished', statuses: COMPLETED_STATUSES },
];

async function jobsList(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_build');
  const db = ctx.cairn.db;
  const tab = TABS.find((t) => t.key === ctx.query.scope) ?? TABS[0];
  const paging = pageOf(ctx, PER_PAGE);
  const query = projectJobsQuery(db, page.project.id, tab.statuses);
  const [rows, count] = await Promise.all([
    query.selectAll().orderBy('id', 'desc').limit(paging.perPage).offset(paging.offset).execute(),
    query.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  const runnerIds = [...new Set(rows.flatMap((r) => (r.runner_id ? [r.runner_id] : [])))];
  const runners = runnerIds.length ? await db.selectFrom('ci_runners').select(['id', 'description']).where('id', 'in', runnerIds).execute() : [];
  const base = projectPath(page);
  const tabs = html`<nav class="tabs" aria-label="Job scopes">${TABS.map(
    (t) => html`<a href="${base}/-/jobs${t.key === 'all' ? '' : `?scope=${t.key}`}"${t === tab ? html` aria-current="page"` : ''}>${t.text}</a>`,
  )}</nav>`;
  const body = rows.length
    ? html`<div class="scroll-x"><table class="jobs">
<thead><tr><th scope="col">Status</th><th scope="col">Job</th><th scope="col">Pipeline</th><th scope="col">Stage</th><th scope="col">Runner</th><th scope="col">Duration</th><th scope="col">Created</th></tr></thead>
<tbody>${rows.map((b) => {
        const runner = b.runner_id ? runners.find((r) => r.id === b.runner_id) : undefined;
        return html`<tr><td>${statusBadge(b.status)}</td>
<td><a href="${jobHref(page, b.id)}" class="title">${b.name}</a> <span class="muted small">#${b.id}</span>
<div class="muted small"><a class="ref" href="${base}/-/commits/${pathUrl(b.ref)}">${b.ref}</a> · <a class="sha" href="${base}/-/commit/${b.sha}">${b.sha.slice(0, 8)}</a></div></td>
<td><a href="${pipelineHref(page, b.pipeline_id)}">#${b.pipeline_id}</a></td>
<td>${b.stage}</td>
<td>${runner ? html`#${runner.id}${runner.description ? html` <span class="muted small">${runner.description}</span>` : ''}` : ''}</td>
<td>${formatDuration(jobDuration(b))}</td><td>${timeAgo(b.created_at as any)}</td></tr>`;
      })}</tbody></table></div>`
    : html`<div class="empty card">There are no jobs to show here.</div>`;
  return sendPage(ctx, {
    title: 'Jobs',
    project: page,
    section: 'jobs',
    breadcrumbs: projectCrumbs(page, ['Jobs']),
    body: html`<div class="spread"><h1>Jobs</h1><a class="button secondary" href="${base}/-/pipelines">Pipelines</a></div>${tabs}${body}
${pagination(ctx, paging.page, Number(count.n), paging.perPage)}`,
  });
}

/** The log a job page shows first: its end (at most SHOWN_LOG_BYTES), as text, and the offset the live stream continues from. */
async function shownLog(ctx: PageContext, job: CiBuild, live: boolean) {
  const total = await traceLength(ctx.cairn.db, job.id);
  const from = Math.max(0, total - SHOWN_LOG_BYTES);
  const log = new LogText(from);
  let text = total ? log.push(await readTraceFrom(ctx.cairn.db, job.id, from)) : '';
  if (from > 0) text = text.slice(text.indexOf('\n') + 1); // from a whole line on
  if (!live) text += log.flush();
  return { text, offset: log.offset, truncated: from > 0 };
}

async function jobShow(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_build');
  const db = ctx.cairn.db;
  const job = await loadJob(ctx, page, idParam(ctx));
  const live = LIVE_STATUSES.includes(job.status);
  const [pipeline, runner, user, log, mayDeploy, latest, stuck] = await Promise.all([
    db.selectFrom('ci_pipelines').select(['id', 'status', 'ref']).where('id', '=', job.pipeline_id).executeTakeFirst(),
    job.runner_id ? db.selectFrom('ci_runners').select(['id', 'description']).where('id', '=', job.runner_id).executeTakeFirst() : undefined,
    job.user_id ? db.selectFrom('users').select(['id', 'username', 'name']).where('id', '=', job.user_id).executeTakeFirst() : undefined,
    shownLog(ctx, job, live),
    ctx.user && page.can('update_build') ? canDeployTo(db, page.project.id, job.environment, ctx.user, page.subject.accessLevel) : false,
    // An older attempt: the latest one of the same job.
    job.retried
      ? db.selectFrom('ci_builds').select('id').where('pipeline_id', '=', job.pipeline_id).where('name', '=', job.name)
          .where('retried', '=', false).where('type', '=', 'Ci::Build').orderBy('id', 'desc').limit(1).executeTakeFirst()
      : undefined,
    job.status === 'pending' ? stuckJobIds(db, [job.id]).then((s) => s.has(job.id)) : false,
  ]);
  const base = projectPath(page);
  const href = jobHref(page, job.id);
  const actions = mayDeploy
    ? html`<div class="row">${isRetryable(job) ? actionButton(ctx, `${href}/retry`, 'Retry') : ''}${CANCELABLE_STATUSES.includes(job.status) ? actionButton(ctx, `${href}/cancel`, 'Cancel', 'danger') : ''}${isPlayable(job) ? actionButton(ctx, `${href}/play`, job.status === 'manual' || job.status === 'scheduled' ? 'Run' : 'Run again', 'ok') : ''}</div>`
    : html``;
  const stuckBlock = stuck ? html`<div class="alert warn" role="status"><p><strong>${stuckExplanation(job.tag_list)}</strong></p><p>${RUNNER_INSTALL_HINT}</p></div>` : html``;
  const note =
    job.status === 'pending' || job.status === 'created' || job.status === 'waiting_for_resource' || job.status === 'preparing'
      ? html`<p class="muted">This job has not started yet: it waits for ${job.status === 'created' ? 'the jobs before it' : 'a runner'}.</p>`
      : job.status === 'manual'
        ? html`<p class="muted">This job requires a manual action.</p>`
        : job.status === 'scheduled'
          ? html`<p class="muted">This is a delayed job: it runs ${timeAgo(job.scheduled_at as any)}.</p>`
          : html``;
  const stream = live ? `${href}/trace/stream?offset=${log.offset}` : null;
  const pre = html`<pre class="log" id="job-log" tabindex="0" aria-label="Job log"${stream ? html` data-log-stream="${stream}" aria-busy="true"` : ''}>${log.text}</pre>`;
  return sendPage(ctx, {
    title: `${job.name} (#${job.id})`,
    project: page,
    section: 'jobs',
    breadcrumbs: projectCrumbs(page, ['Jobs', `${base}/-/jobs`], [`#${job.id}`]),
    body: html`<div class="spread"><h1>${job.name} ${statusBadge(job.status, { live: true })}</h1>${actions}</div>
${latest ? html`<div class="alert warn">This job has been retried: see <a href="${jobHref(page, latest.id)}">its latest attempt, #${latest.id}</a>.</div>` : ''}
${job.status === 'failed' ? html`<div class="alert error" role="alert">${failureMessage(job.failure_reason)}</div>` : ''}
<div class="job-page"><div class="job-log">${stuckBlock}${note}
<div class="spread log-head"><span class="muted small">${log.truncated ? 'Showing the end of the log.' : ''}</span><a class="button secondary small" href="${href}/raw">Raw log</a></div>
${pre}</div>
<aside class="card job-facts" aria-label="Job details"><dl class="facts">
<dt>Job</dt><dd>#${job.id}</dd>
<dt>Stage</dt><dd>${job.stage}</dd>
${pipeline ? html`<dt>Pipeline</dt><dd><a href="${pipelineHref(page, pipeline.id)}">#${pipeline.id}</a> ${statusBadge(pipeline.status)}</dd>` : ''}
<dt>Ref</dt><dd><a href="${base}/-/commits/${pathUrl(job.ref)}">${job.ref}</a> · <a class="sha" href="${base}/-/commit/${job.sha}">${job.sha.slice(0, 8)}</a></dd>
<dt>Runner</dt><dd>${runner ? html`#${runner.id}${runner.description ? ` (${runner.description})` : ''}` : html`<span class="muted">none yet</span>`}</dd>
<dt>Duration</dt><dd>${formatDuration(jobDuration(job)) || html`<span class="muted">not started</span>`}</dd>
${job.started_at ? html`<dt>Started</dt><dd>${timeAgo(job.started_at as any)}</dd>` : ''}
${job.finished_at ? html`<dt>Finished</dt><dd>${timeAgo(job.finished_at as any)}</dd>` : ''}
${user ? html`<dt>Triggered by</dt><dd><a href="/${pathUrl(user.username)}">${user.name}</a></dd>` : ''}
${job.coverage !== null ? html`<dt>Coverage</dt><dd>${Number(job.coverage).toFixed(2)}%</dd>` : ''}
${job.tag_list.length ? html`<dt>Tags</dt><dd>${job.tag_list.map((t) => html`<span class="badge">${t}</span> `)}</dd>` : ''}
</dl></aside></div>`,
  });
}

/** The whole log as the runner sent it, as plain text (as GET /api/v4/projects/:id/jobs/:job_id/trace). */
async function jobRaw(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_build');
  const job = await loadJob(ctx, page, idParam(ctx));
  const trace = await readTrace(ctx.cairn.db, job.id);
  return ctx.reply.code(200).headers({ 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }).send(trace ?? '');
}

async function jobAction(ctx: PageContext, page: ProjectPage, action: 'retry' | 'cancel' | 'play') {
  const user = requireCsrf(ctx);
  requireAbility(ctx, page, 'read_build');
  const job = await loadJob(ctx, page, idParam(ctx));
  requireAbility(ctx, page, 'update_build', 'forbid');
  // As the API: a job of a ref the user may not push or merge to is not theirs to run or stop.
  if (!(await canUpdateRef(ctx.cairn.db, page.project, user, page.subject.accessLevel, job.ref, job.tag))) throw pageForbidden();
  let target: CiBuild | null = job;
  if (action === 'cancel') {
    await cancelBuild(ctx.cairn, job.id);
  } else {
    // As the API: a deployment job needs the right to deploy to its environment.
    if (!(await canDeployTo(ctx.cairn.db, page.project.id, job.environment, user, page.subject.accessLevel))) throw pageForbidden();
    if (action === 'retry') {
      if (!isRetryable(job)) throw pageForbidden('Job is not retryable.');
      target = await retryBuild(ctx.cairn, job.id, user.id);
      if (!target) throw pageForbidden('Job is not retryable.');
    } else {
      if (!isPlayable(job)) throw pageBadRequest('Unplayable job.');
      target = await playBuild(ctx.cairn, job.id, user.id, []);
      if (!target) throw pageBadRequest('Unplayable job.');
    }
  }
  throw new PageRedirect(jobHref(page, target.id), 303);
}

/** Why a job failed, in words (GitLab's job failure messages for the reasons that need explaining). */
function failureMessage(reason: string | null): string {
  switch (reason) {
    case 'protected_environment_failure':
      return 'This job failed: the environment this job is deploying to is protected. Only users with permission may successfully run this job.';
    case 'environment_creation_failure':
      return 'This job failed: the environment this job deploys to could not be created.';
    default:
      return `This job failed: ${(reason ?? 'unknown_failure').replace(/_/g, ' ')}.`;
  }
}

export function registerJobPages(pages: PageRegistry) {
  pages.projectPage('GET', 'jobs', jobsList);
  pages.projectPage('GET', 'jobs/:id', jobShow);
  pages.projectPage('GET', 'jobs/:id/raw', jobRaw);
  pages.projectPage('GET', 'jobs/:id/trace/stream', jobLogStream);
  pages.projectPage('POST', 'jobs/:id/retry', (ctx, page) => jobAction(ctx, page, 'retry'));
  pages.projectPage('POST', 'jobs/:id/cancel', (ctx, page) => jobAction(ctx, page, 'cancel'));
  pages.projectPage('POST', 'jobs/:id/play', (ctx, page) => jobAction(ctx, page, 'play'));
}
