// Step 1 of the compiler: the YAML text -> one merged configuration hash, as GitLab builds it
// (Gitlab::Ci::Config#build_config): include:local files are read and deep-merged under the file
// that includes them (the including file wins), `extends` is resolved (bases deep-merged in
// order, then the job itself), then `!reference` tags are replaced by what they point at.

import { RE2JS } from 're2js';
import { Expression } from './expression.js';
import { matchAnyGlob } from './glob.js';
import { InvalidCompareToError } from './errors.js';
import { applyInputs } from './inputs.js';
import type { IncludeInfo, RepositoryAccess } from './types.js';
import { expandString } from './variables.js';
import { deepClone, deepMerge, isPlainObject, loadYaml, ReferenceTag } from './yaml.js';

export const MAX_INCLUDES = 150;
export const MAX_EXTENDS_NESTING = 10;
export const MAX_REFERENCE_NESTING = 10;

/** Top-level keys that are never jobs. */
export const RESERVED_KEYS = new Set([
  'include',
  'before_script',
  'image',
  'services',
  'after_script',
  'variables',
  'stages',
  'types',
  'cache',
  'default',
  'workflow',
]);

export class ConfigError extends Error {}

export interface LoadOptions {
  access: Pick<RepositoryAccess, 'readLocalFile' | 'fileExists' | 'changedPaths' | 'listFiles'>;
  sha: string | null;
  /** Variables usable in include paths and include:rules (pipeline, project, predefined). */
  variables: Record<string, string>;
  /** Values for the main file's `spec:inputs` (a pipeline's inputs). */
  inputs?: Record<string, unknown>;
}

export interface Loaded {
  config: Record<string, unknown>;
  includes: IncludeInfo[];
}

/** Throws ConfigError with GitLab's message. */
export async function loadConfig(text: string, opts: LoadOptions): Promise<Loaded> {
  if (text.trim() === '') throw new ConfigError('Please provide content of .gitlab-ci.yml');
  const parsed = loadYaml(text);
  if (!parsed.ok) throw new ConfigError(parsed.error);
  // The main file's own spec:inputs take the pipeline's inputs (GitLab's Config::Yaml::Loader).
  const applied = applyInputs(parsed.header, parsed.value, opts.inputs ?? {}, opts.variables);
  if (!applied.ok) throw new ConfigError(applied.error);
  if (!isPlainObject(applied.value)) throw new ConfigError('Invalid configuration format');
  const state = { count: 0, includes: [] as IncludeInfo[] };
  let config = await expandIncludes(applied.value, opts, state, 0);
  config = resolveExtends(config);
  config = resolveReferences(config);
  return { config, includes: state.includes };
}

type IncludeEntry = {
  /** The path with variables expanded. */
  local: string;
  /** The path as written: a wildcard is matched before variables are expanded, as GitLab's Mapper does. */
  raw: string;
  inputs: Record<string, unknown>;
  extra: Record<string, unknown>;
};

/**
 * A wildcard `include:local` path as GitLab matches it (Repository#search_files_by_wildcard_path):
 * `**` is any text, `*` any text without a slash, everything else literal, the whole path.
 */
export function wildcardMatcher(pattern: string): RE2JS {
  const re = pattern
    .replace(/^\/+/, '')
    .split('**')
    .map((part) => part.split('*').map((lit) => RE2JS.quote(lit)).join('[^/]*?'))
    .join('.*?');
  return RE2JS.compile(`^${re}$`);
}

async function expandIncludes(
  config: Record<string, unknown>,
  opts: LoadOptions,
  state: { count: number; includes: IncludeInfo[]; listed?: string[] },
  depth: number,
): Promise<Record<string, unknown>> {
  if (!Object.hasOwn(config, 'include')) return config;
  const { include, ...rest } = config;
  if (include === null || include === undefined) return rest;
  const entries = Array.isArray(include) ? include : [include];
  let merged: Record<string, unknown> = {};
  for (const raw of entries) {
    const entry = normalizeInclude(raw, opts.variables);
    if (!entry) continue;
    if (!(await includeRulesMatch(entry.extra.rules, opts))) continue;
    let files: Array<{ location: string; inputs: Record<string, unknown>; extra: Record<string, unknown> }>;
    if (entry.raw.includes('*')) {
      // Each file a wildcard matches is an include of its own, without the entry's other keys.
      state.listed ??= opts.access.listFiles ? await opts.access.listFiles() : [];
      const matcher = wildcardMatcher(entry.raw);
      files = state.listed.filter((p) => matcher.testExact(p)).map((location) => ({ location, inputs: {}, extra: {} }));
    } else {
      files = [{ location: entry.local.replace(/^\/+/, ''), inputs: entry.inputs, extra: entry.extra }];
    }
    for (const file of files) {
      merged = deepMerge(merged, await includeLocal(file, opts, state, depth));
    }
  }
  return deepMerge(merged, rest);
}

