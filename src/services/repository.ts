import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Cairn } from '../context.js';
import type { ParsedCommit } from '../git/catfile.js';
import type { ArchiveFormat } from '../git/archive.js';
import { authorCounts, compareCommits, type AuthorCount } from '../git/compare.js';
import { listTree, mergeBase, objectAtPath, readBlob, readCommit, resolveCommit, type BlobData, type PathEntry } from '../git/refs.js';
import { normalizeRepoPath } from '../git/validate.js';
import type { ProjectWithNamespace } from '../finders/projects.js';
import { projectFullPath } from '../finders/projects.js';
import { apiError, badRequest, notFound } from '../plugins/errors.js';
import type { Comparison } from '../presenters/repository.js';
import type { CommitContext } from '../presenters/commits.js';
import { projectRepoPath } from './projects.js';

/**
 * Reads of a project's repository for the repository API: trees, blobs, archives,
 * comparisons, contributors and merge bases. Object reads use the process's cat-file pool.
 */
export function linkContext(cairn: Cairn, project: ProjectWithNamespace): CommitContext {
  return { baseUrl: cairn.config.externalUrl, projectFullPath: projectFullPath(project) };
}

/** `ref` or the default branch, as a commit id; null when there is no such commit. */
async function resolveRefOrDefault(cairn: Cairn, project: ProjectWithNamespace, ref: string | undefined): Promise<string | null> {
  const name = ref === undefined || ref === '' ? (project.default_branch ?? 'HEAD') : ref;
  return (await resolveCommit(cairn.catfile, projectRepoPath(cairn, project), name))?.oid ?? null;
}

/** A caller-given repository path, or a 400. */
function checkedPath(value: string | undefined, param = 'path'): string {
  if (value === undefined) return '';
  const p = normalizeRepoPath(value);
  if (p === null) throw badRequest(`${param} is invalid`);
  return p;
}

export async function treeEntries(cairn: Cairn, project: ProjectWithNamespace, opts: { ref?: string; path?: string; recursive: boolean }): Promise<PathEntry[]> {
  const p = checkedPath(opts.path);
  const commit = await resolveRefOrDefault(cairn, project, opts.ref);
  if (!commit) throw notFound('Tree');
  const entries = await listTree(cairn.catfile, projectRepoPath(cairn, project), commit, p, opts.recursive);
  if (!entries) throw notFound('Tree');
  return entries;
}

/**
 * Keyset page of tree entries after `pageToken` (an entry id; when several entries share an
 * id the token carries its occurrence as `<id>:<n>`). Returns the page and the next token.
 */
export function keysetTreePage(entries: PathEntry[], perPage: number, pageToken: string | undefined): { page: PathEntry[]; next: string | null } {
  let start = 0;
  if (pageToken) {
    const [id, nth] = pageToken.split(':');
    let seen = 0;
    const wanted = nth ? Number(nth) : 0;
    const at = entries.findIndex((e) => e.oid === id && seen++ === wanted);
    if (at < 0) throw notFound('Tree');
    start = at + 1;
  }
  const page = entries.slice(start, start + perPage);
  if (start + perPage >= entries.length || !page.length) return { page, next: null };
  const last = page[page.length - 1];
  let occurrence = 0;
  for (let i = 0; i < start + page.length - 1; i++) if (entries[i].oid === last.oid) occurrence++;
  return { page, next: occurrence ? `${last.oid}:${occurrence}` : last.oid };
}

export async function blobById(cairn: Cairn, project: ProjectWithNamespace, sha: string): Promise<BlobData> {
  const blob = await readBlob(cairn.catfile, projectRepoPath(cairn, project), sha);
  if (!blob) throw notFound('Blob');
  return blob;
}

/** Text as git judges it: no NUL byte in the first 8000 bytes. */
export function isTextBlob(data: Buffer): boolean {
  return data.subarray(0, 8000).indexOf(0) < 0;
}

export interface Archive {
  stream: Readable;
  filename: string;
}

const ARCHIVE_EXTENSIONS: Record<ArchiveFormat, string> = { 'tar.gz': 'tar.gz', 'tar.bz2': 'tar.bz2', tar: 'tar', zip: 'zip' };

/**
 * A streamed archive named as GitLab names it: `<project>-<ref>-<sha>[-<path>]`, which is
 * also the directory inside the archive.
 */
