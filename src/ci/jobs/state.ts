import { queueHookEvent, queueJobHookEvent } from '../../hooks/events.js';
import { sql } from 'kysely';
import { RE2JS } from 're2js';
import type { Cairn } from '../../context.js';
import type { Database } from '../../db/index.js';
import type { CiBuild, CiStatus } from '../../db/schema/ci.js';
import '../../db/schema/ci_engine.js';
import '../../db/schema/ci_resource_groups.js';
import { defineMachine, transition } from '../../db/state_machine.js';
import { beginInlineJob, defineJob, enqueue, finishInlineJob } from '../../jobs/queue.js';
import { randomToken, tokenDigest } from '../../lib/secrets.js';
import { canDeployTo } from '../../policies/environments.js';
import { projectSettings } from '../../presenters/projects.js';
import type { CompiledJob } from '../config/index.js';
import { readTrace } from '../trace.js';
import { acquireResource, ASSIGN_RESOURCE_JOB, ensureResourceGroup, MAX_RESOURCE_GROUP_KEY, releaseResources, waitingJobs } from './resource_groups.js';
import { notifyPipelineFinished } from '../../services/notify.js';
import { afterJobTransition, deploymentForRetry, registerStopJobRunner } from '../../services/environments.js';

// The job state machine. Every transition is one guarded UPDATE (`where status = ...`), so two
// Cairn processes racing on the same job cannot both move it; everything that looks at a
// pipeline as a whole (processPipeline, cancel, retry) first locks the pipeline row, so they
// take turns. Lock order is always: pending-queue row (the runner protocol's SKIP LOCKED pick)
// → pipeline row → job rows; rows of the pending queue are only deleted with SKIP LOCKED by
// anyone else, so no cycle can form.

export const CANCELABLE_STATUSES: CiStatus[] = ['created', 'waiting_for_resource', 'preparing', 'pending', 'running', 'scheduled'];
export const COMPLETED_STATUSES: CiStatus[] = ['success', 'failed', 'canceled', 'skipped'];
export const ACTIVE_STATUSES: CiStatus[] = ['waiting_for_resource', 'preparing', 'pending', 'running'];
/** Job statuses the API's `scope` accepts. */
export const JOB_SCOPES = ['created', 'pending', 'running', 'failed', 'success', 'canceled', 'skipped', 'waiting_for_resource', 'manual', 'scheduled', 'preparing'] as const;

export const BUILD_SCHEDULED_JOB = 'ci.build_scheduled';
export const BUILD_TIMEOUT_JOB = 'ci.build_timeout';
/** A bridge went to pending: create its downstream pipeline (handler in src/ci/pipelines/downstream.ts). */
export const CREATE_DOWNSTREAM_JOB = 'ci.create_downstream';
/** A job failed in a pipeline with `workflow:auto_cancel:on_job_failure: all`: cancel the pipeline. */
export const AUTO_CANCEL_PIPELINE_JOB = 'ci.auto_cancel_pipeline';
/** The journal of a pipeline's status change whose consequences (listeners) have not all run yet. */
export const PIPELINE_TRANSITION_JOB = 'ci.pipeline_transition';

const DEFAULT_TIMEOUT = 3600;

/** The job state machine (GitLab's Ci::Build and Ci::Bridge transitions that Cairn makes). */
export const JOB_MACHINE = defineMachine('ci_builds', 'status', {
  /** To the runners' queue (a bridge: to its downstream pipeline's creation). */
  enqueue: { from: ['created', 'manual', 'scheduled', 'waiting_for_resource'], to: 'pending' },
  /** A job with a resource_group whose resource another job holds. */
  await_resource: { from: ['created', 'manual', 'scheduled'], to: 'waiting_for_resource' },
  /** Picked by a runner. */
  run: { from: ['pending'], to: 'running' },
  succeed: { from: ['running'], to: 'success' },
  /** Failed: by its runner, by the stuck-job sweep, or before it ran (protected environment). */
  drop: { from: ['created', 'manual', 'scheduled', 'waiting_for_resource', 'pending', 'running'], to: 'failed' },
  cancel: { from: CANCELABLE_STATUSES, to: 'canceled' },
  skip: { from: ['created'], to: 'skipped' },
  actionize: { from: ['created'], to: 'manual' },
  schedule: { from: ['created'], to: 'scheduled' },
  /** A skipped job waits again (a job before it is retried or played). */
  reset: { from: ['skipped'], to: 'created' },
  /** Played: who plays it is recorded while it is still manual or scheduled; enqueue follows. */
  play: { from: ['manual', 'scheduled'] },
  /** A bridge follows its downstream pipeline (`to` is the mirrored status, set by the caller). */
  mirror: { from: ['pending', 'running', 'manual'] },
});

/** What every change a runner could observe sets besides the status. */
const touched = () => ({ updated_at: sql`now()` as any, lock_version: sql`lock_version + 1` as any });

type Executor = Database;

// ---- composite status (GitLab's Gitlab::Ci::Status::Composite) ----------------------------------

export interface StatusItem {
  status: CiStatus | string;
  allow_failure: boolean;
}

/**
 * The status of a group of jobs (a stage, a pipeline, a job's needs). Allowed failures count as
 * "success with warnings", allowed manual jobs are ignored. With `dag`, the result is what a job
 * needing them sees: skipped when any of them is skipped or ignored, pending until all are done.
 */
