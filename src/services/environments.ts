import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import type { CiBuild } from '../db/schema/ci.js';
import type { Deployment, DeploymentStatus, Environment, EnvironmentTier } from '../db/schema/environments.js';
import { defineMachine, transition } from '../db/state_machine.js';
import { defineRecurring } from '../jobs/queue.js';
import { environmentNameError, environmentSlug, guessTier } from '../lib/environments.js';
import { validationFailed } from '../plugins/errors.js';
import { parseDuration } from '../ci/config/duration.js';
import type { CompiledEnvironment } from '../ci/config/index.js';
import { nextInternalId } from './internal_ids.js';

// Environments and deployments (GitLab's Environment and Deployment models). A job with
// `environment:` finds or makes its environment when its pipeline is created; a job that starts
// the environment (action `start`, the default) also gets a deployment, which follows the job's
// status from then on. A successful `stop` job stops its environment; stopping an environment
// plays the `on_stop` job of its last deployment.

/** GitLab's environment state machine. */
export const ENVIRONMENT_MACHINE = defineMachine('environments', 'state', {
  start: { from: ['stopped', 'stopping'], to: 'available' },
  /** Stopping with stop jobs to run: stopped once one of them succeeds. */
  stop: { from: ['available'], to: 'stopping' },
  stop_complete: { from: ['available', 'stopping'], to: 'stopped' },
  recover_stuck_stopping: { from: ['stopping'], to: 'available' },
});

/** GitLab's deployment state machine (the API's status updates take the same events). */
export const DEPLOYMENT_MACHINE = defineMachine('deployments', 'status', {
  run: { from: ['created', 'blocked'], to: 'running' },
  block: { from: ['created'], to: 'blocked' },
  unblock: { from: ['blocked'], to: 'created' },
  succeed: { from: ['created', 'running', 'failed', 'canceled', 'skipped', 'blocked'], to: 'success' },
  drop: { from: ['created', 'running', 'success', 'canceled', 'skipped', 'blocked'], to: 'failed' },
  cancel: { from: ['created', 'running', 'success', 'failed', 'skipped', 'blocked'], to: 'canceled' },
  skip: { from: ['created', 'running', 'success', 'failed', 'blocked'], to: 'skipped' },
});

const EVENT_FOR: Partial<Record<DeploymentStatus, 'run' | 'block' | 'succeed' | 'drop' | 'cancel' | 'skip'>> = {
  running: 'run',
  blocked: 'block',
  success: 'succeed',
  failed: 'drop',
  canceled: 'cancel',
  skipped: 'skip',
};
export const FINISHED_DEPLOYMENT_STATUSES: DeploymentStatus[] = ['success', 'failed', 'canceled'];

/** A deployment's status from its job's (GitLab's sync_status_with: a manual job blocks it). */
function deploymentStatusOf(jobStatus: string): DeploymentStatus | null {
  if (jobStatus === 'manual') return 'blocked';
  return (['running', 'success', 'failed', 'canceled', 'skipped'] as string[]).includes(jobStatus) ? (jobStatus as DeploymentStatus) : null;
}

function environmentOf(build: Pick<CiBuild, 'options'>): CompiledEnvironment | null {
  return ((build.options ?? {}) as { environment?: CompiledEnvironment | null }).environment ?? null;
}

export interface EnvironmentAttributes {
  externalUrl?: string | null;
  tier?: EnvironmentTier | null;
  description?: string | null;
}

/** An external URL GitLab accepts: http(s) only (no javascript: and the like), at most 255 characters. */
export function externalUrlError(url: string): string | null {
  if (url.length > 255) return 'is too long (maximum is 255 characters)';
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is blocked: URI is invalid';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return 'is blocked: Only allowed schemes are http, https';
  return null;
}

/**
 * The project's environment `name`, made when it does not exist yet (a concurrent creator's row
 * is taken as it is). Null when the name is not a valid environment name (the job then deploys
 * nowhere, as GitLab's seed drops an invalid environment).
 */
export async function ensureEnvironment(db: Database, projectId: number, name: string, attrs: EnvironmentAttributes = {}): Promise<Environment | null> {
  const existing = await db.selectFrom('environments').selectAll().where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst();
  if (existing) return existing;
  if (environmentNameError(name)) return null;
  const url = attrs.externalUrl && !externalUrlError(attrs.externalUrl) ? attrs.externalUrl : null;
  await db
    .insertInto('environments')
    .values({ project_id: projectId, name, slug: environmentSlug(name), external_url: url, tier: attrs.tier ?? guessTier(name), description: attrs.description ?? null })
    .onConflict((oc) => oc.doNothing())
    .execute();
  return (await db.selectFrom('environments').selectAll().where('project_id', '=', projectId).where('name', '=', name).executeTakeFirst()) ?? null;
}

