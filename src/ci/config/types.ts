// Types of the .gitlab-ci.yml compiler (src/ci/config). The compiler is pure: no database, no
// HTTP, no git. What it needs from the repository comes in as functions (CompileInput), and what
// it gives back is plain JSON (CompiledPipeline / CompiledJob) so that pipeline creation can store
// it as is and the runner protocol can build job payloads from it later.
//
// Three steps, each usable on its own (see index.ts):
//   1. load:      YAML (anchors, merge keys, !reference) + include:local + extends -> one merged
//                 hash (what /ci/lint calls merged_yaml).
//   2. analyze:   that hash -> a validated, normalised PipelineSpec (all visible jobs, parallel
//                 jobs expanded, needs/dependencies/stages checked). Independent of the pipeline
//                 being created: /ci/lint without dry_run stops here.
//   3. seed:      PipelineSpec + the pipeline's ref/source/variables -> the jobs of this pipeline
//                 (workflow:rules, rules, only/except evaluated; needs to excluded jobs checked).

/** Pipeline sources, as GitLab names them in CI_PIPELINE_SOURCE. */
export type PipelineSource =
  | 'push'
  | 'web'
  | 'api'
  | 'trigger'
  | 'schedule'
  | 'merge_request_event'
  | 'parent_pipeline'
  | 'pipeline'
  | 'external'
  | 'chat'
  | 'webide'
  | 'external_pull_request_event'
  | 'ondemand_dast_scan'
  | 'security_orchestration_policy';

/** What the compiler reads from the repository at the pipeline's sha. */
export interface RepositoryAccess {
  /** Content of a file (path relative to the repository root, no leading slash), null when absent. */
  readLocalFile(path: string): Promise<string | null>;
  /** rules:exists — true when any file of the repository matches any of the globs (see glob.ts matchGlob). */
  fileExists?(globs: string[]): Promise<boolean>;
  /**
   * rules:changes / only:changes — paths changed by the push (or the merge request). null means
   * "no comparison possible" (a new branch, a tag, a web/api pipeline...): GitLab then treats
   * `changes` as true. compareTo is rules:changes:compare_to when given: the paths changed since
   * its merge base with the pipeline's sha; throw errors.ts InvalidCompareToError when it names no commit.
   */
  changedPaths?(compareTo?: string): Promise<string[] | null>;
  /** Every file path of the repository (include:local wildcards); none when absent. */
  listFiles?(): Promise<string[]>;
}

export interface CompileInput extends RepositoryAccess {
  /** The .gitlab-ci.yml text. */
  yaml: string;
  /** Branch or tag name (not refs/heads/...). For merge request pipelines, the source branch. */
  ref: string;
  /** true when ref is a tag. */
  tag: boolean;
  sha: string;
  beforeSha?: string;
  source: PipelineSource;
  /**
   * Variables that outrank the file's own `variables:` (project, group, instance, pipeline /
   * trigger / schedule variables) and the predefined CI_* ones, already merged by the caller.
   * Used to evaluate rules:if, only:variables, workflow:rules and to expand names.
   */
  variables: Record<string, string>;
  /** Optional variables ranked below the file's (GitLab ranks predefined ones lowest). */
  lowPrecedenceVariables?: Record<string, string>;
  /** The head commit's message ([skip ci] / [ci skip]). */
  commitMessage: string;
  /** git push -o ci.skip */
  skipCi?: boolean;
  /** Values for the main file's `spec:inputs` (pipeline inputs: API, trigger:inputs). */
  inputs?: Record<string, unknown>;
}

export interface CompiledNeed {
  /** Name of the needed job (after parallel expansion: "rspec 1/3", "build: [linux]"). */
  name: string;
  /** Download its artifacts (needs:artifacts, default true). */
  artifacts: boolean;
  /** needs:optional — it may be absent from this pipeline. */
  optional: boolean;
}

export interface CompiledCrossNeed {
  /** The pipeline id, variables expanded. */
  pipeline: string;
  job: string;
  artifacts: boolean;
}

export interface CompiledImage {
  name: string;
  entrypoint?: string[];
  pullPolicy?: string[];
  /** image:docker (platform, user) passed through. */
  docker?: Record<string, unknown>;
}

export interface CompiledService {
  name: string;
  alias?: string;
  entrypoint?: string[];
  command?: string[];
  variables?: Record<string, string>;
  pullPolicy?: string[];
}

