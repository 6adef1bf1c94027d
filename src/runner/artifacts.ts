// Artifact archives: collecting the paths a job declares (globs, exclude) inside its build
// directory and nowhere else, writing them as a zip (or concatenated gzip members for
// reports), and extracting a dependency's zip without letting an entry land outside the
// build directory (zip-slip) or through a symlink.
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { isUtf8 } from 'node:buffer';
import { pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import picomatch from 'picomatch';
import yauzl from 'yauzl';
import yazl from 'yazl';

export interface CollectResult {
  /** Relative paths (with / separators) of regular files and in-tree symlinks. */
  files: string[];
  /** Why some patterns or paths were left out (shown in the job log). */
  warnings: string[];
}

const GLOB_CHARS = /[*?[\]{}]/;

function inside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
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

/** Walks a directory without following symlinked directories; yields relative paths of files and symlinks. */
function* walk(root: string, rel: string): Generator<{ rel: string; kind: 'file' | 'link' | 'dir' }> {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isSymbolicLink()) yield { rel: r, kind: 'link' };
    else if (e.isDirectory()) {
      yield { rel: r, kind: 'dir' };
      yield* walk(root, r);
    } else if (e.isFile()) yield { rel: r, kind: 'file' };
  }
}

/** A symlink is kept only when its target stays inside the build directory. */
function linkStaysInside(root: string, rel: string): boolean {
  try {
    const target = fs.readlinkSync(path.join(root, rel));
    const resolved = path.resolve(path.dirname(path.join(root, rel)), target);
    if (!inside(root, resolved)) return false;
    // Also through any symlinks on the way.
    const real = fs.realpathSync(path.join(root, rel));
    return inside(fs.realpathSync(root), real);
  } catch {
    return false; // dangling
  }
}

export function collectArtifactFiles(buildDir: string, paths: string[], exclude: string[] = []): CollectResult {
  const root = path.resolve(buildDir);
  const files = new Set<string>();
  const warnings: string[] = [];
  const excluded = exclude.map((e) => normalisePattern(e)).filter((e): e is string => e !== null);
  const isExcluded = excluded.length ? picomatch(excluded, { dot: true }) : () => false;
  let all: { rel: string; kind: 'file' | 'link' | 'dir' }[] | null = null;

  const addTree = (rel: string) => {
    const abs = path.join(root, rel);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(abs);
    } catch {
      warnings.push(`${rel}: no matching files`);
      return;
    }
    // Every directory on the way must be a real directory inside the build dir.
    try {
      if (!inside(fs.realpathSync(root), fs.realpathSync(path.dirname(abs)))) {
        warnings.push(`${rel}: outside the build directory, skipped`);
        return;
      }
    } catch {
      return;
    }
    if (st.isSymbolicLink()) {
      if (linkStaysInside(root, rel)) files.add(rel);
      else warnings.push(`${rel}: symlink pointing outside the build directory, skipped`);
    } else if (st.isFile()) files.add(rel);
    else if (st.isDirectory()) {
      for (const e of walk(root, rel)) {
        if (e.kind === 'file') files.add(e.rel);
        else if (e.kind === 'link') {
          if (linkStaysInside(root, e.rel)) files.add(e.rel);
          else warnings.push(`${e.rel}: symlink pointing outside the build directory, skipped`);
        }
      }
    }
  };

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
  return { files: [...files].filter((f) => !isExcluded(f)).sort(), warnings };
}

/** Writes the files into a zip at outPath, streamed from disk. */
export async function writeZip(buildDir: string, files: string[], outPath: string): Promise<void> {
  const zip = new yazl.ZipFile();
  const out = fs.createWriteStream(outPath, { mode: 0o600 });
  const piped = pipeline(zip.outputStream, out);
  for (const rel of files) {
    const abs = path.join(buildDir, rel);
    const st = fs.lstatSync(abs);
    if (st.isSymbolicLink()) {
      zip.addBuffer(Buffer.from(fs.readlinkSync(abs)), rel, { mode: 0o120777, mtime: st.mtime });
    } else {
      zip.addFile(abs, rel, { mode: st.mode & 0o777 ? 0o100000 | (st.mode & 0o777) : 0o100644, mtime: st.mtime });
    }
  }
  zip.end();
  await piped;
}

/** Concatenated gzip members, one per file (what reports with artifact_format gzip are). */
export async function writeGzipConcat(buildDir: string, files: string[], outPath: string): Promise<void> {
  const out = fs.createWriteStream(outPath, { mode: 0o600 });
  for (const rel of files) {
    const abs = path.join(buildDir, rel);
    if (!fs.lstatSync(abs).isFile()) continue;
    const gz = zlib.createGzip();
    fs.createReadStream(abs).pipe(gz);
    for await (const chunk of gz) if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
}

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, decodeStrings: false, validateEntrySizes: true }, (err, z) => (err ? reject(err) : resolve(z!))),
  );
}