async function includeLocal(
  file: { location: string; inputs: Record<string, unknown>; extra: Record<string, unknown> },
  opts: LoadOptions,
  state: { count: number; includes: IncludeInfo[]; listed?: string[] },
  depth: number,
): Promise<Record<string, unknown>> {
  const { location } = file;
  if (state.count >= MAX_INCLUDES) throw new ConfigError(`Maximum of ${MAX_INCLUDES} nested includes are allowed!`);
  state.count++;
  if (!/\.ya?ml$/i.test(location)) throw new ConfigError(`Included file \`${location}\` does not have YAML extension!`);
  const content = await opts.access.readLocalFile(location);
  if (content === null) throw new ConfigError(`Local file \`${location}\` does not exist!`);
  if (content.trim() === '') throw new ConfigError(`Local file \`${location}\` is empty!`);
  const parsed = loadYaml(content);
  if (!parsed.ok) throw new ConfigError(`Included file \`${location}\` does not have valid YAML syntax!`);
  const applied = applyInputs(parsed.header, parsed.value, file.inputs, opts.variables);
  if (!applied.ok) throw new ConfigError(`\`${location}\`: ${applied.error}`);
  if (!isPlainObject(applied.value)) throw new ConfigError(`Included file \`${location}\` does not have valid YAML syntax!`);
  state.includes.push({ type: 'local', location, extra: file.extra, contextSha: opts.sha });
  return expandIncludes(applied.value, opts, state, depth + 1);
}

const INCLUDE_ACCESSORS = ['local', 'remote', 'project', 'template', 'component', 'file', 'artifact'];

function normalizeInclude(raw: unknown, variables: Record<string, string>): IncludeEntry | null {
  if (typeof raw === 'string') {
    if (/^https?:\/\//i.test(raw)) {
      throw new ConfigError(`Remote file \`${raw}\` could not be fetched: include:remote is not supported by Cairn!`);
    }
    return { local: expandString(raw, variables), raw, inputs: {}, extra: {} };
  }
  if (!isPlainObject(raw)) throw new ConfigError(`Include \`${JSON.stringify(raw)}\` needs to match exactly one accessor!`);
  const accessors = Object.keys(raw).filter((k) => INCLUDE_ACCESSORS.includes(k));
  const shown = JSON.stringify(raw);
  if (accessors.length !== 1 || (accessors[0] === 'project' && !('file' in raw)) || (accessors[0] === 'file' && !('project' in raw))) {
    if (!(accessors.length === 2 && accessors.includes('project') && accessors.includes('file'))) {
      throw new ConfigError(`Include \`${shown}\` needs to match exactly one accessor!`);
    }
  }
  if (accessors.includes('project')) throw new ConfigError(`Project file \`${shown}\`: include:project is not supported by Cairn!`);
  const kind = accessors[0];
  if (kind !== 'local') throw new ConfigError(`Include \`${shown}\`: include:${kind} is not supported by Cairn!`);
  if (typeof raw.local !== 'string' || raw.local === '') throw new ConfigError(`Include \`${shown}\` needs to match exactly one accessor!`);
  const unknown = Object.keys(raw).filter((k) => !['local', 'rules', 'inputs'].includes(k));
  if (unknown.length) throw new ConfigError(`include config contains unknown keys: ${unknown.join(', ')}`);
  if (raw.inputs !== undefined && raw.inputs !== null && !isPlainObject(raw.inputs)) {
    throw new ConfigError(`Include \`${shown}\`: inputs should be a hash`);
  }
  const { local, ...extra } = raw;
  return { local: expandString(local as string, variables), raw: local as string, inputs: isPlainObject(raw.inputs) ? raw.inputs : {}, extra };
}

async function includeRulesMatch(rules: unknown, opts: LoadOptions): Promise<boolean> {
  if (rules === undefined || rules === null) return true;
  if (!Array.isArray(rules)) throw new ConfigError('include:rules config should be an array of hashes');
  for (const rule of rules.flat(10)) {
    if (!isPlainObject(rule)) throw new ConfigError('include:rules:rule config should be a hash');
    const unknown = Object.keys(rule).filter((k) => !['if', 'exists', 'changes', 'when'].includes(k));
    if (unknown.length) throw new ConfigError(`include:rules:rule config contains unknown keys: ${unknown.join(', ')}`);
    let matched = true;
    if (rule.if !== undefined) {
      if (typeof rule.if !== 'string' || !Expression.isValid(rule.if)) throw new ConfigError('include:rules:rule if invalid expression syntax');
      matched = Expression.parse(rule.if).truthful(opts.variables);
    }
    if (matched && rule.exists !== undefined) {
      const globs = (Array.isArray(rule.exists) ? rule.exists : [rule.exists]).map((g) => expandString(String(g), opts.variables));
      matched = opts.access.fileExists ? await opts.access.fileExists(globs) : false;
    }
    if (matched && rule.changes !== undefined) {
      const paths = Array.isArray(rule.changes) ? rule.changes : isPlainObject(rule.changes) ? (rule.changes.paths as unknown[]) : [];
      const compareTo = isPlainObject(rule.changes) && typeof rule.changes.compare_to === 'string' ? expandString(rule.changes.compare_to, opts.variables) : undefined;
      let changed: string[] | null = null;
      try {
        changed = opts.access.changedPaths ? await opts.access.changedPaths(compareTo) : null;
      } catch (e) {
        if (e instanceof InvalidCompareToError) throw new ConfigError(`include:${e.message}`);
        throw e;
      }
      matched = changed === null || matchAnyGlob((paths ?? []).map((g) => expandString(String(g), opts.variables)), changed);
    }
    if (matched) return rule.when !== 'never';
  }
  return false;
}

