import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { assertSafeArg, git, GitError, gitText } from './command.js';
import { treeEntries } from './commits.js';
import { isOid, ZERO_OID } from './validate.js';

/**
 * Building commits without a work tree: a temporary index (GIT_INDEX_FILE in a temp dir) is
 * loaded from the parent's tree, edited with `update-index --index-info`, written with
 * `write-tree` and committed with `commit-tree`. Refs move only by compare-and-swap.
 */

export type ActionKind = 'create' | 'update' | 'delete' | 'move' | 'chmod';

export interface TreeAction {
  action: ActionKind;
  path: string;
  previousPath?: string;
  /** New content; for move, null/undefined keeps the old blob. */
  content?: Buffer | null;
  /** chmod: the executable bit; create/update: set it when given. */
  executable?: boolean;
}

export interface Identity {
  name: string;
  email: string;
  /** Seconds since the epoch; now when absent. */
  time?: number;
  tz?: string;
}

/** An action that cannot apply to the tree; `message` is GitLab's wording. */
export class TreeActionError extends Error {}

/**
 * GitLab's path rules for written files: relative, no `..`/`.`/empty segments, no `.git`
 * directory, no control characters, nothing git could read as an option.
 */
export function checkWritablePath(p: string | undefined | null): string {
  if (p === undefined || p === null || p === '') throw new TreeActionError('You must provide a file path');
  if (p.split('/').some((s) => s === '..')) throw new TreeActionError('Path cannot include directory traversal');
  if (p.startsWith('/') || p.startsWith('-') || p.endsWith('/') || /[\x00-\x1f\x7f]/.test(p)) throw new TreeActionError('Invalid path');
  if (p.split('/').some((s) => s === '' || s === '.' || s.toLowerCase() === '.git')) throw new TreeActionError('Invalid path');
  if (Buffer.byteLength(p) > 4096) throw new TreeActionError('Invalid path');
  return p;
}

function ancestors(p: string): string[] {
  const parts = p.split('/');
  const out: string[] = [];
  for (let i = 1; i < parts.length; i++) out.push(parts.slice(0, i).join('/'));
  return out;
}

interface Entry {
  mode: string;
  oid: string;
}

/**
 * Applies actions to a tree in order and validates them the way Gitaly does (a file that
 * must exist, must not exist, or collides with a directory). Returns index lines to write.
 */
async function planActions(gitDir: string, baseTree: string | null, actions: TreeAction[], blobs: (string | null)[]) {
  const wanted = new Set<string>();
  for (const a of actions) {
    for (const p of [a.path, a.previousPath]) {
      if (!p) continue;
      wanted.add(p);
      for (const anc of ancestors(p)) wanted.add(anc);
    }
  }
  const base = baseTree ? await treeEntries(gitDir, baseTree, [...wanted]) : new Map();
  const overlay = new Map<string, Entry | null>();
  const fileAt = (p: string): Entry | null => {
    if (overlay.has(p)) return overlay.get(p)!;
    const e = base.get(p);
    return e && e.type === 'blob' ? { mode: e.mode, oid: e.oid } : e && e.type === 'commit' ? { mode: e.mode, oid: e.oid } : null;
  };
  const dirAt = (p: string): boolean => {
    if (overlay.get(p)) return false;
    if (base.get(p)?.type === 'tree' && !overlay.has(p)) return true;
    for (const [k, v] of overlay) if (v && k.startsWith(p + '/')) return true;
    return false;
  };
  const assertCreatable = (p: string) => {
    if (fileAt(p)) throw new TreeActionError('A file with this name already exists');
    if (dirAt(p)) throw new TreeActionError('A directory with this name already exists');
    for (const anc of ancestors(p)) if (fileAt(anc)) throw new TreeActionError('A file with this name already exists');
  };
  const existing = (p: string): Entry => {
    const e = fileAt(p);
    if (!e) throw new TreeActionError("A file with this name doesn't exist");
    return e;
  };
  const modeFor = (a: TreeAction, current: string | null) =>
    a.executable === true ? '100755' : a.executable === false ? '100644' : current && current !== '120000' && current !== '160000' ? current : '100644';

  actions.forEach((a, i) => {
    switch (a.action) {
      case 'create':
        assertCreatable(a.path);
        overlay.set(a.path, { mode: modeFor(a, null), oid: blobs[i]! });
        break;
      case 'update': {
        const e = existing(a.path);
        overlay.set(a.path, { mode: modeFor(a, e.mode), oid: blobs[i]! });
        break;
      }
      case 'delete':
        existing(a.path);
        overlay.set(a.path, null);
        break;
      case 'chmod': {
        const e = existing(a.path);
        overlay.set(a.path, { mode: a.executable ? '100755' : '100644', oid: e.oid });
        break;
      }
      case 'move': {
        const from = a.previousPath ?? a.path;
        const e = existing(from);
        if (from !== a.path) {
          assertCreatable(a.path);
          overlay.set(from, null);
        }
        overlay.set(a.path, { mode: e.mode, oid: blobs[i] ?? e.oid });
        break;
      }
    }
  });
  return overlay;
}

/** Writes the new contents of `actions` as blobs (one git call); null where an action has none. */
export async function writeActionBlobs(gitDir: string, actions: TreeAction[]): Promise<(string | null)[]> {
  return withTempDir((tmp) => writeBlobs(gitDir, tmp, actions));
}

