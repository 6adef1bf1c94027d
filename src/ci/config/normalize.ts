// Step 2 of the compiler: the merged configuration hash -> a validated PipelineSpec, independent
// of the pipeline being created. Entry validation collects GitLab-worded errors for every key
// ("jobs:rspec:artifacts config contains unknown keys: foo"); then parallel jobs are expanded
// and the logical checks of GitLab's YamlProcessor run (stages exist, needs and dependencies
// point at jobs of the current or earlier stages, no cycles), stopping at the first failure as
// GitLab does.

import { parseDuration } from './duration.js';
import { Expression, fabricatePattern } from './expression.js';
import { RESERVED_KEYS } from './load.js';
import type {
  CompiledArtifacts,
  CacheKeyFiles,
  CompiledCache,
  CompiledImage,
  CompiledRetry,
  CompiledService,
  CompiledVariable,
  JobWhen,
} from './types.js';
import { isPlainObject } from './yaml.js';

export const MAX_JOB_NAME_LENGTH = 255;
export const MAX_PARALLEL = 200;
export const MAX_NEEDS = 50;
export const MAX_START_IN_SECONDS = 7 * 24 * 3600;
/** A job's `timeout` is at most one month, as a project's build timeout (services/project-settings.ts). */
export const MAX_JOB_TIMEOUT_SECONDS = 2_592_000;
export const DEFAULT_STAGES = ['build', 'test', 'deploy'];
const JOB_WHEN = ['on_success', 'on_failure', 'always', 'manual', 'delayed'] as const;
const BRIDGE_WHEN = ['on_success', 'on_failure', 'always', 'manual'] as const;
const RULE_WHEN = ['on_success', 'on_failure', 'always', 'never', 'manual', 'delayed'];
const WORKFLOW_RULE_WHEN = ['always', 'never'];
const RETRY_WHEN = [
  'always',
  'unknown_failure',
  'script_failure',
  'api_failure',
  'stuck_or_timeout_failure',
  'runner_system_failure',
  'runner_unsupported',
  'stale_schedule',
  'job_execution_timeout',
  'archived_failure',
  'unmet_prerequisites',
  'scheduler_failure',
  'data_integrity_failure',
];

const PROCESSABLE_KEYS = ['extends', 'stage', 'only', 'except', 'rules', 'variables', 'inherit', 'allow_failure', 'when', 'needs', 'resource_group'];
const JOB_KEYS = new Set([
  ...PROCESSABLE_KEYS,
  'tags', 'script', 'run', 'type', 'image', 'services', 'start_in', 'artifacts', 'cache', 'dependencies',
  'before_script', 'after_script', 'environment', 'coverage', 'retry', 'parallel', 'interruptible', 'timeout',
  'release', 'secrets', 'hooks', 'id_tokens', 'pages', 'publish', 'manual_confirmation', 'identity', 'dast_configuration',
]);
const BRIDGE_KEYS = new Set([...PROCESSABLE_KEYS, 'trigger', 'parallel', 'environment', 'manual_confirmation']);
/** Accepted and passed through untouched in CompiledJob.extra. */
const EXTRA_KEYS = ['release', 'secrets', 'hooks', 'id_tokens', 'pages', 'publish', 'manual_confirmation', 'identity', 'dast_configuration'];
const DEFAULT_KEYS = ['after_script', 'artifacts', 'before_script', 'cache', 'hooks', 'id_tokens', 'image', 'interruptible', 'retry', 'services', 'tags', 'timeout', 'identity'];
const INHERITABLE = new Set(DEFAULT_KEYS);

export interface VarSpec {
  key: string;
  value: string;
  raw: boolean;
  description?: string;
  options?: string[];
}

export interface NeedSpec {
  job: string;
  artifacts: boolean;
  optional: boolean;
  /** needs:parallel:matrix — which instances of a parallel job. */
  matrix: Array<Record<string, string[]>> | null;
  /** needs:pipeline — a job of another pipeline of the same hierarchy (GitLab's cross_dependency), as written. */
  pipeline?: string;
}

/** needs:pipeline:job — artifacts of a job of another pipeline (a child's parent). */
export interface CrossNeedSpec {
  pipeline: string;
  job: string;
  artifacts: boolean;
}

export interface RuleSpec {
  if: Expression | null;
  changes: { paths: string[]; compareTo: string | null } | null;
  exists: string[] | null;
  when: string | null;
  startIn: number | null;
  allowFailure: boolean | null;
  interruptible: boolean | null;
  variables: Record<string, string> | null;
  needs: NeedSpec[] | null;
  /** workflow:rules:auto_cancel (overrides workflow:auto_cancel when the rule matches). */
  autoCancel: { onNewCommit: string | null; onJobFailure: string | null } | null;
}

export interface PolicySpec {
  refs: string[] | null;
  variables: Expression[] | null;
  changes: string[] | null;
  kubernetes: string | null;
  /** As written, for /ci/lint's jobs list. */
  raw: { refs?: string[]; variables?: string[]; changes?: string[] };
}

export type TriggerSpec =
  | {
      kind: 'child';
      include: Array<{ local: string; inputs?: Record<string, unknown> } | { artifact: string; job: string }>;
      strategy: 'depend' | null;
      forward: { yamlVariables: boolean; pipelineVariables: boolean };
    }
  | {
      kind: 'multi_project';
      project: string;
      branch: string | null;
      strategy: 'depend' | null;
      forward: { yamlVariables: boolean; pipelineVariables: boolean };
      inputs?: Record<string, unknown>;
    };

export interface EnvironmentSpec {
  name: string;
  url: string | null;
  action: 'start' | 'prepare' | 'stop' | 'verify' | 'access';
  onStop: string | null;
  autoStopIn: string | null;
  deploymentTier: string | null;
  kubernetes: Record<string, unknown> | null;
}

export interface JobSpec {
  name: string;
  kind: 'build' | 'bridge';
  stage: string;
  stageIdx: number;
  index: number;
  when: JobWhen | null;
  startIn: number | null;
  allowFailure: boolean | null;
  allowFailureExitCodes: number[] | null;
  needs: NeedSpec[] | null;
  /** needs:pipeline entries (they are not in `needs`). */
  crossNeeds: CrossNeedSpec[];
  dependencies: string[] | null;
  beforeScript: string[];
  script: string[];
  afterScript: string[];
  image: CompiledImage | null;
  services: CompiledService[];
  /** The job's own variables (matrix ones included), without the global ones. */
  variables: VarSpec[];
  /** inherit:variables — true, false or the global names to inherit. */
  inheritVariables: boolean | string[];
  tags: string[];
  timeout: number | null;
  retry: CompiledRetry | null;
  artifacts: CompiledArtifacts | null;
  cache: CompiledCache[];
  coverage: string | null;
  environment: EnvironmentSpec | null;
  interruptible: boolean | null;
  resourceGroup: string | null;
  parallel: { index: number; total: number; matrix: Record<string, string> | null } | null;
  trigger: TriggerSpec | null;
  extra: Record<string, unknown>;
  rules: RuleSpec[] | null;
  only: PolicySpec | null;
  except: PolicySpec | null;
  /** Name before parallel expansion. */
  baseName: string;
}

export interface WorkflowSpec {
  name: string | null;
  rules: RuleSpec[] | null;
  autoCancel: { onNewCommit: string | null; onJobFailure: string | null } | null;
}

export interface PipelineSpec {
  stages: string[];
  variables: VarSpec[];
  workflow: WorkflowSpec;
  jobs: JobSpec[];
  warnings: string[];
}

export type AnalyzeResult = { ok: true; spec: PipelineSpec } | { ok: false; errors: string[]; warnings: string[] };

class Errors {
  readonly list: string[] = [];
  add(path: string, message: string) {
    this.list.push(`${path} ${message}`);
  }
}

// ---------------------------------------------------------------------------------------------
// small validators

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/** Strings or nested arrays of strings (up to 10 levels), flattened — GitLab's script entries. */
function commands(v: unknown, path: string, errors: Errors): string[] | null {
  if (typeof v === 'string') return [v];
  const out: string[] = [];
  const walk = (x: unknown, depth: number): boolean => {
    if (depth > 10) return false;
    if (typeof x === 'string') {
      out.push(x);
      return true;
    }
    if (typeof x === 'number' || typeof x === 'boolean') {
      out.push(String(x));
      return true;
    }
    if (Array.isArray(x)) return x.every((y) => walk(y, depth + 1));
    return false;
  };
  if (Array.isArray(v) && walk(v, 0)) return out;
  errors.add(path, 'config should be a string or a nested array of strings up to 10 levels deep');
  return null;
}

function scalarString(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return null;
}

