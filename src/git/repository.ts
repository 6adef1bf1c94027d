import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { git } from './command.js';

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
  await git(['config', 'http.receivepack', 'true'], { gitDir: dir });
  await git(['config', 'uploadpack.allowAnySHA1InWant', 'true'], { gitDir: dir });
  await git(['config', 'core.logAllRefUpdates', 'false'], { gitDir: dir });
}

export async function removeRepository(dir: string): Promise<void> {
  await fs.rm(dir, { recursive: true, force: true });
}

export type HousekeepingTask = 'incremental' | 'eager' | 'prune';

/**
 * Keeps a repository fast to read: packed refs and a commit-graph (which makes history walks
 * and `rev-list --count` cheap); `eager` also repacks everything, `prune` drops unreachable
 * objects older than two weeks.
 */
export async function runHousekeeping(dir: string, task: HousekeepingTask = 'incremental'): Promise<void> {
  const opts = { gitDir: dir, timeoutMs: 30 * 60_000 };
  if (task === 'eager') await git(['repack', '-a', '-d', '-q', '--write-bitmap-index'], opts);
  if (task === 'prune') await git(['prune', '--expire=2.weeks.ago'], opts);
  await git(['pack-refs', '--all'], opts);
  await git(['commit-graph', 'write', '--reachable', '--split', '--size-multiple=4'], opts);
}
