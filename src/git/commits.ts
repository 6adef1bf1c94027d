import { assertSafeArg, git, GitError, gitText } from './command.js';
import { parseTree, type CatFilePool, type ParsedCommit } from './catfile.js';
import { HistoryMemo, replaceRefsState } from './history_memo.js';
import { treeAtPath } from './refs.js';
import { EMPTY_TREE_OID, isOid, isSafeRevision, isSafeRevisionRange, splitRevisionRange } from './validate.js';

/**
 * History and its derivatives: walking history with rev-list, per-commit stats, diffs with
 * GitLab's size limits, refs containing a commit, blame and last commit of a path. Objects are
 * read through the long-lived cat-file pool (refs.ts reads single commits and refs); only walks
 * spawn git.
 */

/** Pathspecs are taken literally (no globs, no `:(magic)`). */
const LITERAL = { GIT_LITERAL_PATHSPECS: '1' };

export interface LogOptions {
  /** A revision or range (`a..b`, `a...b`); ignored with `all`. */
  ref?: string | null;
  all?: boolean;
  path?: string | null;
  since?: Date | null;
  until?: Date | null;
  firstParent?: boolean;
  topo?: boolean;
  author?: string | null;
}

function logArgs(opts: LogOptions): string[] | null {
  const args: string[] = [];
  if (opts.topo) args.push('--topo-order');
  if (opts.firstParent) args.push('--first-parent');
  // "@<epoch> <tz>" is the one form git parses exactly (ISO and bare "@N" go through approxidate,
  // which misreads far-future dates); whole seconds keep both bounds inclusive, and a fractional
  // since rounds up so that a commit before it is never listed.
  if (opts.since) args.push(`--since=@${Math.ceil(opts.since.getTime() / 1000)} +0000`);
  if (opts.until) args.push(`--until=@${Math.floor(opts.until.getTime() / 1000)} +0000`);
  if (opts.author) args.push('--regexp-ignore-case', '--fixed-strings', `--author=${opts.author}`);
  if (opts.all) args.push('--all');
  else {
    if (!isSafeRevisionRange(opts.ref)) return null;
    args.push(opts.ref);
  }
  args.push('--');
  if (opts.path) args.push(opts.path);
  return args;
}

function unknownRevision(e: unknown): boolean {
  return e instanceof GitError && e.exitCode === 128;
}

/** One page of commit ids, newest first (or topological). Unknown revisions give an empty list. */
async function listCommitOids(gitDir: string, opts: LogOptions, page: { offset: number; limit: number }): Promise<string[]> {
  const args = logArgs(opts);
  if (!args) return [];
  try {
    const out = await gitText(['rev-list', `--max-count=${page.limit}`, `--skip=${page.offset}`, ...args], { gitDir, env: LITERAL });
    return out.split('\n').filter(isOid);
  } catch (e) {
    if (unknownRevision(e)) return [];
    throw e;
  }
}

async function countCommits(gitDir: string, opts: LogOptions): Promise<number> {
  const args = logArgs(opts);
  if (!args) return 0;
  try {
    return Number((await gitText(['rev-list', '--count', ...args], { gitDir, env: LITERAL })).trim()) || 0;
  } catch (e) {
    if (unknownRevision(e)) return 0;
    throw e;
  }
}

const historyMemo = new HistoryMemo();

/**
 * `ref` with each revision replaced by the commit id it names, or null when one does not name a
 * single commit the way rev-list would read it (`^x`, `x^!`, `x^@`, `x^-`, unknown names: those
 * walk from the names themselves). An empty side of a range is HEAD, as for git.
 */
async function pinRevisions(pool: CatFilePool, gitDir: string, ref: string): Promise<string | null> {
  const range = splitRevisionRange(ref);
  const sides = range ? [range.from || 'HEAD', range.to || 'HEAD'] : [ref];
  const oids: string[] = [];
  for (const rev of sides) {
    if (!isSafeRevision(rev) || rev.startsWith('^') || /\^[!@-]/.test(rev)) return null;
    // A missing or broken repository pins nothing; the walk then reports it as it always has.
    const info = await pool.info(gitDir, `${rev}^{commit}`).catch((e) => {
      if (e instanceof GitError) return null;
      throw e;
    });
    if (!info || info.type !== 'commit') return null;
    oids.push(info.oid);
  }
  return range ? `${oids[0]}${range.operator}${oids[1]}` : oids[0];
}

/**
 * One page of history and the number of commits in all of it: two rev-list walks. When the
 * revisions pin to commit ids, both results are kept under those ids (see HistoryMemo), so a
 * page asked for again runs no git, and another page of the same history only its own walk.
 * `all` (every ref) cannot be pinned this cheaply and is walked each time.
 */
