import { resolveCommit } from './refs.js';
import { EMPTY_TREE_OID as EMPTY_TREE, isOid } from './validate.js';
import { assertSafeArg, git, gitText } from './command.js';
import type { CatFilePool } from './catfile.js';
import { commitTree, compareAndSwapRef, mergeTrees, type Identity } from './write.js';

/**
 * The git side of merge requests: can a source merge into a target, the merge (or squash) commit,
 * a rebase replayed commit by commit, and the compare-and-swap that publishes it. Nothing here
 * moves a branch except `publish`, whose update-ref is conditional on the old value, so two
 * processes merging one merge request produce exactly one merge.
 */

export type MergeCheck =
  | { status: 'clean'; tree: string }
  /** `paths`: the files with conflicts (as merge-tree lists them). */
  | { status: 'conflict'; paths: string[] };

/** Merges `sourceOid` into `targetOid` in memory (merge-tree --write-tree); writes objects, moves nothing. */
export async function checkMerge(gitDir: string, targetOid: string, sourceOid: string): Promise<MergeCheck> {
  const res = await git(['merge-tree', '--write-tree', '--name-only', '--no-messages', assertSafeArg(targetOid, 'target'), assertSafeArg(sourceOid, 'source')], {
    gitDir,
    okCodes: [1],
  });
  const lines = res.stdout.toString().split('\n').filter(Boolean);
  const tree = lines[0]?.trim() ?? '';
  if (res.exitCode === 1) return { status: 'conflict', paths: [...new Set(lines.slice(1))] };
  if (!isOid(tree)) throw new Error(`merge-tree printed ${tree}`);
  return { status: 'clean', tree };
}

/** The best common ancestor of two commits, or null when they share no history. */
export async function mergeBaseOf(gitDir: string, a: string, b: string): Promise<string | null> {
  const res = await git(['merge-base', assertSafeArg(a, 'commit'), assertSafeArg(b, 'commit')], { gitDir, okCodes: [1] });
  const oid = res.stdout.toString().trim();
  return res.exitCode === 0 && isOid(oid) ? oid : null;
}

/** Commits only in `target` and commits only in `source` (GitLab's diverged_commits_count is the first). */
export async function divergence(gitDir: string, targetOid: string, sourceOid: string): Promise<{ behind: number; ahead: number }> {
  const out = await gitText(['rev-list', '--left-right', '--count', `${assertSafeArg(targetOid, 'target')}...${assertSafeArg(sourceOid, 'source')}`], { gitDir });
  const [behind, ahead] = out.trim().split(/\s+/).map(Number);
  return { behind: behind || 0, ahead: ahead || 0 };
}

/** How many paths differ between two commits (a merge request's changes_count). */
export async function changedPathCount(gitDir: string, from: string, to: string): Promise<number> {
  const res = await git(['diff', '--name-only', '-z', '--no-renames', assertSafeArg(from, 'commit'), assertSafeArg(to, 'commit'), '--'], { gitDir, okCodes: [128] });
  if (res.exitCode !== 0) return 0;
  return res.stdout.toString().split('\0').filter(Boolean).length;
}

/** Is `ancestor` reachable from `descendant` (so a fast-forward from one to the other is possible)? */
export async function isAncestor(gitDir: string, ancestor: string, descendant: string): Promise<boolean> {
  const res = await git(['merge-base', '--is-ancestor', assertSafeArg(ancestor, 'commit'), assertSafeArg(descendant, 'commit')], { gitDir, okCodes: [1] });
  return res.exitCode === 0;
}

export interface MergeInput {
  targetOid: string;
  sourceOid: string;
  /** Message of the merge commit; null for a fast-forward (no merge commit). */
  mergeMessage: string | null;
  /** Squash the source's commits into one on top of the merge base first. */
  squash?: { message: string; author: Identity } | null;
  committer: Identity;
}

