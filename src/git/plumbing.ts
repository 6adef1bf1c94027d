import { parseTree, type CatFilePool } from './catfile.js';
import { assertSafeArg, git, gitText } from './command.js';
import { ZERO_OID } from './validate.js';

export interface Signature {
  name: string;
  email: string;
  /** Defaults to now. */
  date?: Date;
}

export interface NewFile {
  path: string;
  content: string | Buffer;
}

/**
 * Writes a root commit holding `files` (top-level files only) and creates `branch` on it,
 * compare-and-swap against "branch does not exist". Plumbing only: no work tree, no index.
 * Author and committer come from a fixed environment, never from git configuration.
 */
export async function createRootCommit(
  gitDir: string,
  opts: { branch: string; files: NewFile[]; message: string; author: Signature },
): Promise<string> {
  assertSafeArg(opts.branch, 'branch');
  const entries: string[] = [];
  for (const file of opts.files) {
    if (!/^[^/\x00]+$/.test(file.path)) throw new Error(`not a top-level file name: ${file.path}`);
    const oid = (await gitText(['hash-object', '-w', '--stdin'], { gitDir, input: file.content })).trim();
    entries.push(`100644 blob ${oid}\t${file.path}`);
  }
  const tree = (await gitText(['mktree'], { gitDir, input: entries.sort().join('\n') + (entries.length ? '\n' : '') })).trim();
  const when = `${Math.floor((opts.author.date ?? new Date()).getTime() / 1000)} +0000`;
  const env = {
    GIT_AUTHOR_NAME: opts.author.name,
    GIT_AUTHOR_EMAIL: opts.author.email,
    GIT_AUTHOR_DATE: when,
    GIT_COMMITTER_NAME: opts.author.name,
    GIT_COMMITTER_EMAIL: opts.author.email,
    GIT_COMMITTER_DATE: when,
  };
  const commit = (await gitText(['commit-tree', tree], { gitDir, env, input: opts.message.endsWith('\n') ? opts.message : opts.message + '\n' })).trim();
  await git(['update-ref', `refs/heads/${opts.branch}`, commit, ZERO_OID], { gitDir });
  return commit;
}

/** Does the repository have any branch or tag? */
export async function hasRefs(gitDir: string): Promise<boolean> {
  const out = await gitText(['for-each-ref', '--count=1', '--format=%(refname)', 'refs/heads', 'refs/tags'], { gitDir });
  return out.trim() !== '';
}

const README_RE = /^readme(\.[a-z0-9]+)?$/i;

/** The README file at the root of `branch`, as GitLab picks it (README.md preferred), or null. */
export async function rootReadme(catfile: CatFilePool, gitDir: string, branch: string): Promise<string | null> {
  assertSafeArg(branch, 'branch');
  // Lists read a README per project: through a long-lived cat-file process only when the
  // repository has one already.
  const tree = await catfile.readOnce(gitDir, `refs/heads/${branch}^{tree}`);
  if (!tree || tree.type !== 'tree') return null;
  const names = parseTree(tree.data).filter((e) => e.type === 'blob' && README_RE.test(e.name)).map((e) => e.name);
  if (names.length === 0) return null;
  const rank = (n: string) => (/\.(md|markdown|mdown|mkd)$/i.test(n) ? 0 : /\.(adoc|rst|org|txt)$/i.test(n) ? 1 : n.includes('.') ? 2 : 1);
  return names.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))[0];
}
