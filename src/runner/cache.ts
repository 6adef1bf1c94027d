// `cache:` of a job, as gitlab-runner does it (shells/abstract.go's cache extractor and archiver),
// with Cairn's server as the shared cache storage (GET / PUT /api/v4/jobs/:id/cache?key=, the
// job's token): restoreCaches() after the sources and before the dependencies' artifacts,
// archiveCaches() after after_script and before the artifacts upload.
//
// For each entry of the job's `cache`: nothing without `paths` or `untracked`; the key is
// expanded with the job's variables and normalised as gitlab-runner's cachekey.Sanitize does; the
// policy (`pull`, `push`, `pull-push`, or a variable naming one) says whether to restore and
// whether to save; `when` (on_success, on_failure, always) whether this job's outcome saves it.
// A restore tries the key, then `fallback_keys`, then CACHE_FALLBACK_KEY (refused when it ends
// in `-protected`, as gitlab-runner refuses it); a miss or a broken archive is a warning and the
// next key is tried. A save collects `paths` (globs, as artifacts) and the untracked files, zips
// them and uploads the archive; a failure is a warning. The archives are extracted and written by
// the artifact code (artifact_sandbox.ts): inside the job's sandbox as the job's user, never
// following a link the job made.
import fs from 'node:fs';
import path from 'node:path';
import { archiveArtifacts, extractArtifacts, type ArtifactWorkOptions } from './artifact_sandbox.js';
import { createOutput } from './artifacts.js';
import type { RunnerClient } from './client.js';
import type { JobPayload, JobVariable } from './types.js';

export interface CacheEntry {
  key?: string;
  untracked?: boolean;
  policy?: string;
  paths?: string[];
  when?: string;
  fallback_keys?: string[];
}

export interface CacheWork {
  client: RunnerClient;
  job: JobPayload;
  /** The job's variables, expanded (script.ts expandVariables). */
  vars: Map<string, JobVariable>;
  buildDir: string;
  /** The runner's own directory of the job (archives are written there, never in build/). */
  tmpDir: string;
  /** Appends to the job's log. */
  write: (text: string) => void;
  /** Where and how archives are extracted and written (the job's sandbox, limits, timeout). */
  work: () => ArtifactWorkOptions;
  interrupted: () => boolean;
}

/** A cache entry's policy names neither pull, push nor pull-push: the job fails, as with gitlab-runner. */
export class CachePolicyError extends Error {}

const color = {
  section: (s: string) => `\x1b[32;1m${s}\x1b[0;m\n`,
  notice: (s: string) => `\x1b[32;1m${s}\x1b[0;m\n`,
  info: (s: string) => `${s}\n`,
  warn: (s: string) => `\x1b[0;33mWARNING: ${s}\x1b[0;m\n`,
};

/** $NAME and ${NAME} replaced by the job's variables (unknown ones by nothing), as gitlab-runner's ExpandValue. */
export function expandValue(text: string, vars: Map<string, JobVariable>): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, a?: string, b?: string) => (m === '$$' ? '$' : (vars.get((a ?? b)!)?.value ?? '')));
}

/**
 * gitlab-runner's cache key normalisation: `%2f` and `%2e` decoded, `\` made `/`, `.` and `..`
 * resolved inside a virtual root (a key cannot climb), trailing whitespace of the last segments
 * dropped. null: nothing is left.
 */
