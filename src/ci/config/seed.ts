// Step 3 of the compiler: a PipelineSpec + this pipeline's ref, source and variables -> the jobs
// of this pipeline. workflow:rules first (no match, or `when: never`: no pipeline), then each
// job's rules (first match wins, no match excludes the job) or only/except (the default
// `only: [branches, tags]` applies unless workflow:rules exist), then needs to jobs that ended up
// excluded are errors unless optional, as GitLab's pipeline seeding does.

import { InvalidCompareToError } from './errors.js';
import { fabricatePattern } from './expression.js';
import { matchAnyGlob } from './glob.js';
import type { JobSpec, NeedSpec, PipelineSpec, PolicySpec, RuleSpec, VarSpec } from './normalize.js';
import type {
  CompileInput,
  CompileResult,
  CompiledEnvironment,
  CompiledJob,
  CompiledTrigger,
  CompiledVariable,
  IncludeInfo,
  JobWhen,
} from './types.js';
import { expandAll, expandString } from './variables.js';
import { environmentSlug } from '../../lib/environments.js';

export const NO_JOBS_MESSAGE =
  'Pipeline will not run for the selected trigger. The rules configuration prevented any jobs from being added to the pipeline.';
export const WORKFLOW_FILTERED_MESSAGE = 'Pipeline filtered out by workflow rules.';
export const EDGE_STAGES_ONLY_MESSAGE = 'Pipeline will not run for the selected trigger. A pipeline needs jobs in stages other than .pre and .post.';

type SeedInput = Pick<
  CompileInput,
  'ref' | 'tag' | 'source' | 'variables' | 'lowPrecedenceVariables' | 'fileExists' | 'changedPaths'
>;

const DEFAULT_ONLY: PolicySpec = { refs: ['branches', 'tags'], variables: null, changes: null, kubernetes: null, raw: { refs: ['branches', 'tags'] } };

class Evaluator {
  private changed = new Map<string, Promise<string[] | null>>();
  private existsCache = new Map<string, Promise<boolean>>();

  constructor(private readonly input: SeedInput) {}

  changedPaths(compareTo: string | null): Promise<string[] | null> {
    const key = compareTo ?? '';
    let p = this.changed.get(key);
    if (!p) {
      p = this.input.changedPaths ? this.input.changedPaths(compareTo ?? undefined) : Promise.resolve(null);
      this.changed.set(key, p);
    }
    return p;
  }

  exists(globs: string[]): Promise<boolean> {
    const key = JSON.stringify(globs);
    let p = this.existsCache.get(key);
    if (!p) {
      p = this.input.fileExists ? this.input.fileExists(globs) : Promise.resolve(false);
      this.existsCache.set(key, p);
    }
    return p;
  }

  async ruleMatches(rule: RuleSpec, vars: Record<string, string>): Promise<boolean> {
    if (rule.if && !rule.if.truthful(vars)) return false;
    if (rule.changes) {
      const changed = await this.changedPaths(rule.changes.compareTo ? expandString(rule.changes.compareTo, vars) : null);
      if (changed !== null && !matchAnyGlob(rule.changes.paths.map((p) => expandString(p, vars)), changed)) return false;
    }
    if (rule.exists) {
      if (!(await this.exists(rule.exists.map((p) => expandString(p, vars))))) return false;
    }
    return true;
  }

  async firstMatch(rules: RuleSpec[], vars: Record<string, string>): Promise<RuleSpec | null> {
    for (const r of rules) if (await this.ruleMatches(r, vars)) return r;
    return null;
  }

  refMatches(pattern: string, vars: Record<string, string>): boolean {
    const { ref, tag, source } = this.input;
    let p = pattern;
    const scoped = p.startsWith('/') ? /^(\/.*\/[ismU]*)@([\w.\-/]+)$/.exec(p) : /^([^@]*)@([\w.\-/]+)$/.exec(p);
    if (scoped) {
      if (vars.CI_PROJECT_PATH !== undefined && vars.CI_PROJECT_PATH !== scoped[2]) return false;
      p = scoped[1];
    }
    switch (p) {
      case 'branches':
        return !tag && source !== 'merge_request_event' && source !== 'external_pull_request_event';
      case 'tags':
        return tag;
      case 'api':
        return source === 'api';
      case 'external':
        return source === 'external';
      case 'pipelines':
        return source === 'pipeline';
      case 'pushes':
        return source === 'push';
      case 'schedules':
        return source === 'schedule';
      case 'triggers':
        return source === 'trigger';
      case 'web':
        return source === 'web';
      case 'merge_requests':
        return source === 'merge_request_event';
      case 'chat':
        return source === 'chat';
      case 'external_pull_requests':
        return source === 'external_pull_request_event';
    }
    if (p.startsWith('/')) {
      const re = fabricatePattern(p);
      return re ? re.test(ref) : false;
    }
    return p === ref;
  }

