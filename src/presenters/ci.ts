import type { CiBuild, CiJobArtifact, CiPipeline, CiRunner, CiVariable } from '../db/schema/ci.js';
import type { User } from '../db/schema/core.js';
import type { CiResourceGroup } from '../db/schema/ci_resource_groups.js';
import type { ParsedCommit } from '../git/catfile.js';
import { presentCommit } from './commits.js';
import { presentProjectIdentity, projectFullPath, projectSettings, type ProjectRow } from './projects.js';
import { presentRunner } from './runners.js';
import { iso, presentUserBasic, presentUserExtended, type PresentContext } from './users.js';

const ZERO_OID = '0000000000000000000000000000000000000000';

export function pipelineWebUrl(ctx: PresentContext, project: ProjectRow, id: number): string {
  return `${ctx.baseUrl}/${projectFullPath(project)}/-/pipelines/${id}`;
}

export function jobWebUrl(ctx: PresentContext, project: ProjectRow, id: number, bridge = false): string {
  return bridge ? `${ctx.baseUrl}/${projectFullPath(project)}/-/pipelines/${id}` : `${ctx.baseUrl}/${projectFullPath(project)}/-/jobs/${id}`;
}

/** A pipeline as a job and a commit's last_pipeline show it: PipelineBasic without its name. */
export function presentPipelineSummary(ctx: PresentContext, project: ProjectRow, p: CiPipeline) {
  return {
    id: p.id,
    iid: p.iid,
    project_id: p.project_id,
    sha: p.sha,
    ref: p.ref,
    status: p.status,
    source: p.source,
    created_at: iso(p.created_at)!,
    updated_at: iso(p.updated_at)!,
    web_url: pipelineWebUrl(ctx, project, p.id),
  };
}

/** GitLab's PipelineBasic. */
export function presentPipelineBasic(ctx: PresentContext, project: ProjectRow, p: CiPipeline) {
  return { ...presentPipelineSummary(ctx, project, p), name: p.name };
}

const STATUS_TEXT: Record<string, [string, string]> = {
  created: ['Created', 'created'],
  waiting_for_resource: ['Waiting', 'waiting for resource'],
  preparing: ['Preparing', 'preparing'],
  pending: ['Pending', 'pending'],
  running: ['Running', 'running'],
  success: ['Passed', 'passed'],
  failed: ['Failed', 'failed'],
  canceled: ['Canceled', 'canceled'],
  skipped: ['Skipped', 'skipped'],
  manual: ['Blocked', 'manual action'],
  scheduled: ['Scheduled', 'delayed'],
};

export function detailedStatus(ctx: PresentContext, project: ProjectRow, p: CiPipeline, warnings = false) {
  const [text, label] = STATUS_TEXT[p.status] ?? [p.status, p.status];
  const group = p.status === 'success' && warnings ? 'success-with-warnings' : p.status;
  return {
    icon: `status_${p.status === 'scheduled' ? 'scheduled' : p.status}`,
    text: group === 'success-with-warnings' ? 'Warning' : text,
    label: group === 'success-with-warnings' ? 'passed with warnings' : label,
    group,
    tooltip: group === 'success-with-warnings' ? 'passed with warnings' : label,
    has_details: true,
    details_path: `/${projectFullPath(project)}/-/pipelines/${p.id}`,
    illustration: null,
    favicon: `/assets/ci_favicons/favicon_status_${p.status}.png`,
  };
}

/** GitLab's Pipeline entity (single reads, create, retry, cancel). */
/** What the Pipeline entity shows besides the row: its user, coverage and warnings from its latest jobs. */
export interface PipelineExtras {
  user: User | null;
  coverage: number | null;
  warnings: boolean;
}

export function presentPipeline(ctx: PresentContext, project: ProjectRow, p: CiPipeline, extra: PipelineExtras) {
  return {
    ...presentPipelineBasic(ctx, project, p),
    before_sha: p.before_sha && /^[0-9a-f]{40}$/.test(p.before_sha) ? p.before_sha : ZERO_OID,
    tag: p.tag,
    yaml_errors: p.yaml_errors,
    user: extra.user ? presentUserBasic(ctx, extra.user) : null,
    started_at: iso(p.started_at),
    finished_at: iso(p.finished_at),
    committed_at: iso(p.committed_at),
    duration: p.duration,
    queued_duration: p.queued_duration,
    coverage: extra.coverage === null ? null : extra.coverage.toFixed(2),
    detailed_status: detailedStatus(ctx, project, p, extra.warnings),
    archived: !!project.archived,
  };
}

function seconds(from: unknown, to: unknown): number | null {
  if (!from) return null;
  const end = to ? new Date(to as string).getTime() : Date.now();
  return Math.max(0, (end - new Date(from as string).getTime()) / 1000);
}

/** What presenting a page of jobs needs, loaded once per page (`loadJobExtras`, src/finders/pipelines.ts). */
export interface JobExtras {
  users: Map<number, User>;
  pipelines: Map<number, CiPipeline>;
  commits: Map<string, ParsedCommit>;
  runners: Map<number, CiRunner>;
  artifacts: Map<number, CiJobArtifact[]>;
}

