import { sql, type Transaction } from 'kysely';
import type { Cairn, PostReceiveEvent } from '../../context.js';
import type { CiPipeline } from '../../db/schema/ci.js';
import type { DB } from '../../db/types.js';
import { findProjectRow, type FoundProject } from '../../finders/projects.js';
import { changedPathsBetween } from '../../git/ci_files.js';
import { listTree, mergeBase, objectAtPath, readBlob, readCommit, resolveCommit } from '../../git/refs.js';
import { InvalidCompareToError } from '../config/errors.js';
import { decryptSecret, encryptSecret } from '../../lib/secrets.js';
import { isProtectedRef } from '../../policies/branches.js';
import { VISIBILITY_NAMES } from '../../policies/access.js';
import { projectSettings } from '../../presenters/projects.js';
import { nextInternalId } from '../../services/internal_ids.js';
import { projectRepoPath } from '../../services/projects.js';
import type { CompiledJob, CompileResult, PipelineSource } from '../config/index.js';
import { matchAnyGlob } from '../config/glob.js';
import { advancePipeline, afterPipelineCommit, type PipelineTransition } from '../jobs/state.js';
import { mergeRequestVariables, openMergeRequestsReference } from './lookup.js';
import { CANCEL_REDUNDANT_PIPELINES_JOB } from './auto_cancel.js';
import { enqueue } from '../../jobs/queue.js';
import { notifyPipelineFinished } from '../../services/notify.js';
import { createPipelineDeployments } from '../../services/environments.js';
import { MR_STATE } from '../../db/work_item_states.js';

// Pipeline creation: read .gitlab-ci.yml at the pipeline's sha, compile it (src/ci/config) with
// the predefined, group, project and pipeline variables, and store the pipeline, its stages, jobs
// and needs in one transaction; then processPipeline starts the first jobs.

const ZERO_OID = '0000000000000000000000000000000000000000';

export interface PipelineVariableInput {
  key: string;
  value: string;
  variable_type?: 'env_var' | 'file';
  raw?: boolean;
}

export interface CreatePipelineInput {
  project: FoundProject;
  ref: string;
  tag: boolean;
  sha: string;
  beforeSha?: string | null;
  source: PipelineSource;
  userId: number | null;
  /** Pipeline variables (API, trigger, push options); they outrank every other. */
  variables?: PipelineVariableInput[];
  /** Push: no file → no pipeline. API: no file → an error. */
  configRequired?: boolean;
  /** API: [skip ci] does not apply and errors are not stored (GitLab's save_on_errors: false). */
  api?: boolean;
  skipCi?: boolean;
  mergeRequestId?: number | null;
  /** Child pipelines: the configuration as YAML, the parent and the bridge that made it. */
  yaml?: string;
  parentPipelineId?: number | null;
  sourceJobId?: number | null;
  /** Variables passed down by a bridge (they outrank the child's file, like pipeline variables). */
  inheritedVariables?: Record<string, string>;
  /**
   * A schedule's variables: they count as pipeline variables but stay the schedule's (jobs read
   * them from it, as GitLab's do), so they are not stored with the pipeline.
   */
  scheduleVariables?: PipelineVariableInput[];
  /** The schedule or trigger token that runs this pipeline. */
  pipelineScheduleId?: number | null;
  triggerId?: number | null;
  /**
   * Runs in the transaction that stores the pipeline, before it commits: a write that must happen
   * exactly when the pipeline is created (a schedule's next run). Throwing rolls the pipeline back.
   */
  beforeCommit?: (trx: Transaction<DB>, pipeline: CiPipeline) => Promise<void>;
  /** Values for the configuration's own `spec:inputs` (API `inputs`). */
  inputs?: Record<string, unknown>;
}

export type CreatePipelineResult =
  | { kind: 'created'; pipeline: CiPipeline }
  | { kind: 'not_created'; reason: 'no_config' | 'skip_ci' | 'workflow_rules' | 'no_jobs' | 'error'; message: string; errors?: string[] };

/** The CI config file path of a project (ci_config_path, or .gitlab-ci.yml). */
export function ciConfigPath(project: FoundProject): string {
  const p = projectSettings(project).ci_config_path;
  return p && !p.includes('@') && !/^https?:/.test(p) ? p.replace(/^\/+/, '') : '.gitlab-ci.yml';
}

function slugify(s: string): string {
  return s.toLowerCase().replace(/[^a-z0-9]/g, '-').slice(0, 63).replace(/^-+|-+$/g, '');
}