  /** only/except: every sub-policy given must be satisfied. */
  async policySatisfied(policy: PolicySpec, vars: Record<string, string>): Promise<boolean> {
    if (policy.refs && !policy.refs.some((r) => this.refMatches(r, vars))) return false;
    if (policy.variables && !policy.variables.some((e) => e.truthful(vars))) return false;
    if (policy.changes) {
      const changed = await this.changedPaths(null);
      if (changed !== null && !matchAnyGlob(policy.changes.map((p) => expandString(p, vars)), changed)) return false;
    }
    if (policy.kubernetes) return false; // no Kubernetes integration
    return true;
  }
}

/** Ordered variable set where a later definition replaces the value in place. */
function mergeVariables(...lists: CompiledVariable[][]): CompiledVariable[] {
  const map = new Map<string, CompiledVariable>();
  for (const list of lists) for (const v of list) map.set(v.key, v);
  return [...map.values()];
}

function toCompiled(vars: VarSpec[]): CompiledVariable[] {
  return vars.map((v) => ({ key: v.key, value: v.value, raw: v.raw }));
}

function evaluationContext(input: SeedInput, yaml: CompiledVariable[], job?: JobSpec): Record<string, string> {
  const all: Record<string, string> = { ...(input.lowPrecedenceVariables ?? {}) };
  if (job) {
    // the job's own predefined variables, as GitLab's seed context has them
    all.CI_JOB_NAME = job.name;
    all.CI_JOB_NAME_SLUG = slugify(job.name);
    all.CI_JOB_STAGE = job.stage;
    if (job.parallel) {
      all.CI_NODE_INDEX = String(job.parallel.index);
      all.CI_NODE_TOTAL = String(job.parallel.total);
    }
  }
  const raw = new Set<string>();
  for (const v of yaml) {
    all[v.key] = v.value;
    if (v.raw) raw.add(v.key);
    else raw.delete(v.key);
  }
  for (const [k, v] of Object.entries(input.variables)) {
    all[k] = v;
    raw.delete(k);
  }
  return expandAll(all, raw);
}

/** GitLab's CI_*_SLUG: lowercased, non-alphanumerics to '-', at most 63 characters, no '-' at the ends. */
function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '-')
    .slice(0, 63)
    .replace(/^-+|-+$/g, '');
}

export async function seedPipeline(spec: PipelineSpec, input: SeedInput, includes: IncludeInfo[]): Promise<CompileResult> {
  const ev = new Evaluator(input);
  const warnings = [...spec.warnings];

  // workflow
  let globals = toCompiled(spec.variables);
  let workflowVariables: Record<string, string> = {};
  let autoCancel = spec.workflow.autoCancel;
  if (spec.workflow.rules) {
    const ctx = evaluationContext(input, globals);
    let match: RuleSpec | null;
    try {
      match = await ev.firstMatch(spec.workflow.rules, ctx);
    } catch (e) {
      if (!(e instanceof InvalidCompareToError)) throw e;
      return { ok: false, kind: 'error', errors: [`Failed to parse rule for workflow: ${e.message}`], warnings };
    }
    if (!match || match.when === 'never') {
      return { ok: true, kind: 'skipped', reason: 'workflow_rules', message: WORKFLOW_FILTERED_MESSAGE, warnings };
    }
    workflowVariables = match.variables ?? {};
    if (match.autoCancel) {
      autoCancel = {
        onNewCommit: match.autoCancel.onNewCommit ?? autoCancel?.onNewCommit ?? null,
        onJobFailure: match.autoCancel.onJobFailure ?? autoCancel?.onJobFailure ?? null,
      };
    }
    globals = mergeVariables(globals, Object.entries(workflowVariables).map(([key, value]) => ({ key, value, raw: false })));
  }
  const workflowName = spec.workflow.name === null ? null : expandString(spec.workflow.name, evaluationContext(input, globals));

  const hasWorkflowRules = spec.workflow.rules !== null;
  const included: CompiledJob[] = [];
  const ruleErrors: string[] = [];
  for (const job of spec.jobs) {
    try {
      const compiled = await seedJob(job, globals, hasWorkflowRules, input, ev);
      if (compiled) included.push(compiled);
    } catch (e) {
      if (!(e instanceof InvalidCompareToError)) throw e;
      ruleErrors.push(`Failed to parse rule for ${job.name}: ${e.message}`);
    }
  }
  if (ruleErrors.length) return { ok: false, kind: 'error', errors: ruleErrors, warnings };

  // needs to jobs that are not in this pipeline
  const present = new Set(included.map((j) => j.name));
  const errors: string[] = [];
  for (const job of included) {
    if (!job.needs) continue;
    for (const need of job.needs) {
      if (present.has(need.name) || need.optional) continue;
      errors.push(
        `'${job.name}' job needs '${need.name}' job, but '${need.name}' does not exist in the pipeline. ` +
          'This might be because of the only, except, or rules keywords. ' +
          'To need a job that sometimes does not exist in the pipeline, use needs:optional.',
      );
    }
    job.needs = job.needs.filter((n) => present.has(n.name));
    if (job.dependencies) job.dependencies = job.dependencies.filter((d) => present.has(d));
  }
  if (errors.length) return { ok: false, kind: 'error', errors, warnings };

  if (included.length === 0) return { ok: true, kind: 'skipped', reason: 'no_jobs', message: NO_JOBS_MESSAGE, warnings };
  if (included.every((j) => j.stage === '.pre' || j.stage === '.post')) {
    return { ok: true, kind: 'skipped', reason: 'no_jobs', message: EDGE_STAGES_ONLY_MESSAGE, warnings };
  }

  return {
    ok: true,
    kind: 'pipeline',
    workflow: { name: workflowName, variables: workflowVariables, autoCancel },
    stages: spec.stages,
    jobs: included,
    variables: globals,
    warnings,
    includes,
  };
}