function variablesEntry(v: unknown, path: string, errors: Errors, allowed: string[]): VarSpec[] {
  if (v === undefined || v === null) return [];
  const bad = () => errors.add(path, 'config should be a hash of key value pairs, value can be a hash');
  if (!isPlainObject(v)) {
    bad();
    return [];
  }
  const out: VarSpec[] = [];
  for (const [key, raw] of Object.entries(v)) {
    if (!/^[A-Za-z0-9_]+$/.test(key)) {
      bad();
      return [];
    }
    const s = scalarString(raw);
    if (s !== null) {
      out.push({ key, value: s, raw: false });
      continue;
    }
    if (isPlainObject(raw)) {
      const unknown = Object.keys(raw).filter((k) => !allowed.includes(k));
      if (unknown.length) {
        errors.add(path, `config uses invalid data keys: ${unknown.join(', ')}`);
        return [];
      }
      const value = raw.value === undefined || raw.value === null ? '' : scalarString(raw.value);
      if (value === null || (raw.expand !== undefined && typeof raw.expand !== 'boolean')) {
        bad();
        return [];
      }
      const spec: VarSpec = { key, value, raw: raw.expand === false };
      if (typeof raw.description === 'string') spec.description = raw.description;
      if (isStringArray(raw.options)) spec.options = raw.options;
      out.push(spec);
      continue;
    }
    bad();
    return [];
  }
  return out;
}

function simpleVariables(v: unknown, path: string, errors: Errors): Record<string, string> | null {
  const specs = variablesEntry(v, path, errors, ['value', 'expand']);
  if (errors.list.length && specs.length === 0 && v !== undefined && v !== null && Object.keys(v as object).length) return null;
  return Object.fromEntries(specs.map((s) => [s.key, s.value]));
}

function image(v: unknown, path: string, errors: Errors): CompiledImage | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return { name: v };
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash or a string');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => !['name', 'entrypoint', 'ports', 'pull_policy', 'docker', 'kubernetes'].includes(k));
  if (unknown.length) {
    errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
    return null;
  }
  if (typeof v.name !== 'string' || v.name === '') {
    errors.add(path, v.name === undefined || v.name === null || v.name === '' ? "name can't be blank" : 'name should be a string');
    return null;
  }
  const out: CompiledImage = { name: v.name };
  if (v.entrypoint !== undefined) {
    if (!isStringArray(v.entrypoint)) errors.add(path, 'entrypoint should be an array of strings');
    else out.entrypoint = v.entrypoint;
  }
  if (v.pull_policy !== undefined) out.pullPolicy = typeof v.pull_policy === 'string' ? [v.pull_policy] : (v.pull_policy as string[]);
  if (isPlainObject(v.docker)) out.docker = v.docker;
  return out;
}

function services(v: unknown, path: string, errors: Errors): CompiledService[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    errors.add(path, 'config should be a array');
    return [];
  }
  const out: CompiledService[] = [];
  for (const s of v) {
    if (typeof s === 'string') {
      out.push({ name: s });
      continue;
    }
    if (!isPlainObject(s)) {
      errors.add(`${path}:service`, 'config should be a hash or a string');
      continue;
    }
    const unknown = Object.keys(s).filter(
      (k) => !['name', 'entrypoint', 'command', 'alias', 'ports', 'variables', 'pull_policy', 'docker', 'kubernetes'].includes(k),
    );
    if (unknown.length) {
      errors.add(`${path}:service`, `config contains unknown keys: ${unknown.join(', ')}`);
      continue;
    }
    if (typeof s.name !== 'string' || s.name === '') {
      errors.add(`${path}:service`, 'config should be a hash or a string');
      continue;
    }
    const svc: CompiledService = { name: s.name };
    if (s.alias !== undefined) {
      if (typeof s.alias !== 'string') errors.add(`${path}:service`, 'alias should be a string');
      else svc.alias = s.alias;
    }
    for (const key of ['entrypoint', 'command'] as const) {
      if (s[key] === undefined) continue;
      if (!isStringArray(s[key])) errors.add(`${path}:service`, `${key} should be an array of strings`);
      else svc[key] = s[key] as string[];
    }
    if (s.variables !== undefined) {
      const vars = simpleVariables(s.variables, `${path}:service:variables`, errors);
      if (vars) svc.variables = vars;
    }
    if (s.pull_policy !== undefined) svc.pullPolicy = typeof s.pull_policy === 'string' ? [s.pull_policy] : (s.pull_policy as string[]);
    out.push(svc);
  }
  return out;
}

function tags(v: unknown, path: string, errors: Errors): string[] {
  if (v === undefined || v === null) return [];
  if (!isStringArray(v)) {
    errors.add(path, 'config should be an array of strings');
    return [];
  }
  return v;
}

function timeout(v: unknown, path: string, errors: Errors): number | null {
  if (v === undefined || v === null) return null;
  const s = parseDuration(v);
  if (s === null) errors.add(path, 'config should be a duration');
  // GitLab's limit (Project::MAX_BUILD_TIMEOUT); the column is a 32-bit integer of seconds.
  else if (s > MAX_JOB_TIMEOUT_SECONDS) errors.add(path, 'config should not exceed the limit');
  return s;
}

function retry(v: unknown, path: string, errors: Errors): CompiledRetry | null {
  if (v === undefined || v === null) return null;
  // retry: N is checked as `config`, retry: {max: N} as `max` (GitLab's SimpleRetry / FullRetry)
  const max = (n: unknown, label = 'config'): number | null => {
    if (typeof n !== 'number' || !Number.isInteger(n)) {
      errors.add(path, label === 'config' ? 'config has to be either an integer or a hash' : `${label} must be an integer`);
      return null;
    }
    if (n < 0) errors.add(path, `${label} must be greater than or equal to 0`);
    else if (n > 2) errors.add(path, `${label} must be less than or equal to 2`);
    else return n;
    return null;
  };
  if (typeof v === 'number') {
    const m = max(v);
    return m === null ? null : { max: m, when: ['always'], exitCodes: null };
  }
  if (!isPlainObject(v)) {
    errors.add(path, 'config has to be either an integer or a hash');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => !['max', 'when', 'exit_codes'].includes(k));
  if (unknown.length) {
    errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
    return null;
  }
  const m = v.max === undefined ? 0 : max(v.max, 'max');
  let when = ['always'];
  if (v.when !== undefined) {
    const list = typeof v.when === 'string' ? [v.when] : v.when;
    if (!isStringArray(list)) {
      errors.add(path, 'when should be an array of strings or a string');
      return null;
    }
    const bad = list.filter((w) => !RETRY_WHEN.includes(w));
    if (bad.length) {
      errors.add(path, `when contains unknown values: ${bad.join(', ')}`);
      return null;
    }
    when = list;
  }
  let exitCodes: number[] | null = null;
  if (v.exit_codes !== undefined) {
    const list = typeof v.exit_codes === 'number' ? [v.exit_codes] : v.exit_codes;
    if (!Array.isArray(list) || !list.every((c) => Number.isInteger(c))) {
      errors.add(path, 'exit codes should be an array of integers or an integer');
      return null;
    }
    exitCodes = list as number[];
  }
  return m === null ? null : { max: m, when, exitCodes };
}

const ARTIFACT_KEYS = ['name', 'untracked', 'paths', 'reports', 'when', 'expire_in', 'expose_as', 'exclude', 'public', 'access'];

function artifacts(v: unknown, path: string, errors: Errors): CompiledArtifacts | null {
  if (v === undefined || v === null) return null;
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash');
    return null;
  }
  const n = errors.list.length;
  const unknown = Object.keys(v).filter((k) => !ARTIFACT_KEYS.includes(k));
  if (unknown.length) errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
  if (v.name !== undefined && typeof v.name !== 'string') errors.add(path, 'name should be a string');
  if (v.untracked !== undefined && typeof v.untracked !== 'boolean') errors.add(path, 'untracked should be a boolean value');
  if (v.paths !== undefined && !isStringArray(v.paths)) errors.add(path, 'paths should be an array of strings');
  if (v.exclude !== undefined && !isStringArray(v.exclude)) errors.add(path, 'exclude should be an array of strings');
  if (v.when !== undefined && !['on_success', 'on_failure', 'always'].includes(v.when as string)) {
    errors.add(path, 'when should be on_success, on_failure or always');
  }
  let expireInSeconds: number | null = null;
  let expireNever = false;
  if (v.expire_in !== undefined && v.expire_in !== null) {
    if (v.expire_in === 'never') expireNever = true;
    else {
      expireInSeconds = parseDuration(v.expire_in);
      if (expireInSeconds === null) errors.add(path, 'expire in should be a duration');
    }
  }
  if (v.expose_as !== undefined) {
    if (typeof v.expose_as !== 'string') errors.add(path, 'expose as should be a string');
    else if (v.paths === undefined) errors.add(path, 'expose as with paths is required');
  }
  let reports: Record<string, unknown> = {};
  if (v.reports !== undefined) {
    if (!isPlainObject(v.reports)) errors.add(`${path}:reports`, 'config should be a hash');
    else {
      reports = v.reports;
      for (const [k, r] of Object.entries(v.reports)) {
        if (['junit', 'dotenv', 'codequality', 'sast', 'terraform', 'accessibility', 'metrics', 'requirements', 'annotations'].includes(k)) {
          if (!(typeof r === 'string' || isStringArray(r))) errors.add(`${path}:reports`, `${k} should be an array of strings or a string`);
        }
      }
    }
  }
  if (v.public !== undefined && typeof v.public !== 'boolean') errors.add(path, 'public should be a boolean value');
  if (errors.list.length > n) return null;
  return {
    name: (v.name as string | undefined) ?? null,
    paths: (v.paths as string[] | undefined) ?? [],
    exclude: (v.exclude as string[] | undefined) ?? [],
    untracked: (v.untracked as boolean | undefined) ?? false,
    when: (v.when as CompiledArtifacts['when'] | undefined) ?? 'on_success',
    expireIn: v.expire_in === undefined || v.expire_in === null ? null : String(v.expire_in),
    expireInSeconds,
    expireNever,
    exposeAs: (v.expose_as as string | undefined) ?? null,
    reports,
    public: (v.public as boolean | undefined) ?? null,
    access: typeof v.access === 'string' ? v.access : null,
  };
}

