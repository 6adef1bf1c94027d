import { sql } from 'kysely';
import type { Cairn } from '../../context.js';
import type { CiBuild, CiRunner } from '../../db/schema/ci.js';
import type { Database } from '../../db/index.js';
import { environmentSlug, guessTier } from '../../lib/environments.js';
import { decryptSecret } from '../../lib/secrets.js';
import { VISIBILITY_NAMES } from '../../policies/access.js';
import { projectSettings } from '../../presenters/projects.js';
import { ciDeployCredentials } from '../../services/deploy_tokens.js';
import { projectRepoPath } from '../../services/projects.js';
import { GITLAB_COMPAT_VERSION } from '../../version.js';
import { mergeRequestVariables, openMergeRequestsReference } from '../pipelines/lookup.js';
import type { CompiledJob } from '../config/index.js';
import { payloadCaches } from './cache_keys.js';
import { releaseStep } from './release_step.js';

/**
 * The job as gitlab-runner's JobResponse has it (common/spec: id, token, allow_git_fetch,
 * job_info, git_info, runner_info, variables, steps, image, services, artifacts, cache,
 * credentials, dependencies, features), built from the job row and its compiled options.
 */
export interface PayloadVariable {
  key: string;
  value: string;
  public: boolean;
  masked: boolean;
  file: boolean;
  raw: boolean;
}

const FAILURE_REASONS = [
  'unknown_failure', 'script_failure', 'api_failure', 'stuck_or_timeout_failure', 'runner_system_failure',
  'missing_dependency_failure', 'runner_unsupported', 'stale_schedule', 'job_execution_timeout', 'archived_failure',
  'unmet_prerequisites', 'scheduler_failure', 'data_integrity_failure', 'forward_deployment_failure',
  'user_blocked', 'project_deleted', 'ci_quota_exceeded', 'pipeline_loop_detected', 'no_matching_runner',
  'trace_size_exceeded', 'builds_disabled', 'environment_creation_failure', 'deployment_rejected',
  'failed_outdated_deployment_job', 'protected_environment_failure', 'insufficient_bridge_permissions',
  'downstream_bridge_project_not_found', 'invalid_bridge_trigger', 'upstream_bridge_project_not_found',
  'insufficient_upstream_permissions', 'bridge_pipeline_is_child_pipeline', 'downstream_pipeline_creation_failed',
  'secrets_provider_not_found', 'reached_max_descendant_pipelines_depth', 'ip_restriction_failure',
  'reached_max_pipeline_hierarchy_size', 'reached_downstream_pipeline_trigger_rate_limit',
  // gitlab-runner's own (it reports it where the server lists it, runner_system_failure elsewhere).
  'image_pull_failure',
];
/** Failure reasons a runner may report in PUT /jobs/:id; others become unknown_failure. */
export const RUNNER_FAILURE_REASONS = new Set(FAILURE_REASONS);

export function jobOptions(build: Pick<CiBuild, 'options'>): Partial<CompiledJob> {
  return (build.options ?? {}) as Partial<CompiledJob>;
}

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').slice(0, 63).replace(/^-+|-+$/g, '');
}