/** API creation: 400 with GitLab's validation messages for a bad or taken name or URL. */
export async function createEnvironment(db: Database, projectId: number, name: string, attrs: EnvironmentAttributes): Promise<Environment> {
  const errors: Record<string, string[]> = {};
  const nameError = environmentNameError(name);
  if (nameError) errors.name = [nameError];
  const urlError = attrs.externalUrl ? externalUrlError(attrs.externalUrl) : null;
  if (urlError) errors.external_url = [urlError];
  if (Object.keys(errors).length) throw validationFailed(errors);
  const slug = environmentSlug(name);
  const inserted = await db
    .insertInto('environments')
    .values({ project_id: projectId, name, slug, external_url: attrs.externalUrl || null, tier: attrs.tier ?? guessTier(name), description: attrs.description ?? null })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted) {
    const taken = await db.selectFrom('environments').select('name').where('project_id', '=', projectId).where((eb) => eb.or([eb('name', '=', name), eb('slug', '=', slug)])).execute();
    throw validationFailed(taken.some((e) => e.name === name) ? { name: ['has already been taken'] } : { slug: ['has already been taken'] });
  }
  return inserted;
}

export async function updateEnvironment(db: Database, env: Environment, attrs: EnvironmentAttributes): Promise<Environment> {
  if (attrs.externalUrl) {
    const urlError = externalUrlError(attrs.externalUrl);
    if (urlError) throw validationFailed({ external_url: [urlError] });
  }
  const set: Record<string, unknown> = {};
  if (attrs.externalUrl !== undefined) set.external_url = attrs.externalUrl || null;
  if (attrs.tier !== undefined && attrs.tier !== null) set.tier = attrs.tier;
  if (attrs.description !== undefined) set.description = attrs.description;
  if (!Object.keys(set).length) return env;
  return db.updateTable('environments').set({ ...set, updated_at: sql`now()` as any }).where('id', '=', env.id).returningAll().executeTakeFirstOrThrow();
}

export interface DeploymentInput {
  projectId: number;
  environmentId: number;
  ref: string;
  tag: boolean;
  sha: string;
  userId: number | null;
  deployableId?: number | null;
  status?: DeploymentStatus;
}

