// Resource limits of a job: a control group of its own when the machine offers one (cgroup v2
// with the pids controller delegated to the runner's cgroup, or the cgroup v1 pids and memory
// hierarchies), so that a fork bomb or a memory hog stays inside its job; otherwise per-process
// rlimits through prlimit (RLIMIT_NPROC then counts every process of the job's user, all jobs
// together). Files: RLIMIT_FSIZE always, and the private /tmp has a size.
import fs from 'node:fs';
import path from 'node:path';
import { setting } from '../config.js';

export interface JobLimits {
  /** Most processes (and threads) a job has at once. */
  pids: number;
  /** Memory of the whole job (cgroup), or of each process (RLIMIT_DATA), bytes. */
  memory: number;
  /** Largest file a job writes, bytes (RLIMIT_FSIZE), and the size of its private /tmp. */
  fileSize: number;
}

export function jobLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): JobLimits {
  return {
    pids: setting<number>('CAIRN_RUNNER_JOB_PIDS', env),
    memory: setting<number>('CAIRN_RUNNER_JOB_MEMORY', env),
    fileSize: setting<number>('CAIRN_RUNNER_JOB_FILE_SIZE', env),
  };
}

/** Where job cgroups can be made: a v2 directory, or the v1 pids (and memory) directories. */
export type CgroupSupport = { version: 2; dir: string } | { version: 1; pids: string; memory: string | null };

interface Mount {
  point: string;
  type: string;
  options: string[];
}

function mounts(): Mount[] {
  try {
    return fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [left, right] = line.split(' - ');
        const f = left.split(' ');
        const r = (right ?? '').split(' ');
        return { point: f[4].replace(/\\040/g, ' '), type: r[0], options: (r[2] ?? '').split(',') };
      });
  } catch {
    return [];
  }
}

/** This process's cgroup path per v1 controller, and under v2 (key ''). */
function ownCgroups(): Map<string, string> {
  const m = new Map<string, string>();
  try {
    for (const line of fs.readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const [, controllers, p] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
      if (p === undefined) continue;
      for (const c of controllers.split(',')) m.set(c, p);
    }
  } catch {
    /* not Linux */
  }
  return m;
}

/** A directory we may make job cgroups in: made (mode 0755) and proven writable by a trial child. */
function usableParent(dir: string, files: [string, string][]): boolean {
  try {
    fs.mkdirSync(dir, { recursive: true });
    const trial = fs.mkdtempSync(path.join(dir, 'trial-'));
    try {
      for (const [f, value] of files) fs.writeFileSync(path.join(trial, f), value);
      return true;
    } finally {
      fs.rmdirSync(trial);
    }
  } catch {
    return false;
  }
}

let detected: CgroupSupport | null | undefined;

/** Finds a place for job cgroups (once per process); null when none is writable here. */
export function detectCgroups(opts: { refresh?: boolean } = {}): CgroupSupport | null {
  if (detected !== undefined && !opts.refresh) return detected;
  detected = null;
  const all = mounts();
  const own = ownCgroups();
  const v2 = all.find((m) => m.type === 'cgroup2');
  if (v2 && own.has('')) {
    // Our own cgroup's parent cannot take us in (processes live in leaves): job cgroups go in a
    // sibling `cairn-jobs` of our cgroup when its parent delegates pids to it.
    const mine = path.join(v2.point, own.get('')!);
    const parent = path.dirname(mine);
    try {
      const controllers = fs.readFileSync(path.join(parent, 'cgroup.subtree_control'), 'utf8').split(/\s+/);
      const dir = path.join(parent, 'cairn-jobs');
      if (controllers.includes('pids') && usableParent(dir, [])) {
        fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), controllers.includes('memory') ? '+pids +memory' : '+pids');
        if (usableParent(dir, [['pids.max', 'max']])) detected = { version: 2, dir };
      }
    } catch {
      /* not delegated */
    }
  }
  if (!detected) {
    const v1 = (c: string) => {
      const m = all.find((x) => x.type === 'cgroup' && x.options.includes(c));
      return m && own.has(c) ? path.join(m.point, own.get(c)!, 'cairn-jobs') : null;
    };
    const pids = v1('pids');
    if (pids && usableParent(pids, [['pids.max', 'max']])) {
      const memory = v1('memory');
      detected = { version: 1, pids, memory: memory && usableParent(memory, [['memory.limit_in_bytes', '-1']]) ? memory : null };
    }
  }
  return detected;
}

