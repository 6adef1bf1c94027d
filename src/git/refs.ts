import { assertSafeArg, git, GitError, gitText, orWhenGitFails } from './command.js';
import { parseCommit, parseTree, type CatFilePool, type ParsedCommit, type TreeEntry } from './catfile.js';
import { HistoryMemo, replaceRefsState } from './history_memo.js';
import { readRefs } from './ref_files.js';
import { isOid, isReadableRefName, isSafeRevision, ZERO_OID } from './validate.js';

/**
 * Reading and updating one bare repository's refs and objects: what a ref points at, the commit
 * a revision names, commits, blobs and trees by id. Reads go through the long-lived cat-file
 * pool, ref listings read the ref files (ref_files.ts); updates spawn git. History walks, diffs
 * and blame are in commits.ts; what a name may be is decided in validate.ts.
 */

/**
 * The commit a revision names (branch, tag, id, `main~2`; tags are peeled), or null when it names
 * none, or is not a single revision (see isSafeRevision).
 */
export async function resolveCommit(pool: CatFilePool, gitDir: string, rev: string): Promise<ParsedCommit | null> {
  if (!isSafeRevision(rev)) return null;
  // A commit id is read by id (the pool may hold it); anything else is resolved and peeled by git.
  const direct = isOid(rev) ? await orWhenGitFails(() => pool.read(gitDir, rev), null) : null;
  if (direct?.type === 'commit') return parseCommit(direct.oid, direct.data);
  const obj = await orWhenGitFails(() => pool.read(gitDir, `${rev}^{commit}`), null);
  return obj && obj.type === 'commit' ? parseCommit(obj.oid, obj.data) : null;
}

/** A commit by id, or null. */
export async function readCommit(pool: CatFilePool, gitDir: string, oid: string): Promise<ParsedCommit | null> {
  if (!isSafeRevision(oid)) return null;
  const obj = await orWhenGitFails(() => pool.read(gitDir, oid), null);
  return obj && obj.type === 'commit' ? parseCommit(obj.oid, obj.data) : null;
}

/** Many commits by id at once (pipelined on the pool), by id; missing ones are left out. */
export async function readCommits(pool: CatFilePool, gitDir: string, oids: string[]): Promise<Map<string, ParsedCommit>> {
  const unique = [...new Set(oids)];
  const commits = await Promise.all(unique.map((oid) => readCommit(pool, gitDir, oid)));
  const map = new Map<string, ParsedCommit>();
  unique.forEach((oid, i) => {
    const c = commits[i];
    if (c) map.set(oid, c);
  });
  return map;
}

/**
 * What the full ref (`refs/heads/main`) points at (a tag object for an annotated tag), or null
 * when there is no such ref or `fullRef` is not a plain ref name (see isReadableRefName).
 */
export async function readRef(pool: CatFilePool, gitDir: string, fullRef: string): Promise<string | null> {
  if (!isReadableRefName(fullRef)) return null;
  const info = await orWhenGitFails(() => pool.info(gitDir, fullRef), null);
  return info ? info.oid : null;
}

export async function branchExists(pool: CatFilePool, gitDir: string, branch: string): Promise<boolean> {
  return (await readRef(pool, gitDir, `refs/heads/${branch}`)) !== null;
}

/** True when the repository has no branches at all (GitLab's empty_repo?). */
export async function hasNoBranches(gitDir: string): Promise<boolean> {
  const out = await gitText(['for-each-ref', '--count=1', '--format=%(refname)', 'refs/heads/'], { gitDir });
  return out.trim() === '';
}

export interface BlobData {
  oid: string;
  size: number;
  data: Buffer;
}

/** A blob by object id (full or abbreviated hex only), or null. */
export async function readBlob(pool: CatFilePool, gitDir: string, oid: string): Promise<BlobData | null> {
  if (!/^[0-9a-fA-F]{4,64}$/.test(oid)) return null;
  const obj = await orWhenGitFails(() => pool.read(gitDir, oid.toLowerCase()), null);
  return obj && obj.type === 'blob' ? { oid: obj.oid, size: obj.size, data: obj.data } : null;
}

export interface PathEntry extends TreeEntry {
  path: string;
}

