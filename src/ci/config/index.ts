// The .gitlab-ci.yml compiler: compilePipeline (what pipeline creation calls) and lintConfig
// (what POST /projects/:id/ci/lint calls). Pure: the repository is reached only through the
// functions passed in. Output types and their meaning are in types.ts.

import { ConfigError, loadConfig } from './load.js';
import { analyzeConfig, type PipelineSpec } from './normalize.js';
import { seedPipeline } from './seed.js';
import type { CompileInput, CompileResult, IncludeInfo, LintJob, LintResult, RepositoryAccess } from './types.js';
import { dumpYaml, loadYamlLibrary } from './yaml.js';

export type * from './types.js';
export { Expression, ExpressionError, fabricatePattern, Pattern } from './expression.js';
export { parseDuration } from './duration.js';
export { matchGlob, matchAnyGlob } from './glob.js';
export { expandString } from './variables.js';
export { MAX_JOB_NAME_LENGTH } from './normalize.js';
export { InvalidCompareToError } from './errors.js';

const SKIP_CI = /\[(ci[ _-]skip|skip[ _-]ci)\]/i;

/** [skip ci], [ci skip] (also skip-ci, skip_ci, any case) in a commit message. */
export function commitMessageSkipsCi(message: string): boolean {
  return SKIP_CI.test(message);
}

export const SKIP_CI_MESSAGE = 'Pipeline skipped: the commit message contains [skip ci] or [ci skip].';

type Built =
  | { ok: true; spec: PipelineSpec; includes: IncludeInfo[]; merged: Record<string, unknown> }
  | { ok: false; errors: string[]; warnings: string[]; includes: IncludeInfo[]; merged: Record<string, unknown> | null };

async function build(
  yaml: string,
  access: RepositoryAccess,
  sha: string | null,
  variables: Record<string, string>,
  inputs?: Record<string, unknown>,
): Promise<Built> {
  await loadYamlLibrary();
  let loaded;
  try {
    loaded = await loadConfig(yaml, { access, sha, variables, inputs });
  } catch (e) {
    if (e instanceof ConfigError) return { ok: false, errors: [e.message], warnings: [], includes: [], merged: null };
    throw e;
  }
  const analyzed = analyzeConfig(loaded.config);
  if (!analyzed.ok) return { ...analyzed, includes: loaded.includes, merged: loaded.config };
  return { ok: true, spec: analyzed.spec, includes: loaded.includes, merged: loaded.config };
}

/**
 * Compiles .gitlab-ci.yml for one pipeline. Never throws for bad configuration (only if one of
 * the repository functions throws). See types.ts for the three possible outcomes.
 */
export async function compilePipeline(input: CompileInput): Promise<CompileResult> {
  if (input.skipCi || commitMessageSkipsCi(input.commitMessage)) {
    return { ok: true, kind: 'skipped', reason: 'skip_ci', message: SKIP_CI_MESSAGE, warnings: [] };
  }
  const includeVars = { ...(input.lowPrecedenceVariables ?? {}), ...input.variables };
  const built = await build(input.yaml, input, input.sha, includeVars, input.inputs);
  if (!built.ok) return { ok: false, kind: 'error', errors: built.errors, warnings: built.warnings };
  return seedPipeline(built.spec, input, built.includes);
}

export interface LintInput extends RepositoryAccess {
  yaml: string;
  sha?: string | null;
  /** Variables for include paths and include:rules (predefined/project ones), optional. */
  variables?: Record<string, string>;
  /** Values for the file's own `spec:inputs`. */
  inputs?: Record<string, unknown>;
  /**
   * dry_run: also simulate a pipeline for this ref/source, so rules-dependent errors (needs to an
   * excluded job, nothing to run) are reported too, as GitLab's dry run does.
   */
  simulate?: Omit<CompileInput, 'yaml' | keyof RepositoryAccess | 'commitMessage'> & { commitMessage?: string };
}

/** Material for POST /ci/lint: {valid, errors, warnings, merged_yaml, includes, jobs}. */
export async function lintConfig(input: LintInput): Promise<LintResult> {
  const vars = { ...(input.simulate?.lowPrecedenceVariables ?? {}), ...(input.simulate?.variables ?? input.variables ?? {}) };
  const built = await build(input.yaml, input, input.sha ?? input.simulate?.sha ?? null, vars, input.simulate?.inputs ?? input.inputs);
  const mergedYaml = built.merged ? dumpYaml(built.merged) : '';
  if (!built.ok) {
    return { valid: false, errors: built.errors, warnings: built.warnings, mergedYaml, includes: built.includes, jobs: [] };
  }
  const jobs: LintJob[] = built.spec.jobs.map((j) => ({
    name: j.name,
    stage: j.stage,
    before_script: j.beforeScript,
    script: j.script,
    after_script: j.afterScript,
    tag_list: j.tags,
    environment: j.environment?.name ?? null,
    when: j.when ?? 'on_success',
    allow_failure: j.allowFailure ?? j.when === 'manual',
    only: j.rules ? null : j.only ? j.only.raw : { refs: ['branches', 'tags'] },
    except: j.except ? j.except.raw : null,
  }));
  let errors: string[] = [];
  let warnings = built.spec.warnings;
  if (input.simulate) {
    const seeded = await seedPipeline(built.spec, { ...input, ...input.simulate }, built.includes);
    warnings = seeded.warnings;
    if (!seeded.ok) errors = seeded.errors;
    else if (seeded.kind === 'skipped' && seeded.reason !== 'skip_ci') errors = [seeded.message];
  }
  return { valid: errors.length === 0, errors, warnings, mergedYaml, includes: built.includes, jobs };
}