export function compositeStatus(items: StatusItem[], opts: { dag?: boolean } = {}): CiStatus | null {
  if (!items.length) return null;
  const kinds = new Set<string>();
  for (const it of items) {
    if (it.allow_failure && (it.status === 'failed' || it.status === 'canceled')) kinds.add('success_with_warnings');
    else if (it.allow_failure && it.status === 'manual') kinds.add('ignored');
    else kinds.add(it.status);
  }
  const only = (...s: string[]) => [...kinds].every((k) => s.includes(k));
  const any = (...s: string[]) => s.some((k) => kinds.has(k));
  if (opts.dag && any('skipped', 'ignored')) return 'skipped';
  if (opts.dag && !only('success', 'failed', 'canceled', 'skipped', 'success_with_warnings')) return 'pending';
  if (only('skipped', 'ignored')) return 'skipped';
  if (only('success', 'skipped', 'success_with_warnings', 'ignored')) return 'success';
  if (only('created', 'success_with_warnings', 'ignored')) return 'created';
  if (only('preparing', 'success_with_warnings', 'ignored')) return 'preparing';
  if (only('created', 'preparing', 'success', 'success_with_warnings', 'skipped', 'ignored')) return 'running';
  if (only('canceled', 'success', 'skipped', 'success_with_warnings', 'ignored')) return 'canceled';
  if (only('pending', 'created', 'skipped', 'success_with_warnings', 'ignored')) return 'pending';
  if (any('running', 'pending')) return 'running';
  if (any('waiting_for_resource')) return 'waiting_for_resource';
  if (any('manual')) return 'manual';
  if (any('scheduled')) return 'scheduled';
  if (any('preparing')) return 'preparing';
  if (any('created')) return 'running';
  return 'failed';
}

// ---- small helpers ------------------------------------------------------------------------------

function jobOf(build: Pick<CiBuild, 'options'>): Partial<CompiledJob> {
  return (build.options ?? {}) as Partial<CompiledJob>;
}

async function lockPipeline(db: Executor, pipelineId: number) {
  return db.selectFrom('ci_pipelines').selectAll().where('id', '=', pipelineId).forUpdate().executeTakeFirst();
}

/** Deletes queue rows of these jobs, skipping rows a runner is taking right now (its assignBuild finds the job gone). */
async function dropPending(db: Executor, buildIds: number[]) {
  if (!buildIds.length) return;
  await sql`delete from ci_pending_builds where build_id in (
      select build_id from ci_pending_builds where build_id in (${sql.join(buildIds)}) for update skip locked)`.execute(db);
}

function inTransaction<T>(db: Database, fn: (trx: Database) => Promise<T>): Promise<T> {
  return db.isTransaction ? fn(db) : db.transaction().execute(fn);
}

// ---- transitions --------------------------------------------------------------------------------

/**
 * created / manual / scheduled → pending: the job waits for a runner (a row in ci_pending_builds,
 * and a notification runners' long polls wake on). A bridge instead gets its downstream pipeline
 * created by the queue. Returns the job, or null when it was not in one of those states.
 */
export async function enqueueBuild(db: Executor, buildId: number): Promise<CiBuild | null> {
  const target = await db.selectFrom('ci_builds').select(['project_id', 'environment', 'user_id', 'status', 'options']).where('id', '=', buildId).executeTakeFirst();
  if (target?.environment && target.status !== 'waiting_for_resource') {
    const user = target.user_id === null ? null : ((await db.selectFrom('users').select(['id', 'admin']).where('id', '=', target.user_id).executeTakeFirst()) ?? null);
    if (!(await canDeployTo(db, target.project_id, target.environment, user))) return failForProtectedEnvironment(db, buildId);
  }
  // resource_group: the job runs once it holds its group's resource (the assign job hands it one later).
  const groupKey = target ? jobOf(target).resourceGroup : null;
  if (target && groupKey && groupKey.length <= MAX_RESOURCE_GROUP_KEY) {
    const groupId = await ensureResourceGroup(db, target.project_id, groupKey);
    if (target.status !== 'waiting_for_resource') {
      const waiting = await transition(db, JOB_MACHINE, buildId, 'await_resource', { set: { resource_group_id: groupId, ...touched() } });
      if (!waiting) return null;
    }
    if (!(await acquireResource(db, groupId, buildId))) {
      await enqueue(db, ASSIGN_RESOURCE_JOB, { resourceGroupId: groupId });
      return (await db.selectFrom('ci_builds').selectAll().where('id', '=', buildId).executeTakeFirst()) ?? null;
    }
  }
  const build = await transition(db, JOB_MACHINE, buildId, 'enqueue', { set: { queued_at: sql`now()` as any, ...touched() } });
  if (!build) return null;
  await queueJobHookEvent(db, build);
  if (build.type === 'Ci::Bridge') {
    await enqueue(db, CREATE_DOWNSTREAM_JOB, { bridgeId: build.id });
    return build;
  }
  const project = await db.selectFrom('projects').select(['id', 'namespace_id', 'settings']).where('id', '=', build.project_id).executeTakeFirstOrThrow();
  const settings = projectSettings(project as any);
  await db
    .insertInto('ci_pending_builds')
    .values({
      build_id: build.id,
      project_id: build.project_id,
      namespace_id: project.namespace_id,
      protected: build.protected,
      tag_list: build.tag_list,
      instance_runners_enabled: settings.shared_runners_enabled !== false,
      group_runners_enabled: settings.group_runners_enabled !== false,
    })
    .onConflict((oc) => oc.column('build_id').doNothing())
    .execute();
  await sql`select pg_notify('cairn_ci_jobs', ${String(build.project_id)})`.execute(db);
  return build;
}

/** GitLab's failure reason for a deployment job whose user may not deploy to its protected environment. */
export const PROTECTED_ENVIRONMENT_FAILURE = 'protected_environment_failure';

/**
 * created / manual / scheduled → failed (protected_environment_failure): the job would deploy to a
 * protected environment for a user its deploy access levels do not admit, so no runner gets it.
 */
async function failForProtectedEnvironment(db: Executor, buildId: number): Promise<CiBuild | null> {
  const failed = await transition(db, JOB_MACHINE, buildId, 'drop', {
    from: ['created', 'manual', 'scheduled'],
    set: { failure_reason: PROTECTED_ENVIRONMENT_FAILURE, finished_at: sql`now()` as any, token_digest: null, ...touched() },
  });
  await afterJobTransition(db, failed);
  await queueJobHookEvent(db, failed);
  return failed;
}

