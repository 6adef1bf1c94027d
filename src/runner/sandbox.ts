// Job isolation with bubblewrap: the root filesystem read-only, only the job's own directory
// (and a private /tmp) writable, Cairn's data directory, the runner's configuration and other
// jobs' directories hidden under empty tmpfs mounts, /run and /var/run (host sockets) hidden, a
// new PID namespace so that the job's processes all die with it, and a network namespace of its
// own: no network at all, unless the runner connects it to the outside through pasta
// (attachNetwork) with the host's loopback not mapped. Resource limits: limits.ts.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setting } from '../config.js';

export interface SandboxStatus {
  available: boolean;
  /** The bwrap binary used, when available. */
  bwrap: string | null;
  /** Why it is not available (shown to the operator). */
  reason: string | null;
  /**
   * When the runner is root: the unprivileged user jobs run as (bwrap sets the sandbox up as
   * root, then setpriv drops to this uid/gid with no capabilities and no_new_privs). Null: jobs
   * keep the runner's uid (a root runner's jobs then have every capability dropped instead).
   */
  runAs?: { uid: number; gid: number; setpriv: string } | null;
  /** The pasta binary that gives jobs outbound network (null: jobs get no network; `pastaReason` says why). */
  pasta?: string | null;
  pastaReason?: string | null;
  /** bwrap understands --size (0.5.0+): the private /tmp gets a size. */
  tmpfsSize?: boolean;
  /** bwrap understands --perms (0.5.0+): the private /tmp is world-writable and sticky, as /tmp is. */
  tmpfsPerms?: boolean;
  /** The prlimit binary (limits that apply inside the sandbox), when installed. */
  prlimit?: string | null;
  /** bwrap understands --disable-userns (0.8.0+): containers of the image executor cannot make user namespaces. */
  disableUserns?: boolean;
}

let cached: SandboxStatus | null = null;

export function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return null;
}

/**
 * Finds bwrap and checks that it can really build a sandbox here (user namespaces may be off,
 * or a container may forbid mounts): a run of `true` with the same kind of arguments jobs get.
 */
export function detectSandbox(opts: { refresh?: boolean; bwrapPath?: string; env?: NodeJS.ProcessEnv } = {}): SandboxStatus {
  if (cached && !opts.refresh && !opts.bwrapPath) return cached;
  const env = opts.env ?? process.env;
  const bwrap = opts.bwrapPath ?? setting<string | null>('CAIRN_RUNNER_BWRAP', env) ?? findOnPath('bwrap');
  let status: SandboxStatus;
  const trial = (command: string[], caps: string[]) =>
    spawnSync(bwrap!, ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--unshare-pid', '--die-with-parent', ...caps, '--', ...command], {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  if (!bwrap) {
    status = { available: false, bwrap: null, reason: 'bubblewrap (bwrap) is not installed; on Debian/Ubuntu: apt-get install bubblewrap' };
  } else {
    const r = trial(['true'], ['--cap-drop', 'ALL']);
    status =
      r.status === 0
        ? { available: true, bwrap, reason: null, runAs: null }
        : { available: false, bwrap: null, reason: `bubblewrap (${bwrap}) cannot create a sandbox here: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()} (are unprivileged user namespaces disabled?)` };
    // A root runner runs its jobs as an unprivileged user: root without capabilities could
    // still read every root-owned file the machine has.
    const setpriv = findOnPath('setpriv');
    if (status.available && typeof process.getuid === 'function' && process.getuid() === 0 && setpriv && setting('CAIRN_RUNNER_JOB_UID', env) !== 'root') {
      const uid = setting<number>('CAIRN_RUNNER_JOB_UID', env);
      const gid = setting<number | null>('CAIRN_RUNNER_JOB_GID', env) ?? uid;
      if (Number.isInteger(uid) && uid > 0 && Number.isInteger(gid) && gid > 0) {
        const runAs = { uid, gid, setpriv };
        const t = trial([...setprivArgs(runAs), 'true'], []);
        if (t.status === 0) status.runAs = runAs;
        else status.reason = `jobs run as root without capabilities: dropping to uid ${uid} failed (${(t.stderr || '').trim()})`;
      }
    }
  }
  if (status.available) {
    const pasta = setting<string | null>('CAIRN_RUNNER_PASTA', env) ?? findOnPath('pasta');
    status.pasta = pasta;
    status.pastaReason = pasta ? null : 'pasta is not installed (on Debian/Ubuntu: apt-get install passt)';
    status.prlimit = findOnPath('prlimit');
    const help = spawnSync(bwrap!, ['--help'], { encoding: 'utf8', timeout: 10_000 }).stdout ?? '';
    status.tmpfsSize = /--size\b/.test(help);
    status.tmpfsPerms = /--perms\b/.test(help);
    status.disableUserns = /--disable-userns\b/.test(help);
  }
  if (!opts.bwrapPath) cached = status;
  return status;
}