export async function listHistory(
  pool: CatFilePool,
  gitDir: string,
  opts: LogOptions,
  page: { offset: number; limit: number },
): Promise<{ oids: string[]; total: number }> {
  if (!logArgs(opts)) return { oids: [], total: 0 };
  const state = opts.all ? null : await historyMemo.replaceRefsState(gitDir);
  const ref = state && opts.ref ? await pinRevisions(pool, gitDir, opts.ref) : null;
  if (!state || !ref) {
    const [oids, total] = await Promise.all([listCommitOids(gitDir, opts, page), countCommits(gitDir, opts)]);
    return { oids, total };
  }
  const pinned = { ...opts, ref };
  const walk = logArgs(pinned)!.join('\0');
  const [oids, total] = await Promise.all([
    historyMemo.remember(gitDir, state, `page\0${page.offset}\0${page.limit}\0${walk}`, () => listCommitOids(gitDir, pinned, page)),
    historyMemo.remember(gitDir, state, `count\0${walk}`, () => countCommits(gitDir, pinned)),
  ]);
  return { oids, total };
}

export interface CommitStats {
  additions: number;
  deletions: number;
  total: number;
}

/** Line stats of each commit against its first parent (root commits against the empty tree), in one git call. */
async function computeCommitStats(gitDir: string, commits: ParsedCommit[]): Promise<Map<string, CommitStats>> {
  const result = new Map<string, CommitStats>();
  if (!commits.length) return result;
  for (const c of commits) result.set(c.oid, { additions: 0, deletions: 0, total: 0 });
  const input = commits.map((c) => (c.parents.length ? `${c.oid} ${c.parents[0]}` : c.oid)).join('\n') + '\n';
  const out = await gitText(['diff-tree', '--stdin', '-r', '--root', '-M', '--numstat', '--no-color'], { gitDir, input });
  let current: CommitStats | undefined;
  for (const line of out.split('\n')) {
    if (isOid(line)) {
      current = result.get(line);
      continue;
    }
    const m = /^(\d+|-)\t(\d+|-)\t/.exec(line);
    if (!m || !current) continue;
    const add = m[1] === '-' ? 0 : Number(m[1]);
    const del = m[2] === '-' ? 0 : Number(m[2]);
    current.additions += add;
    current.deletions += del;
    current.total += add + del;
  }
  return result;
}

/** A commit's stats depend on its id alone (its first parent is part of it). */
const statsMemo = new HistoryMemo({ maxEntries: 20_000 });

/**
 * Line stats of each commit against its first parent (root commits against the empty tree).
 * Each commit's are kept (see HistoryMemo); the ones not kept yet take one git call together.
 * The values are shared: callers must not change them.
 */
export async function commitStats(gitDir: string, commits: ParsedCommit[]): Promise<Map<string, CommitStats>> {
  if (!commits.length) return new Map();
  const state = await replaceRefsState(gitDir);
  if (!state) return computeCommitStats(gitDir, commits);
  const missing = commits.filter((c) => !statsMemo.peek(gitDir, c.oid));
  let batch: Promise<Map<string, CommitStats>> | null = null;
  const stats = await Promise.all(
    commits.map((c) =>
      statsMemo.remember(gitDir, state, c.oid, async () => (await (batch ??= computeCommitStats(gitDir, missing))).get(c.oid) ?? { additions: 0, deletions: 0, total: 0 }),
    ),
  );
  return new Map(commits.map((c, i) => [c.oid, stats[i]]));
}

/** GitLab's diff limits (Gitlab::Git::DiffCollection / Commit): files over the safe limits are collapsed, the rest cut off. */
export const DIFF_LIMITS = {
  /** A single file's patch above this is "too large": its diff is empty. */
  maxPatchBytes: 100 * 1024,
  /** After these many files / lines / bytes further files are collapsed (diff ""). */
  safeMaxFiles: 100,
  safeMaxLines: 5000,
  safeMaxBytes: 500 * 1024,
  /** Files beyond these totals are not returned at all. */
  maxFiles: 1000,
  maxLines: 50000,
};

export interface DiffFile {
  oldPath: string;
  newPath: string;
  aMode: string;
  bMode: string;
  newFile: boolean;
  renamedFile: boolean;
  deletedFile: boolean;
  diff: string;
  tooLarge: boolean;
  collapsed: boolean;
}

interface RawEntry {
  aMode: string;
  bMode: string;
  status: string;
  oldPath: string;
  newPath: string;
}

