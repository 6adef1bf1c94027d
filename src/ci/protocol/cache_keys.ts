// The `cache` entries of a job payload, keyed as GitLab keys them (Gitlab::Ci::Pipeline::Seed::
// Build::Cache, then Ci::Build#cache):
// - a string key is sent as written: the runner expands its variables ($CI_COMMIT_REF_SLUG), as
//   gitlab-runner does;
// - `key: {files: [...]}`: the SHA-1 of the files' blob ids at the job's commit (sorted, unique,
//   joined by `-`; patterns with `*` are matched against the commit's files), `default` when none
//   of them exists; `key: {files_commits: [...]}`: the same over the last commits that changed
//   each file. Prefixed by `prefix`, or else by the entry's position in the job's cache list;
// - then `-<jobs_cache_index>` once the project's runner caches were cleared, and `-protected`
//   or `-non_protected` when the project keeps protected refs' caches apart (the
//   ci_separated_caches setting, on by default; `unprotect: true` shares a protected ref's cache
//   with unprotected ones). Fallback keys get the same suffixes.
import crypto from 'node:crypto';
import type { CatFilePool } from '../../git/catfile.js';
import { lastCommitForPath, pathEntry } from '../../git/commits.js';
import { listTree } from '../../git/refs.js';
import { matchGlob } from '../config/glob.js';
import type { CacheKeyFiles, CompiledCache } from '../config/types.js';

export interface PayloadCache {
  key: string;
  untracked: boolean;
  policy: string;
  paths: string[];
  when: string;
  unprotect: boolean;
  fallback_keys: string[];
}

export interface CacheKeyContext {
  pool: CatFilePool;
  gitDir: string;
  /** The job's commit. */
  sha: string;
  /** The job runs for a protected ref. */
  protectedRef: boolean;
  /** The project's jobs_cache_index (null until its runner caches are first cleared). */
  cacheIndex: number | null;
  /** The project's ci_separated_caches setting. */
  separated: boolean;
}

function digest(ids: Array<string | null>): string | null {
  const list = [...new Set(ids.filter((x): x is string => !!x))].sort();
  return list.length ? crypto.createHash('sha1').update(list.join('-')).digest('hex') : null;
}

/** The files a `key:files` list names at the commit: plain paths as they are, `*` patterns matched against its files. */
async function expandFiles(c: CacheKeyContext, patterns: string[]): Promise<string[]> {
  let all: string[] | null = null;
  const out: string[] = [];
  for (const p of patterns) {
    if (!p.includes('*')) {
      out.push(p);
      continue;
    }
    all ??= ((await listTree(c.pool, c.gitDir, c.sha, '', true)) ?? []).filter((e) => e.type === 'blob').map((e) => e.path);
    for (const f of all) if (matchGlob(p, f)) out.push(f);
  }
  return [...new Set(out)];
}

async function filesDigest(c: CacheKeyContext, key: CacheKeyFiles): Promise<string> {
  if (key.files) {
    const paths = await expandFiles(c, key.files.filter(Boolean));
    const ids = await Promise.all(paths.map(async (p) => {
      const entry = await pathEntry(c.pool, c.gitDir, c.sha, p);
      return entry && entry.type === 'blob' ? entry.oid : null;
    }));
    return digest(ids) ?? 'default';
  }
  if (key.filesCommits) {
    const paths = [...new Set(key.filesCommits.filter(Boolean))];
    const ids = await Promise.all(paths.map((p) => lastCommitForPath(c.gitDir, c.sha, p).catch(() => null)));
    return digest(ids) ?? 'default';
  }
  return 'default';
}

/** The key of cache entry `index` before the project's suffixes. */
export async function baseCacheKey(c: CacheKeyContext, key: CompiledCache['key'], index: number): Promise<string> {
  if (typeof key === 'string') return key;
  const prefix = key.prefix ?? String(index);
  return [prefix, await filesDigest(c, key)].filter((s) => s !== '').join('-');
}

/** The job's cache entries as the runner gets them. */
export async function payloadCaches(c: CacheKeyContext, caches: CompiledCache[]): Promise<PayloadCache[]> {
  const out: PayloadCache[] = [];
  for (const [i, entry] of caches.entries()) {
    const suffixes: string[] = [];
    if (c.cacheIndex !== null) suffixes.push(String(c.cacheIndex));
    if (c.separated) suffixes.push(!entry.unprotect && c.protectedRef ? 'protected' : 'non_protected');
    const withSuffixes = (k: string) => [k, ...suffixes].join('-');
    out.push({
      key: withSuffixes(await baseCacheKey(c, entry.key, i)),
      untracked: !!entry.untracked,
      policy: entry.policy ?? 'pull-push',
      paths: entry.paths ?? [],
      when: entry.when ?? 'on_success',
      unprotect: !!entry.unprotect,
      fallback_keys: (entry.fallbackKeys ?? []).map(withSuffixes),
    });
  }
  return out;
}
