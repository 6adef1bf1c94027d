import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { assertSafeArg, git } from './command.js';

/**
 * Where a repository lives inside its storage. Hashed by id (as GitLab does), so renames and
 * transfers never move a repository on disk.
 */
export function hashedDiskPath(kind: 'project' | 'wiki' | 'snippet' | 'group', id: number): string {
  const hash = crypto.createHash('sha256').update(`${kind}:${id}`).digest('hex');
  const suffix = kind === 'wiki' ? '.wiki' : '';
  return `@hashed/${hash.slice(0, 2)}/${hash.slice(2, 4)}/${hash}${suffix}.git`;
}

export function repositoryPath(storageRoot: string, diskPath: string): string {
  const full = path.resolve(storageRoot, diskPath);
  if (!full.startsWith(path.resolve(storageRoot) + path.sep)) throw new Error('repository path escapes its storage');
  return full;
}

/** Creates an empty bare repository whose HEAD points at `defaultBranch`. Idempotent. */
export async function initBareRepository(dir: string, defaultBranch = 'main'): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  await git(['init', '--bare', '--quiet', `--initial-branch=${defaultBranch}`, dir], { cwd: dir });
  await configureRepository(dir);
}

/** The configuration every repository Cairn serves has (pushes over HTTP, fetches by SHA between repositories). */
async function configureRepository(dir: string): Promise<void> {
  await git(['config', 'http.receivepack', 'true'], { gitDir: dir });
  await git(['config', 'uploadpack.allowAnySHA1InWant', 'true'], { gitDir: dir });
  await git(['config', 'core.logAllRefUpdates', 'false'], { gitDir: dir });
}

/**
 * A fork's repository: a bare clone of `sourceDir` into `dir` (which must not exist yet), with its
 * branches and tags (not merge request or other internal refs); `branch` limits it to that one
 * branch, without tags. `headBranch` becomes HEAD.
 *
 * Why a local clone and not alternates: git's local clone hardlinks the object files (or copies
 * them where the storage is another filesystem), and git never changes an object or pack file
 * in place, so the two repositories share nothing either can alter. Deleting, repacking or
 * pruning the source later cannot break the fork. Alternates would save the copy on a
 * cross-filesystem storage, but leave the fork reading the source's object directory forever: a
 * `git gc --prune` or a deletion of the source would corrupt it. The clone's remote is
 * removed, so nothing in the fork names the source's path.
 */
export async function cloneRepositoryForFork(sourceDir: string, dir: string, opts: { branch?: string; headBranch: string }): Promise<void> {
  const only = opts.branch !== undefined ? ['--single-branch', '--no-tags', '--branch', assertSafeArg(opts.branch, 'branch')] : [];
  await fs.mkdir(path.dirname(dir), { recursive: true });
  await git(['clone', '--bare', '--quiet', ...only, '--', sourceDir, dir], { cwd: path.dirname(dir), timeoutMs: 30 * 60_000 });
  await git(['config', '--remove-section', 'remote.origin'], { gitDir: dir, okCodes: [1, 3, 5, 128] });
  await configureRepository(dir);
  await git(['symbolic-ref', 'HEAD', `refs/heads/${assertSafeArg(opts.headBranch, 'branch')}`], { gitDir: dir });
}

/** Moves a repository prepared elsewhere on the same storage to its place (one rename: it is there whole or not at all). */
export async function moveRepository(from: string, to: string): Promise<void> {
  await fs.mkdir(path.dirname(to), { recursive: true });
  await fs.rename(from, to);
}

export async function removeRepository(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true });
}

/** Does a commit-graph file carry changed-path Bloom filters (its BIDX and BDAT chunks)? Null when unreadable. */
async function graphFileHasBloomFilters(file: string): Promise<boolean | null> {
  const handle = await fs.open(file, 'r').catch(() => null);
  if (!handle) return null;
  try {
    // Header: "CGPH", version, hash version, chunk count, base count; then 12-byte chunk entries.
    const header = Buffer.alloc(8);
    await handle.read(header, 0, 8, 0);
    if (header.toString('latin1', 0, 4) !== 'CGPH') return null;
    const chunks = header[6];
    const table = Buffer.alloc(12 * chunks);
    await handle.read(table, 0, table.length, 8);
    const ids = new Set<string>();
    for (let i = 0; i < chunks; i++) ids.add(table.toString('latin1', i * 12, i * 12 + 4));
    return ids.has('BIDX') && ids.has('BDAT');
  } finally {
    await handle.close();
  }
}

/**
 * Whether every layer of the repository's commit-graph has changed-path Bloom filters (they make
 * "last commit touching a path" walks skip commits without diffing trees); null when there is no
 * commit-graph.
 */
export async function commitGraphHasBloomFilters(dir: string): Promise<boolean | null> {
  const info = path.join(dir, 'objects', 'info');
  const files: string[] = [];
  const single = path.join(info, 'commit-graph');
  if (await fs.stat(single).catch(() => null)) files.push(single);
  const chain = await fs.readFile(path.join(info, 'commit-graphs', 'commit-graph-chain'), 'latin1').catch(() => '');
  for (const hash of chain.split('\n')) if (/^[0-9a-f]{40,64}$/.test(hash)) files.push(path.join(info, 'commit-graphs', `graph-${hash}.graph`));
  if (!files.length) return null;
  for (const file of files) if (!(await graphFileHasBloomFilters(file))) return false;
  return true;
}

/** Does `dir` hold a git repository (a bare one's HEAD and objects)? */
export async function repositoryExists(dir: string): Promise<boolean> {
  try {
    await fs.access(path.join(dir, 'HEAD'));
    return (await fs.stat(path.join(dir, 'objects'))).isDirectory();
  } catch {
    return false;
  }
}

/** Every ref with the object it points to, and where HEAD points: what two copies of a repository must agree on. */
export async function refsFingerprint(dir: string): Promise<{ refs: string; head: string }> {
  const refs = (await git(['for-each-ref', '--format=%(objectname) %(refname)'], { gitDir: dir, timeoutMs: 10 * 60_000 })).stdout.toString('utf8');
  const head = (await git(['symbolic-ref', '-q', 'HEAD'], { gitDir: dir, okCodes: [1] })).stdout.toString('utf8').trim();
  return { refs, head };
}

/**
 * A copy of the repository at `sourceDir` in `dir` (which must not exist): every ref (a mirror,
 * so merge request, pipeline and keep-around refs come along), HEAD, and Cairn's configuration.
 * A local clone hardlinks or copies the object files; git never changes one in place, so the
 * copy shares nothing the source could later alter (see cloneRepositoryForFork).
 */
export async function copyRepository(sourceDir: string, dir: string): Promise<void> {
  await fs.mkdir(path.dirname(dir), { recursive: true });
  await git(['clone', '--mirror', '--quiet', '--', sourceDir, dir], { cwd: path.dirname(dir), timeoutMs: 60 * 60_000 });
  await git(['config', '--remove-section', 'remote.origin'], { gitDir: dir, okCodes: [1, 3, 5, 128] });
  await configureRepository(dir);
  const { head } = await refsFingerprint(sourceDir);
  if (head) await git(['symbolic-ref', 'HEAD', assertSafeArg(head, 'HEAD')], { gitDir: dir });
}

/** `git fsck` of the whole repository; throws with git's complaints when it is not clean. */
export async function checkRepository(dir: string): Promise<void> {
  await git(['fsck', '--no-progress', '--no-dangling', '--full'], { gitDir: dir, timeoutMs: 60 * 60_000 });
}
