// Artifact archives: collecting the paths a job declares (globs, exclude) inside its build
// directory and nowhere else, writing them as a zip (or concatenated gzip members for
// reports), and extracting a dependency's zip without letting an entry land outside the
// build directory (zip-slip) or through a symlink.
//
// The build directory is the job's: any name in it may be a link, and may become one. So
// every path is walked component by component with no-follow semantics (nofollow.ts): a
// parent component that is a symlink, even one pointing inside, means the path is skipped;
// files are opened with O_NOFOLLOW (and created with O_CREAT|O_EXCL after removing what was
// there); symlinks are stored and created as links, never followed. Where a sandbox exists
// this code also runs inside it as the job's user (artifact_sandbox.ts), so the kernel applies
// the job's own rights as well.
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import picomatch from 'picomatch';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { Dir, openPath, removeEntry, type WalkFailure } from './nofollow.js';

export interface CollectResult {
  /** Relative paths (with / separators) of regular files and in-tree symlinks. */
  files: string[];
  /** Why some patterns or paths were left out (shown in the job log). */
  warnings: string[];
}

export interface ArtifactLimits {
  /** Entries in an archive (extracted or written). */
  maxEntries: number;
  /** Bytes of file content (expanded, for extraction). */
  maxBytes: number;
}

export const DEFAULT_ARTIFACT_LIMITS: ArtifactLimits = { maxEntries: 200_000, maxBytes: 4 * 1024 ** 3 };

/** An archive over a limit: the message is the job log's line. */
export class ArtifactLimitError extends Error {}

const GLOB_CHARS = /[*?[\]{}]/;
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = fs.constants;

function inside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

function bytesText(n: number): string {
  return n >= 1024 ** 3 ? `${+(n / 1024 ** 3).toFixed(2)} GiB` : n >= 1024 ** 2 ? `${+(n / 1024 ** 2).toFixed(2)} MiB` : `${n} bytes`;
}

/** Normalises a declared path; null when it would leave the build directory. */
export function normalisePattern(pattern: string): string | null {
  let p = pattern.trim().replace(/\\/g, '/');
  if (!p || p.includes('\0')) return null;
  if (p.startsWith('/')) return null;
  while (p.startsWith('./')) p = p.slice(2);
  const norm = path.posix.normalize(p);
  if (norm === '..' || norm.startsWith('../') || norm.split('/').includes('..')) return null;
  return norm === '.' ? '' : norm.replace(/\/+$/, '');
}

/**
 * Whether a link's target, read as text from where the link is, stays in the tree. Only a
 * filter (such links are left out of archives, as before): nothing on the runner's side ever
 * follows a link, so safety does not depend on it.
 */
function linkTargetLooksInside(relDir: string, target: string): boolean {
  if (!target || path.isAbsolute(target) || target.includes('\0')) return false;
  const base = '/r';
  return inside(base, path.posix.resolve(base, relDir, target));
}

type Kind = 'file' | 'link' | 'dir' | 'other';
function kindOf(st: fs.Stats): Kind {
  return st.isSymbolicLink() ? 'link' : st.isFile() ? 'file' : st.isDirectory() ? 'dir' : 'other';
}

/** Everything under dir (relative paths prefixed with rel), directories held open, links never entered. */
function* walk(dir: Dir, rel: string): Generator<{ rel: string; kind: Kind }> {
  let entries: fs.Dirent[];
  try {
    entries = dir.entries();
  } catch {
    return;
  }
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    const st = dir.lstat(e.name);
    if (!st) continue;
    const kind = kindOf(st);
    yield { rel: r, kind };
    if (kind === 'dir') {
      const sub = dir.child(e.name);
      if (!sub) continue;
      try {
        yield* walk(sub, r);
      } finally {
        sub.close();
      }
    }
  }
}