/** GitLab's predefined variables known before the pipeline exists. */
export async function predefinedVariables(
  cairn: Cairn,
  project: FoundProject,
  p: { ref: string; tag: boolean; sha: string; beforeSha?: string | null; source: string; protectedRef: boolean; userId: number | null; message: string; author: string; committedAt: string | null; configPath: string },
): Promise<Record<string, string>> {
  const base = cairn.config.externalUrl;
  const fullPath = `${project.namespace.full_path}/${project.path}`;
  const lines = p.message.split('\n');
  const v: Record<string, string> = {
    CI: 'true',
    GITLAB_CI: 'true',
    CI_SERVER: 'yes',
    CI_SERVER_URL: base,
    CI_SERVER_HOST: new URL(base).hostname,
    CI_API_V4_URL: `${base}/api/v4`,
    CI_PROJECT_ID: String(project.id),
    CI_PROJECT_NAME: project.path,
    CI_PROJECT_TITLE: project.name,
    CI_PROJECT_PATH: fullPath,
    CI_PROJECT_PATH_SLUG: slugify(fullPath),
    CI_PROJECT_NAMESPACE: project.namespace.full_path,
    CI_PROJECT_NAMESPACE_ID: String(project.namespace.id),
    CI_PROJECT_ROOT_NAMESPACE: project.namespace.full_path.split('/')[0],
    CI_PROJECT_URL: `${base}/${fullPath}`,
    CI_PROJECT_VISIBILITY: VISIBILITY_NAMES[project.visibility_level] ?? 'private',
    CI_DEFAULT_BRANCH: project.default_branch ?? 'main',
    CI_CONFIG_PATH: p.configPath,
    CI_COMMIT_SHA: p.sha,
    CI_COMMIT_SHORT_SHA: p.sha.slice(0, 8),
    CI_COMMIT_BEFORE_SHA: p.beforeSha ?? ZERO_OID,
    CI_COMMIT_REF_NAME: p.ref,
    CI_COMMIT_REF_SLUG: slugify(p.ref),
    CI_COMMIT_REF_PROTECTED: String(p.protectedRef),
    CI_COMMIT_MESSAGE: p.message,
    CI_COMMIT_TITLE: lines[0] ?? '',
    CI_COMMIT_DESCRIPTION: lines.slice(1).join('\n').replace(/^\n+/, ''),
    CI_COMMIT_AUTHOR: p.author,
    CI_PIPELINE_SOURCE: p.source,
  };
  if (p.committedAt) v.CI_COMMIT_TIMESTAMP = p.committedAt;
  if (p.tag) v.CI_COMMIT_TAG = p.ref;
  else v.CI_COMMIT_BRANCH = p.ref;
  if (p.userId) {
    const u = await cairn.db.selectFrom('users').select(['id', 'username', 'name', 'email']).where('id', '=', p.userId).executeTakeFirst();
    if (u) Object.assign(v, { GITLAB_USER_ID: String(u.id), GITLAB_USER_LOGIN: u.username, GITLAB_USER_NAME: u.name, GITLAB_USER_EMAIL: u.email ?? '' });
  }
  return v;
}

/**
 * Instance, then group (outermost first, so nearer groups win), then project CI variables,
 * decrypted. Protected ones only for protected refs; environment-scoped ones are left to job start.
 */
export async function ciVariablesFor(cairn: Cairn, project: FoundProject, protectedRef: boolean): Promise<Array<{ key: string; value: string; variable_type: string; masked: boolean; raw: boolean }>> {
  const groupIds = project.namespace.type === 'Group' ? (project.namespace.traversal_ids ?? []) : [];
  const rows = await cairn.db
    .selectFrom('ci_variables')
    .selectAll()
    .where((eb) => eb.or([
      eb('project_id', '=', project.id),
      eb.and([eb('project_id', 'is', null), eb('namespace_id', 'is', null)]),
      ...(groupIds.length ? [eb('namespace_id', 'in', groupIds)] : []),
    ]))
    .where('environment_scope', '=', '*')
    .execute();
  const rank = (r: (typeof rows)[number]) => (r.project_id !== null ? 1000 : r.namespace_id === null ? -1 : groupIds.indexOf(r.namespace_id));
  return rows
    .filter((r) => protectedRef || !r.protected)
    .sort((a, b) => rank(a) - rank(b))
    .map((r) => ({ key: r.key, value: decryptSecret(cairn.config, r.value_encrypted) ?? '', variable_type: r.variable_type, masked: r.masked, raw: r.raw }));
}