function parseRawZ(out: string): RawEntry[] {
  const parts = out.split('\0');
  const entries: RawEntry[] = [];
  let i = 0;
  while (i < parts.length) {
    const meta = parts[i];
    if (!meta.startsWith(':')) {
      i++;
      continue;
    }
    const [aMode, bMode, , , status] = meta.slice(1).split(' ');
    const kind = status[0];
    if (kind === 'R' || kind === 'C') {
      entries.push({ aMode, bMode, status: kind, oldPath: parts[i + 1], newPath: parts[i + 2] });
      i += 3;
    } else {
      entries.push({ aMode, bMode, status: kind, oldPath: parts[i + 1], newPath: parts[i + 1] });
      i += 2;
    }
  }
  return entries;
}

/** Patch bodies in output order, with git's header lines removed (GitLab's diff starts at "@@"). */
function splitPatches(out: string): string[] {
  const chunks = out.split(/^diff --git /m).slice(1);
  return chunks.map((chunk) => {
    const lines = chunk.split('\n');
    let i = 1;
    while (i < lines.length && !lines[i].startsWith('@@') && !lines[i].startsWith('Binary files') && !lines[i].startsWith('GIT binary patch')) {
      if (/^(old mode|new mode|deleted file mode|new file mode|similarity index|dissimilarity index|rename from|rename to|copy from|copy to|index |--- |\+\+\+ )/.test(lines[i])) i++;
      else break;
    }
    return lines.slice(i).join('\n');
  });
}

/** Diffs between object ids, weighed by their size in memory (bytes, roughly). */
const diffMemo = new HistoryMemo({ maxEntries: 500, maxWeight: 32 * 1024 * 1024 });

function diffWeight(files: DiffFile[]): number {
  let bytes = 256;
  for (const f of files) bytes += 300 + (f.diff.length + f.oldPath.length + f.newPath.length) * 2;
  return bytes;
}

/**
 * The diff of `to` against `from` (null: the empty tree), with rename detection and GitLab's
 * limits applied. Between object ids the result is kept (see HistoryMemo): a commit's page, its
 * diff in the API and a comment on its lines asked for again run no git. The result is shared:
 * callers must not change it.
 */
export async function diffTrees(gitDir: string, from: string | null, to: string, opts: { limits?: boolean } = {}): Promise<DiffFile[]> {
  const state = isOid(to) && (from === null || isOid(from)) ? await replaceRefsState(gitDir) : null;
  if (!state) return computeDiffTrees(gitDir, from, to, opts);
  const key = `${from ?? ''}\0${to}\0${opts.limits === false ? 'all' : 'limits'}`;
  return diffMemo.remember(gitDir, state, key, () => computeDiffTrees(gitDir, from, to, opts), diffWeight);
}

/** Two git calls: a NUL-separated raw listing (exact paths and modes) and the patch, which list files in the same order. */
async function computeDiffTrees(gitDir: string, from: string | null, to: string, opts: { limits?: boolean }): Promise<DiffFile[]> {
  const base = from ?? EMPTY_TREE_OID;
  const [raw, patch] = await Promise.all([
    gitText(['diff-tree', '-r', '-M', '-z', '--raw', '--no-color', base, to], { gitDir }),
    gitText(['diff-tree', '-r', '-M', '-p', '--no-color', '--no-ext-diff', '--full-index', base, to], { gitDir, maxOutputBytes: 256 * 1024 * 1024 }),
  ]);
  const entries = parseRawZ(raw);
  const patches = splitPatches(patch);
  const limits = opts.limits !== false;
  const files: DiffFile[] = [];
  let lines = 0;
  let bytes = 0;
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i];
    let diff = patches[i] ?? '';
    const fileLines = diff ? diff.split('\n').length : 0;
    let tooLarge = false;
    let collapsed = false;
    if (limits) {
      if (files.length >= DIFF_LIMITS.maxFiles || lines >= DIFF_LIMITS.maxLines) break;
      if (Buffer.byteLength(diff) > DIFF_LIMITS.maxPatchBytes) {
        tooLarge = true;
        diff = '';
      } else if (files.length >= DIFF_LIMITS.safeMaxFiles || lines + fileLines > DIFF_LIMITS.safeMaxLines || bytes + diff.length > DIFF_LIMITS.safeMaxBytes) {
        collapsed = true;
        diff = '';
      }
      lines += fileLines;
      bytes += diff.length;
    }
    files.push({
      oldPath: e.oldPath,
      newPath: e.newPath,
      aMode: e.aMode,
      bMode: e.bMode,
      newFile: e.status === 'A',
      renamedFile: e.status === 'R',
      deletedFile: e.status === 'D',
      diff,
      tooLarge,
      collapsed,
    });
  }
  return files;
}