async function seedJob(
  job: JobSpec,
  globals: CompiledVariable[],
  hasWorkflowRules: boolean,
  input: SeedInput,
  ev: Evaluator,
): Promise<CompiledJob | null> {
  const inherited =
    job.inheritVariables === true
      ? globals
      : job.inheritVariables === false
        ? []
        : globals.filter((g) => (job.inheritVariables as string[]).includes(g.key));
  let variables = mergeVariables(inherited, toCompiled(job.variables));
  let ctx = evaluationContext(input, variables, job);

  let when: JobWhen = job.when ?? 'on_success';
  let startIn = job.startIn;
  let allowFailure = job.allowFailure;
  let interruptible = job.interruptible;
  let needs: NeedSpec[] | null = job.needs;

  if (job.rules) {
    const rule = await ev.firstMatch(job.rules, ctx);
    if (!rule || rule.when === 'never') return null;
    if (rule.when) when = rule.when as JobWhen;
    if (rule.startIn !== null) startIn = rule.startIn;
    if (rule.allowFailure !== null) allowFailure = rule.allowFailure;
    if (rule.interruptible !== null) interruptible = rule.interruptible;
    if (rule.needs) needs = rule.needs;
    if (rule.variables) {
      variables = mergeVariables(variables, Object.entries(rule.variables).map(([key, value]) => ({ key, value, raw: false })));
      ctx = evaluationContext(input, variables, job);
    }
  } else {
    const only = job.only ?? (hasWorkflowRules ? null : DEFAULT_ONLY);
    if (only && !(await ev.policySatisfied(only, ctx))) return null;
    if (job.except && (await ev.policySatisfied(job.except, ctx))) return null;
  }
  if (when !== 'delayed') startIn = null;

  let environment: CompiledEnvironment | null = null;
  if (job.environment) {
    const name = expandString(job.environment.name, ctx);
    // The URL may use the environment's own variables (GitLab expands it with the job's).
    const urlVars = { ...ctx, CI_ENVIRONMENT_NAME: name, CI_ENVIRONMENT_SLUG: environmentSlug(name) };
    environment = {
      ...job.environment,
      name,
      url: job.environment.url === null ? null : expandString(job.environment.url, urlVars),
      autoStopIn: job.environment.autoStopIn === null ? null : expandString(job.environment.autoStopIn, ctx),
    };
  }

  let trigger: CompiledTrigger | null = null;
  if (job.trigger) {
    trigger =
      job.trigger.kind === 'multi_project'
        ? { ...job.trigger, project: expandString(job.trigger.project, ctx), branch: job.trigger.branch === null ? null : expandString(job.trigger.branch, ctx) }
        : { ...job.trigger, include: job.trigger.include.map((i) => ('local' in i ? { ...i, local: expandString(i.local, ctx) } : { ...i })) };
  }

  return {
    name: job.name,
    kind: job.kind,
    stage: job.stage,
    stageIdx: job.stageIdx,
    index: job.index,
    when,
    startIn,
    // GitLab's `ignore`: a job-level `when: manual` may fail; a `when: manual` set by a rule blocks.
    allowFailure: allowFailure ?? (job.allowFailureExitCodes ? false : job.when === 'manual'),
    allowFailureExitCodes: job.allowFailureExitCodes,
    needs: needs ? needs.map((n) => ({ name: n.job, artifacts: n.artifacts, optional: n.optional })) : null,
    ...(job.crossNeeds.length ? { crossNeeds: job.crossNeeds.map((n) => ({ pipeline: expandString(n.pipeline, ctx), job: n.job, artifacts: n.artifacts })) } : {}),
    dependencies: job.dependencies ? [...job.dependencies] : null,
    schedulingType: needs ? 'dag' : 'stage',
    beforeScript: job.beforeScript,
    script: job.script,
    afterScript: job.afterScript,
    image: job.image,
    services: job.services,
    variables,
    tags: job.tags.map((t) => expandString(t, ctx)),
    timeout: job.timeout,
    retry: job.retry,
    artifacts: job.artifacts,
    cache: job.cache,
    coverage: job.coverage,
    environment,
    interruptible,
    resourceGroup: job.resourceGroup === null ? null : expandString(job.resourceGroup, ctx),
    parallel: job.parallel,
    trigger,
    extra: job.extra,
  };
}