/** The compiler's view of the repository at `sha`: local files, rules:exists and include:local wildcards. */
export function repositoryReader(cairn: Cairn, project: FoundProject, sha: string) {
  const gitDir = projectRepoPath(cairn, project);
  let allPaths: string[] | null = null;
  const listFiles = async (): Promise<string[]> =>
    (allPaths ??= ((await listTree(cairn.catfile, gitDir, sha, '', true)) ?? []).filter((e) => e.type === 'blob').map((e) => e.path));
  return {
    listFiles,
    async readLocalFile(path: string): Promise<string | null> {
      const clean = path.replace(/^\/+/, '');
      if (!clean || clean.split('/').some((s) => s === '' || s === '.' || s === '..')) return null;
      const info = await objectAtPath(cairn.catfile, gitDir, sha, clean);
      if (!info || info.type !== 'blob') return null;
      const blob = await readBlob(cairn.catfile, gitDir, info.oid);
      return blob ? blob.data.toString('utf8') : null;
    },
    async fileExists(globs: string[]): Promise<boolean> {
      return matchAnyGlob(globs, await listFiles());
    },
  };
}

/** Compiles a project's configuration for a ref and sha (shared by pipeline creation and /ci/lint). */
export async function compileFor(cairn: Cairn, input: CreatePipelineInput): Promise<{ result: CompileResult | null; protectedRef: boolean; message: string; committedAt: string | null; configPath: string }> {
  const { project } = input;
  const gitDir = projectRepoPath(cairn, project);
  const commit = await readCommit(cairn.catfile, gitDir, input.sha);
  const message = commit?.message ?? '';
  const committedAt = commit ? new Date(commit.committer.time * 1000).toISOString() : null;
  const protectedRef = await isProtectedRef(cairn, project.id, input.ref, input.tag);
  const configPath = ciConfigPath(project);
  const { readLocalFile, fileExists, listFiles } = repositoryReader(cairn, project, input.sha);
  const yaml = input.yaml ?? (await readLocalFile(configPath));
  if (yaml === null) return { result: null, protectedRef, message, committedAt, configPath };
  const predefined = await predefinedVariables(cairn, project, {
    ref: input.ref, tag: input.tag, sha: input.sha, beforeSha: input.beforeSha, source: input.source, protectedRef,
    userId: input.userId, message, author: commit ? `${commit.author.name} <${commit.author.email}>` : '', committedAt, configPath,
  });
  const mrVars = await mergeRequestVariables(cairn.db, cairn.config.externalUrl, { source: input.source, merge_request_id: input.mergeRequestId ?? null });
  if (mrVars) {
    delete predefined.CI_COMMIT_BRANCH;
    Object.assign(predefined, mrVars);
  }
  const branch = mrVars ? mrVars.CI_MERGE_REQUEST_SOURCE_BRANCH_NAME : input.tag ? null : input.ref;
  const openMergeRequests = branch === null ? null : await openMergeRequestsReference(cairn.db, mrVars ? Number(mrVars.CI_MERGE_REQUEST_SOURCE_PROJECT_ID ?? project.id) : project.id, branch);
  if (openMergeRequests) predefined.CI_OPEN_MERGE_REQUESTS = openMergeRequests;
  const variables: Record<string, string> = {};
  for (const v of await ciVariablesFor(cairn, project, protectedRef)) variables[v.key] = v.value;
  Object.assign(variables, input.inheritedVariables ?? {});
  for (const v of [...(input.variables ?? []), ...(input.scheduleVariables ?? [])]) variables[v.key] = v.value;
  // The compiler (and its YAML parser, about 10 MB of memory) loads with the first pipeline.
  const { compilePipeline } = await import('../config/index.js');
  const result = await compilePipeline({
    yaml,
    ref: input.ref,
    tag: input.tag,
    sha: input.sha,
    beforeSha: input.beforeSha ?? undefined,
    source: input.source,
    variables,
    lowPrecedenceVariables: predefined,
    commitMessage: input.api ? '' : message,
    skipCi: input.skipCi,
    readLocalFile,
    fileExists,
    listFiles,
    inputs: input.inputs,
    changedPaths: async (compareTo) => {
      if (compareTo) {
        // GitLab: the paths changed since the merge base of compare_to and the pipeline's commit.
        const target = await resolveCommit(cairn.catfile, gitDir, compareTo);
        if (!target) throw new InvalidCompareToError();
        return changedPathsBetween(gitDir, (await mergeBase(gitDir, [target.oid, input.sha])) ?? target.oid, input.sha);
      }
      const from = input.beforeSha ?? null;
      if (!from || from === ZERO_OID || input.tag || input.source !== 'push') return null;
      return changedPathsBetween(gitDir, from, input.sha);
    },
  });
  return { result, protectedRef, message, committedAt, configPath };
}