const CACHE_KEYS = ['key', 'untracked', 'paths', 'when', 'policy', 'unprotect', 'fallback_keys'];

/**
 * GitLab's key validator (cache:key, cache:key:prefix): the URL-decoded value may not contain a
 * `/` nor be `.` or `..`. Null when valid.
 */
export function cacheKeyError(value: string): string | null {
  // CGI.unescape as GitLab uses it: `+` is a space, each %XX a byte (a bad escape stays as it is).
  const decoded = value.replace(/\+/g, ' ').replace(/%([0-9a-fA-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  if (decoded.includes('/')) return 'cannot contain the "/" character';
  if (decoded === '.' || decoded === '..') return 'cannot be "." or ".."';
  return null;
}

/** cache:key as a hash: exactly one of files / files_commits (1 or 2 paths each), and a prefix. */
function complexCacheKey(v: Record<string, unknown>, path: string, errors: Errors): CacheKeyFiles | null {
  const unknown = Object.keys(v).filter((k) => !['files', 'files_commits', 'prefix'].includes(k));
  if (unknown.length) {
    errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
    return null;
  }
  if ((v.files === undefined) === (v.files_commits === undefined)) {
    errors.add(path, 'config must use exactly one of these keys: files, files_commits');
    return null;
  }
  const name = v.files !== undefined ? 'files' : 'files_commits';
  const list = v[name];
  if (!isStringArray(list)) {
    errors.add(`${path}:${name}`, 'config should be an array of strings');
    return null;
  }
  if (list.length < 1) {
    errors.add(`${path}:${name}`, 'config requires at least 1 item');
    return null;
  }
  if (list.length > 2) {
    errors.add(`${path}:${name}`, 'config has too many items (maximum is 2)');
    return null;
  }
  // Leading slashes are dropped, as GitLab does: the paths are the repository's.
  const paths = list.map((f) => f.replace(/^\/+/, ''));
  const key: CacheKeyFiles = name === 'files' ? { files: paths } : { filesCommits: paths };
  if (v.prefix !== undefined && v.prefix !== null) {
    const prefix = scalarString(v.prefix);
    if (prefix === null) {
      errors.add(`${path}:prefix`, 'config should be a string or symbol');
      return null;
    }
    const why = cacheKeyError(prefix);
    if (why) {
      errors.add(`${path}:prefix`, `config ${why}`);
      return null;
    }
    key.prefix = prefix;
  }
  return key;
}

function caches(v: unknown, path: string, errors: Errors): CompiledCache[] {
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  if (list.length > 4) {
    errors.add(path, 'config must not contain more than 4 caches');
    return [];
  }
  const out: CompiledCache[] = [];
  for (const c of list) {
    if (!isPlainObject(c)) {
      errors.add(path, 'config should be a hash');
      continue;
    }
    const unknown = Object.keys(c).filter((k) => !CACHE_KEYS.includes(k));
    if (unknown.length) {
      errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
      continue;
    }
    let key: CompiledCache['key'] = 'default';
    if (c.key !== undefined && c.key !== null) {
      const s = scalarString(c.key);
      if (s !== null) {
        const why = cacheKeyError(s);
        if (why) {
          errors.add(`${path}:key`, `config ${why}`);
          continue;
        }
        key = s;
      } else if (isPlainObject(c.key)) {
        const k = complexCacheKey(c.key, `${path}:key`, errors);
        if (!k) continue;
        key = k;
      } else {
        errors.add(`${path}:key`, 'config should be a hash, a string or a symbol');
        continue;
      }
    }
    if (c.paths !== undefined && !isStringArray(c.paths)) {
      errors.add(path, 'paths config should be an array of strings');
      continue;
    }
    if (c.policy !== undefined && !['pull', 'push', 'pull-push'].includes(c.policy as string) && !String(c.policy).includes('$')) {
      errors.add(path, 'policy should be pull-push, push, or pull');
      continue;
    }
    if (c.when !== undefined && !['on_success', 'on_failure', 'always'].includes(c.when as string)) {
      errors.add(path, 'when is unknown value: ' + String(c.when));
      continue;
    }
    if (c.fallback_keys !== undefined && c.fallback_keys !== null) {
      if (!isStringArray(c.fallback_keys)) {
        errors.add(`${path}:fallback_keys`, 'config should be an array of strings');
        continue;
      }
      if (c.fallback_keys.length > 5) {
        // GitLab's message, spelling included.
        errors.add(path, 'fallback keys has to many entries (maximum 5)');
        continue;
      }
    }
    out.push({
      key,
      paths: (c.paths as string[] | undefined) ?? [],
      untracked: c.untracked === true,
      policy: (c.policy as CompiledCache['policy'] | undefined) ?? 'pull-push',
      when: (c.when as CompiledCache['when'] | undefined) ?? 'on_success',
      unprotect: c.unprotect === true,
      fallbackKeys: isStringArray(c.fallback_keys) ? c.fallback_keys : [],
    });
  }
  return out;
}

function environment(v: unknown, path: string, errors: Errors): EnvironmentSpec | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') {
    return { name: v, url: null, action: 'start', onStop: null, autoStopIn: null, deploymentTier: null, kubernetes: null };
  }
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash or a string');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => !['name', 'url', 'action', 'on_stop', 'auto_stop_in', 'kubernetes', 'deployment_tier'].includes(k));
  if (unknown.length) {
    errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
    return null;
  }
  if (typeof v.name !== 'string' || v.name === '') {
    errors.add(path, "name can't be blank");
    return null;
  }
  const action = (v.action ?? 'start') as EnvironmentSpec['action'];
  if (!['start', 'prepare', 'stop', 'verify', 'access'].includes(action)) {
    errors.add(path, 'action should be start, stop, prepare, verify, or access');
    return null;
  }
  if (v.url !== undefined && typeof v.url !== 'string') errors.add(path, 'url should be a string');
  if (v.on_stop !== undefined && typeof v.on_stop !== 'string') errors.add(path, 'on stop should be a string');
  if (v.deployment_tier !== undefined && !['production', 'staging', 'testing', 'development', 'other'].includes(v.deployment_tier as string)) {
    errors.add(path, 'deployment tier must be one of production, staging, testing, development, other');
  }
  return {
    name: v.name,
    url: typeof v.url === 'string' ? v.url : null,
    action,
    onStop: typeof v.on_stop === 'string' ? v.on_stop : null,
    autoStopIn: typeof v.auto_stop_in === 'string' ? v.auto_stop_in : null,
    deploymentTier: typeof v.deployment_tier === 'string' ? v.deployment_tier : null,
    kubernetes: isPlainObject(v.kubernetes) ? v.kubernetes : null,
  };
}

const RELEASE_KEYS = ['tag_name', 'tag_message', 'name', 'description', 'ref', 'released_at', 'milestones', 'assets'];
const RELEASE_LINK_TYPES = ['other', 'runbook', 'image', 'package'];

/** release: checked as GitLab's Entry::Release (the job keeps it in `extra`). */
function releaseEntry(v: unknown, path: string, errors: Errors) {
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash');
    return;
  }
  const unknown = Object.keys(v).filter((k) => !RELEASE_KEYS.includes(k));
  if (unknown.length) errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
  const text = (key: string, label: string, required: boolean) => {
    const x = v[key];
    if (x === undefined || x === null || x === '') {
      if (required) errors.add(path, `${label} can't be blank`);
    } else if (typeof x !== 'string') errors.add(path, `${label} should be a string`);
  };
  text('tag_name', 'tag name', true);
  text('tag_message', 'tag message', false);
  text('description', 'description', true);
  text('name', 'name', false);
  text('ref', 'ref', false);
  if (v.milestones !== undefined && v.milestones !== null && typeof v.milestones !== 'string' && !isStringArray(v.milestones)) {
    errors.add(path, 'milestones should be an array of strings or a string');
  }
  if (v.released_at !== undefined && v.released_at !== null) {
    const at = typeof v.released_at === 'string' ? v.released_at : '';
    if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(at) || Number.isNaN(Date.parse(at))) {
      errors.add(path, 'released at must be a valid datetime');
    }
  }
  if (v.assets !== undefined && v.assets !== null) {
    const ap = `${path}:assets`;
    if (!isPlainObject(v.assets)) errors.add(ap, 'config should be a hash');
    else {
      const badKeys = Object.keys(v.assets).filter((k) => k !== 'links');
      if (badKeys.length) errors.add(ap, `config contains unknown keys: ${badKeys.join(', ')}`);
      const links = v.assets.links;
      if (!Array.isArray(links) || links.length === 0) errors.add(`${ap}:links`, Array.isArray(links) || links === undefined || links === null ? "config can't be blank" : 'config should be a array');
      else {
        for (const link of links) {
          const lp = `${ap}:links:link`;
          if (!isPlainObject(link)) {
            errors.add(lp, 'config should be a hash');
            continue;
          }
          const extraKeys = Object.keys(link).filter((k) => !['name', 'url', 'filepath', 'direct_asset_path', 'link_type'].includes(k));
          if (extraKeys.length) errors.add(lp, `config contains unknown keys: ${extraKeys.join(', ')}`);
          if (typeof link.name !== 'string' || link.name === '') errors.add(lp, "name can't be blank");
          if (typeof link.url !== 'string' || link.url === '') errors.add(lp, "url can't be blank");
          else if (!/^https?:\/\/[^\s/$.?#][^\s]*$/i.test(link.url)) errors.add(lp, 'url must be a valid URL');
          if (link.link_type !== undefined && !RELEASE_LINK_TYPES.includes(link.link_type as string)) {
            errors.add(lp, `link type should be one of: ${RELEASE_LINK_TYPES.join(', ')}`);
          }
        }
      }
    }
  }
}

function needs(v: unknown, path: string, errors: Errors): NeedSpec[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) && !isPlainObject(v)) {
    errors.add(path, 'config can only be a Hash or an Array');
    return null;
  }
  const out: NeedSpec[] = [];
  for (const n of (Array.isArray(v) ? v : [v]).flat(10)) {
    if (typeof n === 'string') {
      out.push({ job: n, artifacts: true, optional: false, matrix: null });
      continue;
    }
    if (!isPlainObject(n)) {
      errors.add(`${path}:need`, 'has an unsupported type');
      continue;
    }
    if (n.project !== undefined) {
      errors.add(`${path}:need`, 'needs:project is not supported by Cairn yet');
      continue;
    }
    if (n.pipeline !== undefined || n.ref !== undefined) {
      // GitLab's Need::CrossPipelineDependency (pipeline + job); anything else has no strategy.
      if (n.job === undefined || n.ref !== undefined) {
        errors.add(`${path}:need`, 'has an unsupported type');
        continue;
      }
      const unknown = Object.keys(n).filter((k) => !['pipeline', 'job', 'artifacts'].includes(k));
      if (unknown.length) {
        errors.add(`${path}:need`, `config contains unknown keys: ${unknown.join(', ')}`);
        continue;
      }
      const pipeline = scalarString(n.pipeline);
      if (pipeline === null || pipeline === '') {
        errors.add(`${path}:need`, typeof n.pipeline === 'string' ? "pipeline can't be blank" : 'pipeline should be a string');
        continue;
      }
      if (typeof n.job !== 'string' || n.job === '') {
        errors.add(`${path}:need`, typeof n.job === 'string' ? "job can't be blank" : 'job should be a string');
        continue;
      }
      if (n.artifacts !== undefined && typeof n.artifacts !== 'boolean') {
        errors.add(`${path}:need`, 'artifacts should be a boolean value');
        continue;
      }
      out.push({ job: n.job, artifacts: n.artifacts !== false, optional: false, matrix: null, pipeline });
      continue;
    }
    const unknown = Object.keys(n).filter((k) => !['job', 'artifacts', 'optional', 'parallel'].includes(k));
    if (unknown.length) {
      errors.add(`${path}:need`, `config contains unknown keys: ${unknown.join(', ')}`);
      continue;
    }
    if (typeof n.job !== 'string' || n.job === '') {
      errors.add(`${path}:need`, "job can't be blank");
      continue;
    }
    if (n.artifacts !== undefined && typeof n.artifacts !== 'boolean') errors.add(`${path}:need`, 'artifacts should be a boolean value');
    if (n.optional !== undefined && typeof n.optional !== 'boolean') errors.add(`${path}:need`, 'optional should be a boolean value');
    let matrix: Array<Record<string, string[]>> | null = null;
    if (n.parallel !== undefined) {
      matrix = isPlainObject(n.parallel) && n.parallel.matrix !== undefined ? matrixEntry(n.parallel.matrix, `${path}:need:parallel:matrix`, errors) : null;
      if (!matrix) {
        if (!isPlainObject(n.parallel) || n.parallel.matrix === undefined) errors.add(`${path}:need:parallel`, 'should be a hash with a matrix');
        continue;
      }
    }
    out.push({ job: n.job, artifacts: n.artifacts !== false, optional: n.optional === true, matrix });
  }
  return out;
}

