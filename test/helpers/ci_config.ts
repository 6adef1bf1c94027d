// Helpers for tests of the .gitlab-ci.yml compiler (src/ci/config): a CompileInput for a ref,
// an in-memory repository of files, and accessors for the outcome.
import assert from 'node:assert/strict';
import {
  compilePipeline,
  lintConfig,
  matchAnyGlob,
  type CompiledJob,
  type CompiledPipeline,
  type CompileInput,
  type CompileResult,
  type LintResult,
} from '../../src/ci/config/index.js';

export const SHA = 'a'.repeat(40);

export function compileInput(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): CompileInput {
  const ref = over.ref ?? 'main';
  const tag = over.tag ?? false;
  const source = over.source ?? 'push';
  const variables: Record<string, string> = {
    CI_COMMIT_REF_NAME: ref,
    CI_PIPELINE_SOURCE: source,
    CI_DEFAULT_BRANCH: 'main',
    CI_PROJECT_PATH: 'group/project',
    ...(tag ? { CI_COMMIT_TAG: ref } : { CI_COMMIT_BRANCH: ref }),
    ...(over.variables ?? {}),
  };
  return {
    yaml,
    ref,
    tag,
    sha: SHA,
    source,
    commitMessage: 'Update things',
    readLocalFile: async (p) => (Object.hasOwn(files, p) ? files[p] : null),
    listFiles: async () => Object.keys(files).sort(),
    fileExists: async (globs) => matchAnyGlob(globs, Object.keys(files)),
    ...over,
    variables,
  };
}

export function compile(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<CompileResult> {
  return compilePipeline(compileInput(yaml, over, files));
}

export async function pipeline(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<CompiledPipeline> {
  const r = await compile(yaml, over, files);
  assert.equal(r.kind, 'pipeline', JSON.stringify(r));
  return r as CompiledPipeline;
}

export async function errorsOf(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<string[]> {
  const r = await compile(yaml, over, files);
  assert.equal(r.ok, false, `expected errors, got ${JSON.stringify(r).slice(0, 300)}`);
  return (r as { errors: string[] }).errors;
}

export async function firstError(yaml: string, over: Partial<CompileInput> = {}, files: Record<string, string> = {}): Promise<string> {
  return (await errorsOf(yaml, over, files))[0];
}

export function lint(yaml: string, files: Record<string, string> = {}): Promise<LintResult> {
  return lintConfig({ yaml, sha: SHA, readLocalFile: async (p) => (Object.hasOwn(files, p) ? files[p] : null), listFiles: async () => Object.keys(files).sort() });
}

export function job(p: CompiledPipeline, name: string): CompiledJob {
  const j = p.jobs.find((x) => x.name === name);
  assert.ok(j, `job ${name} not in ${p.jobs.map((x) => x.name).join(', ')}`);
  return j;
}

export const names = (p: CompiledPipeline) => p.jobs.map((j) => j.name);