/** Entry names that would leave the destination: absolute, drive letters, `..` segments. */
export function safeEntryName(name: string): string | null {
  const n = name.replace(/\\/g, '/');
  if (!n || n.includes('\0') || n.startsWith('/') || /^[A-Za-z]:/.test(n)) return null;
  const norm = path.posix.normalize(n);
  if (norm === '..' || norm.startsWith('../') || norm.split('/').includes('..')) return null;
  return norm.replace(/^(\.\/)+/, '');
}

/**
 * Creates root/rel one directory at a time; false (nothing created beyond) when a step is a
 * symlink resolving outside root or something that is not a directory.
 */
function mkdirInside(root: string, rel: string): boolean {
  let cur = root;
  for (const seg of rel.split(path.sep).filter(Boolean)) {
    const next = path.join(cur, seg);
    let st: fs.Stats | null = null;
    try {
      st = fs.lstatSync(next);
    } catch {
      st = null;
    }
    if (!st) {
      fs.mkdirSync(next);
      cur = next;
      continue;
    }
    if (st.isSymbolicLink()) {
      let real: string;
      try {
        real = fs.realpathSync(next);
      } catch {
        return false;
      }
      if (!inside(root, real) || !fs.statSync(real).isDirectory()) return false;
      cur = real;
      continue;
    }
    if (!st.isDirectory()) return false;
    cur = next;
  }
  return inside(root, fs.realpathSync(cur));
}

/**
 * Where a symlink target leads as the kernel resolves it (each existing step through its own
 * symlinks, `..` after that), so `a -> .` followed by `b -> a/..` is seen leaving root.
 */
function resolvesInside(root: string, dir: string, linkTarget: string): boolean {
  if (path.isAbsolute(linkTarget)) return inside(root, path.resolve(linkTarget));
  let cur = fs.realpathSync(dir);
  for (const seg of linkTarget.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') cur = path.dirname(cur);
    else {
      const next = path.join(cur, seg);
      try {
        cur = fs.realpathSync(next);
      } catch {
        cur = next; // not there (yet): taken literally
      }
    }
    if (!inside(root, cur)) return false;
  }
  return inside(root, cur);
}

/**
 * Extracts a zip into dest. Entries that would escape are skipped (and reported), parent
 * directories must resolve inside dest (no writing through a symlink), symlinks are created
 * only when they point inside dest.
 */
export async function extractZip(file: string, dest: string): Promise<{ extracted: number; skipped: string[] }> {
  const root = fs.realpathSync(dest);
  const zip = await openZip(file);
  const skipped: string[] = [];
  let extracted = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', () => resolve());
      zip.on('entry', (entry: yauzl.Entry) => {
        void (async () => {
          // Names are decoded here, not by yauzl (which would refuse the whole archive for one bad name).
          const rawName = entry.fileName as unknown as Buffer;
          const fileName = (entry.generalPurposeBitFlag & 0x800) !== 0 || isUtf8(rawName) ? rawName.toString('utf8') : rawName.toString('latin1');
          const name = safeEntryName(fileName);
          if (name === null || name === '' || name === '.') {
            if (name === null) skipped.push(fileName);
            return;
          }
          const target = path.join(root, name);
          const isDir = fileName.endsWith('/');
          const mode = (entry.externalFileAttributes >>> 16) & 0xffff;
          const isLink = (mode & 0o170000) === 0o120000;
          const parent = isDir ? target : path.dirname(target);
          // Directory by directory: never create anything through a symlink that leads out.
          if (!mkdirInside(root, path.relative(root, parent))) {
            skipped.push(fileName);
            return;
          }
          if (isDir) return;
          const stream = await new Promise<NodeJS.ReadableStream>((res, rej) => zip.openReadStream(entry, (err, s) => (err ? rej(err) : res(s!))));
          // Never write through something already there that is a symlink.
          try {
            if (fs.lstatSync(target).isSymbolicLink() || fs.lstatSync(target).isDirectory()) fs.rmSync(target, { recursive: true, force: true });
          } catch {
            /* not there */
          }
          if (isLink) {
            const chunks: Buffer[] = [];
            for await (const c of stream) chunks.push(c as Buffer);
            const linkTarget = Buffer.concat(chunks).toString();
            if (!inside(root, path.resolve(path.dirname(target), linkTarget)) || !resolvesInside(root, path.dirname(target), linkTarget)) {
              skipped.push(fileName);
              return;
            }
            fs.symlinkSync(linkTarget, target);
          } else {
            const perm = mode & 0o777 ? mode & 0o755 : 0o644;
            await pipeline(stream, fs.createWriteStream(target, { mode: perm | 0o600, flags: 'w' }));
          }
          extracted++;
        })().then(
          () => zip.readEntry(),
          (err) => reject(err),
        );
      });
      zip.readEntry();
    });
  } finally {
    zip.close();
  }
  return { extracted, skipped };
}