export interface CompiledVariable {
  key: string;
  value: string;
  /** `expand: false` — the runner must not expand $REFS inside the value. */
  raw: boolean;
}

export interface CompiledArtifacts {
  name: string | null;
  paths: string[];
  exclude: string[];
  untracked: boolean;
  when: 'on_success' | 'on_failure' | 'always';
  /** As written ("1 week", "never"); null = instance default. */
  expireIn: string | null;
  /** expire_in in seconds; null = instance default or "never" (see expireNever). */
  expireInSeconds: number | null;
  expireNever: boolean;
  exposeAs: string | null;
  /** reports:<type> -> paths (junit, dotenv, coverage_report...), passed through. */
  reports: Record<string, unknown>;
  public: boolean | null;
  access: string | null;
}

/**
 * `cache:key` as a hash: `files` (the key follows the files' contents at the pipeline's commit)
 * or `files_commits` (the last commits that changed them), with an optional `prefix`. Resolved
 * to a string when the job is handed to a runner (src/ci/protocol/cache_keys.ts).
 */
export interface CacheKeyFiles {
  files?: string[];
  filesCommits?: string[];
  prefix?: string;
}

export interface CompiledCache {
  /** A string key (variables are expanded by the runner, as gitlab-runner does), or a CacheKeyFiles. */
  key: string | CacheKeyFiles;
  paths: string[];
  untracked: boolean;
  policy: 'pull' | 'push' | 'pull-push';
  when: 'on_success' | 'on_failure' | 'always';
  unprotect: boolean;
  fallbackKeys: string[];
}

export interface CompiledEnvironment {
  /** Expanded with the job's variables, as GitLab does at pipeline creation. */
  name: string;
  /** Expanded with the job's variables and CI_ENVIRONMENT_NAME / CI_ENVIRONMENT_SLUG. */
  url: string | null;
  action: 'start' | 'prepare' | 'stop' | 'verify' | 'access';
  onStop: string | null;
  autoStopIn: string | null;
  deploymentTier: string | null;
  kubernetes: Record<string, unknown> | null;
}

export interface CompiledRetry {
  max: number;
  /** Failure reasons that are retried; ['always'] by default. */
  when: string[];
  exitCodes: number[] | null;
}

/** A bridge's downstream pipeline. */
export type CompiledTrigger =
  | {
      kind: 'child';
      /** Child configuration: local files of this repository at this sha (with their include:inputs), or a job's artifact. */
      include: Array<{ local: string; inputs?: Record<string, unknown> } | { artifact: string; job: string }>;
      /** 'depend': the bridge mirrors the downstream pipeline's status. */
      strategy: 'depend' | null;
      forward: { yamlVariables: boolean; pipelineVariables: boolean };
    }
  | {
      kind: 'multi_project';
      /** Full path of the downstream project (variables expanded). */
      project: string;
      /** Downstream branch; null = its default branch. */
      branch: string | null;
      strategy: 'depend' | null;
      forward: { yamlVariables: boolean; pipelineVariables: boolean };
      /** trigger:inputs, for the downstream configuration's spec:inputs. */
      inputs?: Record<string, unknown>;
    };

export interface CompiledParallel {
  /** 1-based. */
  index: number;
  total: number;
  /** The matrix combination of this job; null for `parallel: N`. */
  matrix: Record<string, string> | null;
}

export type JobWhen = 'on_success' | 'on_failure' | 'always' | 'manual' | 'delayed';

