import type { ParsedCommit } from '../git/catfile.js';
import { readRef, resolveCommit } from '../git/refs.js';
import { projectRepoPath } from '../services/projects.js';
import { pageNotFound, type PageContext, type ProjectPage } from './context.js';

export interface RefAndPath {
  /** The ref as the visitor named it (a branch, a tag or a commit id). */
  ref: string;
  /** The path inside the repository ('' for the root). */
  path: string;
  commit: ParsedCommit;
}

const SHA = /^[0-9a-f]{7,64}$/i;

/** The project's bare repository. */
export function gitDirOf(ctx: PageContext, page: ProjectPage): string {
  return projectRepoPath(ctx.cairn, page.project);
}

/**
 * Splits `<ref>/<path>` of a tree, blob, blame, raw or commits URL the way GitLab's
 * ExtractsRef does: refs may hold slashes (`feature/x/dir/file`), so the longest prefix that
 * names a branch, then a tag, wins; else the first segment as a commit id. 404 when none does.
 */
export async function splitRefAndPath(ctx: PageContext, page: ProjectPage, rest: string): Promise<RefAndPath> {
  const segments = rest.split('/').filter((s) => s !== '');
  if (!segments.length) throw pageNotFound();
  const gitDir = gitDirOf(ctx, page);
  const pool = ctx.cairn.catfile;
  for (let n = Math.min(segments.length, 32); n >= 1; n--) {
    const candidate = segments.slice(0, n).join('/');
    for (const prefix of ['refs/heads/', 'refs/tags/']) {
      if (!(await readRef(pool, gitDir, prefix + candidate).catch(() => null))) continue;
      const commit = await resolveCommit(pool, gitDir, prefix + candidate);
      if (commit) return { ref: candidate, path: segments.slice(n).join('/'), commit };
    }
  }
  if (SHA.test(segments[0])) {
    const commit = await resolveCommit(pool, gitDir, segments[0]);
    if (commit) return { ref: segments[0], path: segments.slice(1).join('/'), commit };
  }
  throw pageNotFound('No such branch, tag or commit.');
}