function jobCommon(ctx: PresentContext, project: ProjectRow, b: CiBuild, x: JobExtras) {
  const user = b.user_id ? x.users.get(b.user_id) : undefined;
  const commit = x.commits.get(b.sha);
  const pipeline = x.pipelines.get(b.pipeline_id)!;
  return {
    id: b.id,
    status: b.status,
    stage: b.stage,
    name: b.name,
    ref: b.ref,
    tag: b.tag,
    coverage: b.coverage,
    allow_failure: b.allow_failure,
    created_at: iso(b.created_at)!,
    started_at: iso(b.started_at),
    finished_at: iso(b.finished_at),
    erased_at: iso(b.erased_at),
    duration: b.started_at ? seconds(b.started_at, b.finished_at) : null,
    queued_duration: b.queued_at ? seconds(b.queued_at, b.started_at) : null,
    user: user ? presentUserExtended(ctx, user) : null,
    commit: commit ? presentCommit({ ...ctx, projectFullPath: projectFullPath(project) }, commit) : null,
    pipeline: presentPipelineSummary(ctx, project, pipeline),
    web_url: jobWebUrl(ctx, project, b.id),
    project: { ci_job_token_scope_enabled: !!projectSettings(project).ci_job_token_scope_enabled },
    archived: !!project.archived,
  };
}

/** GitLab's Entities::Ci::Job. */
export function presentJob(ctx: PresentContext, project: ProjectRow, b: CiBuild, x: JobExtras) {
  const artifacts = x.artifacts.get(b.id) ?? [];
  // GitLab's artifacts?: an archive that has not expired (an expired one waits for the expiry worker).
  const archive = artifacts.find((a) => a.file_type === 'archive' && (!a.expire_at || new Date(a.expire_at as any).getTime() > Date.now()));
  const runner = b.runner_id ? x.runners.get(b.runner_id) : undefined;
  return {
    ...jobCommon(ctx, project, b, x),
    ...(b.status === 'failed' ? { failure_reason: b.failure_reason ?? 'unknown_failure' } : {}),
    ...(archive ? { artifacts_file: { filename: archive.file_name, size: Number(archive.size) } } : {}),
    artifacts: artifacts.map((a) => ({ file_type: a.file_type, size: Number(a.size), filename: a.file_name, file_format: a.file_format })),
    artifacts_expire_at: iso(b.artifacts_expire_at),
    tag_list: b.tag_list,
    runner: runner ? presentRunner(runner) : null,
    runner_manager: null,
  };
}

/** GitLab's Entities::Ci::JobBasic (a job as resource groups list it). */
export function presentJobBasic(ctx: PresentContext, project: ProjectRow, b: CiBuild, x: JobExtras) {
  return {
    ...jobCommon(ctx, project, b, x),
    ...(b.status === 'failed' ? { failure_reason: b.failure_reason ?? 'unknown_failure' } : {}),
  };
}

/** GitLab's Entities::Ci::ResourceGroup. */
export function presentResourceGroup(g: CiResourceGroup) {
  return { id: g.id, key: g.key, process_mode: g.process_mode, created_at: iso(g.created_at)!, updated_at: iso(g.updated_at)! };
}

/**
 * GitLab's JobBasicWithProject, as GET /runners/:id/jobs lists a job: the basic form with the
 * project's identity and the address of the runner that ran it.
 */
export function presentRunnerJob(ctx: PresentContext, project: ProjectRow, b: CiBuild, x: JobExtras) {
  const runner = b.runner_id ? x.runners.get(b.runner_id) : undefined;
  return {
    ...jobCommon(ctx, project, b, x),
    ...(b.status === 'failed' ? { failure_reason: b.failure_reason ?? 'unknown_failure' } : {}),
    ip_address: runner?.ip_address ?? null,
    project: presentProjectIdentity(project),
  };
}

/** GitLab's Entities::Ci::Bridge. */
export function presentBridge(ctx: PresentContext, project: ProjectRow, b: CiBuild, x: JobExtras) {
  const down = b.downstream_pipeline_id ? x.pipelines.get(b.downstream_pipeline_id) : undefined;
  return {
    ...jobCommon(ctx, project, b, x),
    downstream_pipeline: down
      ? { id: down.id, sha: down.sha, ref: down.ref, status: down.status, created_at: iso(down.created_at)!, updated_at: iso(down.updated_at)!, web_url: `${ctx.baseUrl}/-/pipelines/${down.id}` }
      : null,
  };
}

/** GitLab's Entities::Ci::Variable; `value` is the decrypted value (the caller reads the key). */
export function presentCiVariable(v: CiVariable, value: string) {
  return {
    variable_type: v.variable_type,
    key: v.key,
    value,
    protected: v.protected,
    masked: v.masked,
    raw: v.raw,
    environment_scope: v.environment_scope,
    description: v.description,
  };
}

/** An instance variable: a variable without an environment scope. */
export function presentInstanceVariable(v: CiVariable, value: string) {
  const { environment_scope: _scope, ...rest } = presentCiVariable(v, value);
  return rest;
}