function parentFailure(rel: string, f: { missing: string } | { notDir: string; link: boolean }): string {
  if ('missing' in f) return `${rel}: no matching files`;
  return f.link ? `${rel}: ${f.notDir} is a symlink, skipped (paths are not followed through links)` : `${rel}: ${f.notDir} is not a directory, skipped`;
}

/**
 * The files git does not track in buildDir (`git ls-files --others`, ignored ones included, as
 * gitlab-runner's `untracked`), as literal relative paths (a nested repository is one `dir/`).
 * git runs where this code runs: inside the job's sandbox as the job's user when there is one
 * (artifact_helper), so what the job's .git says can do no more than the job itself; and with
 * nothing of any environment (the job's or the runner's), no hooks, no fsmonitor command, no
 * optional locks, and no looking for a repository above the build directory.
 */
export function untrackedFiles(buildDir: string): { files: string[]; warning: string | null } {
  const root = path.resolve(buildDir);
  const r = spawnSync(
    'git',
    ['-c', 'core.fsmonitor=false', '-c', 'core.untrackedCache=false', '-c', 'core.hooksPath=/dev/null', '--no-pager', 'ls-files', '--others', '-z', '--'],
    {
      cwd: root,
      env: {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        LC_ALL: 'C',
        HOME: '/nonexistent',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_CEILING_DIRECTORIES: path.dirname(root),
        GIT_OPTIONAL_LOCKS: '0',
        GIT_TERMINAL_PROMPT: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 512 * 1024 * 1024,
      timeout: 10 * 60_000,
    },
  );
  if (r.error || r.status !== 0) {
    const why = r.error ? r.error.message : (r.stderr?.toString().trim().split('\n').pop() ?? `exit ${r.status}`);
    return { files: [], warning: `untracked: git ls-files failed (${why})` };
  }
  const files = r.stdout.toString('utf8').split('\0').filter(Boolean);
  return { files, warning: files.length ? null : 'untracked: no files' };
}

/**
 * The files the declared `paths` (globs) name under buildDir, and `literal` paths taken as they
 * are (the untracked files git lists: their names may hold glob characters), minus `exclude`.
 */
export function collectArtifactFiles(buildDir: string, paths: string[], exclude: string[] = [], limits: Pick<ArtifactLimits, 'maxEntries'> = DEFAULT_ARTIFACT_LIMITS, literal: string[] = []): CollectResult {
  const root = Dir.open(buildDir);
  const files = new Set<string>();
  const warnings: string[] = [];
  const excluded = exclude.map((e) => normalisePattern(e)).filter((e): e is string => e !== null);
  const isExcluded = excluded.length ? picomatch(excluded, { dot: true }) : () => false;
  let all: { rel: string; kind: Kind }[] | null = null;

  const add = (rel: string) => {
    files.add(rel);
    if (files.size > limits.maxEntries) throw new ArtifactLimitError(`more than ${limits.maxEntries} files to archive: the limit for one archive`);
  };
  const addLink = (dir: Dir, name: string, rel: string) => {
    let target: string;
    try {
      target = fs.readlinkSync(dir.at(name));
    } catch {
      return;
    }
    if (linkTargetLooksInside(path.posix.dirname(rel), target)) add(rel);
    else warnings.push(`${rel}: symlink pointing outside the build directory, skipped`);
  };

  const addTree = (rel: string) => {
    const segs = rel.split('/').filter(Boolean);
    const name = segs.pop();
    const opened = openPath(root, segs);
    if ('failure' in opened) {
      warnings.push(parentFailure(rel, opened.failure));
      return;
    }
    const dir = opened.dir;
    try {
      if (name === undefined) {
        for (const e of walk(dir, '')) addWalked(e);
        return;
      }
      const st = dir.lstat(name);
      if (!st) {
        warnings.push(`${rel}: no matching files`);
        return;
      }
      const kind = kindOf(st);
      if (kind === 'link') addLink(dir, name, rel);
      else if (kind === 'file') add(rel);
      else if (kind === 'dir') {
        const sub = dir.child(name);
        if (!sub) return;
        try {
          for (const e of walk(sub, rel)) addWalked(e);
        } finally {
          sub.close();
        }
      } else warnings.push(`${rel}: not a regular file (device, FIFO or socket), skipped`);
    } finally {
      dir.close();
    }
  };
  // Links found by a walk are read through their own parent, opened again component by component.
  const addWalked = (e: { rel: string; kind: Kind }) => {
    if (e.kind === 'file') add(e.rel);
    else if (e.kind === 'link') {
      const segs = e.rel.split('/');
      const name = segs.pop()!;
      const opened = openPath(root, segs);
      if ('failure' in opened) return;
      try {
        addLink(opened.dir, name, e.rel);
      } finally {
        opened.dir.close();
      }
    } else if (e.kind === 'other') warnings.push(`${e.rel}: not a regular file (device, FIFO or socket), skipped`);
  };

  try {
    for (const raw of paths) {
      const p = normalisePattern(raw);
      if (p === null) {
        warnings.push(`${raw}: path is outside the build directory, skipped`);
        continue;
      }
      if (!GLOB_CHARS.test(p)) {
        addTree(p);
        continue;
      }
      all ??= [...walk(root, '')].filter((e) => e.rel !== '.git' && !e.rel.startsWith('.git/'));
      const match = picomatch(p, { dot: true });
      let n = 0;
      for (const e of all) {
        if (match(e.rel)) {
          n++;
          addTree(e.rel);
        }
      }
      if (!n) warnings.push(`${raw}: no matching files`);
    }
    for (const raw of literal) {
      const p = normalisePattern(raw);
      if (p === null || p === '') warnings.push(`${raw}: path is outside the build directory, skipped`);
      else addTree(p);
    }
  } finally {
    root.close();
  }
  return { files: [...files].filter((f) => !isExcluded(f)).sort(), warnings };
}

type Opened = { kind: 'link'; target: Buffer; mtime: Date } | { kind: 'file'; fd: number; stat: fs.Stats } | { kind: 'skip'; why: string };

/**
 * Opens a collected path for reading without following anything: its parents walked as real
 * directories, a link read as a link, a regular file opened with O_NOFOLLOW (O_NONBLOCK: a FIFO
 * put there meanwhile does not block) and checked with fstat to be the file that was looked
 * at. A hard link (nlink > 1) to a file the job's user does not own is refused: with
 * protected_hardlinks off a job could link any file of the machine into its tree.
 */
function openForArchive(parents: ParentCache, rel: string, jobUid: number | null): Opened {
  const segs = rel.split('/');
  const name = segs.pop()!;
  const opened = parents.open(segs);
  if ('failure' in opened) return { kind: 'skip', why: parentFailure(rel, opened.failure).slice(rel.length + 2) };
  const dir = opened.dir;
  {
    const st = dir.lstat(name);
    if (!st) return { kind: 'skip', why: 'no longer there' };
    if (st.isSymbolicLink()) return { kind: 'link', target: fs.readlinkSync(dir.at(name), { encoding: 'buffer' }), mtime: st.mtime };
    if (!st.isFile()) return { kind: 'skip', why: 'not a regular file (device, FIFO or socket), skipped' };
    let fd: number;
    try {
      fd = fs.openSync(dir.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    } catch (err) {
      return { kind: 'skip', why: `cannot be read (${(err as NodeJS.ErrnoException).code}), skipped` };
    }
    const fst = fs.fstatSync(fd);
    const why = !fst.isFile() || fst.ino !== st.ino || fst.dev !== st.dev ? 'changed while being archived, skipped' : fst.nlink > 1 && jobUid !== null && fst.uid !== jobUid ? 'a hard link to a file the job does not own, skipped' : null;
    if (why) {
      fs.closeSync(fd);
      return { kind: 'skip', why };
    }
    return { kind: 'file', fd, stat: fst };
  }
}

/**
 * The last directory opened, kept for the next entry in the same one (archives list files
 * directory by directory). It is held as a descriptor: what it is cannot change under it.
 */
class ParentCache {
  private key: string | null = null;
  private dir: Dir | null = null;
  constructor(
    private readonly root: Dir,
    private readonly create = false,
  ) {}

  open(segs: string[]): { dir: Dir } | { failure: WalkFailure } {
    const key = segs.join('/');
    if (this.dir && this.key === key) return { dir: this.dir };
    this.forget();
    const opened = openPath(this.root, segs, this.create);
    if ('dir' in opened) {
      this.dir = opened.dir;
      this.key = key;
    }
    return opened;
  }

  /**
   * Closes the cached directory. Nothing an entry does replaces the cached directory itself: an
   * entry naming that directory has another parent, so the cache has moved on before it runs.
   */
  forget(): void {
    this.dir?.close();
    this.dir = null;
    this.key = null;
  }
}

export interface WriteOptions extends Partial<ArtifactLimits> {
  /** Owner a hard-linked file must have (the job's user); default: this process's uid. */
  jobUid?: number | null;
}

export interface WriteResult {
  /** Entries written. */
  written: number;
  /** Paths left out, with why (shown in the job log). */
  skipped: string[];
}

/**
 * Opens an output file the runner owns: what was there is removed (a link is not followed),
 * then created exclusively; its directory itself must not be a link either.
 */
export function createOutput(file: string, mode = 0o600): number {
  const abs = path.resolve(file);
  const parent = Dir.open(path.dirname(abs));
  try {
    removeEntry(parent, path.basename(abs));
    return fs.openSync(parent.at(path.basename(abs)), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  } finally {
    parent.close();
  }
}

function outputStream(out: string | number): fs.WriteStream {
  return typeof out === 'number' ? fs.createWriteStream('', { fd: out, autoClose: false }) : fs.createWriteStream('', { fd: createOutput(out), autoClose: true });
}

async function archiveFiles(buildDir: string, files: string[], opts: WriteOptions, each: (rel: string, o: Exclude<Opened, { kind: 'skip' }>) => Promise<void>): Promise<WriteResult> {
  const root = Dir.open(buildDir);
  const jobUid = opts.jobUid === undefined ? (process.getuid?.() ?? null) : opts.jobUid;
  const maxBytes = opts.maxBytes ?? DEFAULT_ARTIFACT_LIMITS.maxBytes;
  const maxEntries = opts.maxEntries ?? DEFAULT_ARTIFACT_LIMITS.maxEntries;
  const skipped: string[] = [];
  const parents = new ParentCache(root);
  let written = 0;
  let bytes = 0;
  try {
    if (files.length > maxEntries) throw new ArtifactLimitError(`${files.length} files to archive, more than the limit of ${maxEntries}`);
    for (const rel of files) {
      const o = openForArchive(parents, rel, jobUid);
      if (o.kind === 'skip') {
        skipped.push(`${rel}: ${o.why}`);
        continue;
      }
      if (o.kind === 'file') {
        bytes += o.stat.size;
        if (bytes > maxBytes) {
          fs.closeSync(o.fd);
          throw new ArtifactLimitError(`the artifacts are larger than ${bytesText(maxBytes)}: the limit for one archive`);
        }
      }
      await each(rel, o);
      written++;
    }
  } finally {
    parents.forget();
    root.close();
  }
  return { written, skipped };
}

const SMALL_FILE = 1024 * 1024;

/** Reads up to size bytes of a small file and closes it. */
function readSmall(fd: number, size: number): Buffer {
  try {
    const buf = Buffer.alloc(size);
    let got = 0;
    while (got < size) {
      const n = fs.readSync(fd, buf, got, size - got, got);
      if (!n) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes the files into a zip (a path, created exclusively, or an open descriptor), streamed from disk. */
export async function writeZip(buildDir: string, files: string[], out: string | number, opts: WriteOptions = {}): Promise<WriteResult> {
  const zip = new yazl.ZipFile();
  const stream = outputStream(out);
  const piped = pipeline(zip.outputStream, stream);
  piped.catch(() => {});
  // yazl looks for its first unfinished entry from the start of its list at every step:
  // quadratic in the entries (16 s of 24 for 60,000 files). Finished entries are kept aside
  // while writing and put back before end() writes the central directory from the list.
  const internals = zip as unknown as { entries?: Array<{ state: number }> };
  const FILE_DATA_DONE = 3;
  const finished: Array<{ state: number }> = [];
  const setAside = () => {
    const list = internals.entries;
    if (!Array.isArray(list)) return;
    let n = 0;
    while (n < list.length && list[n].state === FILE_DATA_DONE) n++;
    for (const e of list.splice(0, n)) finished.push(e);
  };
  try {
    const result = await archiveFiles(buildDir, files, opts, async (rel, o) => {
      setAside();
      if (o.kind === 'link') {
        zip.addBuffer(o.target, rel, { mode: 0o120777, mtime: o.mtime });
        return;
      }
      const mode = o.stat.mode & 0o777 ? 0o100000 | (o.stat.mode & 0o777) : 0o100644;
      // Small files are read at once (no thread-pool round trips for each of 60,000 files).
      const rs = o.stat.size <= SMALL_FILE ? Readable.from([readSmall(o.fd, o.stat.size)]) : fs.createReadStream('', { fd: o.fd, autoClose: true, start: 0 });
      // Small files are stored: deflating them saves nothing and costs a zlib stream each.
      zip.addReadStream(rs, rel, { mode, mtime: o.stat.mtime, compress: o.stat.size > 512 });
      // One file open at a time: wait for yazl to have read this one.
      await Promise.race([once(rs, 'close'), piped]);
    });
    if (Array.isArray(internals.entries)) internals.entries = finished.concat(internals.entries);
    zip.end();
    await piped;
    return result;
  } catch (err) {
    (zip.outputStream as unknown as NodeJS.ReadableStream & { destroy(): void }).destroy();
    stream.destroy();
    throw err;
  }
}

/** Concatenated gzip members, one per regular file (what reports with artifact_format gzip are). */
export async function writeGzipConcat(buildDir: string, files: string[], out: string | number, opts: WriteOptions = {}): Promise<WriteResult> {
  const stream = outputStream(out);
  try {
    const result = await archiveFiles(buildDir, files, opts, async (_rel, o) => {
      if (o.kind !== 'file') return;
      const gz = zlib.createGzip();
      fs.createReadStream('', { fd: o.fd, autoClose: true, start: 0 }).pipe(gz);
      for await (const chunk of gz) if (!stream.write(chunk)) await once(stream, 'drain');
    });
    stream.end();
    await once(stream, 'finish');
    return result;
  } catch (err) {
    stream.destroy();
    throw err;
  }
}

/** Archives up to this size are read into memory at once: two thread-pool reads an entry cost more. */
const IN_MEMORY_ZIP = 64 * 1024 * 1024;

function openZip(file: string | number): Promise<yauzl.ZipFile> {
  const options = { lazyEntries: true, decodeStrings: false, validateEntrySizes: true, autoClose: typeof file !== 'number' };
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, z?: yauzl.ZipFile) => (err ? reject(err) : resolve(z!));
    const fd = typeof file === 'number' ? file : fs.openSync(file, O_RDONLY);
    try {
      const size = fs.fstatSync(fd).size;
      if (size <= IN_MEMORY_ZIP) {
        const buf = Buffer.alloc(size);
        for (let got = 0; got < size; ) {
          const n = fs.readSync(fd, buf, got, size - got, got);
          if (!n) break;
          got += n;
        }
        if (typeof file !== 'number') fs.closeSync(fd);
        yauzl.fromBuffer(buf, options, done);
      } else yauzl.fromFd(fd, options, done);
    } catch (err) {
      if (typeof file !== 'number') fs.closeSync(fd);
      reject(err);
    }
  });
}

/** Entry names that would leave the destination: absolute, drive letters, `..` segments. */
export function safeEntryName(name: string): string | null {
  const n = name.replace(/\\/g, '/');
  if (!n || n.includes('\0') || n.startsWith('/') || /^[A-Za-z]:/.test(n)) return null;
  const norm = path.posix.normalize(n);
  if (norm === '..' || norm.startsWith('../') || norm.split('/').includes('..')) return null;
  return norm.replace(/^(\.\/)+/, '');
}

export interface ExtractResult {
  extracted: number;
  /** Names of the entries left out. */
  skipped: string[];
  /** Why, one line each (shown in the job log). */
  warnings: string[];
}

const MAX_LINK_TARGET = 4096;

/**
 * Extracts a zip (a path, or an open descriptor) into dest. Entries that would escape are
 * skipped and reported: names with `..` or absolute, any entry below a component that is a
 * symlink (even one pointing inside: it may point elsewhere by the time it is used) or not a
 * directory, links whose target leaves the tree. Files are created with O_EXCL|O_NOFOLLOW after
 * removing whatever was at their name; links are created as links. Over `limits` (entries,
 * expanded bytes as the archive declares them, which yauzl holds each entry to) the extraction
 * stops with an ArtifactLimitError.
 */
export async function extractZip(file: string | number, dest: string, limits: Partial<ArtifactLimits> = {}): Promise<ExtractResult> {
  const maxEntries = limits.maxEntries ?? DEFAULT_ARTIFACT_LIMITS.maxEntries;
  const maxBytes = limits.maxBytes ?? DEFAULT_ARTIFACT_LIMITS.maxBytes;
  const root = Dir.open(dest);
  let zip: yauzl.ZipFile;
  try {
    zip = await openZip(file);
  } catch (err) {
    root.close();
    throw err;
  }
  const skipped: string[] = [];
  const warnings: string[] = [];
  const skip = (name: string, why: string) => {
    skipped.push(name);
    warnings.push(`${name}: ${why}`);
  };
  const parents = new ParentCache(root, true);
  let extracted = 0;
  let entries = 0;
  let declared = 0;
  try {
    if (zip.entryCount > maxEntries) throw new ArtifactLimitError(`the archive has ${zip.entryCount} entries, more than the limit of ${maxEntries}: not extracted`);
    await new Promise<void>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', () => resolve());
      zip.on('entry', (entry: yauzl.Entry) => {
        void (async () => {
          if (++entries > maxEntries) throw new ArtifactLimitError(`the archive has more than ${maxEntries} entries: extraction stopped`);
          declared += entry.uncompressedSize;
          if (declared > maxBytes) throw new ArtifactLimitError(`the archive expands to more than ${bytesText(maxBytes)}: extraction stopped (the limit for one archive)`);
          // Names are decoded here, not by yauzl (which would refuse the whole archive for one bad name).
          const rawName = entry.fileName as unknown as Buffer;
          const fileName = (entry.generalPurposeBitFlag & 0x800) !== 0 || isUtf8(rawName) ? rawName.toString('utf8') : rawName.toString('latin1');
          const name = safeEntryName(fileName);
          if (name === null) return skip(fileName, 'entry would be extracted outside the build directory, skipped');
          const segs = name.split('/').filter((s) => s && s !== '.');
          if (!segs.length) return;
          const isDir = fileName.endsWith('/');
          const mode = (entry.externalFileAttributes >>> 16) & 0xffff;
          const isLink = !isDir && (mode & 0o170000) === 0o120000;
          const last = isDir ? null : segs.pop()!;
          const opened = parents.open(segs);
          if ('failure' in opened) {
            const f = opened.failure;
            if (!('notDir' in f)) return skip(fileName, `${f.missing} could not be created, skipped`);
            return skip(fileName, f.link ? `${f.notDir} is a symlink: entry not extracted through it` : `${f.notDir} is not a directory, skipped`);
          }
          const dir = opened.dir;
          {
            if (last === null) return;
            const stream = await new Promise<NodeJS.ReadableStream>((res, rej) => zip.openReadStream(entry, (err, s) => (err ? rej(err) : res(s!))));
            if (isLink) {
              const chunks: Buffer[] = [];
              let size = 0;
              for await (const c of stream) {
                size += (c as Buffer).length;
                if (size <= MAX_LINK_TARGET) chunks.push(c as Buffer);
              }
              const linkTarget = Buffer.concat(chunks).toString();
              if (size > MAX_LINK_TARGET || !linkTargetLooksInside(segs.join('/'), linkTarget)) return skip(fileName, 'symlink pointing outside the build directory, skipped');
              removeEntry(dir, last);
              fs.symlinkSync(linkTarget, dir.at(last));
            } else {
              removeEntry(dir, last);
              const perm = mode & 0o777 ? (mode & 0o755) | 0o600 : 0o644;
              const fd = fs.openSync(dir.at(last), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, perm);
              if (entry.uncompressedSize <= SMALL_FILE) {
                // Small entries are written at once (yauzl holds each to its declared size).
                try {
                  const chunks: Buffer[] = [];
                  for await (const c of stream) chunks.push(c as Buffer);
                  fs.writeSync(fd, Buffer.concat(chunks));
                } finally {
                  fs.closeSync(fd);
                }
              } else await pipeline(stream, fs.createWriteStream('', { fd, autoClose: true }));
            }
            extracted++;
          }
        })().then(
          () => zip.readEntry(),
          (err) => reject(err),
        );
      });
      zip.readEntry();
    });
  } finally {
    parents.forget();
    zip.close();
    root.close();
  }
  return { extracted, skipped, warnings };
}

// The request and answer of artifact_helper.ts, the entry point run inside the job's sandbox.
export const RESULT_MARK = 'cairn-artifact-result:';
const MAX_WARNINGS = 1000;

export type HelperRequest =
  | { op: 'extract'; dest: string; limits: ArtifactLimits }
  | { op: 'archive'; buildDir: string; paths: string[]; exclude: string[]; format: 'zip' | 'gzip'; limits: ArtifactLimits; untracked?: boolean };

export type HelperResult = { ok: true; count: number; warnings: string[] } | { ok: false; error: string; limit: boolean };

function capped(warnings: string[]): string[] {
  return warnings.length <= MAX_WARNINGS ? warnings : [...warnings.slice(0, MAX_WARNINGS), `... and ${warnings.length - MAX_WARNINGS} more`];
}

/**
 * Does one request on this process's standard input (the archive to extract) or output (the
 * archive to write). `count`: entries extracted, or files archived (0: nothing was written).
 */
export async function runHelperRequest(req: HelperRequest): Promise<HelperResult> {
  try {
    if (req.op === 'extract') {
      const r = await extractZip(0, req.dest, req.limits);
      return { ok: true, count: r.extracted, warnings: capped(r.warnings) };
    }
    const untracked = req.untracked ? untrackedFiles(req.buildDir) : null;
    const c = collectArtifactFiles(req.buildDir, req.paths, req.exclude, req.limits, untracked?.files ?? []);
    if (untracked?.warning) c.warnings.push(untracked.warning);
    if (!c.files.length) return { ok: true, count: 0, warnings: capped(c.warnings) };
    const w = req.format === 'zip' ? await writeZip(req.buildDir, c.files, 1, req.limits) : await writeGzipConcat(req.buildDir, c.files, 1, req.limits);
    return { ok: true, count: w.written, warnings: capped([...c.warnings, ...w.skipped]) };
  } catch (err) {
    return { ok: false, error: (err as Error).message, limit: err instanceof ArtifactLimitError };
  }
}