/** Does a variable's environment_scope apply to the job's environment? ('*' wildcards.) */
function scopeMatches(scope: string, environment: string | null): boolean {
  if (scope === '*') return true;
  if (!environment) return false;
  const re = new RegExp('^' + scope.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$');
  return re.test(environment);
}

/**
 * The jobs whose artifacts this job receives (GitLab's Ci::BuildDependencies): jobs of earlier
 * stages, or for a job with `needs` its needs with artifacts; narrowed by `dependencies`; plus
 * the successful jobs named by `needs:pipeline:job` in another pipeline of the same hierarchy.
 */
export async function dependencyJobs(db: Database, build: CiBuild): Promise<CiBuild[]> {
  const job = jobOptions(build);
  let q = db
    .selectFrom('ci_builds')
    .selectAll()
    .where('pipeline_id', '=', build.pipeline_id)
    .where('type', '=', 'Ci::Build')
    .where('retried', '=', false)
    .where('id', '<>', build.id);
  let names: string[] | null = null;
  if (Array.isArray(job.needs)) names = job.needs.filter((n) => n.artifacts !== false).map((n) => n.name);
  if (Array.isArray(job.dependencies)) names = names ? names.filter((n) => job.dependencies!.includes(n)) : job.dependencies;
  let local: CiBuild[] = [];
  if (!names || names.length) {
    if (names) q = q.where('name', 'in', names);
    else q = q.where('stage_idx', '<', build.stage_idx);
    local = await q.orderBy('id').execute();
  }
  // The latest attempt of each name.
  const byName = new Map<string, CiBuild>();
  for (const r of local) byName.set(r.name, r);
  const cross = await crossPipelineDependencies(db, build, job.crossNeeds ?? []);
  return [...[...byName.values()].sort((a, b) => a.id - b.id), ...cross];
}

/** The pipeline at the top of a pipeline's parent/child hierarchy. */
async function rootPipelineId(db: Database, pipelineId: number): Promise<number | null> {
  let id = pipelineId;
  for (let depth = 0; depth < 20; depth++) {
    const row = await db.selectFrom('ci_pipelines').select(['id', 'parent_pipeline_id']).where('id', '=', id).executeTakeFirst();
    if (!row) return null;
    if (row.parent_pipeline_id === null) return row.id;
    id = row.parent_pipeline_id;
  }
  return null;
}

async function crossPipelineDependencies(db: Database, build: CiBuild, needs: Array<{ pipeline: string; job: string; artifacts: boolean }>): Promise<CiBuild[]> {
  const wanted = needs.filter((n) => n.artifacts && /^\d{1,12}$/.test(n.pipeline) && Number(n.pipeline) !== build.pipeline_id);
  if (!wanted.length) return [];
  const root = await rootPipelineId(db, build.pipeline_id);
  const out: CiBuild[] = [];
  for (const need of wanted) {
    const pipelineId = Number(need.pipeline);
    if (root === null || (await rootPipelineId(db, pipelineId)) !== root) continue;
    const found = await db
      .selectFrom('ci_builds')
      .selectAll()
      .where('pipeline_id', '=', pipelineId)
      .where('project_id', '=', build.project_id)
      .where('type', '=', 'Ci::Build')
      .where('name', '=', need.job)
      .where('retried', '=', false)
      .where('status', '=', 'success')
      .executeTakeFirst();
    if (found && !out.some((b) => b.id === found.id)) out.push(found);
  }
  return out;
}

export async function buildJobPayload(cairn: Cairn, build: CiBuild, token: string, runner: CiRunner) {
  const db = cairn.db;
  const job = jobOptions(build);
  const project = await db
    .selectFrom('projects as p')
    .innerJoin('namespaces as n', 'n.id', 'p.namespace_id')
    .select(['p.id', 'p.name', 'p.path', 'p.description', 'p.visibility_level', 'p.default_branch', 'p.settings', 'p.namespace_id', 'p.repository_storage', 'p.disk_path', 'p.jobs_cache_index', 'n.full_path as namespace_full_path', 'n.traversal_ids', 'n.path as namespace_path'])
    .where('p.id', '=', build.project_id)
    .executeTakeFirstOrThrow();
  const pipeline = await db.selectFrom('ci_pipelines').selectAll().where('id', '=', build.pipeline_id).executeTakeFirstOrThrow();
  const user = build.user_id ? await db.selectFrom('users').select(['id', 'username', 'name', 'email']).where('id', '=', build.user_id).executeTakeFirst() : undefined;
  const rootNamespace = await db.selectFrom('namespaces').select(['id', 'path']).where('id', '=', project.traversal_ids[0] ?? project.namespace_id).executeTakeFirst();
  const settings = projectSettings(project as any);

  const base = cairn.config.externalUrl;
  const url = new URL(base);
  const fullPath = `${project.namespace_full_path}/${project.path}`;
  const projectUrl = `${base}/${fullPath}`;
  const repoUrl = new URL(`${base}/${fullPath}.git`);
  repoUrl.username = 'gitlab-ci-token';
  repoUrl.password = token;
  const timeout = build.timeout ?? settings.build_timeout ?? 3600;
  const refType = build.tag ? 'tag' : 'branch';

  // ---- variables: predefined, then the file's, then instance, group, project, pipeline and job-play ones (later wins)
  const vars: PayloadVariable[] = [];
  const add = (key: string, value: string | number | boolean | null | undefined, opts: Partial<PayloadVariable> = {}) => {
    if (value === null || value === undefined) return;
    vars.push({ key, value: String(value), public: true, masked: false, file: false, raw: false, ...opts });
  };
  add('CI_PIPELINE_ID', pipeline.id);
  add('CI_PIPELINE_URL', `${projectUrl}/-/pipelines/${pipeline.id}`);
  add('CI_JOB_ID', build.id);
  add('CI_JOB_URL', `${projectUrl}/-/jobs/${build.id}`);
  add('CI_JOB_TOKEN', token, { public: false, masked: true });
  add('CI_JOB_STARTED_AT', build.started_at ? new Date(build.started_at).toISOString().replace(/\.\d{3}Z$/, 'Z') : null);
  add('CI_REGISTRY_USER', 'gitlab-ci-token');
  add('CI_REGISTRY_PASSWORD', token, { public: false, masked: true });
  add('CI_REPOSITORY_URL', repoUrl.toString(), { public: false });
  add('CI_DEPENDENCY_PROXY_USER', 'gitlab-ci-token');
  add('CI_DEPENDENCY_PROXY_PASSWORD', token, { public: false, masked: true });
  // The project's (else its group's) active deploy token named gitlab-deploy-token, as GitLab gives it.
  const deploy = await ciDeployCredentials(cairn, project);
  if (deploy) {
    add('CI_DEPLOY_USER', deploy.username);
    add('CI_DEPLOY_PASSWORD', deploy.password, { public: false, masked: true });
  }
  add('CI_JOB_NAME', build.name);
  add('CI_JOB_NAME_SLUG', slug(build.name));
  add('CI_JOB_STAGE', build.stage);
  // As GitLab: the name the job's image: gives (the runner expands variables in it).
  if (job.image?.name) add('CI_JOB_IMAGE', job.image.name);
  add('CI_JOB_TIMEOUT', timeout);
  add('CI_NODE_TOTAL', job.parallel?.total ?? 1);
  if (job.parallel) add('CI_NODE_INDEX', job.parallel.index);
  add('CI', 'true');
  add('GITLAB_CI', 'true');
  add('CI_SERVER_URL', base);
  add('CI_SERVER_HOST', url.hostname);
  add('CI_SERVER_PORT', url.port || (url.protocol === 'https:' ? '443' : '80'));
  add('CI_SERVER_PROTOCOL', url.protocol.replace(':', ''));
  // host[:port], the port only when it is not the scheme's (GitLab's Gitlab.config.gitlab.host_with_port).
  add('CI_SERVER_FQDN', url.host);
  add('CI_SERVER_SHELL_SSH_HOST', url.hostname);
  add('CI_SERVER_NAME', 'GitLab');
  add('CI_SERVER_VERSION', GITLAB_COMPAT_VERSION);
  const [major, minor, patch] = GITLAB_COMPAT_VERSION.split('.');
  add('CI_SERVER_VERSION_MAJOR', major);
  add('CI_SERVER_VERSION_MINOR', minor);
  add('CI_SERVER_VERSION_PATCH', patch);
  add('CI_SERVER_REVISION', '');
  add('GITLAB_FEATURES', '');
  add('CI_API_V4_URL', `${base}/api/v4`);
  add('CI_API_GRAPHQL_URL', `${base}/api/graphql`);
  add('CI_PROJECT_CONFIG_PATH', settings.ci_config_path || '.gitlab-ci.yml');
  add('CI_CONFIG_PATH', settings.ci_config_path || '.gitlab-ci.yml');
  add('CI_PROJECT_ID', project.id);
  add('CI_PROJECT_NAME', project.path);
  add('CI_PROJECT_TITLE', project.name);
  add('CI_PROJECT_DESCRIPTION', project.description ?? '');
  add('CI_PROJECT_PATH', fullPath);
  add('CI_PROJECT_PATH_SLUG', slug(fullPath));
  add('CI_PROJECT_NAMESPACE', project.namespace_full_path);
  add('CI_PROJECT_NAMESPACE_SLUG', slug(project.namespace_full_path));
  add('CI_PROJECT_NAMESPACE_ID', project.namespace_id);
  add('CI_PROJECT_ROOT_NAMESPACE', rootNamespace?.path ?? project.namespace_path);
  add('CI_PROJECT_URL', projectUrl);
  add('CI_PROJECT_VISIBILITY', VISIBILITY_NAMES[project.visibility_level] ?? 'private');
  add('CI_PROJECT_REPOSITORY_LANGUAGES', '');
  add('CI_PROJECT_CLASSIFICATION_LABEL', '');
  add('CI_DEFAULT_BRANCH', project.default_branch);
  add('CI_PIPELINE_IID', pipeline.iid);
  add('CI_PIPELINE_SOURCE', pipeline.source);
  add('CI_PIPELINE_CREATED_AT', new Date(pipeline.created_at).toISOString().replace(/\.\d{3}Z$/, 'Z'));
  if (pipeline.name) add('CI_PIPELINE_NAME', pipeline.name);
  add('CI_COMMIT_SHA', build.sha);
  add('CI_COMMIT_SHORT_SHA', build.sha.slice(0, 8));
  add('CI_COMMIT_BEFORE_SHA', pipeline.before_sha ?? '0000000000000000000000000000000000000000');
  const mrVars = await mergeRequestVariables(db, base, pipeline);
  if (mrVars) {
    // A merge request pipeline: the source branch's names, no CI_COMMIT_BRANCH.
    for (const [k, v] of Object.entries(mrVars)) add(k, v);
  } else {
    add('CI_COMMIT_REF_NAME', build.ref);
    add('CI_COMMIT_REF_SLUG', slug(build.ref));
    if (build.tag) add('CI_COMMIT_TAG', build.ref);
    else add('CI_COMMIT_BRANCH', build.ref);
  }
  const branch = mrVars ? mrVars.CI_MERGE_REQUEST_SOURCE_BRANCH_NAME : build.tag ? null : build.ref;
  const openMergeRequests = branch === null ? null : await openMergeRequestsReference(db, mrVars ? Number(mrVars.CI_MERGE_REQUEST_SOURCE_PROJECT_ID ?? build.project_id) : build.project_id, branch);
  if (openMergeRequests) add('CI_OPEN_MERGE_REQUESTS', openMergeRequests);
  add('CI_COMMIT_REF_PROTECTED', build.protected ? 'true' : 'false');
  if (pipeline.committed_at) add('CI_COMMIT_TIMESTAMP', new Date(pipeline.committed_at).toISOString().replace(/\.\d{3}Z$/, '+00:00'));
  add('CI_RUNNER_ID', runner.id);
  add('CI_RUNNER_DESCRIPTION', runner.description);
  add('CI_RUNNER_TAGS', JSON.stringify(runner.tag_list));
  if (user) {
    add('GITLAB_USER_ID', user.id);
    add('GITLAB_USER_EMAIL', user.email);
    add('GITLAB_USER_LOGIN', user.username);
    add('GITLAB_USER_NAME', user.name);
  }
  if (build.environment) {
    // The environment's own slug (GitLab's 24-character rule), as stored when the pipeline made it.
    const env = await db.selectFrom('environments').select(['slug', 'external_url', 'tier'])
      .where('project_id', '=', build.project_id).where('name', '=', build.environment).executeTakeFirst();
    const spec = job.environment;
    add('CI_ENVIRONMENT_NAME', build.environment);
    add('CI_ENVIRONMENT_SLUG', env?.slug ?? environmentSlug(build.environment));
    const url = spec?.url ?? env?.external_url;
    if (url) add('CI_ENVIRONMENT_URL', url);
    add('CI_ENVIRONMENT_ACTION', spec?.action ?? 'start');
    add('CI_ENVIRONMENT_TIER', spec?.deploymentTier ?? env?.tier ?? guessTier(build.environment));
  }

  // The file's variables (global ones inherited, job ones, matrix, rules:variables), as compiled.
  for (const v of (build.yaml_variables as Array<{ key: string; value: string; raw?: boolean }>) ?? []) {
    if (v && typeof v.key === 'string') add(v.key, v.value ?? '', { raw: !!v.raw });
  }
  if (Array.isArray(job.variables) && !(build.yaml_variables as unknown[])?.length) {
    for (const v of job.variables) add(v.key, v.value, { raw: v.raw });
  }

  const config = cairn.config;
  const ciVariable = (v: { key: string; value_encrypted: string; variable_type: string; masked: boolean; raw: boolean }) => {
    const value = decryptSecret(config, v.value_encrypted);
    if (value === null) return;
    add(v.key, value, { public: false, masked: v.masked, file: v.variable_type === 'file', raw: v.raw });
  };
  const protectedOk = build.protected;
  // Instance variables first: group, project and pipeline ones outrank them.
  const instanceVars = await db.selectFrom('ci_variables').selectAll().where('project_id', 'is', null).where('namespace_id', 'is', null).orderBy('id').execute();
  for (const v of instanceVars) if (!v.protected || protectedOk) ciVariable(v);
  const ancestors = project.traversal_ids ?? [];
  if (ancestors.length) {
    const groupVars = await db
      .selectFrom('ci_variables')
      .selectAll()
      .where('namespace_id', 'in', ancestors)
      .execute();
    // Nearer groups win: root first, then down the tree.
    groupVars.sort((a, b) => ancestors.indexOf(a.namespace_id!) - ancestors.indexOf(b.namespace_id!) || a.id - b.id);
    for (const v of groupVars) if ((!v.protected || protectedOk) && scopeMatches(v.environment_scope, build.environment)) ciVariable(v);
  }
  const projectVars = await db.selectFrom('ci_variables').selectAll().where('project_id', '=', project.id).orderBy('id').execute();
  // A specific environment scope outranks '*'.
  projectVars.sort((a, b) => Number(a.environment_scope !== '*') - Number(b.environment_scope !== '*') || a.id - b.id);
  for (const v of projectVars) if ((!v.protected || protectedOk) && scopeMatches(v.environment_scope, build.environment)) ciVariable(v);
  const pipelineVars = await db.selectFrom('ci_pipeline_variables').selectAll().where('pipeline_id', '=', pipeline.id).orderBy('id').execute();
  for (const v of pipelineVars) {
    const value = decryptSecret(config, v.value_encrypted);
    if (value !== null) add(v.key, value, { public: false, file: v.variable_type === 'file', raw: v.raw });
  }
  // A scheduled pipeline's schedule variables, read from its schedule (they come after pipeline variables, as GitLab's).
  if (pipeline.pipeline_schedule_id !== null) {
    const scheduleVars = await db.selectFrom('ci_pipeline_schedule_variables').selectAll().where('pipeline_schedule_id', '=', pipeline.pipeline_schedule_id).orderBy('id').execute();
    for (const v of scheduleVars) {
      const value = decryptSecret(config, v.value_encrypted);
      if (value !== null) add(v.key, value, { public: false, file: v.variable_type === 'file', raw: v.raw });
    }
  }
  const jobVars = await db.selectFrom('ci_job_variables').selectAll().where('job_id', '=', build.id).orderBy('id').execute();
  for (const v of jobVars) {
    const value = decryptSecret(config, v.value_encrypted);
    if (value !== null) add(v.key, value, { public: false, file: v.variable_type === 'file' });
  }

  // ---- steps
  const steps: Array<Record<string, unknown>> = [
    { name: 'script', script: [...(job.beforeScript ?? []), ...(job.script ?? [])], timeout, when: 'on_success', allow_failure: false },
  ];
  // release: its own step after the script (GitLab's Step.from_release), see release_step.ts.
  const release = releaseStep(job.extra?.release, timeout);
  if (release) steps.push(release);
  if (job.afterScript?.length) steps.push({ name: 'after_script', script: job.afterScript, timeout, when: 'always', allow_failure: true });

  const image = job.image
    ? {
        name: job.image.name,
        entrypoint: job.image.entrypoint ?? null,
        ports: [],
        pull_policy: job.image.pullPolicy ?? null,
        executor_opts: job.image.docker ? { docker: job.image.docker } : {},
      }
    : null;
  const services = (job.services ?? []).map((s) => ({
    name: s.name,
    alias: s.alias ?? null,
    entrypoint: s.entrypoint ?? null,
    command: s.command ?? null,
    ports: [],
    variables: Object.entries(s.variables ?? {}).map(([key, value]) => ({ key, value, public: true, masked: false, file: false, raw: false })),
    pull_policy: s.pullPolicy ?? null,
  }));

  const artifacts: Array<Record<string, unknown>> = [];
  const a = job.artifacts;
  if (a) {
    const expireIn = a.expireNever ? 'never' : a.expireIn;
    if (a.paths.length || a.untracked) {
      artifacts.push({
        name: a.name ?? '',
        untracked: a.untracked,
        paths: a.paths,
        exclude: a.exclude,
        when: a.when,
        artifact_type: 'archive',
        artifact_format: 'zip',
        expire_in: expireIn,
      });
    }
    for (const [type, paths] of Object.entries(a.reports ?? {})) {
      const list = Array.isArray(paths) ? paths.map(String) : typeof paths === 'string' ? [paths] : [];
      if (!list.length) continue;
      artifacts.push({
        name: type,
        untracked: false,
        paths: list,
        exclude: [],
        when: 'always',
        artifact_type: type,
        artifact_format: type === 'dotenv' ? 'gzip' : 'gzip',
        expire_in: expireIn,
      });
    }
  }

  const cache = await payloadCaches(
    {
      pool: cairn.catfile,
      gitDir: projectRepoPath(cairn, project),
      sha: build.sha,
      protectedRef: build.protected,
      cacheIndex: project.jobs_cache_index,
      separated: settings.ci_separated_caches !== false,
    },
    job.cache ?? [],
  );

  const deps = await dependencyJobs(db, build);
  const archives = deps.length
    ? await db
        .selectFrom('ci_job_artifacts')
        .select(['job_id', 'file_name', 'size'])
        .where('job_id', 'in', deps.map((d) => d.id))
        .where('file_type', '=', 'archive')
        .where((eb) => eb.or([eb('expire_at', 'is', null), eb('expire_at', '>', sql<Date>`now()`)]))
        .execute()
    : [];
  const dependencies = deps.map((d) => {
    const file = archives.find((f) => f.job_id === d.id);
    return { id: d.id, name: d.name, token, ...(file ? { artifacts_file: { filename: file.file_name, size: Number(file.size) } } : {}) };
  });

  const running = await db
    .selectFrom('ci_builds as b')
    .innerJoin('ci_runners as r', 'r.id', 'b.runner_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('b.project_id', '=', project.id)
    .where('b.status', '=', 'running')
    .where('r.runner_type', '=', 'instance_type')
    .executeTakeFirst();
  const runningCount = Number(running?.n ?? 0);

  return {
    id: build.id,
    token,
    allow_git_fetch: settings.build_git_strategy !== 'clone',
    job_info: {
      id: build.id,
      name: build.name,
      stage: build.stage,
      pipeline_id: pipeline.id,
      project_id: project.id,
      project_name: project.name,
      project_full_path: fullPath,
      namespace_id: project.namespace_id,
      root_namespace_id: rootNamespace?.id ?? project.namespace_id,
      user_id: build.user_id ?? 0,
      time_in_queue_seconds: build.queued_at && build.started_at ? Math.max(0, (new Date(build.started_at).getTime() - new Date(build.queued_at).getTime()) / 1000) : 0,
      project_jobs_running_on_instance_runners_count: runningCount > 3 ? '+Inf' : String(runningCount),
      queue_size: 0,
      queue_depth: 0,
    },
    git_info: {
      repo_url: repoUrl.toString(),
      repo_object_format: 'sha1',
      ref: build.ref,
      sha: build.sha,
      before_sha: pipeline.before_sha ?? '0000000000000000000000000000000000000000',
      ref_type: refType,
      refspecs: build.tag
        ? [`+refs/tags/${build.ref}:refs/tags/${build.ref}`]
        : build.ref.startsWith('refs/merge-requests/')
          ? [`+${build.ref}:${build.ref}`]
          : [`+refs/heads/${build.ref}:refs/remotes/origin/${build.ref}`],
      depth: settings.ci_default_git_depth ?? 20,
      protected: build.protected,
    },
    runner_info: { timeout, runner_session_url: null },
    variables: vars,
    steps,
    image,
    services,
    artifacts,
    cache,
    credentials: [] as unknown[],
    dependencies,
    features: { trace_sections: true, failure_reasons: FAILURE_REASONS },
  };
}