/** Creates a pipeline (see CreatePipelineInput); processing starts its first jobs. */
export async function createPipeline(cairn: Cairn, input: CreatePipelineInput): Promise<CreatePipelineResult> {
  const { project } = input;
  const compiled = await compileFor(cairn, input);
  const { result, protectedRef, committedAt } = compiled;
  if (!result) {
    return { kind: 'not_created', reason: 'no_config', message: 'Missing CI config file' };
  }
  if (result.kind === 'skipped' && result.reason !== 'skip_ci') {
    return { kind: 'not_created', reason: result.reason, message: result.message };
  }
  if (result.kind === 'error' && input.api) {
    return { kind: 'not_created', reason: 'error', message: result.errors[0] ?? 'Invalid configuration', errors: result.errors };
  }
  const settings = projectSettings(project);
  const jobs: CompiledJob[] = result.kind === 'pipeline' ? result.jobs : [];
  // A new pipeline moves on (its first jobs pending) in the transaction that makes it.
  let moved: PipelineTransition | null = null;
  const insertPipeline = async (trx: Transaction<DB>): Promise<CiPipeline> => {
    const iid = await nextInternalId(trx, 'ci_pipelines', project.id);
    const base = {
      iid,
      project_id: project.id,
      ref: input.ref,
      tag: input.tag,
      sha: input.sha,
      before_sha: input.beforeSha ?? ZERO_OID,
      source: input.source,
      protected: protectedRef,
      user_id: input.userId,
      merge_request_id: input.mergeRequestId ?? null,
      parent_pipeline_id: input.parentPipelineId ?? null,
      source_job_id: input.sourceJobId ?? null,
      pipeline_schedule_id: input.pipelineScheduleId ?? null,
      trigger_id: input.triggerId ?? null,
      committed_at: committedAt as any,
    };
    if (result.kind === 'error') {
      const failed = await trx.insertInto('ci_pipelines').values({
        ...base, status: 'failed', yaml_errors: result.errors.join(', '), failure_reason: 'config_error', finished_at: sql`now()` as any,
      }).returningAll().executeTakeFirstOrThrow();
      await notifyPipelineFinished(cairn, trx, failed, null, 'failed');
      return failed;
    }
    if (result.kind === 'skipped') {
      return trx.insertInto('ci_pipelines').values({ ...base, status: 'skipped', finished_at: sql`now()` as any }).returningAll().executeTakeFirstOrThrow();
    }
    const row = await trx.insertInto('ci_pipelines').values({
      ...base,
      status: 'created',
      name: result.workflow.name,
      config: JSON.stringify({ stages: result.stages, variables: result.variables, workflow: result.workflow }),
    }).returningAll().executeTakeFirstOrThrow();
    if (input.variables?.length) {
      await trx.insertInto('ci_pipeline_variables').values(input.variables.map((v) => ({
        pipeline_id: row.id, key: v.key, value_encrypted: encryptSecret(cairn.config, v.value), variable_type: v.variable_type ?? 'env_var', raw: v.raw ?? false,
      }))).execute();
    }
    // Stages that have jobs, in file order.
    const used = [...new Set(jobs.map((j) => j.stageIdx))].sort((a, b) => a - b);
    const stageIds = new Map<number, number>();
    if (used.length) {
      const stages = await trx.insertInto('ci_stages').values(used.map((idx) => ({
        pipeline_id: row.id, project_id: project.id, name: result.stages[idx], position: idx,
      }))).returning(['id', 'position']).execute();
      for (const s of stages) stageIds.set(s.position, s.id);
    }
    const ordered = [...jobs].sort((a, b) => a.stageIdx - b.stageIdx || a.index - b.index);
    const builds = ordered.length ? await trx.insertInto('ci_builds').values(ordered.map((j) => ({
      pipeline_id: row.id,
      project_id: project.id,
      stage_id: stageIds.get(j.stageIdx) ?? null,
      stage: j.stage,
      stage_idx: j.stageIdx,
      name: j.name,
      type: j.kind === 'bridge' ? 'Ci::Bridge' as const : 'Ci::Build' as const,
      when: j.when,
      allow_failure: j.allowFailure,
      options: JSON.stringify(j),
      yaml_variables: JSON.stringify(j.variables),
      ref: input.ref,
      tag: input.tag,
      sha: input.sha,
      protected: protectedRef,
      tag_list: j.tags,
      user_id: input.userId,
      coverage_regex: j.coverage,
      timeout: j.timeout ?? settings.build_timeout ?? 3600,
      environment: j.environment?.name ?? null,
      interruptible: j.interruptible,
    }))).returning(['id', 'name']).execute() : [];
    const idByName = new Map(builds.map((b) => [b.name, b.id]));
    const needs = ordered.flatMap((j) => (j.needs ?? []).map((n) => ({ build_id: idByName.get(j.name)!, name: n.name, artifacts: n.artifacts, optional: n.optional })));
    if (needs.length) await trx.insertInto('ci_build_needs').values(needs).execute();
    // Jobs with `environment:` find or make it; deployment jobs get their `created` deployment.
    await createPipelineDeployments(trx, { project_id: project.id, ref: input.ref, tag: input.tag, sha: input.sha, user_id: input.userId },
      ordered.map((j) => ({ buildId: idByName.get(j.name)!, environment: j.environment })));
    // Older pipelines of the ref may now be redundant (auto_cancel.ts decides, after the commit).
    if (!input.parentPipelineId) await enqueue(trx, CANCEL_REDUNDANT_PIPELINES_JOB, { pipelineId: row.id });
    moved = await advancePipeline(cairn, trx, row.id);
    return row;
  };
  const pipeline = await cairn.db.transaction().execute(async (trx) => {
    const row = await insertPipeline(trx);
    await input.beforeCommit?.(trx, row);
    return row;
  });
  await linkMergeRequests(cairn, pipeline);
  await afterPipelineCommit(cairn, moved);
  const fresh = await cairn.db.selectFrom('ci_pipelines').selectAll().where('id', '=', pipeline.id).executeTakeFirstOrThrow();
  return { kind: 'created', pipeline: fresh };
}