/**
 * pending → running for `runnerId`, in the caller's transaction (the runner protocol's SKIP LOCKED
 * pick). Issues a fresh job token, returned in clear this once. Null when the job is no longer
 * pending (canceled meanwhile); the queue row goes either way.
 */
export async function assignBuild(trx: Database, buildId: number, runnerId: number): Promise<{ build: CiBuild; token: string } | null> {
  await trx.deleteFrom('ci_pending_builds').where('build_id', '=', buildId).execute();
  const current = await trx.selectFrom('ci_builds').select(['pipeline_id', 'timeout']).where('id', '=', buildId).executeTakeFirst();
  if (!current) return null;
  await lockPipeline(trx, current.pipeline_id);
  const runner = await trx.selectFrom('ci_runners').select(['maximum_timeout']).where('id', '=', runnerId).executeTakeFirst();
  let timeout = current.timeout ?? DEFAULT_TIMEOUT;
  if (runner?.maximum_timeout && runner.maximum_timeout < timeout) timeout = runner.maximum_timeout;
  const token = `glcbt-${randomToken(24)}`;
  const build = await transition(trx, JOB_MACHINE, buildId, 'run', {
    set: { started_at: sql`now()` as any, runner_id: runnerId, token_digest: tokenDigest(token), timeout, ...touched() },
  });
  if (!build) return null;
  await afterJobTransition(trx, build);
  await queueJobHookEvent(trx, build);
  await enqueue(trx, BUILD_TIMEOUT_JOB, { buildId }, { runAt: new Date(Date.now() + timeout * 1000) });
  await updateStatuses(trx, build.pipeline_id);
  return { build, token };
}

export interface FinishOptions {
  status: 'success' | 'failed';
  failureReason?: string;
  exitCode?: number | null;
  /** The states the job may leave (running by default; the stuck-job sweep also drops pending and scheduled ones). */
  from?: CiStatus[];
  /** Only if the job was last updated before this (a job a runner touched meanwhile stays). */
  updatedBefore?: Date;
}

/**
 * running → success / failed (and, for the stuck-job sweep, pending or scheduled → failed). The
 * job token dies, its queue row goes, coverage is read from the log, a failed job with `retry` is
 * retried, and the pipeline moves on. False when the job was not in one of those states.
 */
export async function finishBuild(cairn: Cairn, buildId: number, opts: FinishOptions): Promise<boolean> {
  const from = opts.from ?? ['running'];
  const untouched = <Q extends { where: (...a: any[]) => Q }>(q: Q): Q => (opts.updatedBefore ? q.where('updated_at', '<', opts.updatedBefore) : q);
  const done = await inTransaction(cairn.db, async (trx) => {
    const current = await trx.selectFrom('ci_builds').select(['pipeline_id']).where('id', '=', buildId).executeTakeFirst();
    if (!current) return null;
    await lockPipeline(trx, current.pipeline_id);
    const before = await untouched(trx.selectFrom('ci_builds').selectAll().where('id', '=', buildId).where('status', 'in', from)).executeTakeFirst();
    if (!before) return null;
    const job = jobOf(before);
    const failed = opts.status === 'failed';
    const exitCode = opts.exitCode ?? null;
    const allowedByExit = failed && exitCode !== null && (job.allowFailureExitCodes ?? []).includes(exitCode);
    const coverage = before.status === 'running' ? await coverageOf(trx, before) : before.coverage;
    const build = await transition(trx, JOB_MACHINE, buildId, failed ? 'drop' : 'succeed', {
      from,
      where: untouched,
      set: {
        finished_at: sql`now()` as any,
        token_digest: null,
        failure_reason: failed ? (opts.failureReason ?? 'script_failure') : null,
        exit_code: exitCode,
        allow_failure: before.allow_failure || allowedByExit,
        coverage,
        ...touched(),
      },
    });
    if (!build) return null;
    await afterJobTransition(trx, build);
    await queueJobHookEvent(trx, build);
    if (before.status !== 'running') await dropPending(trx, [build.id]);
    await releaseResources(trx, [build.id]);
    const retrying = failed && (await shouldAutoRetry(trx, build));
    if (retrying) await cloneForRetry(trx, build, build.user_id, false);
    else if (failed && !build.allow_failure && (await cancelsOnJobFailure(trx, build.pipeline_id))) {
      await enqueue(trx, AUTO_CANCEL_PIPELINE_JOB, { pipelineId: build.pipeline_id });
    }
    return { moved: await advancePipeline(cairn, trx, build.pipeline_id) };
  });
  if (done === null) return false;
  await afterPipelineCommit(cairn, done.moved);
  return true;
}

/** workflow:auto_cancel:on_job_failure: all — a job that fails (not allowed to) cancels the rest of the pipeline. */
async function cancelsOnJobFailure(db: Executor, pipelineId: number): Promise<boolean> {
  const row = await db.selectFrom('ci_pipelines').select('config').where('id', '=', pipelineId).executeTakeFirst();
  const config = row?.config as { workflow?: { autoCancel?: { onJobFailure?: string | null } | null } } | null | undefined;
  return config?.workflow?.autoCancel?.onJobFailure === 'all';
}

