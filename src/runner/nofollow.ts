// Walking a directory tree that a job controls without ever following a link the job made.
// Node has no openat(), so each directory on the way is held open as a file descriptor
// (O_DIRECTORY|O_NOFOLLOW: a symlink in its place fails with ELOOP) and the next name is
// looked up through /proc/self/fd/<fd>/<name>: the kernel resolves the descriptor itself,
// and only <name>, the last component, is subject to the call's own no-follow rule (lstat,
// unlink, mkdir, symlink, O_NOFOLLOW|O_EXCL opens). Nothing is decided by resolving a path as
// text, and a job that swaps a directory for a link between two calls gains nothing.
// Without /proc (not Linux) the same calls go through the directory's path, checked one
// component at a time with lstat (racy against a job still running, never following a link
// that was there at the check).
import fs from 'node:fs';
import path from 'node:path';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
const O_DIR = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

let procFd: boolean | null = null;
function hasProcFd(): boolean {
  if (procFd === null) {
    try {
      const fd = fs.openSync('/', O_DIR & ~O_NOFOLLOW);
      try {
        procFd = fs.statSync(`/proc/self/fd/${fd}`).ino === fs.statSync('/').ino;
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      procFd = false;
    }
  }
  return procFd;
}

/** A directory held open; names are looked up in it, never through a path. */
export class Dir {
  private constructor(
    readonly fd: number,
    /** The path it was reached by (messages, and the fallback without /proc). */
    readonly path: string,
  ) {}

  /** Opens a directory the runner chose (its last component must not be a symlink). */
  static open(dir: string): Dir {
    const abs = path.resolve(dir);
    return new Dir(fs.openSync(abs, O_DIR), abs);
  }

  /** Another descriptor for the same directory (the caller closes each). */
  dup(): Dir {
    return new Dir(fs.openSync(hasProcFd() ? `/proc/self/fd/${this.fd}` : this.path, O_RDONLY | O_DIRECTORY), this.path);
  }

  /** A path naming `name` in this directory, for calls that do not follow their last component. */
  at(name: string): string {
    if (!name || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) throw new Error(`not a single path component: ${JSON.stringify(name)}`);
    return hasProcFd() ? `/proc/self/fd/${this.fd}/${name}` : path.join(this.path, name);
  }

  lstat(name: string): fs.Stats | null {
    try {
      return fs.lstatSync(this.at(name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  /** The subdirectory `name`, or null when it is missing, a symlink or not a directory. */
  child(name: string): Dir | null {
    const st = this.lstat(name);
    if (!st || !st.isDirectory()) return null;
    try {
      const fd = fs.openSync(this.at(name), O_DIR);
      return new Dir(fd, path.join(this.path, name));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'ENOENT') return null;
      throw err;
    }
  }

  /** Entries with their types as the directory lists them (d_type: a symlink is a symlink). */
  entries(): fs.Dirent[] {
    return fs.readdirSync(hasProcFd() ? `/proc/self/fd/${this.fd}` : this.path, { withFileTypes: true });
  }

  close(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      /* closed */
    }
  }
}

export type WalkFailure = { missing: string } | { notDir: string; link: boolean };

/**
 * Opens the directory at the relative path `segments` under `root`, one component at a time
 * (a new descriptor, also for no segments: the caller closes it).
 * `create`: missing directories are made (mode 0755 less the umask). Fails (returns why) at the
 * first component that is a symlink (even one pointing inside) or not a directory.
 */
export function openPath(root: Dir, segments: string[], create = false): { dir: Dir } | { failure: WalkFailure } {
  let cur = root;
  let so = '';
  const release = () => {
    if (cur !== root) cur.close();
  };
  for (const seg of segments) {
    so = so ? `${so}/${seg}` : seg;
    let next = cur.child(seg);
    if (!next) {
      let st = cur.lstat(seg);
      if (!st && create) {
        try {
          fs.mkdirSync(cur.at(seg), 0o755);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
            release();
            throw err;
          }
        }
        next = cur.child(seg);
        if (!next) st = cur.lstat(seg);
      }
      if (!next) {
        release();
        return { failure: st ? { notDir: so, link: st.isSymbolicLink() } : { missing: so } };
      }
    }
    release();
    cur = next;
  }
  return { dir: cur === root ? root.dup() : cur };
}

/** Removes `name` in `dir` whatever it is; a directory's contents are removed the same way, links are unlinked, never followed. */
export function removeEntry(dir: Dir, name: string): void {
  const st = dir.lstat(name);
  if (!st) return;
  if (!st.isDirectory()) {
    fs.unlinkSync(dir.at(name));
    return;
  }
  const sub = dir.child(name);
  if (sub) {
    try {
      for (const e of sub.entries()) removeEntry(sub, e.name);
    } finally {
      sub.close();
    }
  }
  try {
    fs.rmdirSync(dir.at(name));
  } catch (err) {
    // Swapped for something else meanwhile: remove that instead (unlink does not follow).
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') fs.unlinkSync(dir.at(name));
    else if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}

/** Removes a whole tree (a job's directory) without following any link in it. */
export function removeTree(p: string): void {
  const abs = path.resolve(p);
  let parent: Dir;
  try {
    parent = Dir.open(path.dirname(abs));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  try {
    removeEntry(parent, path.basename(abs));
  } finally {
    parent.close();
  }
}

/** lchown of a tree, never following symlinks (the job may have planted some). */
export function chownTree(p: string, uid: number, gid: number): void {
  const abs = path.resolve(p);
  const parent = Dir.open(path.dirname(abs));
  try {
    chownEntry(parent, path.basename(abs), uid, gid);
  } finally {
    parent.close();
  }
}

function chownEntry(dir: Dir, name: string, uid: number, gid: number): void {
  fs.lchownSync(dir.at(name), uid, gid);
  const sub = dir.lstat(name)?.isDirectory() ? dir.child(name) : null;
  if (!sub) return;
  try {
    for (const e of sub.entries()) chownEntry(sub, e.name, uid, gid);
  } finally {
    sub.close();
  }
}