function matrixEntry(v: unknown, path: string, errors: Errors): Array<Record<string, string[]>> | null {
  if (!Array.isArray(v) || !v.every(isPlainObject) || v.length === 0) {
    errors.add(path, 'config should be an array of hashes');
    return null;
  }
  const out: Array<Record<string, string[]>> = [];
  for (const entry of v as Record<string, unknown>[]) {
    const combo: Record<string, string[]> = {};
    for (const [k, val] of Object.entries(entry)) {
      const s = scalarString(val);
      if (s !== null) combo[k] = [s];
      else if (Array.isArray(val) && val.length > 0 && val.every((x) => scalarString(x) !== null)) combo[k] = val.map((x) => scalarString(x)!);
      else {
        errors.add(path, `variables config should be a hash of key value pairs, value can be an array`);
        return null;
      }
    }
    if (Object.keys(combo).length === 0) {
      errors.add(path, 'config should be an array of hashes');
      return null;
    }
    out.push(combo);
  }
  return out;
}

/** Every combination of a matrix, first key outermost, values in the order written. */
export function matrixCombinations(matrix: Array<Record<string, string[]>>): Array<Record<string, string>> {
  const out: Array<Record<string, string>> = [];
  for (const entry of matrix) {
    let combos: Array<Record<string, string>> = [{}];
    for (const [k, values] of Object.entries(entry)) {
      const next: Array<Record<string, string>> = [];
      for (const c of combos) for (const val of values) next.push({ ...c, [k]: val });
      combos = next;
    }
    out.push(...combos);
  }
  return out;
}

export function matrixJobName(base: string, combo: Record<string, string>): string {
  return `${base}: [${Object.values(combo).join(', ')}]`;
}

function parallel(
  v: unknown,
  path: string,
  errors: Errors,
): { total: number; matrix: Array<Record<string, string>> | null } | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) errors.add(path, 'should be an integer or a hash');
    else if (v < 1) errors.add(path, 'config must be greater than or equal to 1');
    else if (v > MAX_PARALLEL) errors.add(path, `config must be less than or equal to ${MAX_PARALLEL}`);
    else return { total: v, matrix: null };
    return null;
  }
  if (!isPlainObject(v)) {
    errors.add(path, 'should be an integer or a hash');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => k !== 'matrix');
  if (unknown.length || v.matrix === undefined) {
    errors.add(path, unknown.length ? `config contains unknown keys: ${unknown.join(', ')}` : 'should be an integer or a hash');
    return null;
  }
  const matrix = matrixEntry(v.matrix, `${path}:matrix`, errors);
  if (!matrix) return null;
  const combos = matrixCombinations(matrix);
  if (combos.length > MAX_PARALLEL) {
    errors.add(`${path}:matrix`, `config generates too many jobs (maximum is ${MAX_PARALLEL})`);
    return null;
  }
  return { total: combos.length, matrix: combos };
}