export interface CompiledJob {
  name: string;
  /** 'build' runs on a runner; 'bridge' creates a downstream pipeline (trigger:). */
  kind: 'build' | 'bridge';
  stage: string;
  /** Index into CompiledPipeline.stages. */
  stageIdx: number;
  /** Position in the file after includes/extends (parallel jobs keep their source position, then their index). */
  index: number;
  when: JobWhen;
  /** Seconds, for when: delayed. */
  startIn: number | null;
  allowFailure: boolean;
  /** allow_failure:exit_codes — failures with these exit codes are allowed (allowFailure stays false). */
  allowFailureExitCodes: number[] | null;
  /** null: the job waits for the previous stages. []: `needs: []`, starts at once. */
  needs: CompiledNeed[] | null;
  /**
   * needs:pipeline:job — artifacts of a job of another pipeline of this hierarchy (a child's
   * parent), `pipeline` expanded (usually $PARENT_PIPELINE_ID). Not in `needs`: they do not order jobs.
   */
  crossNeeds?: CompiledCrossNeed[];
  /** null: artifacts of all jobs of previous stages (GitLab's default); otherwise those names. */
  dependencies: string[] | null;
  /** 'dag' when needs is set. */
  schedulingType: 'stage' | 'dag';
  beforeScript: string[];
  script: string[];
  afterScript: string[];
  image: CompiledImage | null;
  services: CompiledService[];
  /** The file's variables for this job: inherited global ones, job ones, matrix, rules:variables. */
  variables: CompiledVariable[];
  tags: string[];
  /** Seconds; null = the project's default timeout. */
  timeout: number | null;
  retry: CompiledRetry | null;
  artifacts: CompiledArtifacts | null;
  cache: CompiledCache[];
  /** The coverage regex as written, slashes included ("/Total: (\d+)%/"). */
  coverage: string | null;
  environment: CompiledEnvironment | null;
  /** null: not set (GitLab treats it as false). */
  interruptible: boolean | null;
  resourceGroup: string | null;
  parallel: CompiledParallel | null;
  trigger: CompiledTrigger | null;
  /** Keywords Cairn accepts but does not interpret yet (release, secrets, id_tokens, hooks, pages, ...). */
  extra: Record<string, unknown>;
}

export interface CompiledWorkflow {
  /** workflow:name expanded; null when absent. */
  name: string | null;
  /** workflow:rules:variables of the matching rule (they also override the file's global variables). */
  variables: Record<string, string>;
  autoCancel: { onNewCommit: string | null; onJobFailure: string | null } | null;
}

export interface CompiledPipeline {
  ok: true;
  kind: 'pipeline';
  workflow: CompiledWorkflow;
  /** Declared stages, with .pre first and .post last. Stages without jobs are kept. */
  stages: string[];
  jobs: CompiledJob[];
  /** The file's global variables after workflow:rules:variables (pipeline-level yaml variables). */
  variables: CompiledVariable[];
  warnings: string[];
  includes: IncludeInfo[];
}

/**
 * No pipeline for this push, and that is not a configuration error:
 *  - skip_ci: [skip ci] / [ci skip] in the commit message or ci.skip (GitLab records a pipeline
 *    with status "skipped" and no jobs; the configuration is not even read);
 *  - workflow_rules: workflow:rules matched nothing or matched `when: never` (no pipeline);
 *  - no_jobs: rules/only/except left no job, or only .pre/.post jobs (no pipeline).
 */
export interface PipelineNotCreated {
  ok: true;
  kind: 'skipped';
  reason: 'skip_ci' | 'workflow_rules' | 'no_jobs';
  /** GitLab's message for the case (what POST /pipeline answers with a 400). */
  message: string;
  warnings: string[];
}

export interface CompileFailure {
  ok: false;
  kind: 'error';
  /** GitLab-worded errors; the first is what a failed pipeline's yaml_errors shows. */
  errors: string[];
  warnings: string[];
}

export type CompileResult = CompiledPipeline | PipelineNotCreated | CompileFailure;

/** One include, as /ci/lint's `includes` lists them (the caller adds blob/raw URLs and context_project). */
export interface IncludeInfo {
  type: 'local';
  location: string;
  /** Other keys of the include entry (e.g. rules), as GitLab's `extra`. */
  extra: Record<string, unknown>;
  contextSha: string | null;
}

/** A job as /ci/lint's `jobs` lists them (include_jobs=true), before rules are evaluated. */
export interface LintJob {
  name: string;
  stage: string;
  before_script: string[];
  script: string[];
  after_script: string[];
  tag_list: string[];
  environment: string | null;
  when: string;
  allow_failure: boolean;
  only: { refs?: string[]; variables?: string[]; changes?: string[] } | null;
  except: { refs?: string[]; variables?: string[]; changes?: string[] } | null;
}

export interface LintResult {
  valid: boolean;
  errors: string[];
  warnings: string[];
  /** The configuration after includes, anchors, !reference and extends, as YAML ('' when it could not be built). */
  mergedYaml: string;
  includes: IncludeInfo[];
  jobs: LintJob[];
}