export interface DiffLine {
  type: 'new' | 'old' | null;
  oldLine: number;
  newLine: number;
}

/** The lines of a unified diff with their old/new line numbers (context lines have type null). */
export function diffLines(diff: string): DiffLine[] {
  const out: DiffLine[] = [];
  let oldLine = 0;
  let newLine = 0;
  for (const line of diff.split('\n')) {
    const h = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (h) {
      oldLine = Number(h[1]);
      newLine = Number(h[2]);
      continue;
    }
    if (line.startsWith('+')) out.push({ type: 'new', oldLine, newLine: newLine++ });
    else if (line.startsWith('-')) out.push({ type: 'old', oldLine: oldLine++, newLine });
    else if (line.startsWith(' ')) out.push({ type: null, oldLine: oldLine++, newLine: newLine++ });
  }
  return out;
}

/** Branches and/or tags whose tip contains the commit. */
export async function refsContaining(gitDir: string, oid: string, type: 'branch' | 'tag' | 'all'): Promise<{ type: 'branch' | 'tag'; name: string }[]> {
  assertSafeArg(oid, 'commit');
  const patterns = type === 'branch' ? ['refs/heads/'] : type === 'tag' ? ['refs/tags/'] : ['refs/heads/', 'refs/tags/'];
  const out = await gitText(['for-each-ref', `--contains=${oid}`, '--format=%(refname)', ...patterns], { gitDir });
  const refs: { type: 'branch' | 'tag'; name: string }[] = [];
  for (const ref of out.split('\n')) {
    if (ref.startsWith('refs/heads/')) refs.push({ type: 'branch', name: ref.slice(11) });
    else if (ref.startsWith('refs/tags/')) refs.push({ type: 'tag', name: ref.slice(10) });
  }
  return refs;
}

async function walkLastCommitForPath(gitDir: string, rev: string, path: string): Promise<string | null> {
  const out = await gitText(['rev-list', '--max-count=1', rev, '--', path], { gitDir, env: LITERAL });
  const oid = out.trim();
  return isOid(oid) ? oid : null;
}

/** Per (commit id, path): the last commit at or below it that touched the path. */
const lastCommitMemo = new HistoryMemo({ maxEntries: 20_000 });

/**
 * The last commit at or before `rev` that touched `path`, or null. A walk (fast with the
 * commit-graph's changed-path Bloom filters that housekeeping writes); when `rev` is a commit id
 * its answer is kept (see HistoryMemo), so asking again for the same commit runs no git.
 */
export async function lastCommitForPath(gitDir: string, rev: string, path: string): Promise<string | null> {
  assertSafeArg(rev, 'revision');
  const state = isOid(rev) ? await replaceRefsState(gitDir) : null;
  if (!state) return walkLastCommitForPath(gitDir, rev, path);
  return lastCommitMemo.remember(gitDir, state, `${rev}\0${path}`, () => walkLastCommitForPath(gitDir, rev, path));
}

/**
 * A path's entry (mode, type, oid) in a commit, or null: the entry named like the path's last
 * component in the tree of its directory, read through the cat-file pool. Only a path in the
 * form git lists it (no empty, `.` or `..` components) names an entry, as with ls-tree.
 */
export async function pathEntry(pool: CatFilePool, gitDir: string, commitOid: string, path: string): Promise<{ mode: string; type: string; oid: string } | null> {
  const parts = path.split('/');
  if (!isOid(commitOid) || parts.some((p) => p === '' || p === '.' || p === '..')) return null;
  const name = parts.pop()!;
  const dir = await treeAtPath(pool, gitDir, commitOid, parts);
  const entry = dir ? parseTree(dir.data).find((e) => e.name === name) : undefined;
  return entry ? { mode: entry.mode, type: entry.type, oid: entry.oid } : null;
}

/** Entries for exactly the given paths (files or directories) of a tree-ish, in one call. */
export async function treeEntries(gitDir: string, treeish: string, paths: string[]): Promise<Map<string, { mode: string; type: string; oid: string }>> {
  const map = new Map<string, { mode: string; type: string; oid: string }>();
  if (!paths.length) return map;
  assertSafeArg(treeish, 'revision');
  const out = await git(['ls-tree', '-z', '--full-tree', treeish, '--', ...paths], { gitDir, env: LITERAL });
  for (const rec of out.stdout.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t([\s\S]*)$/.exec(rec);
    if (m) map.set(m[4], { mode: m[1], type: m[2], oid: m[3] });
  }
  return map;
}