function trigger(v: unknown, path: string, errors: Errors): TriggerSpec | null {
  const forward = { yamlVariables: true, pipelineVariables: false };
  if (typeof v === 'string') return { kind: 'multi_project', project: v, branch: null, strategy: null, forward };
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash or a string');
    return null;
  }
  if (v.strategy !== undefined && v.strategy !== 'depend') {
    errors.add(path, 'strategy should be depend');
    return null;
  }
  const strategy = v.strategy === 'depend' ? 'depend' : null;
  if (v.forward !== undefined) {
    if (!isPlainObject(v.forward) || Object.keys(v.forward).some((k) => !['yaml_variables', 'pipeline_variables'].includes(k))) {
      errors.add(`${path}:forward`, 'config contains unknown keys');
      return null;
    }
    if (typeof v.forward.yaml_variables === 'boolean') forward.yamlVariables = v.forward.yaml_variables;
    if (typeof v.forward.pipeline_variables === 'boolean') forward.pipelineVariables = v.forward.pipeline_variables;
  }
  if (v.include !== undefined) {
    const unknown = Object.keys(v).filter((k) => !['include', 'strategy', 'forward', 'inputs'].includes(k));
    if (unknown.length) {
      errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
      return null;
    }
    const list = Array.isArray(v.include) ? v.include : [v.include];
    if (list.length === 0 || list.length > 3) {
      errors.add(`${path}:include`, 'config must be between 1 and 3 items');
      return null;
    }
    const include: Array<{ local: string; inputs?: Record<string, unknown> } | { artifact: string; job: string }> = [];
    for (const i of list) {
      if (typeof i === 'string') include.push({ local: i.replace(/^\/+/, '') });
      else if (isPlainObject(i) && typeof i.local === 'string' && Object.keys(i).every((k) => k === 'local' || k === 'inputs')) {
        if (i.inputs !== undefined && !isPlainObject(i.inputs)) {
          errors.add(`${path}:include`, 'inputs should be a hash');
          return null;
        }
        include.push(isPlainObject(i.inputs) ? { local: i.local.replace(/^\/+/, ''), inputs: i.inputs } : { local: i.local.replace(/^\/+/, '') });
      } else if (isPlainObject(i) && typeof i.artifact === 'string') {
        if (typeof i.job !== 'string') {
          errors.add(`${path}:include`, 'config must specify the job where to fetch the artifact from');
          return null;
        }
        include.push({ artifact: i.artifact, job: i.job });
      } else {
        errors.add(`${path}:include`, 'config contains an include Cairn does not support (only local files and artifacts)');
        return null;
      }
    }
    return { kind: 'child', include, strategy, forward };
  }
  if (typeof v.project === 'string' && v.project !== '') {
    const unknown = Object.keys(v).filter((k) => !['project', 'branch', 'strategy', 'forward', 'inputs'].includes(k));
    if (unknown.length) {
      errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
      return null;
    }
    if (v.branch !== undefined && typeof v.branch !== 'string') {
      errors.add(path, 'branch should be a string');
      return null;
    }
    if (v.inputs !== undefined && v.inputs !== null && !isPlainObject(v.inputs)) {
      errors.add(path, 'inputs should be a hash');
      return null;
    }
    const spec: TriggerSpec = { kind: 'multi_project', project: v.project, branch: (v.branch as string | undefined) ?? null, strategy, forward };
    if (isPlainObject(v.inputs)) spec.inputs = v.inputs;
    return spec;
  }
  errors.add(path, 'config must specify either project or include');
  return null;
}

function rules(v: unknown, path: string, errors: Errors, workflow: boolean): RuleSpec[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) {
    // a job checks `rules` itself (nested_array_of_hashes_or_arrays); workflow only has Entry::Rules
    if (workflow) errors.add(path, 'config should be a array');
    else errors.add(path.replace(/:rules$/, ''), 'rules should be an array containing hashes and arrays of hashes');
    return null;
  }
  if (v.length === 0) {
    errors.add(path, "config can't be blank");
    return null;
  }
  const flat = v.flat(10);
  const allowedKeys = workflow
    ? ['if', 'changes', 'exists', 'when', 'variables', 'auto_cancel']
    : ['if', 'changes', 'exists', 'when', 'start_in', 'allow_failure', 'variables', 'needs', 'interruptible'];
  const allowedWhen = workflow ? WORKFLOW_RULE_WHEN : RULE_WHEN;
  const out: RuleSpec[] = [];
  const rp = `${path}:rule`;
  for (const r of flat) {
    if (!isPlainObject(r) || Object.keys(r).length === 0) {
      errors.add(rp, isPlainObject(r) ? "config can't be blank" : 'config should be a hash');
      continue;
    }
    const n = errors.list.length;
    const unknown = Object.keys(r).filter((k) => !allowedKeys.includes(k));
    if (unknown.length) errors.add(rp, `config contains unknown keys: ${unknown.join(', ')}`);
    let ifExpr: Expression | null = null;
    if (r.if !== undefined && r.if !== null) {
      if (typeof r.if !== 'string' || !Expression.isValid(r.if)) errors.add(rp, 'if invalid expression syntax');
      else ifExpr = Expression.parse(r.if);
    }
    let changes: RuleSpec['changes'] = null;
    if (r.changes !== undefined && r.changes !== null) {
      // GitLab's Rules::Rule::Changes: an array of globs, or {paths, compare_to}
      const cp = `${rp}:changes`;
      if (Array.isArray(r.changes)) {
        if (!isStringArray(r.changes)) errors.add(cp, 'config should be an array of strings');
        else if (r.changes.length > 50) errors.add(cp, 'config has too many entries (maximum 50)');
        else changes = { paths: r.changes, compareTo: null };
      } else if (isPlainObject(r.changes)) {
        const bad = Object.keys(r.changes).filter((k) => k !== 'paths' && k !== 'compare_to');
        if (bad.length) errors.add(cp, `config contains unknown keys: ${bad.join(', ')}`);
        if (r.changes.paths === undefined) errors.add(cp, 'config missing required keys: paths');
        else if (!isStringArray(r.changes.paths)) errors.add(cp, 'paths should be an array of strings');
        else if (r.changes.paths.length > 50) errors.add(cp, 'paths has too many entries (maximum 50)');
        if (r.changes.compare_to !== undefined && r.changes.compare_to !== null && typeof r.changes.compare_to !== 'string') {
          errors.add(cp, 'compare to should be a string');
        }
        if (!bad.length && isStringArray(r.changes.paths) && r.changes.paths.length <= 50) {
          changes = { paths: r.changes.paths, compareTo: typeof r.changes.compare_to === 'string' ? r.changes.compare_to : null };
        }
      } else errors.add(cp, 'should be an array or a hash');
    }
    let exists: string[] | null = null;
    if (r.exists !== undefined) {
      // GitLab's Rules::Rule::Exists: a glob, an array of globs, or {paths, project, ref}
      const ep = `${rp}:exists`;
      if (r.exists === null || typeof r.exists === 'string') exists = r.exists === null ? [] : [r.exists];
      else if (Array.isArray(r.exists)) {
        if (!isStringArray(r.exists)) errors.add(ep, 'config should be an array of strings');
        else if (r.exists.length > 50) errors.add(ep, 'config has too many entries (maximum 50)');
        else exists = r.exists;
      } else if (isPlainObject(r.exists)) {
        const bad = Object.keys(r.exists).filter((k) => !['paths', 'project', 'ref'].includes(k));
        if (bad.length) errors.add(ep, `config contains unknown keys: ${bad.join(', ')}`);
        else if (r.exists.paths === undefined) errors.add(ep, 'config missing required keys: paths');
        else if (r.exists.ref !== undefined && r.exists.project === undefined) errors.add(ep, 'config missing required keys: project');
        else if (!isStringArray(r.exists.paths)) errors.add(ep, 'paths should be an array of strings');
        else if (r.exists.paths.length > 50) errors.add(ep, 'paths has too many entries (maximum 50)');
        else if (r.exists.project !== undefined) errors.add(ep, 'project is not supported by Cairn yet (files of another project)');
        else exists = r.exists.paths;
      } else errors.add(ep, 'should be a string, an array of strings, or a hash');
    }
    let when: string | null = null;
    if (r.when !== undefined && r.when !== null) {
      if (typeof r.when !== 'string' || !allowedWhen.includes(r.when)) errors.add(rp, `when unknown value: ${String(r.when)}`);
      else when = r.when;
    }
    let startIn: number | null = null;
    if (!workflow) {
      if (when === 'delayed') {
        if (r.start_in === undefined || r.start_in === null) errors.add(rp, "start in can't be blank");
        else {
          startIn = parseDuration(r.start_in);
          if (startIn === null) errors.add(rp, 'start in should be a duration');
          else if (startIn > MAX_START_IN_SECONDS) errors.add(rp, 'start in should not exceed the limit');
        }
      } else if (r.start_in !== undefined) errors.add(rp, 'config contains disallowed keys: start_in');
    }
    if (r.allow_failure !== undefined && typeof r.allow_failure !== 'boolean') errors.add(rp, 'allow failure should be a boolean value');
    if (r.interruptible !== undefined && typeof r.interruptible !== 'boolean') errors.add(rp, 'interruptible should be a boolean value');
    const variables = r.variables === undefined ? null : simpleVariables(r.variables, `${rp}:variables`, errors);
    let autoCancel: RuleSpec['autoCancel'] = null;
    if (workflow && r.auto_cancel !== undefined && r.auto_cancel !== null) autoCancel = autoCancelEntry(r.auto_cancel, `${rp}:auto_cancel`, errors);
    const ruleNeeds = r.needs === undefined ? null : needs(r.needs, `${rp}:needs`, errors);
    if (ruleNeeds?.some((x) => x.pipeline !== undefined)) errors.add(`${rp}:needs`, 'config uses invalid types: cross_dependency');
    if (errors.list.length > n) continue;
    out.push({
      if: ifExpr,
      changes,
      exists,
      when,
      startIn,
      allowFailure: typeof r.allow_failure === 'boolean' ? r.allow_failure : null,
      interruptible: typeof r.interruptible === 'boolean' ? r.interruptible : null,
      variables,
      needs: ruleNeeds,
      autoCancel,
    });
  }
  return out;
}

