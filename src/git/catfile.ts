import type { ChildProcess } from 'node:child_process';
import { assertSafeArg, git, GitError, spawnGit } from './command.js';
import { replaceRefsState } from './history_memo.js';
import { isObjectId } from './validate.js';
import { recordRepositoryRead } from '../cache/read_tracking.js';

/**
 * Long-lived `git cat-file --batch-command` processes, one per repository in a bounded pool,
 * so object reads cost a pipe round trip (~30 µs) instead of a process spawn (~2 ms).
 * A process that errors or exits is dropped and the next read starts a new one.
 *
 * Objects read by their full id are also kept in memory (small ones, least recently used go
 * first): an object id names the same bytes forever, except where replace refs make git read
 * another object in its place, so nothing is kept for a repository that may hold them (see
 * history_memo.ts). Names that are not object ids (`main`, `main:path`) always go to git, so
 * refs are read as they are now.
 */
export type ObjectType = 'blob' | 'tree' | 'commit' | 'tag';

export interface ObjectInfo {
  oid: string;
  type: ObjectType;
  size: number;
}

export interface GitObject extends ObjectInfo {
  data: Buffer;
}

interface Pending {
  command: 'info' | 'contents';
  resolve: (v: GitObject | ObjectInfo | null) => void;
  reject: (e: Error) => void;
}

const MAX_OBJECT_BYTES = 256 * 1024 * 1024;

class CatFileProcess {
  private readonly child: ChildProcess;
  private readonly pending: Pending[] = [];
  private buf: Buffer = Buffer.alloc(0);
  private header: ObjectInfo | null = null;
  dead = false;
  lastUsed = Date.now();
  /** Requests written in one tick leave in one write (a request costs a system call otherwise). */
  private corked = false;

  constructor(readonly gitDir: string, private readonly onDeath: (p: CatFileProcess) => void) {
    this.child = spawnGit(['cat-file', '--batch-command'], { gitDir });
    this.child.stdout!.on('data', (chunk: Buffer) => this.onData(chunk));
    this.child.stderr!.on('data', () => {});
    this.child.on('error', (e) => this.die(new GitError(['cat-file'], null, String(e))));
    this.child.on('close', (code) => this.die(new GitError(['cat-file'], code, 'cat-file exited')));
    this.child.stdin!.on('error', (e) => this.die(new GitError(['cat-file'], null, String(e))));
  }

  get busy() {
    return this.pending.length;
  }

  request(command: 'info' | 'contents', name: string): Promise<GitObject | ObjectInfo | null> {
    if (this.dead) return Promise.reject(new GitError(['cat-file'], null, 'process is gone'));
    this.lastUsed = Date.now();
    return new Promise((resolve, reject) => {
      this.pending.push({ command, resolve, reject });
      const stdin = this.child.stdin!;
      if (!this.corked) {
        this.corked = true;
        stdin.cork();
        process.nextTick(() => {
          this.corked = false;
          stdin.uncork();
        });
      }
      stdin.write(`${command} ${name}\n`);
    });
  }

  private onData(chunk: Buffer) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    try {
      while (this.pending.length) {
        const current = this.pending[0];
        if (!this.header) {
          const nl = this.buf.indexOf(10);
          if (nl < 0) return;
          const line = this.buf.subarray(0, nl).toString('utf8');
          this.buf = this.buf.subarray(nl + 1);
          const parts = line.split(' ');
          if (parts[parts.length - 1] === 'missing' || parts[parts.length - 1] === 'ambiguous') {
            this.pending.shift();
            current.resolve(null);
            continue;
          }
          const [oid, type, size] = parts;
          const info: ObjectInfo = { oid, type: type as ObjectType, size: Number(size) };
          if (!/^[0-9a-f]{40,64}$/.test(oid) || !Number.isFinite(info.size)) throw new Error(`unexpected cat-file output: ${line}`);
          if (current.command === 'info') {
            this.pending.shift();
            current.resolve(info);
            continue;
          }
          if (info.size > MAX_OBJECT_BYTES) throw new Error(`object ${oid} is too large to read in one piece`);
          this.header = info;
        }
        const need = this.header.size + 1;
        if (this.buf.length < need) return;
        const data = Buffer.from(this.buf.subarray(0, this.header.size));
        this.buf = this.buf.subarray(need);
        const obj: GitObject = { ...this.header, data };
        this.header = null;
        this.pending.shift();
        current.resolve(obj);
      }
    } catch (e) {
      this.die(e as Error);
      this.child.kill('SIGKILL');
    }
  }

  die(err: Error) {
    if (this.dead) return;
    this.dead = true;
    for (const p of this.pending.splice(0)) p.reject(err);
    this.onDeath(this);
  }

  close() {
    if (this.dead) return;
    this.dead = true;
    this.child.stdin!.end();
    this.child.kill();
    this.onDeath(this);
  }
}

export interface CatFilePoolOptions {
  /** Most processes alive at once, across repositories. */
  maxProcesses?: number;
  /** Processes per repository (reads on one process are sequential). */
  perRepository?: number;
  idleMs?: number;
  /** Bytes of objects kept in memory across repositories (0: none). */
  cacheBytes?: number;
  /** Largest object kept in memory. */
  cacheObjectBytes?: number;
}