export function sanitizeCacheKey(raw: string): string | null {
  if (raw === '') return null;
  const decoded = raw.replace(/%2[fF]/g, '/').replace(/%2[eE]/g, '.').replace(/\\/g, '/');
  const parts: string[] = [];
  for (const seg of decoded.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  while (parts.length) {
    const last = parts[parts.length - 1].replace(/\s+$/u, '');
    if (last) {
      parts[parts.length - 1] = last;
      break;
    }
    parts.pop();
  }
  return parts.length ? parts.join('/') : null;
}

/** The key a cache entry names for this job, or null (with why) when it names none. */
function resolveKey(c: CacheWork, raw: string | undefined): { key: string | null; warning: string | null } {
  // gitlab-runner's default when the server sends no key: <job name>/<ref>.
  const name = c.job.job_info?.name ?? '';
  const userKey = raw ? expandValue(raw, c.vars) : [name, c.job.git_info?.ref ?? ''].filter(Boolean).join('/');
  const key = sanitizeCacheKey(userKey);
  if (key === null) return { key: null, warning: `cache key "${userKey}" could not be sanitized` };
  return { key, warning: key !== userKey ? `cache key "${userKey}" sanitized to "${key}"` : null };
}

type Policy = 'pull' | 'push' | 'pull-push';

function policyOf(c: CacheWork, entry: CacheEntry, key: string): Policy {
  const p = expandValue(entry.policy || 'pull-push', c.vars);
  if (p === 'pull' || p === 'push' || p === 'pull-push') return p;
  throw new CachePolicyError(`unknown cache policy "${p}" for ${key}`);
}

const hasContent = (e: CacheEntry) => (e.paths?.length ?? 0) > 0 || !!e.untracked;

let archiveSeq = 0;
const archivePath = (c: CacheWork, what: string) => path.join(c.tmpDir, `cache-${what}-${++archiveSeq}.zip`);

/**
 * Restores the job's caches into its build directory. Throws CachePolicyError for a policy that
 * is none; everything else (a miss, a download or extraction failure) is a warning in the log.
 */
export async function restoreCaches(c: CacheWork): Promise<void> {
  const entries = ((c.job.cache ?? []) as CacheEntry[]).filter((e) => e && typeof e === 'object' && hasContent(e));
  if (!entries.length) return;
  c.write(color.section('Restoring cache'));
  for (const entry of entries) {
    if (c.interrupted()) return;
    const first = resolveKey(c, entry.key);
    if (first.warning) c.write(color.warn(first.warning));
    if (first.key === null) {
      c.write(color.notice('Skipping cache extraction due to empty cache key'));
      continue;
    }
    const policy = policyOf(c, entry, first.key);
    if (policy === 'push') {
      c.write(color.notice(`Not downloading cache ${first.key} due to policy`));
      continue;
    }
    const keys = [first.key];
    for (const fb of entry.fallback_keys ?? []) {
      if (typeof fb !== 'string' || !fb) continue;
      const k = resolveKey(c, expandValue(fb, c.vars));
      if (k.warning) c.write(color.warn(k.warning));
      if (k.key !== null) keys.push(k.key);
    }
    const globalFallback = c.vars.get('CACHE_FALLBACK_KEY')?.value;
    if (globalFallback) {
      const k = resolveKey(c, globalFallback);
      if (k.warning) c.write(color.warn(k.warning));
      if (k.key !== null && /-protected$/.test(k.key.replace(/[. ]+$/, ''))) {
        c.write(color.warn(`CACHE_FALLBACK_KEY "${globalFallback}" not allowed to end in "-protected"`));
      } else if (k.key !== null) keys.push(k.key);
    }
    for (const key of keys) {
      if (c.interrupted()) return;
      if (await restoreOne(c, key)) break;
    }
  }
}

/** Downloads and extracts the archive of one key: true when it was there and extracted. */
async function restoreOne(c: CacheWork, key: string): Promise<boolean> {
  c.write(color.notice(`Checking cache for ${key}...`));
  const file = archivePath(c, 'restore');
  try {
    const fd = createOutput(file);
    let found: boolean;
    try {
      found = await c.client.downloadCache(c.job.id, c.job.token, key, fd);
    } finally {
      fs.closeSync(fd);
    }
    if (!found) {
      c.write(color.warn(`file does not exist: no cache for ${key} yet`));
      c.write(color.warn('Failed to extract cache'));
      return false;
    }
    c.write(color.info(`Downloading cache.zip from ${c.client.baseUrl} (${formatSize(fs.statSync(file).size)})`));
    const r = await extractArtifacts(file, c.buildDir, c.work());
    if (c.interrupted()) return false;
    for (const w of r.warnings) c.write(color.warn(w));
    c.write(color.notice(`Successfully extracted cache (${r.count} entries)`));
    return true;
  } catch (err) {
    if (c.interrupted()) return false;
    c.write(color.warn(`${(err as Error).message}`));
    c.write(color.warn('Failed to extract cache'));
    return false;
  } finally {
    fs.rmSync(file, { force: true });
  }
}

/**
 * Saves the job's caches whose `when` matches the job's outcome (`succeeded`) and whose policy
 * pushes. Throws CachePolicyError for a policy that is none; a failure to archive or upload is a
 * warning in the log.
 */
export async function archiveCaches(c: CacheWork, succeeded: boolean): Promise<void> {
  const entries = ((c.job.cache ?? []) as CacheEntry[]).filter((e) => {
    if (!e || typeof e !== 'object' || !hasContent(e)) return false;
    const when = e.when || 'on_success';
    return when === 'always' || (when === 'on_failure' ? !succeeded : succeeded);
  });
  if (!entries.length) return;
  c.write(color.section(succeeded ? 'Saving cache for successful job' : 'Saving cache for failed job'));
  for (const entry of entries) {
    if (c.interrupted()) return;
    const k = resolveKey(c, entry.key);
    if (k.warning) c.write(color.warn(k.warning));
    if (k.key === null) {
      c.write(color.notice('Skipping cache archiving due to empty cache key'));
      continue;
    }
    const policy = policyOf(c, entry, k.key);
    if (policy === 'pull') {
      c.write(color.notice(`Not uploading cache ${k.key} due to policy`));
      continue;
    }
    await archiveOne(c, entry, k.key);
  }
}

async function archiveOne(c: CacheWork, entry: CacheEntry, key: string): Promise<void> {
  c.write(color.notice(`Creating cache ${key}...`));
  const file = archivePath(c, 'save');
  try {
    const paths = (entry.paths ?? []).filter((p): p is string => typeof p === 'string');
    const r = await archiveArtifacts(c.buildDir, { paths, exclude: [], format: 'zip', untracked: !!entry.untracked }, file, c.work());
    if (c.interrupted()) return;
    for (const w of r.warnings) c.write(color.warn(w));
    if (!r.count) {
      c.write(color.warn('No files to cache.'));
      return;
    }
    const size = fs.statSync(file).size;
    c.write(color.info(`${r.count} files and links archived (${formatSize(size)})`));
    c.write(color.info(`Uploading cache.zip to ${c.client.baseUrl}`));
    await c.client.uploadCache(c.job.id, c.job.token, key, file);
    c.write(color.notice('Created cache'));
  } catch (err) {
    if (c.interrupted()) return;
    c.write(color.warn(`${(err as Error).message}`));
    c.write(color.warn('Failed to create cache'));
  } finally {
    fs.rmSync(file, { force: true });
  }
}

function formatSize(n: number): string {
  return n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(2)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(2)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} bytes`;
}