/** The object at `path` inside a commit ('' = its root tree), or null. */
export async function objectAtPath(pool: CatFilePool, gitDir: string, commitOid: string, path: string) {
  const name = path === '' ? `${commitOid}^{tree}` : `${commitOid}:${path}`;
  return orWhenGitFails(() => pool.info(gitDir, name), null);
}

/**
 * The tree at `path` (components without empty, `.` or `..` ones; [] for the root) of a commit
 * id, or null when there is none. Walked from the commit by object ids, so every step may come
 * from the pool's memory.
 */
export async function treeAtPath(pool: CatFilePool, gitDir: string, commitOid: string, parts: string[]) {
  const commit = await orWhenGitFails(() => pool.read(gitDir, commitOid), null);
  if (!commit || commit.type !== 'commit') return null;
  let tree = await orWhenGitFails(() => pool.read(gitDir, parseCommit(commit.oid, commit.data).tree), null);
  for (const part of parts) {
    if (!tree || tree.type !== 'tree') return null;
    const entry = parseTree(tree.data).find((e) => e.name === part);
    if (!entry || entry.type !== 'tree') return null;
    tree = await orWhenGitFails(() => pool.read(gitDir, entry.oid), null);
  }
  return tree && tree.type === 'tree' ? tree : null;
}

/** Listings of a tree id under a path, weighed by their entries (bytes, roughly). */
const listingMemo = new HistoryMemo({ maxEntries: 2000, maxWeight: 32 * 1024 * 1024 });

/**
 * The entries of the tree at `path` in a commit, in git's tree order; with `recursive`,
 * depth first as `ls-tree -r -t` prints them. Null when there is no tree at that path. A listing
 * depends on the tree's id alone and is kept under it (see HistoryMemo); callers share it and
 * must not change it.
 */
export async function listTree(pool: CatFilePool, gitDir: string, commitOid: string, path: string, recursive: boolean): Promise<PathEntry[] | null> {
  const parts = path === '' ? [] : path.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return null;
  const state = await replaceRefsState(gitDir);
  const root = await treeAtPath(pool, gitDir, commitOid, parts);
  if (!root) return null;
  const walk = async (data: Buffer, prefix: string): Promise<PathEntry[]> => {
    const entries: PathEntry[] = parseTree(data).map((e) => ({ mode: e.mode, type: e.type, name: e.name, oid: e.oid, path: prefix ? `${prefix}/${e.name}` : e.name }));
    if (!recursive) return entries;
    const subtrees = await Promise.all(
      entries.map((e) => (e.type === 'tree' ? pool.read(gitDir, e.oid).then((o) => (o && o.type === 'tree' ? walk(o.data, e.path) : [])) : null)),
    );
    const out: PathEntry[] = [];
    entries.forEach((e, i) => {
      out.push(e);
      const sub = subtrees[i];
      if (sub) for (const s of sub) out.push(s);
    });
    return out;
  };
  if (!state) return walk(root.data, path);
  return listingMemo.remember(gitDir, state, `${root.oid}\0${recursive ? 'r' : ''}\0${path}`, () => walk(root.data, path), (entries) => entries.length * 300);
}

export interface RefEntry {
  /** Short name (`main`, `v1.0`). */
  name: string;
  /** What the ref points at (a tag object for annotated tags). */
  oid: string;
}

/**
 * Branches (`refs/heads/`) or tags (`refs/tags/`) with their targets, sorted by name, read from
 * the ref files in-process (see ref_files.ts). With `mergedInto`, only the refs whose target that
 * commit reaches, as `git for-each-ref --merged` lists them.
 */
export async function listRefs(gitDir: string, prefix: 'refs/heads/' | 'refs/tags/', opts: { mergedInto?: string } = {}): Promise<RefEntry[]> {
  if (opts.mergedInto) {
    const args = ['for-each-ref', '--format=%(objectname) %(refname)', `--merged=${opts.mergedInto}`, prefix];
    const out = await orWhenGitFails(async () => (await git(args, { gitDir })).stdout.toString('utf8'), '');
    const refs: RefEntry[] = [];
    for (const line of out.split('\n')) {
      const sp = line.indexOf(' ');
      if (sp > 0) refs.push({ oid: line.slice(0, sp), name: line.slice(sp + 1 + prefix.length) });
    }
    return refs;
  }
  // Unreadable refs read as none, as a failing for-each-ref did.
  const values = (await readRefs(gitDir, prefix)) ?? [];
  return values.map((v) => ({ name: v.ref.slice(prefix.length), oid: v.oid }));
}