export type MergeOutcome =
  | { status: 'merged'; head: string; mergeCommit: string | null; squashCommit: string | null }
  | { status: 'conflict'; paths: string[] }
  /** Nothing to merge: the source adds nothing to the target. */
  | { status: 'empty' };

/**
 * The commit the target branch would move to. With `squash`, the source's changes become one
 * commit whose parent is the merge base; with `mergeMessage` null the result is the source (or
 * the squash commit) itself, which the caller may only use when it fast-forwards the target.
 */
export async function buildMerge(gitDir: string, input: MergeInput): Promise<MergeOutcome> {
  const { targetOid, committer } = input;
  if (await isAncestor(gitDir, input.sourceOid, targetOid)) return { status: 'empty' };
  let sourceOid = input.sourceOid;
  let squashCommit: string | null = null;
  if (input.squash) {
    const base = await mergeBaseOf(gitDir, targetOid, sourceOid);
    const sourceTree = (await gitText(['rev-parse', `${sourceOid}^{tree}`], { gitDir })).trim();
    squashCommit = await commitTree(gitDir, sourceTree, base ? [base] : [], input.squash.message, input.squash.author, committer);
    sourceOid = squashCommit;
  }
  if (input.mergeMessage === null) return { status: 'merged', head: sourceOid, mergeCommit: null, squashCommit };
  const check = await checkMerge(gitDir, targetOid, sourceOid);
  if (check.status === 'conflict') return check;
  const mergeCommit = await commitTree(gitDir, check.tree, [targetOid, sourceOid], input.mergeMessage, committer, committer);
  return { status: 'merged', head: mergeCommit, mergeCommit, squashCommit };
}

/** Moves `ref` from `oldOid` to `newOid` only if nobody moved it meanwhile; false when someone did. */
export function publish(gitDir: string, ref: string, newOid: string, oldOid: string): Promise<boolean> {
  return compareAndSwapRef(gitDir, ref, newOid, oldOid);
}

export type RebaseOutcome = { status: 'rebased'; head: string } | { status: 'conflict'; commit: string } | { status: 'up_to_date' };

/**
 * Replays the source's own commits (merge base..source, merges skipped as `git rebase` does) on
 * top of `ontoOid`, keeping each author and setting `committer`. Builds commits only; the caller
 * publishes the new head with a compare-and-swap on the source branch.
 */
export async function rebaseOnto(pool: CatFilePool, gitDir: string, ontoOid: string, sourceOid: string, committer: Identity): Promise<RebaseOutcome> {
  if (await isAncestor(gitDir, ontoOid, sourceOid)) return { status: 'up_to_date' };
  const list = await gitText(['rev-list', '--reverse', '--no-merges', '--topo-order', `${assertSafeArg(ontoOid, 'onto')}..${assertSafeArg(sourceOid, 'source')}`], { gitDir });
  let head = ontoOid;
  let headTree = (await gitText(['rev-parse', `${ontoOid}^{tree}`], { gitDir })).trim();
  for (const oid of list.split('\n').filter(Boolean)) {
    const commit = await resolveCommit(pool, gitDir, oid);
    if (!commit) throw new Error(`commit ${oid} vanished during a rebase`);
    const parentTree = commit.parents[0]
      ? (await gitText(['rev-parse', `${commit.parents[0]}^{tree}`], { gitDir })).trim()
      : EMPTY_TREE;
    const picked = await mergeTrees(gitDir, parentTree, headTree, commit.tree);
    if (picked.status === 'conflict') return { status: 'conflict', commit: oid };
    // A commit whose change is already upstream is dropped, as `git rebase` drops it.
    if (picked.status === 'empty') continue;
    const author: Identity = { name: commit.author.name, email: commit.author.email, time: commit.author.time, tz: commit.author.tz };
    head = await commitTree(gitDir, picked.tree!, [head], commit.message, author, committer);
    headTree = picked.tree!;
  }
  return { status: 'rebased', head };
}