export function setprivArgs(runAs: { uid: number; gid: number; setpriv: string }): string[] {
  return [runAs.setpriv, `--reuid=${runAs.uid}`, `--regid=${runAs.gid}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--'];
}

export interface SandboxSpec {
  bwrap: string;
  /** The job's own directory: build dir, scripts, file variables, HOME. Writable. */
  jobDir: string;
  /** Working directory inside. */
  cwd: string;
  /** Directories and files the job must not see (Cairn's data dir, config, all builds). */
  hidden: string[];
  /** Drop to this user inside the sandbox (a root runner); otherwise every capability is dropped. */
  runAs?: { uid: number; gid: number; setpriv: string } | null;
  /**
   * `none` (the default): a network namespace of its own with nothing but its loopback; `host`:
   * the machine's network (no namespace; only when an operator asks for it). A job that gets
   * network through pasta is spawned with `none` and `syncFds`, then attachNetwork().
   */
  network?: 'none' | 'host';
  /** bwrap writes the sandbox's pid to `info` and waits for a byte on `block` before running the command. */
  syncFds?: { info: number; block: number };
  /** Size of the private /tmp and /var/tmp, bytes (needs SandboxStatus.tmpfsSize). */
  tmpSize?: number | null;
  /**
   * The private /tmp and /var/tmp mode 1777 (needs SandboxStatus.tmpfsPerms): bwrap makes a tmpfs
   * root's and 0755, which a job dropped to an unprivileged user could not write.
   */
  tmpSticky?: boolean;
  /** Limits applied inside the sandbox with prlimit (each process gets them; RLIMIT_NPROC counts per user). */
  rlimits?: { prlimit: string; nproc?: number | null; data?: number | null; fsize?: number | null } | null;
}

/** /run and /var/run as the job sees them: empty (host sockets: PostgreSQL's, D-Bus, any world-writable one). */
const HOST_SOCKET_DIRS = ['/run', '/var/run'];

/** The bwrap argument list that runs `command` isolated (arguments, never a shell string). */
export function sandboxArgs(spec: SandboxSpec, command: string[]): string[] {
  const tmp = [...(spec.tmpSize ? ['--size', String(spec.tmpSize)] : []), ...(spec.tmpSticky ? ['--perms', '1777'] : [])];
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', ...tmp, '--tmpfs', '/tmp', ...tmp, '--tmpfs', '/var/tmp'];
  for (const dir of HOST_SOCKET_DIRS) {
    // /var/run is usually a link to /run: hidden once, where it really is.
    let st: fs.Stats;
    try {
      st = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (st.isDirectory()) args.push('--tmpfs', dir);
  }
  const jobDir = path.resolve(spec.jobDir);
  // Shallow paths first, so a deeper hidden path is mounted inside a shallower one's tmpfs.
  const hidden = [...new Set(spec.hidden.map((p) => path.resolve(p)))].sort((a, b) => a.length - b.length);
  for (const p of hidden) {
    if (p === '/' || jobDir === p || !fs.existsSync(p)) continue;
    // A path under the job's own directory is the job's to see.
    if (p.startsWith(jobDir + path.sep)) continue;
    let real: string;
    try {
      real = fs.realpathSync(p);
    } catch {
      continue;
    }
    for (const target of new Set([p, real])) {
      const st = fs.statSync(target);
      if (st.isDirectory()) args.push('--tmpfs', target);
      else args.push('--ro-bind', '/dev/null', target);
    }
  }
  // After the tmpfs mounts, so the job's directory reappears inside a hidden parent.
  args.push('--bind', jobDir, jobDir);
  args.push('--unshare-pid', '--die-with-parent', '--chdir', spec.cwd);
  if (spec.network !== 'host') args.push('--unshare-net');
  if (spec.syncFds) args.push('--info-fd', String(spec.syncFds.info), '--block-fd', String(spec.syncFds.block));
  const r = spec.rlimits;
  const limited = r ? [r.prlimit, ...(r.nproc ? [`--nproc=${r.nproc}`] : []), ...(r.data ? [`--data=${r.data}`] : []), ...(r.fsize ? [`--fsize=${r.fsize}`] : []), '--', ...command] : command;
  if (spec.runAs) return [...args, '--', ...setprivArgs(spec.runAs), ...limited];
  return [...args, '--cap-drop', 'ALL', '--', ...limited];
}

/** Waits (up to 2 s) until the namespace of `pid` has its loopback address (bwrap's loopback setup is done). */
async function loopbackReady(pid: number) {
  const end = Date.now() + 2000;
  while (Date.now() < end) {
    try {
      if (fs.readFileSync(`/proc/${pid}/net/fib_trie`, 'utf8').includes('127.0.0.1')) return;
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** localhost, 127.x.y.z, ::1: a host name that means this machine's loopback. */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h.endsWith('.localhost') || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

export function urlPort(url: URL): number {
  return Number(url.port || (url.protocol === 'https:' ? 443 : 80));
}

export interface PortForward {
  /** The port a job connects to on its own loopback (127.0.0.1 / ::1). */
  jobPort: number;
  /** The host loopback port that connection is forwarded to. */
  hostPort: number;
}

export interface AttachedNetwork {
  /** Stops pasta (it would otherwise outlive the namespace). */
  close(): void;
}

/**
 * Connects the network namespace of a sandbox spawned with `syncFds` to the outside through
 * pasta: outbound TCP/UDP from the job goes out as the runner's own connections, the host's
 * loopback is NOT reachable (--no-map-gw; no automatic port forwarding), except exactly the
 * `forward` ports (a job's connection to 127.0.0.1:jobPort goes to the host's
 * 127.0.0.1:hostPort). Resolves once the namespace is configured; then the caller lets bwrap
 * go on (a byte on the block fd). `wrap` prefixes pasta's command (the job's cgroup).
 */
export async function attachNetwork(
  childPid: number,
  opts: { pasta: string; forward: PortForward[]; wrap?: string[]; pidFile: string },
): Promise<AttachedNetwork> {
  // bwrap brings the namespace's loopback up itself, racing pasta's own setup of it (an
  // RTM_NEWADDR of one fails): pasta starts once bwrap's 127.0.0.1 is there.
  await loopbackReady(childPid);
  // A root runner's pasta drops to nobody, who may not open a root process's namespace: the
  // namespace is opened here and handed over as fd 3; pasta keeps root (--runas 0) to enter it.
  // A runner that is not root has an unprivileged bwrap, whose namespaces belong to a user
  // namespace of its own: pasta joins both by pid, the rootless way (not exercised by the tests,
  // which run as root).
  const root = typeof process.getuid === 'function' && process.getuid() === 0;
  const nsFd = root ? fs.openSync(`/proc/${childPid}/ns/net`, 'r') : null;
  const spec = opts.forward.length ? opts.forward.map((f) => `${f.jobPort}:${f.hostPort}`).join(',') : 'none';
  const args = [
    '--config-net', '--no-map-gw', '--quiet',
    '-t', 'none', '-u', 'none', '-U', 'none', '-T', spec,
    '--pid', opts.pidFile,
    ...(root ? ['--netns', '/proc/self/fd/3', '--netns-only', '--runas', '0:0'] : [String(childPid)]),
  ];
  const [file, argv] = opts.wrap?.length ? [opts.wrap[0], [...opts.wrap.slice(1), opts.pasta, ...args]] : [opts.pasta, args];
  try {
    // pasta goes to the background once the namespace is configured; its first process exits 0.
    const r = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const p = spawn(file, argv, { stdio: nsFd === null ? ['ignore', 'ignore', 'pipe'] : ['ignore', 'ignore', 'pipe', nsFd] });
      let err = '';
      p.stderr!.on('data', (b) => (err += b));
      p.once('error', (e) => resolve({ code: null, err: e.message }));
      p.once('close', (code) => resolve({ code, err }));
    });
    if (r.code !== 0) throw new Error(`pasta failed (${r.code ?? 'not started'}): ${r.err.split('\n').filter((l) => l && !/syslog/.test(l)).join('; ')}`);
  } finally {
    if (nsFd !== null) fs.closeSync(nsFd);
  }
  return {
    close() {
      try {
        const pid = Number(fs.readFileSync(opts.pidFile, 'utf8').trim());
        // Only the pasta it started (a pid can be reused once pasta is gone): the process whose
        // command line names this pid file (its name is passt, or passt.avx2 on most machines).
        if (Number.isInteger(pid) && pid > 1 && fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(opts.pidFile)) process.kill(pid, 'SIGKILL');
      } catch {
        /* gone already */
      }
      fs.rmSync(opts.pidFile, { force: true });
    },
  };
}
