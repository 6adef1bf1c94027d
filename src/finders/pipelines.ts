import { sql } from 'kysely';
import { COMPLETED_STATUSES, JOB_SCOPES } from '../ci/jobs/state.js';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { CiBuild, CiJobArtifact, CiPipeline, CiStatus } from '../db/schema/ci.js';
import { readCommits } from '../git/refs.js';
import type { JobExtras, PipelineExtras } from '../presenters/ci.js';
import type { ProjectRow } from '../presenters/projects.js';
import { projectRepoPath } from '../services/projects.js';
import { findUserById, findUsersByIds } from './users.js';

/**
 * A project's pipelines and jobs as the API lists them (GET /projects/:id/pipelines and /jobs)
 * and the web pages show them (/-/pipelines, /-/jobs): one place for the filters, so both agree.
 * Parameters arrive validated (the API answers 400 for bad ones before calling this).
 */
export const PIPELINE_SCOPES = ['running', 'pending', 'finished', 'branches', 'tags'] as const;
export const PIPELINE_STATUSES = ['created', 'waiting_for_resource', 'preparing', 'pending', 'running', 'success', 'failed', 'canceled', 'skipped', 'manual', 'scheduled'] as const;
export const PIPELINE_ORDER_BY = ['id', 'status', 'ref', 'updated_at', 'user_id'] as const;

export interface PipelineFilters {
  scope?: (typeof PIPELINE_SCOPES)[number];
  status?: string;
  source?: string;
  ref?: string;
  sha?: string;
  name?: string;
  yamlErrors?: boolean;
  username?: string;
  updatedAfter?: Date;
  updatedBefore?: Date;
  createdAfter?: Date;
  createdBefore?: Date;
  /** The pipelines a schedule ran (GET /pipeline_schedules/:id/pipelines). */
  pipelineScheduleId?: number;
}

/** The pipelines of a project matching the filters (`p`), to select, order and count. */
export function pipelinesQuery(db: Database, projectId: number, f: PipelineFilters) {
  let query = db.selectFrom('ci_pipelines as p').where('p.project_id', '=', projectId);
  if (f.scope === 'running') query = query.where('p.status', '=', 'running');
  if (f.scope === 'pending') query = query.where('p.status', '=', 'pending');
  if (f.scope === 'finished') query = query.where('p.status', 'in', COMPLETED_STATUSES);
  if (f.scope === 'branches' || f.scope === 'tags') {
    // The latest pipeline of each branch (or tag).
    const tag = f.scope === 'tags';
    query = query.where('p.id', 'in', (eb) =>
      eb.selectFrom('ci_pipelines as l').select((e) => e.fn.max('l.id').as('id')).where('l.project_id', '=', projectId).where('l.tag', '=', tag).groupBy('l.ref'));
  }
  if (f.status) query = query.where('p.status', '=', f.status as CiStatus);
  if (f.source) query = query.where('p.source', '=', f.source);
  if (f.ref) query = query.where('p.ref', '=', f.ref);
  if (f.sha) query = query.where('p.sha', '=', f.sha);
  if (f.name) query = query.where('p.name', '=', f.name);
  if (f.yamlErrors === true) query = query.where('p.yaml_errors', 'is not', null);
  if (f.yamlErrors === false) query = query.where('p.yaml_errors', 'is', null);
  if (f.username !== undefined) {
    query = query.where('p.user_id', 'in', (eb) => eb.selectFrom('users').select('id').where(sql`lower(username)`, '=', f.username!.toLowerCase()));
  }
  if (f.updatedAfter) query = query.where('p.updated_at', '>', f.updatedAfter);
  if (f.updatedBefore) query = query.where('p.updated_at', '<', f.updatedBefore);
  if (f.createdAfter) query = query.where('p.created_at', '>', f.createdAfter);
  if (f.createdBefore) query = query.where('p.created_at', '<', f.createdBefore);
  if (f.pipelineScheduleId !== undefined) query = query.where('p.pipeline_schedule_id', '=', f.pipelineScheduleId);
  return query;
}

/** A project's jobs (not bridges, not external statuses), optionally of some statuses (the API's `scope`). */
export function projectJobsQuery(db: Database, projectId: number, statuses: readonly string[] | null) {
  let q = db.selectFrom('ci_builds').where('project_id', '=', projectId).where('type', '=', 'Ci::Build');
  if (statuses) q = q.where('status', 'in', statuses as CiStatus[]);
  return q;
}

export { JOB_SCOPES };

/** What the Pipeline entity shows besides the row: its user, and coverage and warnings from its latest jobs. */
export async function loadPipelineExtras(db: Database, p: CiPipeline): Promise<PipelineExtras> {
  const [user, builds] = await Promise.all([
    p.user_id ? findUserById(db, p.user_id) : undefined,
    db.selectFrom('ci_builds').select(['coverage', 'status', 'allow_failure']).where('pipeline_id', '=', p.id).where('retried', '=', false).execute(),
  ]);
  const covered = builds.filter((b) => b.coverage !== null);
  const coverage = covered.length ? covered.reduce((s, b) => s + Number(b.coverage), 0) / covered.length : null;
  const warnings = builds.some((b) => b.allow_failure && (b.status === 'failed' || b.status === 'canceled'));
  return { user: user ?? null, coverage, warnings };
}

/** What a page of jobs shows (users, pipelines, runners, artifacts, commits): one read per kind. */
export async function loadJobExtras(cairn: Cairn, project: ProjectRow, builds: CiBuild[]): Promise<JobExtras> {
  const db = cairn.db;
  const userIds = [...new Set(builds.flatMap((b) => (b.user_id ? [b.user_id] : [])))];
  const pipelineIds = [...new Set(builds.flatMap((b) => [b.pipeline_id, ...(b.downstream_pipeline_id ? [b.downstream_pipeline_id] : [])]))];
  const runnerIds = [...new Set(builds.flatMap((b) => (b.runner_id ? [b.runner_id] : [])))];
  const buildIds = builds.map((b) => b.id);
  const [users, pipelines, runners, artifacts, commits] = await Promise.all([
    findUsersByIds(db, userIds),
    pipelineIds.length ? db.selectFrom('ci_pipelines').selectAll().where('id', 'in', pipelineIds).execute() : [],
    runnerIds.length ? db.selectFrom('ci_runners').selectAll().where('id', 'in', runnerIds).execute() : [],
    buildIds.length ? db.selectFrom('ci_job_artifacts').selectAll().where('job_id', 'in', buildIds).orderBy('id').execute() : [],
    readCommits(cairn.catfile, projectRepoPath(cairn, project), [...new Set(builds.map((b) => b.sha))]),
  ]);
  const byJob = new Map<number, CiJobArtifact[]>();
  for (const a of artifacts) byJob.set(a.job_id, [...(byJob.get(a.job_id) ?? []), a]);
  return {
    users,
    pipelines: new Map(pipelines.map((p) => [p.id, p])),
    commits,
    runners: new Map(runners.map((r) => [r.id, r])),
    artifacts: byJob,
  };
}