/**
 * GitLab's Extendable: every top-level hash with `extends` gets its bases deep-merged under it
 * (in order), then its own keys. GitLab checks nesting from every starting key; the memo keeps
 * each key's longest chain so that a key resolved earlier still counts at its full depth.
 */
export function resolveExtends(config: Record<string, unknown>): Record<string, unknown> {
  const ctx: Record<string, unknown> = { ...config };
  // height: extensible levels from this key down (0 for a plain hash); deepest: the last of them
  const memo = new Map<string, { height: number; deepest: string }>();
  const extend = (key: string, ancestors: string[]): unknown => {
    const value = ctx[key];
    if (!isPlainObject(value) || !Object.hasOwn(value, 'extends')) return value;
    const known = memo.get(key);
    if (known) {
      if (ancestors.length + known.height - 1 > MAX_EXTENDS_NESTING) throw new ConfigError(`${known.deepest}: nesting too deep in \`extends\``);
      return value;
    }
    const ext = value.extends;
    if (!(typeof ext === 'string' || (Array.isArray(ext) && ext.every((e) => typeof e === 'string')))) {
      throw new ConfigError(`jobs:${key} extends should be an array of strings or a string`);
    }
    const bases = (Array.isArray(ext) ? ext : [ext]) as string[];
    const unknown = bases.filter((b) => !Object.hasOwn(ctx, b));
    if (unknown.length) throw new ConfigError(`${key}: unknown keys in \`extends\` (${unknown.join(', ')})`);
    const invalid = bases.filter((b) => !isPlainObject(ctx[b]));
    if (invalid.length) throw new ConfigError(`${key}: invalid base hashes in \`extends\` (${invalid.join(', ')})`);
    if (ancestors.length > MAX_EXTENDS_NESTING) throw new ConfigError(`${key}: nesting too deep in \`extends\``);
    if (ancestors.includes(key)) throw new ConfigError(`${key}: circular dependency detected in \`extends\``);
    let merged: Record<string, unknown> = {};
    let height = 1;
    let deepest = key;
    for (const base of bases) {
      merged = deepMerge(merged, deepClone(extend(base, [...ancestors, key])) as Record<string, unknown>);
      const below = memo.get(base);
      if (below && below.height + 1 > height) {
        height = below.height + 1;
        deepest = below.deepest;
      }
    }
    ctx[key] = deepMerge(merged, value);
    memo.set(key, { height, deepest });
    return ctx[key];
  };
  for (const key of Object.keys(ctx)) if (key !== 'include') extend(key, []);
  return ctx;
}

/** Replaces every `!reference [a, b, ...]` by a copy of config[a][b]... (references inside it resolved too). */
export function resolveReferences(config: Record<string, unknown>): Record<string, unknown> {
  const lookup = (tag: ReferenceTag, chain: string[]): unknown => {
    const shown = `!reference [${tag.path.map((p) => JSON.stringify(p)).join(', ')}]`;
    const id = tag.path.join('\u0000');
    if (chain.includes(id)) throw new ConfigError(`${shown} is part of a circular chain`);
    if (chain.length >= MAX_REFERENCE_NESTING) throw new ConfigError(`${shown} is nested too deep`);
    let node: unknown = config;
    for (const key of tag.path) {
      if (isPlainObject(node) && Object.hasOwn(node, key)) node = node[key];
      else throw new ConfigError(`${shown} could not be found`);
    }
    return walk(node, [...chain, id]);
  };
  const walk = (node: unknown, chain: string[]): unknown => {
    if (node instanceof ReferenceTag) return lookup(node, chain);
    if (Array.isArray(node)) return node.map((x) => walk(x, chain));
    if (isPlainObject(node)) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(node)) out[k] = walk(v, chain);
      return out;
    }
    return node;
  };
  return walk(config, []) as Record<string, unknown>;
}