export class RefUpdateConflict extends Error {}

/**
 * Compare-and-swap ref update: `oldOid` ZERO_OID means "must not exist", `newOid` ZERO_OID
 * deletes. A concurrent change makes git refuse, surfaced as RefUpdateConflict.
 */
export async function updateRef(gitDir: string, fullRef: string, newOid: string, oldOid: string, message = 'cairn'): Promise<void> {
  const args =
    newOid === ZERO_OID ? ['update-ref', '-m', message, '-d', fullRef, oldOid] : ['update-ref', '-m', message, fullRef, newOid, oldOid];
  try {
    await git(args, { gitDir });
  } catch (e) {
    if (e instanceof GitError && e.exitCode === 1) throw new RefUpdateConflict(e.stderr.trim());
    throw e;
  }
}

/** Points HEAD at refs/heads/<branch> (the repository's default branch). */
export async function setHead(gitDir: string, branch: string): Promise<void> {
  await git(['symbolic-ref', 'HEAD', `refs/heads/${assertSafeArg(branch, 'branch')}`], { gitDir });
}

/** The best common ancestor of the commits, or null when they share none. */
export async function mergeBase(gitDir: string, oids: string[], env?: Record<string, string>): Promise<string | null> {
  const res = await git(['merge-base', ...oids], { gitDir, okCodes: [1], env });
  const oid = res.stdout.toString('utf8').trim();
  return res.exitCode === 0 && oid ? oid : null;
}

/** Writes an annotated tag object and returns its id. */
export async function writeTagObject(
  gitDir: string,
  tag: { object: string; type: string; name: string; tagger: { name: string; email: string; time: number; tz: string }; message: string },
): Promise<string> {
  const clean = (s: string) => s.replace(/[<>\n\r\0]/g, '');
  const body =
    `object ${tag.object}\ntype ${tag.type}\ntag ${tag.name}\n` +
    `tagger ${clean(tag.tagger.name)} <${clean(tag.tagger.email)}> ${tag.tagger.time} ${tag.tagger.tz}\n\n` +
    (tag.message.endsWith('\n') ? tag.message : `${tag.message}\n`);
  const res = await git(['mktag'], { gitDir, input: body });
  return res.stdout.toString('utf8').trim();
}

export interface ParsedTag {
  oid: string;
  object: string;
  type: string;
  name: string;
  tagger: { name: string; email: string; time: number; tz: string } | null;
  message: string;
}

function parseTagObject(oid: string, data: Buffer): ParsedTag {
  const text = data.toString('utf8');
  const split = text.indexOf('\n\n');
  const head = split < 0 ? text : text.slice(0, split);
  let message = split < 0 ? '' : text.slice(split + 2);
  // Signed tags carry their signature after the message.
  const sig = message.indexOf('-----BEGIN PGP SIGNATURE-----');
  if (sig >= 0) message = message.slice(0, sig);
  const tag: ParsedTag = { oid, object: '', type: '', name: '', tagger: null, message };
  for (const line of head.split('\n')) {
    const sp = line.indexOf(' ');
    const key = line.slice(0, sp);
    const value = line.slice(sp + 1);
    if (key === 'object') tag.object = value;
    else if (key === 'type') tag.type = value;
    else if (key === 'tag') tag.name = value;
    else if (key === 'tagger') {
      const m = /^(.*?) <([^>]*)> (-?\d+) ([+-]\d{4})$/.exec(value);
      tag.tagger = m ? { name: m[1], email: m[2], time: Number(m[3]), tz: m[4] } : null;
    }
  }
  return tag;
}

export async function readTag(pool: CatFilePool, gitDir: string, oid: string): Promise<ParsedTag | null> {
  const obj = await orWhenGitFails(() => pool.read(gitDir, oid), null);
  return obj && obj.type === 'tag' ? parseTagObject(obj.oid, obj.data) : null;
}