export interface BlameRange {
  commit: string;
  lines: string[];
}

async function runBlame(gitDir: string, commit: string, path: string, range?: { start: number; end: number }): Promise<BlameRange[]> {
  const args = ['blame', '--porcelain'];
  if (range) args.push(`-L${range.start},${range.end}`);
  args.push(commit, '--', path);
  const out = await gitText(args, { gitDir });
  const ranges: BlameRange[] = [];
  let current: string | null = null;
  for (const line of out.split('\n')) {
    const header = /^([0-9a-f]{40}) \d+ \d+/.exec(line);
    if (header) {
      current = header[1];
      continue;
    }
    if (line.startsWith('\t') && current) {
      const last = ranges[ranges.length - 1];
      if (last && last.commit === current) last.lines.push(line.slice(1));
      else ranges.push({ commit: current, lines: [line.slice(1)] });
    }
  }
  return ranges;
}

/** Blames of a path at a commit id, weighed by their text (bytes, roughly). */
const blameMemo = new HistoryMemo({ maxEntries: 2000, maxWeight: 32 * 1024 * 1024 });

/**
 * `git blame --porcelain`, grouped into runs of consecutive lines from the same commit. Kept per
 * (commit id, path, range) (see HistoryMemo). The ranges are shared: callers must not change them.
 */
export async function blame(gitDir: string, commit: string, path: string, range?: { start: number; end: number }): Promise<BlameRange[]> {
  assertSafeArg(commit, 'commit');
  const state = isOid(commit) ? await replaceRefsState(gitDir) : null;
  if (!state) return runBlame(gitDir, commit, path, range);
  const key = `${commit}\0${path}\0${range ? `${range.start},${range.end}` : ''}`;
  return blameMemo.remember(gitDir, state, key, () => runBlame(gitDir, commit, path, range), (ranges) =>
    ranges.reduce((sum, r) => sum + 64 + r.lines.reduce((n, l) => n + 32 + l.length * 2, 0), 0),
  );
}

/** Merged-ness of a branch tip into a target commit, per (tip, target) pair. */
const mergedMemo = new HistoryMemo({ maxEntries: 20_000 });

async function walkUnmerged(gitDir: string, target: string, tips: string[]): Promise<Set<string>> {
  // Commits reachable from the tips but not from the target: a tip is merged iff it is not listed.
  const input = `^${target}\n${tips.join('\n')}\n`;
  const out = await gitText(['rev-list', '--stdin'], { gitDir, input, maxOutputBytes: 1024 * 1024 * 1024 });
  return new Set(out.split('\n').filter(isOid));
}

/**
 * Which of the commit ids in `tips` are reachable from commit id `target` (as `for-each-ref
 * --merged` decides it). Answers are kept per pair (see HistoryMemo); the pairs not kept yet
 * take one rev-list together. An unreadable commit counts as not merged (and is not kept).
 */
export async function mergedInto(gitDir: string, target: string, tips: string[]): Promise<Set<string>> {
  const unique = [...new Set(tips)].filter(isOid);
  if (!unique.length || !isOid(target)) return new Set();
  const state = await replaceRefsState(gitDir);
  const missing = state ? unique.filter((tip) => !mergedMemo.peek(gitDir, `${target}\0${tip}`)) : unique;
  let batch: Promise<Set<string>> | null = null;
  const walk = () => (batch ??= walkUnmerged(gitDir, target, missing));
  const answers = await Promise.all(
    unique.map((tip) => {
      const load = async () => !(await walk()).has(tip);
      return state ? mergedMemo.remember(gitDir, state, `${target}\0${tip}`, load) : load();
    }),
  ).catch((e) => {
    if (e instanceof GitError) return unique.map(() => false);
    throw e;
  });
  return new Set(unique.filter((_tip, i) => answers[i]));
}

/**
 * Copies the objects of `oid` (and its history) from another repository on this host into
 * `gitDir`, holding them under a temporary ref so that gc cannot drop them before use.
 */
export async function fetchCommitFrom(gitDir: string, sourceGitDir: string, oid: string, tmpRef: string): Promise<void> {
  assertSafeArg(oid, 'commit');
  assertSafeArg(tmpRef, 'ref');
  await git(['fetch', '--quiet', '--no-tags', '--no-write-fetch-head', sourceGitDir, `+${oid}:${tmpRef}`], { gitDir });
}

export async function deleteRef(gitDir: string, ref: string): Promise<void> {
  assertSafeArg(ref, 'ref');
  await git(['update-ref', '-d', ref], { gitDir, okCodes: [1, 128] });
}