/** Objects by repository and id, least recently used first, bounded by their summed size. */
class ObjectCache {
  private readonly entries = new Map<string, GitObject>();
  private bytes = 0;

  constructor(private readonly maxBytes: number) {}

  get(key: string): GitObject | undefined {
    const hit = this.entries.get(key);
    if (hit) {
      this.entries.delete(key);
      this.entries.set(key, hit);
    }
    return hit;
  }

  set(key: string, obj: GitObject) {
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.bytes -= old.size + 100;
    }
    this.entries.set(key, obj);
    this.bytes += obj.size + 100;
    while (this.bytes > this.maxBytes && this.entries.size) {
      const [oldestKey, oldest] = this.entries.entries().next().value!;
      this.entries.delete(oldestKey);
      this.bytes -= oldest.size + 100;
    }
  }

  forgetRepository(gitDir: string) {
    const prefix = `${gitDir}\0`;
    for (const [key, obj] of this.entries) {
      if (key.startsWith(prefix)) {
        this.entries.delete(key);
        this.bytes -= obj.size + 100;
      }
    }
  }
}

export class CatFilePool {
  private readonly byRepo = new Map<string, CatFileProcess[]>();
  private count = 0;
  private readonly timer: NodeJS.Timeout;
  private readonly objects: ObjectCache;
  private readonly cacheObjectBytes: number;

  constructor(private readonly opts: CatFilePoolOptions = {}) {
    this.objects = new ObjectCache(opts.cacheBytes ?? 64 * 1024 * 1024);
    this.cacheObjectBytes = opts.cacheObjectBytes ?? 256 * 1024;
    this.timer = setInterval(() => this.reapIdle(), 10_000);
    this.timer.unref();
  }

  private acquire(gitDir: string): CatFileProcess {
    const list = this.byRepo.get(gitDir) ?? [];
    const idle = list.find((p) => p.busy === 0);
    if (idle) return idle;
    if (list.length < (this.opts.perRepository ?? 2)) {
      if (this.count >= (this.opts.maxProcesses ?? 64)) this.evictOldest();
      const proc = new CatFileProcess(gitDir, (p) => this.forget(p));
      list.push(proc);
      this.byRepo.set(gitDir, list);
      this.count++;
      return proc;
    }
    return list.reduce((a, b) => (a.busy <= b.busy ? a : b));
  }

  /** Processes in the pool (metrics). */
  get size(): number {
    return this.count;
  }

  private forget(p: CatFileProcess) {
    const list = this.byRepo.get(p.gitDir);
    if (!list) return;
    const i = list.indexOf(p);
    if (i >= 0) {
      list.splice(i, 1);
      this.count--;
    }
    if (!list.length) this.byRepo.delete(p.gitDir);
  }

  private evictOldest() {
    let oldest: CatFileProcess | null = null;
    for (const list of this.byRepo.values()) for (const p of list) if (p.busy === 0 && (!oldest || p.lastUsed < oldest.lastUsed)) oldest = p;
    oldest?.close();
  }

  private reapIdle() {
    const limit = Date.now() - (this.opts.idleMs ?? 60_000);
    for (const list of [...this.byRepo.values()]) for (const p of [...list]) if (p.busy === 0 && p.lastUsed < limit) p.close();
  }

  /** Type and size of an object or revision (`main`, `HEAD:README.md`, an oid), or null. */
  async info(gitDir: string, name: string): Promise<ObjectInfo | null> {
    checkName(name);
    recordRepositoryRead();
    if (isObjectId(name)) {
      const kept = this.objects.get(`${gitDir}\0${name}`);
      if (kept && (await replaceRefsState(gitDir))) return { oid: kept.oid, type: kept.type, size: kept.size };
    }
    return (await this.acquire(gitDir).request('info', name)) as ObjectInfo | null;
  }

  /**
   * An object's contents, or null when it does not exist. The object may be shared with other
   * callers: its data must not be changed.
   */
  async read(gitDir: string, name: string): Promise<GitObject | null> {
    checkName(name);
    recordRepositoryRead();
    if (!isObjectId(name) || !this.cacheObjectBytes) return (await this.acquire(gitDir).request('contents', name)) as GitObject | null;
    const key = `${gitDir}\0${name}`;
    const state = await replaceRefsState(gitDir);
    if (!state) return (await this.acquire(gitDir).request('contents', name)) as GitObject | null;
    const kept = this.objects.get(key);
    if (kept) return kept;
    const obj = (await this.acquire(gitDir).request('contents', name)) as GitObject | null;
    // Kept only if the replace refs did not change while it was read.
    if (obj && obj.size <= this.cacheObjectBytes && (await replaceRefsState(gitDir)) === state) this.objects.set(key, obj);
    return obj;
  }