const POLICY_REFS_SPECIAL = new Set([
  'branches', 'tags', 'api', 'external', 'pipelines', 'pushes', 'schedules', 'triggers', 'web',
  'merge_requests', 'chat', 'external_pull_requests',
]);

function policy(v: unknown, path: string, errors: Errors): PolicySpec | null {
  if (v === undefined || v === null) return null;
  const refsCheck = (refs: unknown, p: string): string[] | null => {
    if (!isStringArray(refs)) {
      errors.add(p, 'config should be an array of strings or regular expressions');
      return null;
    }
    for (const r of refs) {
      const refPart = r.replace(/@[\w.\-/]+$/, '');
      if (refPart.startsWith('/') && !fabricatePattern(refPart)) {
        errors.add(p, 'config should be an array of strings or regular expressions');
        return null;
      }
    }
    return refs;
  };
  if (Array.isArray(v) || typeof v === 'string') {
    const refs = refsCheck(typeof v === 'string' ? [v] : v, path);
    return refs ? { refs, variables: null, changes: null, kubernetes: null, raw: { refs } } : null;
  }
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be an array of strings or regular expressions');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => !['refs', 'variables', 'changes', 'kubernetes'].includes(k));
  if (unknown.length) {
    errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
    return null;
  }
  const spec: PolicySpec = { refs: null, variables: null, changes: null, kubernetes: null, raw: {} };
  if (v.refs !== undefined) {
    spec.refs = refsCheck(v.refs, `${path}:refs`);
    if (spec.refs) spec.raw.refs = spec.refs;
  }
  if (v.variables !== undefined) {
    if (!isStringArray(v.variables) || !v.variables.every((e) => Expression.isValid(e))) {
      errors.add(`${path}:variables`, 'config should be an array of valid expressions');
    } else {
      spec.variables = v.variables.map((e) => Expression.parse(e));
      spec.raw.variables = v.variables;
    }
  }
  if (v.changes !== undefined) {
    const ch = isStringArray(v.changes) ? v.changes : isPlainObject(v.changes) && isStringArray(v.changes.paths) ? v.changes.paths : null;
    if (!ch) errors.add(`${path}:changes`, 'config should be an array of strings');
    else {
      spec.changes = ch;
      spec.raw.changes = ch;
    }
  }
  if (v.kubernetes !== undefined) {
    if (v.kubernetes !== 'active') errors.add(`${path}:kubernetes`, 'config should be one of: active');
    else spec.kubernetes = 'active';
  }
  return spec;
}

export { POLICY_REFS_SPECIAL };