export async function projectArchive(cairn: Cairn, project: ProjectWithNamespace, opts: { sha?: string; path?: string; format: ArchiveFormat }): Promise<Archive> {
  const ref = opts.sha || project.default_branch || 'HEAD';
  const archivePath = checkedPath(opts.path);
  const commit = (await resolveCommit(cairn.catfile, projectRepoPath(cairn, project), ref))?.oid;
  if (!commit) throw notFound('File');
  if (archivePath && !(await objectAtPath(cairn.catfile, projectRepoPath(cairn, project), commit, archivePath))) throw notFound('File');
  const segments = [project.path, ref.replace(/\//g, '-'), commit];
  if (archivePath) segments.push(archivePath.replace(/\//g, '-'));
  const prefix = segments.join('-');
  try {
    const stream = await cairn.archives.open(projectRepoPath(cairn, project), { commit, format: opts.format, prefix, path: archivePath || undefined });
    return { stream, filename: `${prefix}.${ARCHIVE_EXTENSIONS[opts.format]}` };
  } catch {
    throw notFound('File');
  }
}

export interface CompareOptions {
  from: string;
  to: string;
  straight: boolean;
  /** The project `from` lives in, when it is not this one (already authorized by the caller). */
  fromProject?: ProjectWithNamespace;
}

const COMPARE_TIMEOUT_MS = 30_000;
const COMPARE_MAX_COMMITS = 10_000;

export async function compare(cairn: Cairn, project: ProjectWithNamespace, opts: CompareOptions): Promise<Comparison> {
  const gitDir = projectRepoPath(cairn, project);
  const fromDir = opts.fromProject ? projectRepoPath(cairn, opts.fromProject) : gitDir;
  const toOid = (await resolveCommit(cairn.catfile, gitDir, opts.to))?.oid;
  const fromOid = (await resolveCommit(cairn.catfile, fromDir, opts.from))?.oid;
  if (!toOid || !fromOid) throw notFound('Ref');
  // Another project's objects are read through a read-only alternate, never copied in.
  const alternates = fromDir !== gitDir ? [path.join(fromDir, 'objects')] : undefined;
  const names = { from: opts.from, to: opts.to, straight: opts.straight };
  try {
    const result = await compareCommits(gitDir, fromOid, toOid, { alternates, timeoutMs: COMPARE_TIMEOUT_MS, straight: opts.straight, maxCommits: COMPARE_MAX_COMMITS });
    return { ...result, ...names };
  } catch (e) {
    if ((e as Error).message?.includes('killed by SIGKILL')) return { commits: [], diffs: [], overflow: true, sameRef: false, ...names };
    throw e;
  }
}

export async function contributors(cairn: Cairn, project: ProjectWithNamespace, ref: string | undefined): Promise<AuthorCount[]> {
  const commit = await resolveRefOrDefault(cairn, project, ref);
  if (!commit) return [];
  return authorCounts(projectRepoPath(cairn, project), commit);
}

export function sortContributors(list: AuthorCount[], orderBy: 'name' | 'email' | 'commits', sort: 'asc' | 'desc'): AuthorCount[] {
  const dir = sort === 'desc' ? -1 : 1;
  return [...list].sort((a, b) => {
    const x = a[orderBy];
    const y = b[orderBy];
    return (typeof x === 'number' ? x - (y as number) : String(x).localeCompare(String(y))) * dir;
  });
}

export async function mergeBaseOf(cairn: Cairn, project: ProjectWithNamespace, refs: string[]): Promise<ParsedCommit> {
  if (refs.length < 2) throw apiError(400, 'Provide at least 2 refs');
  const gitDir = projectRepoPath(cairn, project);
  const oids = await Promise.all(refs.map(async (r) => (await resolveCommit(cairn.catfile, gitDir, r))?.oid));
  const unknown = refs.filter((_r, i) => !oids[i]);
  if (unknown.length) throw apiError(400, `Could not find ${unknown.length === 1 ? 'ref' : 'refs'}: ${unknown.join(', ')}`);
  const base = await mergeBase(gitDir, oids as string[]);
  const commit = base ? await readCommit(cairn.catfile, gitDir, base) : null;
  if (!commit) throw notFound('Merge Base');
  return commit;
}
