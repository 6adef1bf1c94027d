import crypto from 'node:crypto';
import type { Cairn } from '../context.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import type { ParsedCommit } from '../git/catfile.js';
import { blame, lastCommitForPath, pathEntry, type BlameRange } from '../git/commits.js';
import { readCommits, resolveCommit } from '../git/refs.js';
import { apiError, badRequest, notFound } from '../plugins/errors.js';
import type { RepositoryFile } from '../presenters/commits.js';
import { projectRepoPath } from './projects.js';

/**
 * The repository files API's reads: a blob at a path of a ref with its last commit, and blame.
 * Writes go through services/commits.ts createCommit with a single action.
 */

/** GitLab's file_path validator: no traversal, not absolute, nothing git could misread. */
export function validFilePath(p: string): boolean {
  if (!p || p.startsWith('/') || p.startsWith('-') || /[\x00-\x1f\x7f]/.test(p)) return false;
  return !p.split('/').some((s) => s === '..');
}

export async function readFile(cairn: Cairn, project: ProjectWithNamespace, ref: string, path: string): Promise<RepositoryFile> {
  const gitDir = projectRepoPath(cairn, project);
  const commit = await resolveCommit(cairn.catfile, gitDir, ref);
  if (!commit) throw notFound('Commit');
  const entry = await pathEntry(cairn.catfile, gitDir, commit.oid, path);
  if (!entry || entry.type !== 'blob') throw notFound('File');
  const [blob, last] = await Promise.all([cairn.catfile.read(gitDir, entry.oid), lastCommitForPath(gitDir, commit.oid, path)]);
  if (!blob) throw notFound('File');
  return {
    path,
    size: blob.size,
    content: blob.data,
    ref,
    blobId: entry.oid,
    commitId: commit.oid,
    lastCommitId: last ?? commit.oid,
    mode: entry.mode,
    sha256: crypto.createHash('sha256').update(blob.data).digest('hex'),
  };
}

/** The file and its blame ranges with their commits (read once each through cat-file). */
export async function blameFile(
  cairn: Cairn,
  project: ProjectWithNamespace,
  ref: string,
  path: string,
  range?: { start: number; end: number },
): Promise<{ file: RepositoryFile; ranges: { range: BlameRange; commit: ParsedCommit }[] }> {
  const file = await readFile(cairn, project, ref, path);
  const gitDir = projectRepoPath(cairn, project);
  let lines = file.content.length ? file.content.toString('utf8').split('\n').length : 0;
  if (file.content.length && file.content[file.content.length - 1] === 10) lines--;
  if (range) {
    if (range.start < 1 || range.end < range.start) throw badRequest('range[start] must be less than or equal to range[end]');
    if (range.start > lines) throw apiError(400, 'range is outside of the file');
    range = { start: range.start, end: Math.min(range.end, lines) };
  }
  if (!lines) return { file, ranges: [] };
  const ranges = await blame(gitDir, file.commitId, path, range);
  const byOid = await readCommits(cairn.catfile, gitDir, ranges.map((r) => r.commit));
  return { file, ranges: ranges.map((r) => ({ range: r, commit: byOid.get(r.commit)! })) };
}
