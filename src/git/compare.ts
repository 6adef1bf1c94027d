import { git, GitError } from './command.js';
import { parseCommit, type ParsedCommit } from './catfile.js';
import { HistoryMemo, replaceRefsState } from './history_memo.js';
import { mergeBase } from './refs.js';
import { EMPTY_TREE_OID } from './validate.js';

/**
 * History and diff reads that walk many objects: one git process each, with optional extra
 * object directories (GIT_ALTERNATE_OBJECT_DIRECTORIES, read-only) so a comparison can
 * reach commits of another repository without writing into either.
 */
export interface ReadOptions {
  /** Object directories of other repositories to read from (never written). */
  alternates?: string[];
  timeoutMs?: number;
}

function envFor(opts: ReadOptions): Record<string, string> | undefined {
  return opts.alternates?.length ? { GIT_ALTERNATE_OBJECT_DIRECTORIES: opts.alternates.join(':') } : undefined;
}

/** Commits reachable from `to` but not from `from` (`from..to`), oldest first. */
export async function commitsBetween(gitDir: string, from: string | null, to: string, opts: ReadOptions & { limit?: number } = {}): Promise<string[]> {
  const args = ['rev-list', '--reverse'];
  if (opts.limit) args.push(`--max-count=${opts.limit}`);
  args.push(to);
  if (from) args.push(`^${from}`);
  const out = (await git(args, { gitDir, env: envFor(opts), timeoutMs: opts.timeoutMs })).stdout.toString('utf8');
  return out.split('\n').filter(Boolean);
}

/** Reads commits in one `cat-file --batch` run (so alternates apply). */
export async function readCommitsOnce(gitDir: string, oids: string[], opts: ReadOptions = {}): Promise<ParsedCommit[]> {
  if (!oids.length) return [];
  const res = await git(['cat-file', '--batch'], { gitDir, env: envFor(opts), input: oids.join('\n') + '\n', timeoutMs: opts.timeoutMs });
  const buf = res.stdout;
  const commits: ParsedCommit[] = [];
  let i = 0;
  while (i < buf.length) {
    const nl = buf.indexOf(10, i);
    if (nl < 0) break;
    const [oid, type, size] = buf.subarray(i, nl).toString('utf8').split(' ');
    if (type === 'missing' || size === undefined) {
      i = nl + 1;
      continue;
    }
    const n = Number(size);
    const data = buf.subarray(nl + 1, nl + 1 + n);
    if (type === 'commit') commits.push(parseCommit(oid, Buffer.from(data)));
    i = nl + 1 + n + 1;
  }
  return commits;
}

export interface DiffEntry {
  old_path: string;
  new_path: string;
  a_mode: string;
  b_mode: string;
  new_file: boolean;
  renamed_file: boolean;
  deleted_file: boolean;
  diff: string;
  /** The patch was left out because the whole comparison got too long. */
  collapsed: boolean;
  /** The patch was left out because this file's patch alone is too large. */
  too_large: boolean;
}

export interface DiffLimits {
  maxFiles: number;
  maxLines: number;
  /** A single file's patch larger than this is sent with an empty diff. */
  maxPatchBytes: number;
}

const DEFAULT_DIFF_LIMITS: DiffLimits = { maxFiles: 1000, maxLines: 50_000, maxPatchBytes: 200 * 1024 };

export interface DiffResult {
  diffs: DiffEntry[];
  /** Limits were reached: some files are missing or have empty diffs. */
  overflow: boolean;
}

function mode(m: string): string {
  return /^0+$/.test(m) ? '0' : m;
}

/**
 * The diff from `base` to `head` (rename detection on), one entry per file, as GitLab
 * presents diffs: the patch text starts at the first hunk.
 */