  /**
   * An object's contents, or null, without starting a long-lived process: through one the
   * repository already has, else through one short-lived `git cat-file --batch` (started by the
   * spawner, so it does not fork this process). For sweeps over many repositories, such as the
   * READMEs of a project list, which would otherwise push busy repositories' processes out of
   * the pool and pay a fork each.
   */
  async readOnce(gitDir: string, name: string): Promise<GitObject | null> {
    checkName(name);
    recordRepositoryRead();
    if (this.byRepo.get(gitDir)?.some((p) => !p.dead)) return this.read(gitDir, name);
    const { stdout } = await git(['cat-file', '--batch'], { gitDir, input: `${name}\n` });
    const nl = stdout.indexOf(10);
    const parts = stdout.subarray(0, nl < 0 ? stdout.length : nl).toString('utf8').split(' ');
    if (parts.length !== 3 || !/^[0-9a-f]{40,64}$/.test(parts[0])) return null;
    const size = Number(parts[2]);
    return { oid: parts[0], type: parts[1] as ObjectType, size, data: Buffer.from(stdout.subarray(nl + 1, nl + 1 + size)) };
  }

  /** Drops a repository's processes and kept objects (after it is moved or deleted). */
  forgetRepository(gitDir: string) {
    for (const p of [...(this.byRepo.get(gitDir) ?? [])]) p.close();
    this.objects.forgetRepository(gitDir);
  }

  async close() {
    clearInterval(this.timer);
    for (const list of [...this.byRepo.values()]) for (const p of [...list]) p.close();
  }
}

function checkName(name: string): string {
  assertSafeArg(name, 'revision');
  return name;
}

export interface Signature {
  name: string;
  email: string;
  /** Seconds since the epoch and the original offset ("+0200"). */
  time: number;
  tz: string;
}

export interface ParsedCommit {
  oid: string;
  tree: string;
  parents: string[];
  author: Signature;
  committer: Signature;
  message: string;
}

/**
 * Signature times Cairn shows: years 1 to 9999 UTC, as every other timestamp (src/lib/timestamps.ts).
 * git takes any 64-bit time in a pushed commit; one beyond JavaScript's dates would make every
 * list showing the commit fail, so it is shown at the nearest end of the range (as Gitaly shows
 * an out-of-range date as its fallback maximum).
 */
export const MIN_SIGNATURE_TIME = -62135596800;
export const MAX_SIGNATURE_TIME = 253402300799;

function parseSignature(value: string): Signature {
  const m = /^(.*?) <([^>]*)> (-?\d+) ([+-]\d{4})$/.exec(value);
  if (!m) return { name: value, email: '', time: 0, tz: '+0000' };
  return { name: m[1], email: m[2], time: Math.min(MAX_SIGNATURE_TIME, Math.max(MIN_SIGNATURE_TIME, Number(m[3]))), tz: m[4] };
}

export function parseCommit(oid: string, data: Buffer): ParsedCommit {
  const text = data.toString('utf8');
  const split = text.indexOf('\n\n');
  const head = split < 0 ? text : text.slice(0, split);
  const message = split < 0 ? '' : text.slice(split + 2);
  const commit: ParsedCommit = { oid, tree: '', parents: [], author: parseSignature(''), committer: parseSignature(''), message };
  for (const line of head.split('\n')) {
    if (line.startsWith(' ')) continue; // continuation of a multi-line header (gpgsig)
    const sp = line.indexOf(' ');
    const key = line.slice(0, sp);
    const value = line.slice(sp + 1);
    if (key === 'tree') commit.tree = value;
    else if (key === 'parent') commit.parents.push(value);
    else if (key === 'author') commit.author = parseSignature(value);
    else if (key === 'committer') commit.committer = parseSignature(value);
  }
  return commit;
}

/** Signature time as ISO 8601 in its own offset, as GitLab prints commit dates ("2024-01-02T03:04:05.000+02:00"). */
export function signatureDate(sig: Signature): string {
  const sign = sig.tz.startsWith('-') ? -1 : 1;
  const offsetMin = sign * (Number(sig.tz.slice(1, 3)) * 60 + Number(sig.tz.slice(3, 5)));
  const local = new Date(Math.min(MAX_SIGNATURE_TIME, Math.max(MIN_SIGNATURE_TIME, sig.time + offsetMin * 60)) * 1000).toISOString().replace('Z', '');
  return `${local}${sig.tz.slice(0, 3)}:${sig.tz.slice(3, 5)}`;
}

export interface TreeEntry {
  mode: string;
  type: 'blob' | 'tree' | 'commit';
  name: string;
  oid: string;
}

/** Parses a raw tree object (`<mode> <name>\0<20-byte oid>`...). */
export function parseTree(data: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(32, i);
    const nul = data.indexOf(0, sp);
    const mode = data.subarray(i, sp).toString('latin1');
    const name = data.subarray(sp + 1, nul).toString('utf8');
    const oid = data.subarray(nul + 1, nul + 21).toString('hex');
    i = nul + 21;
    const type = mode === '40000' ? 'tree' : mode === '160000' ? 'commit' : 'blob';
    entries.push({ mode: mode === '40000' ? '040000' : mode, type, name, oid });
  }
  return entries;
}