export interface JobCgroup {
  /** Directories of this job's cgroup (one per v1 hierarchy). */
  dirs: string[];
  /** The command prefix that puts a process into the cgroup before it runs anything. */
  enter: string[];
  /** What the log says about it. */
  description: string;
  /** SIGKILLs every process in the cgroup until none is left, then removes it. */
  destroy(): Promise<void>;
}

/** Makes the job's cgroup with its limits; null when the machine offers none (the caller falls back to rlimits). */
export function createJobCgroup(support: CgroupSupport | null, name: string, limits: JobLimits): JobCgroup | null {
  if (!support) return null;
  const dirs: string[] = [];
  const made: string[] = [];
  try {
    if (support.version === 2) {
      const dir = path.join(support.dir, name);
      fs.mkdirSync(dir);
      made.push(dir);
      fs.writeFileSync(path.join(dir, 'pids.max'), String(limits.pids));
      if (fs.existsSync(path.join(dir, 'memory.max'))) {
        fs.writeFileSync(path.join(dir, 'memory.max'), String(limits.memory));
        try {
          fs.writeFileSync(path.join(dir, 'memory.swap.max'), '0');
        } catch {
          /* no swap accounting */
        }
      }
      dirs.push(dir);
    } else {
      const pids = path.join(support.pids, name);
      fs.mkdirSync(pids);
      made.push(pids);
      fs.writeFileSync(path.join(pids, 'pids.max'), String(limits.pids));
      dirs.push(pids);
      if (support.memory) {
        const memory = path.join(support.memory, name);
        fs.mkdirSync(memory);
        made.push(memory);
        fs.writeFileSync(path.join(memory, 'memory.limit_in_bytes'), String(limits.memory));
        dirs.push(memory);
      }
    }
  } catch {
    for (const d of made.reverse()) void rmCgroup(d);
    return null;
  }
  const memoryLimited = support.version === 2 ? fs.existsSync(path.join(dirs[0], 'memory.max')) : !!support.memory;
  return {
    dirs,
    // A shell writes its own pid into each cgroup.procs, then becomes the command: every
    // process the command starts is born inside.
    enter: ['/bin/sh', '-c', 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"', 'cairn-cgroup', ...dirs.map((d) => path.join(d, 'cgroup.procs')), '--'],
    description: `cgroup v${support.version}: at most ${limits.pids} processes${memoryLimited ? `, ${formatBytes(limits.memory)} of memory` : ''}`,
    async destroy() {
      for (const d of dirs) await killAll(d);
      for (const d of [...dirs].reverse()) await rmCgroup(d);
    },
  };
}

function cgroupPids(dir: string): number[] {
  try {
    return fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function killAll(dir: string) {
  try {
    // cgroup v2 (5.14+) kills the whole tree at once.
    fs.writeFileSync(path.join(dir, 'cgroup.kill'), '1');
  } catch {
    /* v1, or an older kernel: one by one */
  }
  // A fork bomb keeps forking while it is killed; the pids limit bounds it, so rounds end (on a
  // loaded machine they may take seconds: the bound is time, not rounds).
  const until = Date.now() + 20_000;
  for (let round = 0; Date.now() < until; round++) {
    const pids = cgroupPids(dir);
    if (!pids.length) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await new Promise((r) => setTimeout(r, round < 10 ? 5 : 25));
  }
}

async function rmCgroup(dir: string) {
  const until = Date.now() + 10_000;
  for (;;) {
    try {
      fs.rmdirSync(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || Date.now() >= until) return;
      // EBUSY while the last killed processes are reaped.
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

export function formatBytes(n: number): string {
  for (const [unit, size] of [['GB', 1024 ** 3], ['MB', 1024 ** 2], ['KB', 1024]] as const) if (n >= size && n % size === 0) return `${n / size} ${unit}`;
  return `${n} bytes`;
}
