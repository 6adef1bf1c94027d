import type { ParsedCommit } from '../git/catfile.js';
import type { AuthorCount, DiffEntry } from '../git/compare.js';
import type { PathEntry } from '../git/refs.js';
import { presentCommit, type CommitContext } from './commits.js';

export function presentTreeEntry(e: PathEntry) {
  return { id: e.oid, name: e.name, type: e.type, path: e.path, mode: e.mode };
}

export function presentBlob(blob: { oid: string; size: number; data: Buffer }) {
  return { size: blob.size, encoding: 'base64', content: blob.data.toString('base64'), sha: blob.oid };
}

export function presentContributor(c: AuthorCount) {
  return { name: c.name, email: c.email, commits: c.commits, additions: 0, deletions: 0 };
}

export function presentDiff(d: DiffEntry) {
  return {
    diff: d.diff,
    collapsed: d.collapsed,
    too_large: d.too_large,
    new_path: d.new_path,
    old_path: d.old_path,
    a_mode: d.a_mode,
    b_mode: d.b_mode,
    new_file: d.new_file,
    renamed_file: d.renamed_file,
    deleted_file: d.deleted_file,
    generated_file: false,
  };
}

export interface Comparison {
  commits: ParsedCommit[];
  diffs: DiffEntry[];
  overflow: boolean;
  sameRef: boolean;
  from: string;
  to: string;
  straight: boolean;
}

export function presentComparison(c: Comparison, ctx: CommitContext) {
  const commits = c.commits.map((x) => presentCommit(ctx, x));
  return {
    commit: commits.length ? commits[commits.length - 1] : null,
    commits,
    diffs: c.diffs.map(presentDiff),
    compare_timeout: c.overflow,
    compare_same_ref: c.sameRef,
    web_url: `${ctx.baseUrl}/${ctx.projectFullPath}/-/compare/${encodeURIComponent(c.from)}${c.straight ? '..' : '...'}${encodeURIComponent(c.to)}`,
  };
}