export async function diffCommits(gitDir: string, base: string, head: string, opts: ReadOptions & { limits?: DiffLimits } = {}): Promise<DiffResult> {
  const limits = opts.limits ?? DEFAULT_DIFF_LIMITS;
  const env = envFor(opts);
  const common = ['--no-color', '--no-ext-diff', '-M', '--full-index'];
  const raw = (await git(['diff', ...common, '--raw', '-z', '--abbrev=40', base, head], { gitDir, env, timeoutMs: opts.timeoutMs })).stdout.toString('utf8');
  const fields = raw.split('\0');
  const entries: DiffEntry[] = [];
  for (let i = 0; i < fields.length - 1; ) {
    const meta = fields[i++];
    if (!meta.startsWith(':')) continue;
    const [aMode, bMode, , , status] = meta.slice(1).split(' ');
    const letter = status[0];
    const oldPath = fields[i++];
    const newPath = letter === 'R' || letter === 'C' ? fields[i++] : oldPath;
    entries.push({
      old_path: oldPath,
      new_path: newPath,
      a_mode: mode(aMode),
      b_mode: mode(bMode),
      new_file: letter === 'A' || letter === 'C',
      renamed_file: letter === 'R',
      deleted_file: letter === 'D',
      diff: '',
      collapsed: false,
      too_large: false,
    });
  }
  let overflow = false;
  if (entries.length > limits.maxFiles) {
    overflow = true;
    entries.length = limits.maxFiles;
  }
  if (!entries.length) return { diffs: entries, overflow };

  const patch = (
    await git(['diff', ...common, '-p', base, head], { gitDir, env, timeoutMs: opts.timeoutMs, maxOutputBytes: 256 * 1024 * 1024 })
  ).stdout.toString('utf8');
  // Every file pair starts with a "diff --git" line (content lines always carry a prefix),
  // in the same order as the raw listing.
  const chunks = patch.split(/^diff --git .*\n/m).slice(1);
  let lines = 0;
  entries.forEach((entry, idx) => {
    const chunk = chunks[idx] ?? '';
    const hunk = chunk.search(/^@@ /m);
    let body = hunk >= 0 ? chunk.slice(hunk) : (/^Binary files .*\n/m.exec(chunk)?.[0] ?? '');
    const count = body ? body.split('\n').length - 1 : 0;
    if (Buffer.byteLength(body) > limits.maxPatchBytes) {
      overflow = true;
      entry.too_large = true;
      body = '';
    } else if (lines + count > limits.maxLines) {
      overflow = true;
      entry.collapsed = true;
      body = '';
    } else lines += count;
    entry.diff = body;
  });
  return { diffs: entries, overflow };
}

export interface CommitComparison {
  /** Commits in `base..to`, oldest first. */
  commits: ParsedCommit[];
  diffs: DiffEntry[];
  /** Limits were reached (too many commits, or diff limits). */
  overflow: boolean;
  /** `to` is the base itself: nothing to compare. */
  sameRef: boolean;
}

/** Comparisons between commit ids, weighed by their size in memory (bytes, roughly). */
const comparisonMemo = new HistoryMemo({ maxEntries: 500, maxWeight: 32 * 1024 * 1024 });

function comparisonWeight(c: CommitComparison): number {
  let bytes = 256;
  for (const commit of c.commits) bytes += 600 + commit.message.length * 2;
  for (const d of c.diffs) bytes += 300 + (d.diff.length + d.old_path.length + d.new_path.length) * 2;
  return bytes;
}

async function computeComparison(gitDir: string, fromOid: string, toOid: string, opts: ReadOptions & { straight: boolean; maxCommits: number }): Promise<CommitComparison> {
  const env = envFor(opts);
  const base = opts.straight ? fromOid : await mergeBase(gitDir, [fromOid, toOid], env);
  const sameRef = (base ?? fromOid) === toOid;
  if (sameRef) return { commits: [], diffs: [], overflow: false, sameRef };
  let overflow = false;
  const oids = await commitsBetween(gitDir, base ?? fromOid, toOid, opts);
  if (oids.length > opts.maxCommits) {
    overflow = true;
    oids.splice(0, oids.length - opts.maxCommits);
  }
  const parsed = await readCommitsOnce(gitDir, oids, opts);
  const byOid = new Map(parsed.map((c) => [c.oid, c]));
  const commits = oids.map((o) => byOid.get(o)).filter((c): c is ParsedCommit => !!c);
  const diff = await diffCommits(gitDir, base ?? EMPTY_TREE_OID, toOid, opts);
  return { commits, diffs: diff.diffs, overflow: overflow || diff.overflow, sameRef };
}

