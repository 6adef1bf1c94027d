// One owner per embedded database. PGlite keeps PostgreSQL's files in the data directory but
// none of PostgreSQL's own interlock (postmaster.pid): two processes that open the same
// directory each run a server over the same files, and what one writes the other overwrites
// (a token made by `cairn token create` beside a running `cairn serve` answered 401 and was
// gone after a restart). So every process that opens it takes this lock first, a pid file as
// PostgreSQL's: created exclusively, naming the process and when it started (a pid reused after
// a crash or a reboot is not taken for the owner), removed when the database is closed.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';

export const LOCK_FILE = 'pglite.lock';

interface Holder {
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat), when readable. */
  started: string | null;
}

function startTime(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function parse(text: string): Holder | null {
  const m = /^(\d+)(?: (\d+))?\n?$/.exec(text);
  return m ? { pid: Number(m[1]), started: m[2] ?? null } : null;
}

function alive(h: Holder): boolean {
  try {
    process.kill(h.pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // Alive, but is it the process that wrote the lock?
  const now = startTime(h.pid);
  return h.started === null || now === null || now === h.started;
}

function readText(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * Takes the lock of the embedded database in `dataDir`, or throws a ConfigError (one line)
 * naming the process that holds it. Returns the release, which is also run at process exit.
 */
export function lockDataDir(dataDir: string): () => void {
  fs.mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, LOCK_FILE);
  const mine = `${process.pid}${startTime(process.pid) ? ` ${startTime(process.pid)}` : ''}\n`;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx', 0o644);
      try {
        fs.writeSync(fd, mine);
      } finally {
        fs.closeSync(fd);
      }
      const release = () => {
        process.off('exit', release);
        // Only our own lock: never one another process took after we lost ours.
        if (readText(file) === mine) fs.rmSync(file, { force: true });
      };
      process.on('exit', release);
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const text = readText(file);
    if (text === null) continue; // released meanwhile
    const holder = parse(text);
    if (holder && alive(holder)) {
      const who = holder.pid === process.pid ? 'this process' : `another process (pid ${holder.pid})`;
      throw new ConfigError(
        `CAIRN_DATA_DIR: the embedded database in ${dataDir} is in use by ${who}; stop it first (the embedded database belongs to one process; several processes share a PostgreSQL through DATABASE_URL)`,
        'CAIRN_DATA_DIR',
      );
    }
    // A lock left by a process that is gone (or unreadable): set it aside, then check that what
    // was set aside is still that stale lock and not one a racing process made meanwhile.
    const aside = `${file}.stale-${process.pid}`;
    try {
      fs.renameSync(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (readText(aside) !== text) {
      try {
        fs.linkSync(aside, file); // put the racer's lock back
      } catch {
        /* yet another one took it: it is the owner */
      }
    }
    fs.rmSync(aside, { force: true });
  }
  throw new ConfigError(`CAIRN_DATA_DIR: could not take the lock ${file} (other processes keep taking it)`, 'CAIRN_DATA_DIR');
}

/**
 * The pid of the live process holding the lock of the embedded database in `dataDir`, or null
 * (no lock, or one left by a process that is gone). Used by commands that, when a server holds
 * the database, ask it instead (src/control/) or refuse (restore).
 */
export function dataDirHolder(dataDir: string): number | null {
  const text = readText(path.join(dataDir, LOCK_FILE));
  const holder = text === null ? null : parse(text);
  return holder && alive(holder) ? holder.pid : null;
}