async function writeBlobs(gitDir: string, tmp: string, actions: TreeAction[]): Promise<(string | null)[]> {
  const files: string[] = [];
  const index: number[] = [];
  for (let i = 0; i < actions.length; i++) {
    const c = actions[i].content;
    if (c === undefined || c === null || actions[i].action === 'delete' || actions[i].action === 'chmod') continue;
    const file = path.join(tmp, `blob-${i}`);
    await fs.writeFile(file, c);
    files.push(file);
    index.push(i);
  }
  const blobs: (string | null)[] = actions.map(() => null);
  if (files.length) {
    const out = await gitText(['hash-object', '-w', '--no-filters', '--stdin-paths'], { gitDir, input: files.join('\n') + '\n' });
    out.split('\n').filter(isOid).forEach((oid, k) => (blobs[index[k]] = oid));
  }
  return blobs;
}

function identityEnv(author: Identity, committer: Identity): Record<string, string> {
  const now = Math.floor(Date.now() / 1000);
  const date = (i: Identity) => `@${i.time ?? now} ${i.tz ?? '+0000'}`;
  return {
    GIT_AUTHOR_NAME: author.name,
    GIT_AUTHOR_EMAIL: author.email,
    GIT_AUTHOR_DATE: date(author),
    GIT_COMMITTER_NAME: committer.name,
    GIT_COMMITTER_EMAIL: committer.email,
    GIT_COMMITTER_DATE: date(committer),
  };
}

/** `git commit-tree` with the message on stdin and explicit identities. */
export async function commitTree(gitDir: string, tree: string, parents: string[], message: string, author: Identity, committer: Identity): Promise<string> {
  const args = ['commit-tree', assertSafeArg(tree, 'tree')];
  for (const p of parents) args.push('-p', assertSafeArg(p, 'parent'));
  args.push('-F', '-');
  const out = (await gitText(args, { gitDir, input: message, env: identityEnv(author, committer) })).trim();
  if (!isOid(out)) throw new GitError(args, 0, '', `commit-tree printed ${out}`);
  return out;
}

async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'cairn-index-'));
  try {
    return await fn(dir);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

export interface BuildCommitInput {
  parent: string | null;
  actions: TreeAction[];
  message: string;
  author: Identity;
  committer: Identity;
  /** Blobs already written by writeActionBlobs (so retries do not rewrite content). */
  blobs?: (string | null)[];
}

/** Writes the commit that applies `actions` on top of `parent`; throws TreeActionError for invalid actions. */
export async function buildCommit(gitDir: string, input: BuildCommitInput): Promise<{ commit: string; tree: string }> {
  for (const a of input.actions) {
    checkWritablePath(a.path);
    if (a.action === 'move' && a.previousPath !== undefined) checkWritablePath(a.previousPath);
  }
  return withTempDir(async (tmp) => {
    const env = { GIT_INDEX_FILE: path.join(tmp, 'index') };
    const baseTree = input.parent ? `${input.parent}^{tree}` : null;
    const blobs = input.blobs ?? (await writeBlobs(gitDir, tmp, input.actions));
    const overlay = await planActions(gitDir, baseTree, input.actions, blobs);
    if (baseTree) await git(['read-tree', baseTree], { gitDir, env });
    else await git(['read-tree', '--empty'], { gitDir, env });
    const lines: string[] = [];
    for (const [p, e] of overlay) lines.push(e ? `${e.mode} ${e.oid}\t${p}` : `0 ${ZERO_OID}\t${p}`);
    // Removals first, so a path freed by a delete or move can be reused as a directory.
    lines.sort((a, b) => Number(a.startsWith('0 ') ? 0 : 1) - Number(b.startsWith('0 ') ? 0 : 1));
    if (lines.length) await git(['update-index', '-z', '--index-info'], { gitDir, env, input: lines.join('\0') + '\0' });
    const tree = (await gitText(['write-tree'], { gitDir, env })).trim();
    const commit = await commitTree(gitDir, tree, input.parent ? [input.parent] : [], input.message, input.author, input.committer);
    return { commit, tree };
  });
}

/**
 * Moves `ref` from `oldOid` (null: the ref must not exist) to `newOid` atomically.
 * Returns false when the ref was not at `oldOid` any more (someone else moved it).
 */
export async function compareAndSwapRef(gitDir: string, ref: string, newOid: string, oldOid: string | null): Promise<boolean> {
  assertSafeArg(ref, 'ref');
  const res = await git(['update-ref', ref, assertSafeArg(newOid, 'commit'), oldOid ?? ZERO_OID], { gitDir, okCodes: [1, 128] });
  return res.exitCode === 0;
}

export interface PickResult {
  status: 'ok' | 'conflict' | 'empty';
  tree?: string;
}

/**
 * Three-way merge of `ours` and `theirs` over an explicit `base` tree. git 2.39 has no
 * `merge-tree --merge-base`, so the trees are wrapped in synthetic commits whose only common
 * ancestor carries the base tree; `merge-tree --write-tree` then merges exactly that.
 */
export async function mergeTrees(gitDir: string, baseTree: string | null, oursTree: string, theirsTree: string): Promise<PickResult> {
  const ident = { name: 'Cairn', email: 'cairn@localhost', time: 0 };
  let base = baseTree;
  if (!base) base = (await gitText(['mktree'], { gitDir, input: '' })).trim();
  const root = await commitTree(gitDir, base, [], 'base', ident, ident);
  const [ours, theirs] = await Promise.all([
    commitTree(gitDir, oursTree, [root], 'ours', ident, ident),
    commitTree(gitDir, theirsTree, [root], 'theirs', ident, ident),
  ]);
  const res = await git(['merge-tree', '--write-tree', '--no-messages', ours, theirs], { gitDir, okCodes: [1] });
  const tree = res.stdout.toString().split('\n')[0].trim();
  if (res.exitCode === 1) return { status: 'conflict' };
  if (tree === oursTree) return { status: 'empty' };
  return { status: 'ok', tree };
}