async function coverageOf(db: Executor, build: CiBuild): Promise<number | null> {
  const regex = build.coverage_regex;
  if (!regex) return build.coverage;
  const m = /^\/(.*)\/([ismU]*)$/s.exec(regex);
  const source = m ? m[1].replace(/\\\//g, '/') : regex;
  let re: RE2JS;
  try {
    let flags = 0;
    if (m && /[ms]/.test(m[2])) flags |= RE2JS.DOTALL;
    if (m && m[2].includes('i')) flags |= RE2JS.CASE_INSENSITIVE;
    re = RE2JS.compile(source, flags);
  } catch {
    return build.coverage;
  }
  const trace = await readTrace(db, build.id);
  if (!trace) return build.coverage;
  // GitLab (Trace::Stream#extract_coverage): from the last line up, the first line with a match
  // whose last match (its last group, when the regex has groups) holds a number; that number.
  const lines = trace.toString('utf8').split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const matcher = re.matcher(lines[i].replace(/\r$/, ''));
    let last: string | null = null;
    let any = false;
    while (matcher.find()) {
      any = true;
      last = matcher.groupCount() > 0 ? matcher.group(matcher.groupCount()) : matcher.group(0);
      if (matcher.end() === matcher.start() && matcher.end() >= lines[i].length) break;
    }
    if (!any || last === null) continue;
    const num = /\d+(\.\d+)?/.exec(last);
    if (num) return Number(num[0]);
  }
  return build.coverage;
}

async function shouldAutoRetry(db: Executor, build: CiBuild): Promise<boolean> {
  const retry = jobOf(build).retry;
  if (!retry || retry.max <= 0) return false;
  const attempts = await db
    .selectFrom('ci_builds').select((eb) => eb.fn.countAll<number>().as('n'))
    .where('pipeline_id', '=', build.pipeline_id).where('name', '=', build.name).where('retried', '=', true)
    .executeTakeFirstOrThrow();
  if (Number(attempts.n) >= retry.max) return false;
  const when = retry.when?.length ? retry.when : ['always'];
  if (!when.includes('always') && !when.includes(build.failure_reason ?? 'unknown_failure')) return false;
  if (retry.exitCodes?.length && (build.exit_code === null || !retry.exitCodes.includes(build.exit_code))) return false;
  return true;
}