/**
 * What `to` adds over `from` (commit ids): the commits and the diff from their merge base (from
 * `from` itself when `straight`, or when they share no history). Kept per pair of ids (see
 * HistoryMemo): the same comparison asked for again runs no git. The result is shared: callers
 * must not change it. `alternates` lend another repository's objects (a fork's parent).
 */
export async function compareCommits(
  gitDir: string,
  fromOid: string,
  toOid: string,
  opts: ReadOptions & { straight: boolean; maxCommits: number },
): Promise<CommitComparison> {
  const state = await replaceRefsState(gitDir);
  if (!state) return computeComparison(gitDir, fromOid, toOid, opts);
  const key = [fromOid, toOid, opts.straight ? 'straight' : 'base', opts.maxCommits, ...(opts.alternates ?? [])].join('\0');
  return comparisonMemo.remember(gitDir, state, key, () => computeComparison(gitDir, fromOid, toOid, opts), comparisonWeight);
}

export interface AuthorCount {
  name: string;
  email: string;
  commits: number;
}

/**
 * Authors of the last `limit` non-merge commits reachable from `rev`, grouped by e-mail
 * (the name is the one on the newest commit), in order of first appearance.
 */
export async function authorCounts(gitDir: string, rev: string, limit = 2000): Promise<AuthorCount[]> {
  let out = '';
  try {
    out = (await git(['log', '--no-merges', `--max-count=${limit}`, '--format=%aN%x00%aE', rev, '--'], { gitDir })).stdout.toString('utf8');
  } catch (e) {
    if (e instanceof GitError) return [];
    throw e;
  }
  const byEmail = new Map<string, AuthorCount>();
  for (const line of out.split('\n')) {
    if (!line) continue;
    const [name, email] = line.split('\0');
    const found = byEmail.get(email);
    if (found) found.commits++;
    else byEmail.set(email, { name, email, commits: 1 });
  }
  return [...byEmail.values()];
}

/** How many commits `from..to` holds (`from` null: all of `to`'s history). */
export async function countCommitsBetween(gitDir: string, from: string | null, to: string, opts: ReadOptions = {}): Promise<number> {
  const args = ['rev-list', '--count', to];
  if (from) args.push(`^${from}`);
  const out = (await git(args, { gitDir, env: envFor(opts), timeoutMs: opts.timeoutMs })).stdout.toString('utf8').trim();
  return Number(out) || 0;
}

/** The paths a commit added, modified and removed against its first parent (renames as remove + add). */
export interface PathChanges {
  added: string[];
  modified: string[];
  removed: string[];
}

/**
 * What each commit changed against its first parent (a root commit: all it has), as GitLab's push
 * payloads list it; a commit that changed nothing is missing from the map.
 */
export async function commitPathChanges(gitDir: string, commits: Pick<ParsedCommit, 'oid' | 'parents'>[]): Promise<Map<string, PathChanges>> {
  const result = new Map<string, PathChanges>();
  if (commits.length === 0) return result;
  // One diff-tree for them all. Each stdin line names the commit and its first parent: given the
  // commit alone, diff-tree diffs a merge against every parent. Ids on stdin are never options.
  const input = commits.map((c) => (c.parents.length ? `${c.oid} ${c.parents[0]}` : c.oid)).join('\n') + '\n';
  const out = (await git(['diff-tree', '--stdin', '--root', '-r', '-z', '--no-renames', '--name-status'], { gitDir, input })).stdout.toString('utf8');
  const parts = out.split('\0');
  let current: PathChanges | null = null;
  for (let i = 0; i < parts.length; ) {
    const token = parts[i];
    // A status is one letter (and a score for copies); a commit's id starts its changes.
    if (/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(token)) {
      current = { added: [], modified: [], removed: [] };
      result.set(token, current);
      i += 1;
      continue;
    }
    const path = parts[i + 1];
    if (token && current && path !== undefined) {
      if (token === 'A') current.added.push(path);
      else if (token === 'D') current.removed.push(path);
      else current.modified.push(path);
    }
    i += 2;
  }
  return result;
}