/**
 * Open merge requests whose head is this pipeline's commit take it as head pipeline (the newest
 * wins, as GitLab's): those of this branch for a branch pipeline, its own for a merge request's.
 */
async function linkMergeRequests(cairn: Cairn, pipeline: CiPipeline) {
  if (pipeline.tag || pipeline.parent_pipeline_id) return;
  let q = cairn.db
    .updateTable('merge_requests')
    .set({ head_pipeline_id: pipeline.id })
    .where('head_sha', '=', pipeline.sha)
    .where('state_id', '=', MR_STATE.opened);
  q = pipeline.source === 'merge_request_event' && pipeline.merge_request_id !== null
    ? q.where('id', '=', pipeline.merge_request_id)
    : q.where('source_project_id', '=', pipeline.project_id).where('source_branch', '=', pipeline.ref);
  await q.execute();
}

/** The post-receive hook: a pipeline for every branch or tag the push created or moved. */
export async function pipelinesForPush(cairn: Cairn, event: PostReceiveEvent): Promise<void> {
  const skipCi = event.pushOptions.some((o) => o === 'ci.skip' || o === 'skip-ci');
  const variables: PipelineVariableInput[] = [];
  for (const o of event.pushOptions) {
    const m = /^ci\.variable=([^=]+)=(.*)$/s.exec(o);
    if (m) variables.push({ key: m[1], value: m[2] });
  }
  let project: FoundProject | undefined;
  for (const change of event.changes) {
    if (change.newSha === ZERO_OID) continue;
    const tag = change.ref.startsWith('refs/tags/');
    if (!tag && !change.ref.startsWith('refs/heads/')) continue;
    project ??= await findProjectRow(cairn.db, event.projectId);
    if (!project || project.archived) return;
    const ref = change.ref.slice(tag ? 'refs/tags/'.length : 'refs/heads/'.length);
    // An annotated tag points at a tag object; the pipeline runs on its commit.
    let sha = change.newSha;
    if (tag) {
      const peeled = await resolveCommit(cairn.catfile, projectRepoPath(cairn, project), sha);
      if (!peeled) continue;
      sha = peeled.oid;
    }
    // A replayed push (after a crash) may have had its pipeline created before the crash.
    if (event.resumed) {
      const existing = await cairn.db.selectFrom('ci_pipelines').select('id')
        .where('project_id', '=', project.id).where('ref', '=', ref).where('sha', '=', sha).where('tag', '=', tag).where('source', '=', 'push')
        .executeTakeFirst();
      if (existing) continue;
    }
    try {
      await createPipeline(cairn, {
        project, ref, tag, sha, beforeSha: change.oldSha, source: 'push', userId: event.userId, skipCi, variables,
      });
    } catch (err) {
      console.error('pipeline creation failed', err);
    }
  }
}

export function registerPipelineHooks(cairn: Cairn) {
  cairn.postReceiveHooks.push((event) => pipelinesForPush(cairn, event));
}