export async function insertDeployment(db: Database, input: DeploymentInput): Promise<Deployment> {
  const iid = await nextInternalId(db, 'deployments', input.projectId);
  const status = input.status ?? 'created';
  return db
    .insertInto('deployments')
    .values({
      iid,
      project_id: input.projectId,
      environment_id: input.environmentId,
      ref: input.ref,
      tag: input.tag,
      sha: input.sha,
      user_id: input.userId,
      deployable_id: input.deployableId ?? null,
      status,
      finished_at: FINISHED_DEPLOYMENT_STATUSES.includes(status) ? (sql`now()` as any) : null,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface PipelineJobEnvironment {
  buildId: number;
  environment: CompiledEnvironment | null;
}

/**
 * At pipeline creation (in its transaction): every job with an environment finds or makes it;
 * those that start it (GitLab's starts_environment?: action start) get a `created` deployment.
 * prepare, verify, access and stop jobs deploy nothing.
 */
export async function createPipelineDeployments(
  db: Database,
  pipeline: { project_id: number; ref: string; tag: boolean; sha: string; user_id: number | null },
  jobs: PipelineJobEnvironment[],
): Promise<void> {
  for (const job of jobs) {
    if (!job.environment) continue;
    const env = await ensureEnvironment(db, pipeline.project_id, job.environment.name, {
      externalUrl: job.environment.url,
      tier: (job.environment.deploymentTier as EnvironmentTier | null) ?? null,
    });
    if (!env) {
      // GitLab: a job whose environment cannot be made (an invalid expanded name) deploys nowhere.
      await db.updateTable('ci_builds').set({ environment: null }).where('id', '=', job.buildId).execute();
      continue;
    }
    if (job.environment.action !== 'start') continue;
    await insertDeployment(db, {
      projectId: pipeline.project_id, environmentId: env.id, ref: pipeline.ref, tag: pipeline.tag, sha: pipeline.sha, userId: pipeline.user_id, deployableId: job.buildId,
    });
  }
}

/** A retried or replayed deployment job deploys again: its new attempt gets a deployment of its own. */
export async function deploymentForRetry(db: Database, copy: CiBuild): Promise<void> {
  const spec = environmentOf(copy);
  if (!copy.environment || !spec || spec.action !== 'start') return;
  const env = await ensureEnvironment(db, copy.project_id, copy.environment, { externalUrl: spec.url });
  if (!env) return;
  await insertDeployment(db, {
    projectId: copy.project_id, environmentId: env.id, ref: copy.ref, tag: copy.tag, sha: copy.sha, userId: copy.user_id, deployableId: copy.id,
  });
}

/**
 * A job with an environment changed status (in the transaction that changed it): its deployment
 * follows, and what the job did to its environment happens — a successful deployment starts it
 * (URL, tier, auto_stop_at renewed), a successful stop job stops it, a failed one leaves
 * `stopping` for `available` again. A no-op for jobs without an environment.
 */
export async function afterJobTransition(db: Database, build: CiBuild | null): Promise<void> {
  if (!build?.environment) return;
  const spec = environmentOf(build);
  const action = spec?.action ?? 'start';
  const status = deploymentStatusOf(build.status);
  if (action === 'start' && status) {
    const event = EVENT_FOR[status]!;
    const moved = await transition(db, DEPLOYMENT_MACHINE, (qb: any) => qb.where('deployable_id', '=', build.id), event, {
      set: { updated_at: sql`now()`, finished_at: FINISHED_DEPLOYMENT_STATUSES.includes(status) ? sql`now()` : null },
    });
    if (status === 'success' && moved.length) await startAfterDeployment(db, moved[0].environment_id, spec);
    return;
  }
  if (action === 'stop' && ['success', 'failed', 'canceled'].includes(build.status)) {
    const env = await db.selectFrom('environments').select('id').where('project_id', '=', build.project_id).where('name', '=', build.environment).executeTakeFirst();
    if (!env) return;
    if (build.status === 'success') await transition(db, ENVIRONMENT_MACHINE, env.id, 'stop_complete', { set: { auto_stop_at: null, updated_at: sql`now()` } });
    else await transition(db, ENVIRONMENT_MACHINE, env.id, 'recover_stuck_stopping', { set: { updated_at: sql`now()` } });
  }
}

/** GitLab's UpdateEnvironmentService: the deployed environment takes the job's URL, tier and auto_stop_in, and is available. */
async function startAfterDeployment(db: Database, environmentId: number, spec: CompiledEnvironment | null) {
  // A deployment keeps a review app that was scheduled for deletion.
  const set: Record<string, unknown> = { updated_at: sql`now()`, auto_delete_at: null };
  if (spec?.url && !externalUrlError(spec.url)) set.external_url = spec.url;
  if (spec?.deploymentTier) set.tier = spec.deploymentTier;
  if (spec?.autoStopIn === 'never') {
    set.auto_stop_at = null;
  } else if (spec?.autoStopIn) {
    const seconds = parseDuration(spec.autoStopIn);
    if (seconds !== null) set.auto_stop_at = new Date(Date.now() + seconds * 1000);
  }
  await db.updateTable('environments').set(set).where('id', '=', environmentId).execute();
  await transition(db, ENVIRONMENT_MACHINE, environmentId, 'start', { set: { updated_at: sql`now()` } });
}

/**
 * The stop jobs of an environment (GitLab's stop_actions): the `on_stop` jobs of its last
 * finished deployment's job, the latest attempt of each in that job's pipeline.
 */
export async function stopActionsOf(db: Database, env: Pick<Environment, 'id'>): Promise<CiBuild[]> {
  const last = await db
    .selectFrom('deployments')
    .select(['deployable_id'])
    .where('environment_id', '=', env.id)
    .where('status', 'in', FINISHED_DEPLOYMENT_STATUSES)
    .where('deployable_id', 'is not', null)
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!last?.deployable_id) return [];
  const job = await db.selectFrom('ci_builds').select(['pipeline_id', 'options']).where('id', '=', last.deployable_id).executeTakeFirst();
  const onStop = job ? environmentOf(job)?.onStop : null;
  if (!job || !onStop) return [];
  const stop = await db.selectFrom('ci_builds').selectAll()
    .where('pipeline_id', '=', job.pipeline_id).where('name', '=', onStop).where('retried', '=', false)
    .orderBy('id', 'desc').limit(1).executeTakeFirst();
  return stop ? [stop] : [];
}

/** How a stop job is run: played (manual), retried (finished), or nothing. Kept apart so the jobs layer is not imported here. */
export interface StopJobRunner {
  play(buildId: number, userId: number | null): Promise<unknown>;
  retry(buildId: number, userId: number | null): Promise<unknown>;
}

/**
 * GitLab's Environments::StopService. With `force`, the environment is stopped at once. Otherwise
 * an available environment with stop jobs goes `stopping` and its stop jobs run (as `userId`);
 * one without them is stopped. Other states are left as they are.
 */
export async function stopEnvironment(db: Database, runner: StopJobRunner, env: Environment, userId: number | null, opts: { force?: boolean } = {}): Promise<Environment> {
  if (opts.force) {
    await transition(db, ENVIRONMENT_MACHINE, env.id, 'stop_complete', { set: { auto_stop_at: null, updated_at: sql`now()` } });
  } else if (env.state === 'available') {
    const actions = await stopActionsOf(db, env);
    if (!actions.length) {
      await transition(db, ENVIRONMENT_MACHINE, env.id, 'stop_complete', { set: { auto_stop_at: null, updated_at: sql`now()` } });
    } else {
      await transition(db, ENVIRONMENT_MACHINE, env.id, 'stop', { set: { updated_at: sql`now()` } });
      for (const action of actions) {
        if (action.status === 'manual' || action.status === 'scheduled') await runner.play(action.id, userId);
        else if (['success', 'failed', 'canceled'].includes(action.status)) await runner.retry(action.id, userId);
      }
    }
  }
  return db.selectFrom('environments').selectAll().where('id', '=', env.id).executeTakeFirstOrThrow();
}

/** Who stops an environment on its own (auto-stop): the user of its last deployment. */
async function lastDeployerOf(db: Database, environmentId: number): Promise<number | null> {
  const row = await db.selectFrom('deployments').select('user_id').where('environment_id', '=', environmentId).orderBy('id', 'desc').limit(1).executeTakeFirst();
  return row?.user_id ?? null;
}

export const AUTO_STOP_BATCH = 100;

/** Environments past their auto_stop_at are stopped (their stop jobs run as their last deployer). Returns how many. */
export async function stopExpiredEnvironments(cairn: Cairn, runner: StopJobRunner, now = new Date()): Promise<number> {
  const due = await cairn.db
    .selectFrom('environments').selectAll()
    .where('state', '=', 'available').where('auto_stop_at', 'is not', null).where('auto_stop_at', '<=', now)
    .orderBy('auto_stop_at').limit(AUTO_STOP_BATCH)
    .execute();
  for (const env of due) {
    // Claimed by clearing its deadline: one process stops it, and once (a stop job that fails
    // leaves the environment available, not stopped again every minute).
    const claimed = await cairn.db.updateTable('environments').set({ auto_stop_at: null })
      .where('id', '=', env.id).where('state', '=', 'available').where('auto_stop_at', '<=', now)
      .returningAll().executeTakeFirst();
    if (!claimed) continue;
    try {
      await stopEnvironment(cairn.db, runner, claimed, await lastDeployerOf(cairn.db, env.id));
    } catch (err) {
      console.error('auto-stop of environment failed', env.id, err);
    }
  }
  return due.length;
}

export const AUTO_STOP_ENVIRONMENTS_JOB = 'environments.auto_stop';
const AUTO_STOP_EVERY_SECONDS = 60;

/**
 * The jobs layer (src/ci/jobs/state.ts) registers how stop jobs are played and retried when it is
 * imported; services do not import it (it imports this module).
 */
let runnerFactory: ((cairn: Cairn) => StopJobRunner) | null = null;
export function registerStopJobRunner(factory: (cairn: Cairn) => StopJobRunner) {
  runnerFactory = factory;
}
export function stopJobRunner(cairn: Cairn): StopJobRunner {
  if (!runnerFactory) throw new Error('no stop job runner registered (src/ci/jobs/state.ts not loaded)');
  return runnerFactory(cairn);
}

defineRecurring(AUTO_STOP_ENVIRONMENTS_JOB, AUTO_STOP_EVERY_SECONDS, async (cairn) => {
  await stopExpiredEnvironments(cairn, stopJobRunner(cairn));
  await deleteScheduledEnvironments(cairn.db);
});

/** How long a review app scheduled for deletion is kept (GitLab's week). */
export const REVIEW_APP_DELETION_DELAY_MS = 7 * 24 * 3600 * 1000;

/**
 * GitLab's Environments::ScheduleToDeleteReviewAppsService: stopped environments of the `review/`
 * folder created before `before`, oldest first, at most `limit`. Those the user may not deploy to
 * (protected) are unprocessable; the others are scheduled for deletion a week from now, unless
 * it is a dry run.
 */
export async function scheduleReviewAppsDeletion(
  db: Database,
  projectId: number,
  opts: { before: Date; limit: number; dryRun: boolean; mayDestroy: (env: Environment) => Promise<boolean> },
): Promise<{ scheduled: Environment[]; unprocessable: Environment[] }> {
  const candidates = await db.selectFrom('environments').selectAll()
    .where('project_id', '=', projectId).where('state', '=', 'stopped').where('auto_delete_at', 'is', null)
    .where('name', 'like', 'review/%').where('created_at', '<', opts.before)
    .orderBy('created_at').orderBy('id').limit(opts.limit)
    .execute();
  const scheduled: Environment[] = [];
  const unprocessable: Environment[] = [];
  for (const env of candidates) (await opts.mayDestroy(env) ? scheduled : unprocessable).push(env);
  if (!opts.dryRun && scheduled.length) {
    await db.updateTable('environments')
      .set({ auto_delete_at: new Date(Date.now() + REVIEW_APP_DELETION_DELAY_MS), updated_at: sql`now()` })
      .where('id', 'in', scheduled.map((e) => e.id)).where('state', '=', 'stopped')
      .execute();
  }
  return { scheduled, unprocessable };
}

/** Deletes the review apps whose scheduled deletion is due (still stopped: one started again is kept). */
export async function deleteScheduledEnvironments(db: Database, now = new Date()): Promise<number> {
  const gone = await db.deleteFrom('environments').where('auto_delete_at', '<=', now).where('state', '=', 'stopped').returning('id').execute();
  return gone.length;
}

/**
 * GitLab's Environments::StopStaleService: available environments not updated, nor deployed to,
 * since `before` (protected ones excepted) are stopped, at most `limit` of them.
 */
export async function stopStaleEnvironments(cairn: Cairn, projectId: number, before: Date, limit: number, userId: number | null): Promise<number> {
  const stale = await cairn.db
    .selectFrom('environments as e').selectAll('e')
    .where('e.project_id', '=', projectId).where('e.state', '=', 'available').where('e.updated_at', '<', before)
    .where((eb) => eb.not(eb.exists(eb.selectFrom('deployments as d').select('d.id').whereRef('d.environment_id', '=', 'e.id').where('d.updated_at', '>=', before))))
    .where((eb) => eb.not(eb.exists(eb.selectFrom('protected_environments as p').select('p.id').where('p.project_id', '=', projectId).whereRef('p.name', '=', 'e.name'))))
    .orderBy('e.id').limit(limit)
    .execute();
  const runner = stopJobRunner(cairn);
  for (const env of stale) await stopEnvironment(cairn.db, runner, env, userId);
  return stale.length;
}

/** A 400 with GitLab's validation message for an invalid environment name, or null. */
export function environmentNameErrorBody(name: string) {
  const error = environmentNameError(name);
  return error ? validationFailed({ name: [error] }) : null;
}

/**
 * A deployment reported through the API moves to `status` (GitLab's update_status); a successful
 * one starts its environment. 400 when the deployment cannot move there (it is there already).
 */
export async function reportDeploymentStatus(db: Database, d: Deployment, status: DeploymentStatus): Promise<Deployment> {
  if (d.status === status) return d;
  const event = EVENT_FOR[status]!;
  const moved = await transition(db, DEPLOYMENT_MACHINE, d.id, event, {
    set: { updated_at: sql`now()`, finished_at: FINISHED_DEPLOYMENT_STATUSES.includes(status) ? sql`now()` : null },
  });
  if (!moved) throw validationFailed({ status: [`cannot transition via "${event}"`] });
  if (status === 'success') await startAfterDeployment(db, moved.environment_id, null);
  return moved;
}

/** GitLab's Deployments::DestroyService refusals: a running deployment, or the environment's current one. */
export async function deploymentDestroyError(db: Database, d: Deployment): Promise<string | null> {
  if (d.status === 'running') return 'Cannot destroy running deployment';
  const last = await db.selectFrom('deployments').select('id').where('environment_id', '=', d.environment_id).where('status', '=', 'success').orderBy('id', 'desc').limit(1).executeTakeFirst();
  if (last?.id === d.id) return 'Deployment currently deployed to environment';
  return null;
}