/** The new attempt of a job: a copy in `created` (or pending at once with enqueueImmediately); the old one is marked retried. */
async function cloneForRetry(db: Executor, old: CiBuild, userId: number | null, enqueueImmediately: boolean): Promise<CiBuild> {
  const marked = await db.updateTable('ci_builds').set({ retried: true, updated_at: sql`now()` as any }).where('id', '=', old.id).where('retried', '=', false).returning('id').executeTakeFirst();
  if (!marked) throw new Error('job was retried already');
  const job = jobOf(old);
  const copy = await db
    .insertInto('ci_builds')
    .values({
      pipeline_id: old.pipeline_id,
      project_id: old.project_id,
      stage_id: old.stage_id,
      stage: old.stage,
      stage_idx: old.stage_idx,
      name: old.name,
      type: old.type,
      status: 'created',
      when: old.when,
      allow_failure: job.allowFailure ?? (old.when === 'manual' ? true : false),
      options: JSON.stringify(old.options),
      yaml_variables: JSON.stringify(old.yaml_variables),
      ref: old.ref,
      tag: old.tag,
      sha: old.sha,
      protected: old.protected,
      tag_list: old.tag_list,
      user_id: userId,
      coverage_regex: old.coverage_regex,
      timeout: job.timeout ?? old.timeout,
      environment: old.environment,
      interruptible: old.interruptible,
      enqueue_immediately: enqueueImmediately,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await deploymentForRetry(db, copy);
  const needs = await db.selectFrom('ci_build_needs').selectAll().where('build_id', '=', old.id).execute();
  if (needs.length) {
    await db.insertInto('ci_build_needs').values(needs.map((n) => ({ build_id: copy.id, name: n.name, artifacts: n.artifacts, optional: n.optional }))).execute();
  }
  await db
    .insertInto('ci_job_variables')
    .columns(['job_id', 'key', 'value_encrypted', 'variable_type'])
    .expression((eb) => eb.selectFrom('ci_job_variables').select([sql.lit(copy.id).as('job_id'), 'key', 'value_encrypted', 'variable_type']).where('job_id', '=', old.id))
    .execute();
  return copy;
}

/**
 * Jobs skipped because of `job` (later stages, or jobs needing it) go back to created, so that
 * processing can run them once `job` has run again (GitLab's ResetSkippedJobsService).
 */
async function resetSkippedAfter(db: Executor, job: Pick<CiBuild, 'pipeline_id' | 'stage_idx' | 'name'>) {
  const builds = await db.selectFrom('ci_builds').select(['id', 'name', 'stage_idx', 'status', 'options']).where('pipeline_id', '=', job.pipeline_id).where('retried', '=', false).execute();
  const affected = new Set<string>([job.name]);
  // Dependents in the needs graph, transitively, plus everything in later stages.
  let grew = true;
  while (grew) {
    grew = false;
    for (const b of builds) {
      if (affected.has(b.name)) continue;
      const needs = jobOf(b as any).needs;
      if ((needs && needs.some((n) => affected.has(n.name))) || (!needs && b.stage_idx > job.stage_idx)) {
        affected.add(b.name);
        grew = true;
      }
    }
  }
  const ids = builds.filter((b) => b.status === 'skipped' && affected.has(b.name) && b.name !== job.name).map((b) => b.id);
  await transition(db, JOB_MACHINE, ids, 'reset', { set: { updated_at: sql`now()` as any } });
}

/** API cancel: a cancelable job becomes canceled. Returns the job as it is afterwards (null when it does not exist). */
export async function cancelBuild(cairn: Cairn, buildId: number): Promise<CiBuild | null> {
  const result = await inTransaction(cairn.db, async (trx) => {
    const current = await trx.selectFrom('ci_builds').select(['pipeline_id']).where('id', '=', buildId).executeTakeFirst();
    if (!current) return null;
    await lockPipeline(trx, current.pipeline_id);
    const canceled = await cancelBuildsLocked(trx, [buildId]);
    return { moved: canceled.length > 0 ? await advancePipeline(cairn, trx, current.pipeline_id) : null };
  });
  if (!result) return null;
  await afterPipelineCommit(cairn, result.moved);
  return (await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', buildId).executeTakeFirst()) ?? null;
}

/** Cancels the cancelable ones among these jobs (pipeline row locked by the caller). */
async function cancelBuildsLocked(db: Executor, buildIds: number[]): Promise<CiBuild[]> {
  if (!buildIds.length) return [];
  const canceled = await transition(db, JOB_MACHINE, buildIds, 'cancel', { set: { finished_at: sql`now()` as any, token_digest: null, ...touched() } });
  await dropPending(db, canceled.map((b) => b.id));
  await releaseResources(db, canceled.map((b) => b.id));
  for (const b of canceled) {
    await afterJobTransition(db, b);
    await queueJobHookEvent(db, b);
  }
  return canceled;
}

/** GitLab's retryable?: a finished (success, failed, canceled) job that is the latest of its name. */
export function isRetryable(build: Pick<CiBuild, 'status' | 'retried'>): boolean {
  return !build.retried && ['success', 'failed', 'canceled'].includes(build.status);
}

/** API retry: a new attempt of the job, which runs as soon as its predecessors allow. Null when not retryable. */
export async function retryBuild(cairn: Cairn, buildId: number, userId: number | null): Promise<CiBuild | null> {
  const copy = await inTransaction(cairn.db, async (trx) => {
    const current = await trx.selectFrom('ci_builds').select(['pipeline_id']).where('id', '=', buildId).executeTakeFirst();
    if (!current) return null;
    await lockPipeline(trx, current.pipeline_id);
    const build = await trx.selectFrom('ci_builds').selectAll().where('id', '=', buildId).executeTakeFirst();
    if (!build || !isRetryable(build)) return null;
    const made = await cloneForRetry(trx, build, userId, true);
    await resetSkippedAfter(trx, build);
    return { made, moved: await advancePipeline(cairn, trx, current.pipeline_id) };
  });
  if (!copy) return null;
  await afterPipelineCommit(cairn, copy.moved);
  return (await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', copy.made.id).executeTakeFirst()) ?? copy.made;
}

/** GitLab's playable?: a manual or scheduled job, or a finished manual one (played again as a retry). */
export function isPlayable(build: Pick<CiBuild, 'status' | 'when' | 'retried'>): boolean {
  if (build.status === 'manual' || build.status === 'scheduled') return true;
  return (build.when === 'manual' || build.when === 'delayed') && isRetryable(build);
}

export interface JobVariableInput {
  key: string;
  /** Already encrypted (lib/secrets encryptSecret). */
  valueEncrypted: string;
  variableType?: 'env_var' | 'file';
}

/** API play: a manual job runs now (a scheduled one too); a finished manual job runs again. Null when not playable. */
export async function playBuild(cairn: Cairn, buildId: number, userId: number | null, variables: JobVariableInput[] = []): Promise<CiBuild | null> {
  const played = await inTransaction(cairn.db, async (trx) => {
    const current = await trx.selectFrom('ci_builds').select(['pipeline_id']).where('id', '=', buildId).executeTakeFirst();
    if (!current) return null;
    await lockPipeline(trx, current.pipeline_id);
    const build = await trx.selectFrom('ci_builds').selectAll().where('id', '=', buildId).executeTakeFirst();
    if (!build || !isPlayable(build)) return null;
    let target = build;
    if (build.status === 'manual' || build.status === 'scheduled') {
      const updated = await transition(trx, JOB_MACHINE, build.id, 'play', { set: { user_id: userId, enqueue_immediately: true, updated_at: sql`now()` as any } });
      if (!updated) return null;
      target = updated;
    } else {
      target = await cloneForRetry(trx, build, userId, true);
    }
    if (variables.length) {
      await trx.deleteFrom('ci_job_variables').where('job_id', '=', target.id).execute();
      await trx.insertInto('ci_job_variables').values(variables.map((v) => ({ job_id: target.id, key: v.key, value_encrypted: v.valueEncrypted, variable_type: v.variableType ?? 'env_var' }))).execute();
    }
    await enqueueBuild(trx, target.id);
    await resetSkippedAfter(trx, build);
    return { target, moved: await advancePipeline(cairn, trx, current.pipeline_id) };
  });
  if (!played) return null;
  await afterPipelineCommit(cairn, played.moved);
  return (await cairn.db.selectFrom('ci_builds').selectAll().where('id', '=', played.target.id).executeTakeFirst()) ?? played.target;
}

/** GitLab's erasable?: a finished job with a log or artifacts. */
export async function isErasable(db: Executor, build: Pick<CiBuild, 'id' | 'status' | 'type'>): Promise<boolean> {
  if (build.type !== 'Ci::Build' || !['success', 'failed', 'canceled'].includes(build.status)) return false;
  const trace = await db.selectFrom('ci_build_trace_chunks').select('build_id').where('build_id', '=', build.id).limit(1).executeTakeFirst();
  if (trace) return true;
  const art = await db.selectFrom('ci_job_artifacts').select('id').where('job_id', '=', build.id).limit(1).executeTakeFirst();
  return !!art;
}

/**
 * API erase: the log and artifacts of a finished job go; the job records who erased it. Returns
 * the job and the object-store keys of its artifacts (the caller deletes those bytes), or null
 * when it is not erasable.
 */
export async function eraseBuild(cairn: Cairn, buildId: number, userId: number | null): Promise<{ build: CiBuild; storeKeys: string[] } | null> {
  return inTransaction(cairn.db, async (trx) => {
    const build = await trx.selectFrom('ci_builds').selectAll().where('id', '=', buildId).forUpdate().executeTakeFirst();
    if (!build || !(await isErasable(trx, build))) return null;
    const artifacts = await trx.deleteFrom('ci_job_artifacts').where('job_id', '=', buildId).returning('store_key').execute();
    await trx.deleteFrom('ci_build_trace_chunks').where('build_id', '=', buildId).execute();
    const erased = await trx
      .updateTable('ci_builds')
      .set({ erased_at: sql`now()` as any, erased_by_id: userId, trace_size: 0, artifacts_expire_at: null, updated_at: sql`now()` as any })
      .where('id', '=', buildId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { build: erased, storeKeys: artifacts.map((a) => a.store_key) };
  });
}

/** Pipeline cancel: every cancelable job of it (and of its child pipelines) is canceled. */
export async function cancelPipeline(cairn: Cairn, pipelineId: number): Promise<void> {
  const children = await cairn.db.selectFrom('ci_pipelines').select('id').where('parent_pipeline_id', '=', pipelineId).execute();
  for (const c of children) await cancelPipeline(cairn, c.id);
  await cancelPipelineJobs(cairn, pipelineId);
}

/**
 * The cancelable jobs of one pipeline (not its children) are canceled; with onlyInterruptible,
 * only those marked `interruptible` (auto-cancel's `interruptible` mode).
 */
export async function cancelPipelineJobs(cairn: Cairn, pipelineId: number, opts: { onlyInterruptible?: boolean } = {}): Promise<void> {
  const moved = await inTransaction(cairn.db, async (trx) => {
    if (!(await lockPipeline(trx, pipelineId))) return null;
    let q = trx.selectFrom('ci_builds').select('id').where('pipeline_id', '=', pipelineId).where('status', 'in', CANCELABLE_STATUSES);
    if (opts.onlyInterruptible) q = q.where('interruptible', '=', true);
    const ids = await q.execute();
    await cancelBuildsLocked(trx, ids.map((r) => r.id));
    return advancePipeline(cairn, trx, pipelineId);
  });
  await afterPipelineCommit(cairn, moved);
}

/** Pipeline retry: failed and canceled jobs get a new attempt, skipped ones wait again. False when nothing was retryable. */
export async function retryPipeline(cairn: Cairn, pipelineId: number, userId: number | null): Promise<boolean> {
  const retried = await inTransaction(cairn.db, async (trx) => {
    if (!(await lockPipeline(trx, pipelineId))) return { n: 0, moved: null };
    const builds = await trx.selectFrom('ci_builds').selectAll().where('pipeline_id', '=', pipelineId).where('retried', '=', false).orderBy('stage_idx').orderBy('id').execute();
    let n = 0;
    for (const b of builds) {
      if (b.status !== 'failed' && b.status !== 'canceled') continue;
      if ((b.type as string) === 'GenericCommitStatus') continue; // external statuses are the external system's to retry
      await cloneForRetry(trx, b, userId, false);
      n++;
    }
    if (!n) return { n, moved: null };
    await transition(trx, JOB_MACHINE, (qb) => qb.where('pipeline_id', '=', pipelineId).where('retried', '=', false), 'reset', { set: { updated_at: sql`now()` as any } });
    await trx.updateTable('ci_pipelines').set({ finished_at: null }).where('id', '=', pipelineId).execute();
    return { n, moved: await advancePipeline(cairn, trx, pipelineId) };
  });
  await afterPipelineCommit(cairn, retried.moved);
  // Child pipelines' failed jobs too.
  const children = await cairn.db.selectFrom('ci_pipelines').select('id').where('parent_pipeline_id', '=', pipelineId).execute();
  let childRetried = false;
  for (const c of children) childRetried = (await retryPipeline(cairn, c.id, userId)) || childRetried;
  if (childRetried) await processPipeline(cairn, pipelineId);
  return retried.n > 0 || childRetried;
}

// ---- processing ---------------------------------------------------------------------------------

type Row = Pick<CiBuild, 'id' | 'name' | 'stage_idx' | 'status' | 'when' | 'allow_failure' | 'options' | 'type' | 'enqueue_immediately'>;

/** What a job's predecessors say: its needs (DAG) or every job of the earlier stages. */
function predecessorStatus(build: Row, latest: Row[]): CiStatus {
  const needs = jobOf(build).needs;
  if (needs) {
    const names = new Set(needs.map((n) => n.name));
    const needed = latest.filter((b) => names.has(b.name));
    return compositeStatus(needed, { dag: true }) ?? 'success';
  }
  return compositeStatus(latest.filter((b) => b.stage_idx < build.stage_idx)) ?? 'success';
}

/** GitLab's ProcessBuildService: which predecessor statuses let a job run, by its `when`. */
function validStatuses(build: Row): CiStatus[] {
  const dag = !!jobOf(build).needs;
  switch (build.when) {
    case 'on_success':
    case 'manual':
    case 'delayed':
      return dag ? ['success'] : ['success', 'skipped'];
    case 'on_failure':
      return ['failed'];
    case 'always':
      return ['success', 'failed', 'skipped'];
    default:
      return [];
  }
}

/**
 * Moves the pipeline's created jobs on (stage order, needs DAG, when, allow_failure) and
 * recomputes stage and pipeline statuses. Idempotent; the pipeline row lock makes concurrent
 * calls from several processes take turns. Then the consequences of a pipeline that finished:
 * its bridge (strategy: depend) and parent pipeline, merge requests waiting on it.
 */
export async function processPipeline(cairn: Cairn, pipelineId: number): Promise<void> {
  await afterPipelineCommit(cairn, await inTransaction(cairn.db, (trx) => advancePipeline(cairn, trx, pipelineId)));
}

export interface PipelineTransition {
  pipeline: Parameters<PipelineListener>[1];
  before: CiStatus;
  after: CiStatus;
  journal: number;
}

/**
 * processPipeline's work inside the caller's transaction, for callers that changed the pipeline's
 * jobs in it: the change and its consequences for the pipeline commit together, so a crash cannot
 * leave a finished stage whose next one never starts. A status change is journalled in the same
 * transaction; pass the result to afterPipelineCommit once it has committed.
 */
export async function advancePipeline(cairn: Cairn, trx: Database, pipelineId: number): Promise<PipelineTransition | null> {
  const pipeline = await lockPipeline(trx, pipelineId);
  if (!pipeline) return null;
  const latest: Row[] = await trx
    .selectFrom('ci_builds')
    .select(['id', 'name', 'stage_idx', 'status', 'when', 'allow_failure', 'options', 'type', 'enqueue_immediately'])
    .where('pipeline_id', '=', pipelineId).where('retried', '=', false)
    .orderBy('stage_idx').orderBy('id')
    .execute();
  let changed = true;
  while (changed) {
    changed = false;
    for (const b of latest) {
      if (b.status !== 'created') continue;
      const prior = predecessorStatus(b, latest);
      if (!COMPLETED_STATUSES.includes(prior)) continue;
      let next: CiStatus | null;
      if (!validStatuses(b).includes(prior)) next = await skip(trx, b.id);
      else if (b.enqueue_immediately) next = (await enqueueBuild(trx, b.id))?.status ?? null;
      else if (b.when === 'manual') next = await toManual(trx, b.id);
      else if (b.when === 'delayed') next = await schedule(trx, b);
      else next = (await enqueueBuild(trx, b.id))?.status ?? null;
      if (next) {
        b.status = next;
        changed = true;
      }
    }
  }
  const status = await updateStatuses(trx, pipelineId);
  await notifyPipelineFinished(cairn, trx, pipeline, pipeline.status, status);
  if (!status || pipeline.status === status) return null;
  await queueHookEvent(cairn, trx, { kind: 'pipeline', projectId: pipeline.project_id, id: pipelineId });
  const before = pipeline.status as CiStatus;
  const journal = await beginInlineJob(cairn.db, PIPELINE_TRANSITION_JOB, { pipelineId, before, after: status }, { trx });
  return { pipeline, before, after: status, journal };
}

/** The committed status change's listeners run; a crash before they are done leaves the journal, whose handler runs them. */
export async function afterPipelineCommit(cairn: Cairn, moved: PipelineTransition | null): Promise<void> {
  if (!moved) return;
  try {
    await afterPipelineTransition(cairn, moved.pipeline, moved.before, moved.after);
  } finally {
    await finishInlineJob(cairn.db, moved.journal);
  }
}

async function skip(db: Executor, id: number): Promise<CiStatus | null> {
  const skipped = await transition(db, JOB_MACHINE, id, 'skip', { set: { updated_at: sql`now()` as any } });
  await afterJobTransition(db, skipped);
  await queueJobHookEvent(db, skipped);
  return skipped?.status ?? null;
}

async function toManual(db: Executor, id: number): Promise<CiStatus | null> {
  const manual = await transition(db, JOB_MACHINE, id, 'actionize', { set: { updated_at: sql`now()` as any } });
  await afterJobTransition(db, manual);
  await queueJobHookEvent(db, manual);
  return manual?.status ?? null;
}

async function schedule(db: Executor, b: Row): Promise<CiStatus | null> {
  const startIn = jobOf(b).startIn ?? 0;
  const at = new Date(Date.now() + startIn * 1000);
  const r = await transition(db, JOB_MACHINE, b.id, 'schedule', { set: { scheduled_at: at, updated_at: sql`now()` as any } });
  if (!r) return null;
  await enqueue(db, BUILD_SCHEDULED_JOB, { buildId: b.id }, { runAt: at });
  return 'scheduled';
}

/**
 * Stage statuses and the pipeline's status, started_at, finished_at, duration and
 * queued_duration from its latest jobs. Returns the pipeline's status.
 */
async function updateStatuses(db: Executor, pipelineId: number): Promise<CiStatus | null> {
  const builds = await db
    .selectFrom('ci_builds')
    .select(['stage_id', 'status', 'allow_failure', 'started_at', 'finished_at'])
    .where('pipeline_id', '=', pipelineId).where('retried', '=', false)
    .execute();
  const stages = await db.selectFrom('ci_stages').select(['id', 'status']).where('pipeline_id', '=', pipelineId).execute();
  for (const st of stages) {
    const s = compositeStatus(builds.filter((b) => b.stage_id === st.id)) ?? 'skipped';
    if (s !== st.status) await db.updateTable('ci_stages').set({ status: s }).where('id', '=', st.id).execute();
  }
  const p = await db.selectFrom('ci_pipelines').select(['status', 'started_at', 'finished_at', 'created_at', 'yaml_errors']).where('id', '=', pipelineId).executeTakeFirstOrThrow();
  if (p.yaml_errors) return p.status as CiStatus; // a failed configuration stays failed
  const status = compositeStatus(builds) ?? 'skipped';
  const anyStarted = builds.some((b) => b.started_at);
  const completed = COMPLETED_STATUSES.includes(status);
  const startedAt = p.started_at ?? (anyStarted || status === 'running' ? new Date() : null);
  const finishedAt = completed ? (p.finished_at ?? new Date()) : null;
  const duration = completed ? runningSeconds(builds) : null;
  const createdAt = new Date(p.created_at as any);
  const queued = startedAt ? Math.max(0, Math.round((new Date(startedAt as any).getTime() - createdAt.getTime()) / 1000)) : null;
  await db
    .updateTable('ci_pipelines')
    .set({
      status,
      started_at: startedAt as any,
      finished_at: finishedAt as any,
      duration,
      queued_duration: queued,
      updated_at: sql`now()` as any,
      lock_version: sql`lock_version + 1` as any,
    })
    .where('id', '=', pipelineId)
    .execute();
  return status;
}

/** GitLab's pipeline duration: the union of the periods its jobs ran, in whole seconds. */
function runningSeconds(builds: { started_at: unknown; finished_at: unknown }[]): number | null {
  const periods = builds
    .filter((b) => b.started_at && b.finished_at)
    .map((b) => [new Date(b.started_at as any).getTime(), new Date(b.finished_at as any).getTime()] as [number, number])
    .sort((a, b) => a[0] - b[0]);
  if (!periods.length) return null;
  let total = 0;
  let [s, e] = periods[0];
  for (const [ps, pe] of periods.slice(1)) {
    if (ps <= e) e = Math.max(e, pe);
    else {
      total += e - s;
      [s, e] = [ps, pe];
    }
  }
  total += e - s;
  return Math.round(total / 1000);
}

type PipelineListener = (cairn: Cairn, pipeline: { id: number; project_id: number; sha: string; ref: string; source_job_id: number | null; parent_pipeline_id: number | null }, before: CiStatus, after: CiStatus) => Promise<void>;
const listeners: PipelineListener[] = [];

/**
 * Code that reacts to a pipeline's status change (merge when pipeline succeeds, bridges of
 * downstream pipelines) registers here at import time, as queue handlers do.
 */
export function onPipelineStatusChange(listener: PipelineListener) {
  listeners.push(listener);
}

async function afterPipelineTransition(cairn: Cairn, pipeline: Parameters<PipelineListener>[1], before: CiStatus, after: CiStatus) {
  for (const l of listeners) {
    try {
      await l(cairn, pipeline, before, after);
    } catch (err) {
      console.error('pipeline status listener failed', err);
    }
  }
}

// ---- durable queue jobs ---------------------------------------------------------------------------

/** A delayed job's time has come: pending now (unless played or canceled meanwhile). */
defineJob(BUILD_SCHEDULED_JOB, async (cairn, payload) => {
  const build = await cairn.db.selectFrom('ci_builds').select(['id', 'pipeline_id', 'status', 'scheduled_at']).where('id', '=', Number(payload.buildId)).executeTakeFirst();
  if (!build || build.status !== 'scheduled') return;
  const at = build.scheduled_at ? new Date(build.scheduled_at as any) : new Date();
  if (at.getTime() > Date.now() + 500) {
    await enqueue(cairn.db, BUILD_SCHEDULED_JOB, { buildId: build.id }, { runAt: at });
    return;
  }
  const moved = await inTransaction(cairn.db, async (trx) => {
    await lockPipeline(trx, build.pipeline_id);
    await enqueueBuild(trx, build.id);
    return advancePipeline(cairn, trx, build.pipeline_id);
  });
  await afterPipelineCommit(cairn, moved);
});

/**
 * A resource group's resource may be free: its waiting jobs get it in the group's order, each
 * in a transaction that holds its pipeline (the same lock order as processing).
 */
export async function assignResources(cairn: Cairn, groupId: number): Promise<void> {
  for (const candidate of await waitingJobs(cairn.db, groupId)) {
    const result = await inTransaction(cairn.db, async (trx) => {
      await lockPipeline(trx, candidate.pipeline_id);
      const row = await trx.selectFrom('ci_builds').select('status').where('id', '=', candidate.id).executeTakeFirst();
      if (row?.status !== 'waiting_for_resource') return { stop: false, moved: null };
      if (!(await acquireResource(trx, groupId, candidate.id))) return { stop: true, moved: null };
      await enqueueBuild(trx, candidate.id);
      return { stop: false, moved: await advancePipeline(cairn, trx, candidate.pipeline_id) };
    });
    await afterPipelineCommit(cairn, result.moved);
    if (result.stop) return;
  }
}

defineJob(ASSIGN_RESOURCE_JOB, async (cairn, payload) => {
  await assignResources(cairn, Number(payload.resourceGroupId));
});

/** auto_cancel:on_job_failure: all — the pipeline (and its child pipelines) of a failed job is canceled. */
defineJob(AUTO_CANCEL_PIPELINE_JOB, async (cairn, payload) => {
  await cancelPipeline(cairn, Number(payload.pipelineId));
});

/** A status change whose listeners did not all run (the process died): they run now. */
defineJob(PIPELINE_TRANSITION_JOB, async (cairn, payload) => {
  const pipeline = await cairn.db
    .selectFrom('ci_pipelines').select(['id', 'project_id', 'sha', 'ref', 'source_job_id', 'parent_pipeline_id'])
    .where('id', '=', Number(payload.pipelineId)).executeTakeFirst();
  if (pipeline) await afterPipelineTransition(cairn, pipeline, payload.before as CiStatus, payload.after as CiStatus);
});

/** A running job past its timeout fails with stuck_or_timeout_failure. */
defineJob(BUILD_TIMEOUT_JOB, async (cairn, payload) => {
  await failTimedOut(cairn, Number(payload.buildId));
});

/** Fails the job if it is still running past its timeout; true when it did. */
export async function failTimedOut(cairn: Cairn, buildId: number, now = new Date()): Promise<boolean> {
  const build = await cairn.db.selectFrom('ci_builds').select(['id', 'status', 'started_at', 'timeout']).where('id', '=', buildId).executeTakeFirst();
  if (!build || build.status !== 'running' || !build.started_at) return false;
  const deadline = new Date(build.started_at as any).getTime() + (build.timeout ?? DEFAULT_TIMEOUT) * 1000;
  if (deadline > now.getTime() + 500) {
    await enqueue(cairn.db, BUILD_TIMEOUT_JOB, { buildId }, { runAt: new Date(deadline) });
    return false;
  }
  return finishBuild(cairn, buildId, { status: 'failed', failureReason: 'stuck_or_timeout_failure' });
}

// Stopping an environment plays its stop job (or runs it again), as the one who stops it.
registerStopJobRunner((cairn) => ({
  play: (buildId, userId) => playBuild(cairn, buildId, userId),
  retry: (buildId, userId) => retryBuild(cairn, buildId, userId),
}));
