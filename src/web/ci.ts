import type { CiBuild, CiPipeline } from '../db/schema/ci.js';
import type { PageContext, ProjectPage } from './context.js';
import { pageNotFound } from './context.js';
import { html, type SafeHtml } from './html.js';
import { projectPath } from './layout.js';

/**
 * What the CI pages (pipelines, jobs) share: status badges as GitLab words them, durations,
 * the numbered pager, and loading a pipeline or job of the page's project (404 otherwise).
 */

/** GitLab's words for statuses where they differ from the status itself. */
const STATUS_LABELS: Record<string, string> = { success: 'passed', scheduled: 'delayed', waiting_for_resource: 'waiting', manual: 'manual' };

export function statusLabel(status: string): string {
  return STATUS_LABELS[status] ?? status;
}

/** A status badge (`live`: the job page's badge the live log updates). */
export function statusBadge(status: string, opts: { live?: boolean; title?: string } = {}): SafeHtml {
  return html`<span class="badge ${status}"${opts.live ? html` data-job-status` : ''}${opts.title ? html` title="${opts.title}"` : ''}>${statusLabel(status)}</span>`;
}

/** Statuses in which a job may still write to its log (the live log follows these). */
export const LIVE_STATUSES = ['created', 'waiting_for_resource', 'preparing', 'pending', 'running', 'scheduled'];

/** `1h 02m 03s`, `4m 05s`, `12s`; empty for null. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '';
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (h) return `${h}h ${pad(m)}m ${pad(sec)}s`;
  if (m) return `${m}m ${pad(sec)}s`;
  return `${sec}s`;
}

/** Seconds between two timestamps (to now when the second is missing); null without a start. */
export function secondsBetween(from: unknown, to: unknown): number | null {
  if (!from) return null;
  const end = to ? new Date(to as string).getTime() : Date.now();
  return Math.max(0, (end - new Date(from as string).getTime()) / 1000);
}

/** A job's duration as the API computes it (started → finished, or → now while it runs). */
export function jobDuration(b: Pick<CiBuild, 'started_at' | 'finished_at'>): number | null {
  return secondsBetween(b.started_at, b.finished_at);
}

/** An id from the path (`:id`), or 404. */
export function idParam(ctx: PageContext, name = 'id'): number {
  const v = ctx.params[name] ?? '';
  if (!/^\d{1,10}$/.test(v) || Number(v) > 2147483647) throw pageNotFound();
  return Number(v);
}

export async function loadPipeline(ctx: PageContext, page: ProjectPage, id: number): Promise<CiPipeline> {
  const p = await ctx.cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', id).where('project_id', '=', page.project.id).executeTakeFirst();
  if (!p) throw pageNotFound();
  return p;
}

/** A job (not a bridge) of the page's project. */
export async function loadJob(ctx: PageContext, page: ProjectPage, id: number): Promise<CiBuild> {
  const job = await ctx.cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', id).where('project_id', '=', page.project.id).where('type', '=', 'Ci::Build').executeTakeFirst();
  if (!job) throw pageNotFound();
  return job;
}

export const pipelineHref = (page: ProjectPage, id: number) => `${projectPath(page)}/-/pipelines/${id}`;
export const jobHref = (page: ProjectPage, id: number) => `${projectPath(page)}/-/jobs/${id}`;

/** A hidden CSRF field and a button, posting to `action`. */
export function actionButton(ctx: PageContext, action: string, label: string, cls = 'secondary'): SafeHtml {
  return html`<form method="post" action="${action}" class="inline"><input type="hidden" name="authenticity_token" value="${ctx.csrfToken}"><button type="submit" class="${cls}">${label}</button></form>`;
}