function inherit(v: unknown, path: string, errors: Errors): { defaults: boolean | string[]; variables: boolean | string[] } {
  const out = { defaults: true as boolean | string[], variables: true as boolean | string[] };
  if (v === undefined || v === null) return out;
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash');
    return out;
  }
  const unknown = Object.keys(v).filter((k) => k !== 'default' && k !== 'variables');
  if (unknown.length) errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
  for (const [k, target] of [['default', 'defaults'], ['variables', 'variables']] as const) {
    const x = v[k];
    if (x === undefined) continue;
    if (typeof x === 'boolean' || isStringArray(x)) out[target] = x;
    else errors.add(`${path}:${k}`, 'config should be a boolean value or an array of strings');
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

interface Defaults {
  beforeScript?: string[];
  afterScript?: string[];
  image?: CompiledImage | null;
  services?: CompiledService[];
  cache?: CompiledCache[];
  tags?: string[];
  timeout?: number | null;
  retry?: CompiledRetry | null;
  interruptible?: boolean;
  artifacts?: CompiledArtifacts | null;
  raw: Record<string, unknown>;
}

function defaultsEntry(config: Record<string, unknown>, errors: Errors): Defaults {
  const def = config.default;
  const raw: Record<string, unknown> = {};
  if (def !== undefined && def !== null) {
    if (!isPlainObject(def)) errors.add('default', 'config should be a hash');
    else {
      const unknown = Object.keys(def).filter((k) => !DEFAULT_KEYS.includes(k));
      if (unknown.length) errors.add('default', `config contains unknown keys: ${unknown.join(', ')}`);
      Object.assign(raw, def);
    }
  }
  // the deprecated top-level forms behave as default:
  for (const k of ['image', 'services', 'before_script', 'after_script', 'cache']) {
    if (config[k] !== undefined && raw[k] === undefined) raw[k] = config[k];
  }
  const d: Defaults = { raw };
  const p = (k: string) => (isPlainObject(def) && def[k] !== undefined ? `default:${k}` : k);
  if (raw.before_script !== undefined) d.beforeScript = commands(raw.before_script, `${p('before_script')}`, errors) ?? [];
  if (raw.after_script !== undefined) d.afterScript = commands(raw.after_script, `${p('after_script')}`, errors) ?? [];
  if (raw.image !== undefined) d.image = image(raw.image, `${p('image')}`, errors);
  if (raw.services !== undefined) d.services = services(raw.services, `${p('services')}`, errors);
  if (raw.cache !== undefined) d.cache = caches(raw.cache, `${p('cache')}`, errors);
  if (raw.tags !== undefined) d.tags = tags(raw.tags, 'default:tags', errors);
  if (raw.timeout !== undefined) d.timeout = timeout(raw.timeout, 'default:timeout', errors);
  if (raw.retry !== undefined) d.retry = retry(raw.retry, 'default:retry', errors);
  if (raw.interruptible !== undefined) {
    if (typeof raw.interruptible !== 'boolean') errors.add('default:interruptible', 'config should be a boolean value');
    else d.interruptible = raw.interruptible;
  }
  if (raw.artifacts !== undefined) d.artifacts = artifacts(raw.artifacts, 'default:artifacts', errors);
  return d;
}

function stagesEntry(config: Record<string, unknown>, errors: Errors): string[] {
  const v = config.stages ?? config.types;
  let declared = DEFAULT_STAGES;
  if (v !== undefined && v !== null) {
    if (!isStringArray(v)) errors.add('stages', 'config should be an array of strings');
    else declared = v;
  }
  return ['.pre', ...declared.filter((s) => s !== '.pre' && s !== '.post'), '.post'].filter((s, i, a) => a.indexOf(s) === i);
}

function workflowEntry(config: Record<string, unknown>, errors: Errors): WorkflowSpec {
  const w = config.workflow;
  const out: WorkflowSpec = { name: null, rules: null, autoCancel: null };
  if (w === undefined || w === null) return out;
  if (!isPlainObject(w)) {
    errors.add('workflow', 'config should be a hash');
    return out;
  }
  const unknown = Object.keys(w).filter((k) => !['rules', 'name', 'auto_cancel'].includes(k));
  if (unknown.length) errors.add('workflow', `config contains unknown keys: ${unknown.join(', ')}`);
  if (w.name !== undefined && w.name !== null) {
    if (typeof w.name !== 'string') errors.add('workflow', 'name should be a string');
    else if (w.name.length > 255) errors.add('workflow', 'name is too long (maximum is 255 characters)');
    else out.name = w.name;
  }
  out.rules = rules(w.rules, 'workflow:rules', errors, true);
  if (w.auto_cancel !== undefined) out.autoCancel = autoCancelEntry(w.auto_cancel, 'workflow:auto_cancel', errors);
  return out;
}

/** workflow:auto_cancel and workflow:rules:auto_cancel (GitLab's Entry::AutoCancel). */
function autoCancelEntry(v: unknown, path: string, errors: Errors): { onNewCommit: string | null; onJobFailure: string | null } | null {
  if (!isPlainObject(v)) {
    errors.add(path, 'config should be a hash');
    return null;
  }
  const unknown = Object.keys(v).filter((k) => k !== 'on_new_commit' && k !== 'on_job_failure');
  if (unknown.length) errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
  const onNewCommit = v.on_new_commit;
  const onJobFailure = v.on_job_failure;
  if (onNewCommit !== undefined && !['conservative', 'interruptible', 'none'].includes(onNewCommit as string)) {
    errors.add(path, 'on new commit must be one of: conservative, interruptible, none');
  }
  if (onJobFailure !== undefined && !['all', 'none'].includes(onJobFailure as string)) {
    errors.add(path, 'on job failure must be one of: none, all');
  }
  return { onNewCommit: typeof onNewCommit === 'string' ? onNewCommit : null, onJobFailure: typeof onJobFailure === 'string' ? onJobFailure : null };
}

/** The names of the top-level keys that are jobs (hidden ones included), in file order. */
export function jobKeys(config: Record<string, unknown>): string[] {
  return Object.keys(config).filter((k) => !RESERVED_KEYS.has(k));
}

interface RawJob {
  name: string;
  config: Record<string, unknown>;
}

function jobEntry(
  raw: RawJob,
  defaults: Defaults,
  warnings: string[],
  hasWorkflowRules: boolean,
  errors: Errors,
): (Omit<JobSpec, 'stageIdx' | 'index' | 'parallel' | 'baseName'> & { parallelSpec: ReturnType<typeof parallel> }) | null {
  const { name, config: c } = raw;
  const path = `jobs:${name}`;
  const n = errors.list.length;
  const isBridge = c.script === undefined && c.run === undefined && c.trigger !== undefined;
  const kind: 'build' | 'bridge' = isBridge ? 'bridge' : 'build';
  const allowed = isBridge ? BRIDGE_KEYS : JOB_KEYS;
  const unknown = Object.keys(c).filter((k) => !allowed.has(k));
  if (unknown.length) errors.add(path, `config contains unknown keys: ${unknown.join(', ')}`);
  if (name.length > MAX_JOB_NAME_LENGTH) errors.add(path, `name is too long (maximum is ${MAX_JOB_NAME_LENGTH} characters)`);
  if (c.run !== undefined) errors.add(path, 'run is not supported by Cairn yet');

  const hasRules = c.rules !== undefined && c.rules !== null;
  if (hasRules) {
    const disallowed = ['only', 'except', 'start_in'].filter((k) => c[k] !== undefined && c[k] !== null);
    if (disallowed.length) errors.add(path, `config key may not be used with \`rules\`: ${disallowed.join(', ')}`);
  }

  // stage (and its deprecated alias type)
  let stage = 'test';
  const stageRaw = c.stage ?? c.type;
  if (stageRaw !== undefined && stageRaw !== null) {
    if (typeof stageRaw !== 'string') errors.add(`${path}:stage`, 'config should be a string');
    else stage = stageRaw;
  }

  const inh = inherit(c.inherit, `${path}:inherit`, errors);
  const inheritKey = (k: string) => INHERITABLE.has(k) && (inh.defaults === true || (Array.isArray(inh.defaults) && inh.defaults.includes(k)));
  const fromDefault = <T>(key: string, own: T | undefined, def: T | undefined): T | undefined => (own !== undefined ? own : inheritKey(key) ? def : undefined);

  // scripts
  let script: string[] = [];
  let beforeScript: string[] = [];
  let afterScript: string[] = [];
  if (!isBridge) {
    if (c.script !== undefined) {
      script = commands(c.script, `${path}:script`, errors) ?? [];
      if (c.script !== null && script.length === 0 && errors.list.length === n) errors.add(path, "script can't be blank");
    }
    const bs = c.before_script !== undefined ? commands(c.before_script, `${path}:before_script`, errors) ?? [] : undefined;
    const as = c.after_script !== undefined ? commands(c.after_script, `${path}:after_script`, errors) ?? [] : undefined;
    beforeScript = fromDefault('before_script', bs, defaults.beforeScript) ?? [];
    afterScript = fromDefault('after_script', as, defaults.afterScript) ?? [];
  }

  // when / start_in
  let when: JobWhen | null = null;
  if (c.when !== undefined && c.when !== null) {
    const allowedWhen: readonly string[] = isBridge ? BRIDGE_WHEN : JOB_WHEN;
    if (typeof c.when !== 'string' || !allowedWhen.includes(c.when)) errors.add(path, `when should be one of: ${allowedWhen.join(', ')}`);
    else when = c.when as JobWhen;
  }
  let startIn: number | null = null;
  if (!hasRules) {
    if (when === 'delayed') {
      startIn = parseDuration(c.start_in);
      if (startIn === null) errors.add(path, 'start in should be a duration');
      else if (startIn > MAX_START_IN_SECONDS) errors.add(path, 'start in should not exceed the limit');
    } else if (c.start_in !== undefined && c.start_in !== null) errors.add(path, 'start in must be blank');
  }

  // allow_failure
  let allowFailure: boolean | null = null;
  let exitCodes: number[] | null = null;
  if (c.allow_failure !== undefined && c.allow_failure !== null) {
    if (typeof c.allow_failure === 'boolean') allowFailure = c.allow_failure;
    else if (isPlainObject(c.allow_failure)) {
      const ec = c.allow_failure.exit_codes;
      const list = typeof ec === 'number' ? [ec] : ec;
      if (Object.keys(c.allow_failure).some((k) => k !== 'exit_codes') || !Array.isArray(list) || !list.every((x) => Number.isInteger(x))) {
        errors.add(`${path}:allow_failure`, 'exit codes should be an array of integers or an integer');
      } else if (list.length > 255) errors.add(`${path}:allow_failure`, 'exit codes must be less than or equal to 255 items');
      else exitCodes = list as number[];
    } else errors.add(path, 'allow failure should be a hash or a boolean value');
  }

  let dependencies: string[] | null = null;
  if (c.dependencies !== undefined && c.dependencies !== null) {
    if (!isStringArray(c.dependencies)) errors.add(path, 'dependencies should be an array of strings');
    else dependencies = c.dependencies;
  }
  const allNeeds = needs(c.needs, `${path}:needs`, errors);
  const crossNeeds: CrossNeedSpec[] = (allNeeds ?? []).filter((x) => x.pipeline !== undefined).map((x) => ({ pipeline: x.pipeline!, job: x.job, artifacts: x.artifacts }));
  const jobNeeds = allNeeds ? allNeeds.filter((x) => x.pipeline === undefined) : null;

  const variables = variablesEntry(c.variables, `${path}:variables`, errors, ['value', 'expand']);

  const img = isBridge ? null : fromDefault('image', c.image !== undefined ? image(c.image, `${path}:image`, errors) : undefined, defaults.image) ?? null;
  const svcs = isBridge ? [] : fromDefault('services', c.services !== undefined ? services(c.services, `${path}:services`, errors) : undefined, defaults.services) ?? [];
  const tagList = isBridge ? [] : fromDefault('tags', c.tags !== undefined ? tags(c.tags, `${path}:tags`, errors) : undefined, defaults.tags) ?? [];
  const to = isBridge ? null : fromDefault('timeout', c.timeout !== undefined ? timeout(c.timeout, `${path}:timeout`, errors) : undefined, defaults.timeout) ?? null;
  const rt = isBridge ? null : fromDefault('retry', c.retry !== undefined ? retry(c.retry, `${path}:retry`, errors) : undefined, defaults.retry) ?? null;
  const art = isBridge ? null : fromDefault('artifacts', c.artifacts !== undefined ? artifacts(c.artifacts, `${path}:artifacts`, errors) : undefined, defaults.artifacts) ?? null;
  const cache = isBridge ? [] : fromDefault('cache', c.cache !== undefined ? caches(c.cache, `${path}:cache`, errors) : undefined, defaults.cache) ?? [];

  let interruptible: boolean | null = null;
  if (c.interruptible !== undefined && c.interruptible !== null) {
    if (typeof c.interruptible !== 'boolean') errors.add(`${path}:interruptible`, 'config should be a boolean value');
    else interruptible = c.interruptible;
  } else if (inheritKey('interruptible') && defaults.interruptible !== undefined) interruptible = defaults.interruptible;

  let coverage: string | null = null;
  if (c.coverage !== undefined && c.coverage !== null) {
    if (typeof c.coverage !== 'string' || !fabricatePattern(c.coverage)) errors.add(`${path}:coverage`, 'config must be a regular expression');
    else coverage = c.coverage;
  }

  const env = environment(c.environment, `${path}:environment`, errors);

  let resourceGroup: string | null = null;
  if (c.resource_group !== undefined && c.resource_group !== null) {
    if (typeof c.resource_group !== 'string') errors.add(path, 'resource group should be a string');
    else resourceGroup = c.resource_group;
  }

  const trig = isBridge ? trigger(c.trigger, `${path}:trigger`, errors) : null;
  const par = parallel(c.parallel, `${path}:parallel`, errors);
  const jobRules = rules(c.rules, `${path}:rules`, errors, false);
  const only = hasRules ? null : policy(c.only, `${path}:only`, errors);
  const except = hasRules ? null : policy(c.except, `${path}:except`, errors);

  // GitLab checks dependencies against needs only when needs lists something (not `needs: []`).
  if (dependencies && dependencies.length && allNeeds && allNeeds.length) {
    if (jobNeeds!.length === 0) errors.add(path, 'needs corresponding to dependencies must be from the same pipeline');
    else {
      const missing = dependencies.filter((d) => !jobNeeds!.some((nd) => nd.job === d));
      if (missing.length) errors.add(path, `dependencies the ${missing.join(', ')} should be part of needs`);
    }
  }

  if (!hasWorkflowRules && jobRules && jobRules.length) {
    const last = jobRules[jobRules.length - 1];
    if (!last.if && !last.changes && !last.exists && !last.variables && !last.needs && last.allowFailure === null && last.startIn === null && last.when !== null && last.when !== 'never') {
      warnings.push(
        `${path} may allow multiple pipelines to run for a single action due to \`rules:when\` clause with no \`workflow:rules\` - read more: https://docs.gitlab.com/ee/ci/troubleshooting.html#pipeline-warnings`,
      );
    }
  }

  if (c.release !== undefined && c.release !== null) releaseEntry(c.release, `${path}:release`, errors);
  const extra: Record<string, unknown> = {};
  for (const k of EXTRA_KEYS) if (c[k] !== undefined) extra[k] = c[k];

  if (errors.list.length > n) return null;
  return {
    name,
    kind,
    stage,
    when,
    startIn,
    allowFailure,
    allowFailureExitCodes: exitCodes,
    needs: jobNeeds,
    crossNeeds,
    dependencies,
    beforeScript,
    script,
    afterScript,
    image: img,
    services: svcs,
    variables,
    inheritVariables: inh.variables,
    tags: tagList,
    timeout: to,
    retry: rt,
    artifacts: art,
    cache,
    coverage,
    environment: env,
    interruptible,
    resourceGroup,
    trigger: trig,
    extra,
    rules: jobRules,
    only,
    except,
    parallelSpec: par,
  };
}

// ---------------------------------------------------------------------------------------------

export function analyzeConfig(config: Record<string, unknown>): AnalyzeResult {
  const errors = new Errors();
  const warnings: string[] = [];

  const stages = stagesEntry(config, errors);
  const defaults = defaultsEntry(config, errors);
  const globalVariables = variablesEntry(config.variables, 'variables', errors, ['value', 'description', 'expand', 'options']);
  const workflow = workflowEntry(config, errors);

  const names = jobKeys(config);
  const visible = names.filter((n) => !n.startsWith('.'));
  const rawJobs: RawJob[] = [];
  for (const name of visible) {
    const c = config[name];
    if (!isPlainObject(c) || (c.script === undefined && c.run === undefined && c.trigger === undefined)) {
      errors.add(`jobs:${name}`, 'config should implement a script: or a trigger: keyword');
      continue;
    }
    rawJobs.push({ name, config: c });
  }
  if (visible.length === 0) errors.add('jobs', 'config should contain at least one visible job');

  const hasWorkflowRules = workflow.rules !== null;
  const built = rawJobs.map((r) => jobEntry(r, defaults, warnings, hasWorkflowRules, errors));
  if (errors.list.length) return { ok: false, errors: errors.list, warnings };

  // parallel expansion (GitLab's Config::Normalizer)
  const jobs: JobSpec[] = [];
  const parallelized = new Map<string, JobSpec[]>();
  for (const b of built) {
    const { parallelSpec, ...job } = b!;
    const stageIdx = stages.indexOf(job.stage);
    if (!parallelSpec) {
      jobs.push({ ...job, stageIdx, index: jobs.length, parallel: null, baseName: job.name });
      continue;
    }
    const instances: JobSpec[] = [];
    for (let i = 0; i < parallelSpec.total; i++) {
      const combo = parallelSpec.matrix ? parallelSpec.matrix[i] : null;
      const name = combo ? matrixJobName(job.name, combo) : `${job.name} ${i + 1}/${parallelSpec.total}`;
      const variables = combo
        ? [...job.variables.filter((v) => !(v.key in combo)), ...Object.entries(combo).map(([key, value]) => ({ key, value, raw: false }))]
        : job.variables;
      const inst: JobSpec = {
        ...job,
        name,
        variables,
        stageIdx,
        index: jobs.length,
        parallel: { index: i + 1, total: parallelSpec.total, matrix: combo },
        baseName: job.name,
      };
      jobs.push(inst);
      instances.push(inst);
    }
    parallelized.set(job.name, instances);
  }

  const expandNeeds = (list: NeedSpec[] | null): NeedSpec[] | null => {
    if (!list) return list;
    const out: NeedSpec[] = [];
    for (const need of list) {
      const group = parallelized.get(need.job);
      if (!group) {
        out.push(need);
        continue;
      }
      if (need.matrix) {
        for (const combo of matrixCombinations(need.matrix)) out.push({ ...need, job: matrixJobName(need.job, combo), matrix: null });
      } else for (const inst of group) out.push({ ...need, job: inst.name, matrix: null });
    }
    return out;
  };
  for (const job of jobs) {
    job.needs = expandNeeds(job.needs);
    if (job.rules) for (const r of job.rules) r.needs = expandNeeds(r.needs);
    if (job.dependencies) job.dependencies = job.dependencies.flatMap((d) => parallelized.get(d)?.map((i) => i.name) ?? [d]);
  }

  // parallel:matrix names are made here, after the entries checked theirs: GitLab cannot store
  // a longer job name, so the pipeline fails.
  const tooLong = jobs.filter((j) => j.parallel && j.name.length > MAX_JOB_NAME_LENGTH);
  if (tooLong.length) {
    return { ok: false, errors: tooLong.map((j) => `jobs:${j.name} name is too long (maximum is ${MAX_JOB_NAME_LENGTH} characters)`), warnings };
  }

  const logical = logicalValidation(stages, jobs);
  if (logical) return { ok: false, errors: [logical], warnings };

  return { ok: true, spec: { stages, variables: globalVariables, workflow, jobs, warnings } };
}

/** GitLab's YamlProcessor#run_logical_validations!: the first problem, or null. */
function logicalValidation(stages: string[], jobs: JobSpec[]): string | null {
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const check = (job: JobSpec, dep: string, type: 'need' | 'dependency', optional: boolean): string | null => {
    const other = byName.get(dep);
    if (!other) return optional ? null : `${job.name} job: undefined ${type}: ${dep}`;
    if (type === 'need' && dep.length > MAX_JOB_NAME_LENGTH) {
      return `${job.name} job: need \`${dep}\` name is too long (maximum is ${MAX_JOB_NAME_LENGTH} characters)`;
    }
    if (other.stageIdx > job.stageIdx) return `${job.name} job: ${type} ${dep} is not defined in current or prior stages`;
    return null;
  };
  for (const job of jobs) {
    if (job.stageIdx === -1) return `${job.name} job: chosen stage ${job.stage} does not exist; available stages are ${stages.join(', ')}`;
    for (const d of job.dependencies ?? []) {
      const e = check(job, d, 'dependency', false);
      if (e) return e;
    }
    const needSets = [job.needs, ...(job.rules ?? []).map((r) => r.needs)];
    for (const set of needSets) {
      if (!set) continue;
      for (const need of set) {
        const e = check(job, need.job, 'need', need.optional);
        if (e) return e;
      }
      const seen = new Set<string>();
      const dup = new Set<string>();
      for (const need of set) (seen.has(need.job) ? dup : seen).add(need.job);
      if (dup.size) return `${job.name} has the following needs duplicated: ${[...dup].join(', ')}.`;
      if (set.length > MAX_NEEDS) {
        return `${job.name}: one job can only need ${MAX_NEEDS} others, but you have listed ${set.length}. See needs keyword documentation for more details`;
      }
    }
    if (job.trigger?.kind === 'child') {
      for (const inc of job.trigger.include) {
        if ('job' in inc) {
          const e = check(job, inc.job, 'dependency', false);
          if (e) return e;
        }
      }
    }
    if (job.environment?.onStop) {
      const stop = byName.get(job.environment.onStop);
      if (!stop) return `${job.name} job: on_stop job ${job.environment.onStop} is not defined`;
      if (!stop.environment) return `${job.name} job: on_stop job ${job.environment.onStop} does not have environment defined`;
      if (stop.environment.name !== job.environment.name) return `${job.name} job: on_stop job ${job.environment.onStop} have different environment name`;
      if (stop.environment.action !== 'stop') return `${job.name} job: on_stop job ${job.environment.onStop} needs to have action stop defined`;
    }
  }
  // cycles through needs (only possible within a stage)
  const state = new Map<string, 1 | 2>();
  const visit = (name: string): boolean => {
    const s = state.get(name);
    if (s === 2) return false;
    if (s === 1) return true;
    state.set(name, 1);
    for (const n of byName.get(name)?.needs ?? []) if (byName.has(n.job) && visit(n.job)) return true;
    state.set(name, 2);
    return false;
  };
  for (const job of jobs) if (visit(job.name)) return 'The pipeline has circular dependencies';
  return null;
}

/** The global variables as CompiledVariables. */
export function toCompiledVariables(vars: VarSpec[]): CompiledVariable[] {
  return vars.map((v) => ({ key: v.key, value: v.value, raw: v.raw }));
}
