// One network namespace per job (issue #27): a small holder process, started once at the start
// of the job, owns the namespace; pasta is attached to it once; every step, every service and the
// services' health checks enter it (nsenter), and it goes away with the holder at the end of the
// job. The holder is a bubblewrap sandbox with `--unshare-net` (bwrap brings the namespace's
// loopback up) whose mount namespace is a private copy of the machine's view: the overlay roots of
// image jobs are mounted there (never in the machine's own mount namespace, so nothing outlives
// the holder, even when the runner is killed), and image sandboxes are built from it.
//
// Only a root runner can enter namespaces this way (setns needs CAP_SYS_ADMIN over them). A
// runner that is not root keeps one namespace per step (sandbox.ts, attachNetwork).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { attachNetwork, type AttachedNetwork, type PortForward } from './sandbox.js';

/** An environment for the runner's own helper commands: nothing of the job's (LD_PRELOAD...). */
export const HELPER_ENV: NodeJS.ProcessEnv = Object.freeze({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' }) as NodeJS.ProcessEnv;

export interface JobNamespaceOptions {
  bwrap: string;
  nsenter: string;
  /** `mount` binary (util-linux): the overlay roots. */
  mount: string;
  /** `pasta`: outbound connections through pasta (when `pasta` is given); `none`: loopback only; `host`: the machine's network (no namespace of its own: the holder only holds the mounts). */
  network: 'pasta' | 'none' | 'host';
  pasta: string | null;
  forward: PortForward[];
  /** Command prefix that puts a process into the job's cgroup (the holder and pasta go there). */
  wrap: string[];
  /** Where pasta's pid file goes (the job's own tmp/, the runner's). */
  tmpDir: string;
  /** Names the holder in the process list (`cairn-job-holder:<label>`): the job directory's name. */
  label: string;
}

export interface JobNamespace {
  /** The holder's pid (its namespaces are /proc/<pid>/ns/net and /proc/<pid>/ns/mnt). */
  readonly pid: number;
  /** pasta, when attached. */
  readonly network: AttachedNetwork | null;
  /** Why the job has no network beyond its loopback (pasta failed), when it should have had some. */
  readonly networkProblem: string | null;
  /**
   * The command prefix that runs a command in the job's network namespace; `mount`: also in the
   * holder's mount namespace (where the image roots are mounted).
   */
  enter(opts?: { mount?: boolean }): string[];
  /** Mounts an overlay (lower read-only, upper and work in the job's directory) at target, in the holder's mount namespace. */
  mountOverlay(o: { lower: string; upper: string; work: string; target: string }): Promise<void>;
  /** Stops pasta and the holder (the job's cgroup, when there is one, is killed anyway). */
  close(): void;
}

/** Overlay option values are split at `,` and `:`; the runner's own paths never have them, but checks anyway. */
const OVERLAY_SAFE = /^\/[A-Za-z0-9._+@/-]*$/;

function runQuiet(file: string, args: string[], timeoutMs = 20_000): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    const p = spawn(file, args, { cwd: '/', env: HELPER_ENV, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
    p.stderr!.on('data', (b) => (err += b));
    p.once('error', (e) => {
      clearTimeout(timer);
      resolve({ code: null, err: e.message });
    });
    p.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, err: err.trim() });
    });
  });
}

/** Starts the job's holder and attaches its network. Throws when the holder cannot be made. */
export async function createJobNamespace(o: JobNamespaceOptions): Promise<JobNamespace> {
  // `--dev-bind / /`: the holder's mount namespace is a copy of the machine's view (image
  // sandboxes are built from it). It runs `sh`, which reports its pid and then waits on its
  // standard input: the runner holds the other end, so the holder also ends with the runner.
  // Inside its own namespace a job may listen on any port and ping: the namespace is owned by
  // the machine's user namespace, where the job has no capability (so no NET_BIND_SERVICE). The
  // holder sets that itself, keeping only CAP_NET_ADMIN (over its own namespace; it runs nothing
  // of the job's and no job process can see it: they have PID namespaces of their own).
  const own = o.network === 'host' ? [] : ['--unshare-net', '--cap-add', 'CAP_NET_ADMIN'];
  const sysctl = o.network === 'host' ? '' : 'echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start; echo "0 2147483647" > /proc/sys/net/ipv4/ping_group_range; ';
  const argv = [
    ...o.wrap,
    o.bwrap, '--dev-bind', '/', '/', '--die-with-parent', '--cap-drop', 'ALL', ...own,
    '--', '/bin/sh', '-c', `${sysctl}echo "$$" && exec cat`, `cairn-job-holder:${o.label.replace(/[^\w.-]/g, '_')}`,
  ];
  const child = spawn(argv[0], argv.slice(1), { cwd: '/', env: HELPER_ENV, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin!.on('error', () => {});
  const kill = () => {
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  const pid = await new Promise<number>((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => fail(new Error('the job namespace did not start in time')), 20_000);
    const fail = (e: Error) => {
      clearTimeout(timer);
      kill();
      reject(e);
    };
    child.stdout!.on('data', (b) => {
      out += b;
      const m = /^(\d+)\n/.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on('data', (b) => (err += b));
    child.once('error', (e) => fail(e));
    child.once('exit', (code) => fail(new Error(`the job namespace could not be made (exit ${code}): ${err.trim()}`)));
  });
  child.removeAllListeners('exit');
  child.removeAllListeners('error');
  child.once('error', () => {});
  child.stderr!.resume();
  const netns = `/proc/${pid}/ns/net`;
  const mntns = `/proc/${pid}/ns/mnt`;
  const close = () => {
    network?.close();
    child.stdin!.destroy();
    kill();
  };

  let network: AttachedNetwork | null = null;
  let networkProblem: string | null = null;
  if (o.network === 'pasta' && o.pasta) {
    try {
      network = await attachNetwork(pid, { pasta: o.pasta, forward: o.forward, wrap: o.wrap, pidFile: path.join(o.tmpDir, 'pasta.pid') });
    } catch (err) {
      networkProblem = (err as Error).message;
    }
  }

  return {
    pid,
    network,
    networkProblem,
    enter: (opts = {}) => [o.nsenter, ...(o.network === 'host' ? [] : [`--net=${netns}`]), ...(opts.mount ? [`--mount=${mntns}`] : []), '--'],
    async mountOverlay(m) {
      for (const p of [m.lower, m.upper, m.work, m.target]) if (!OVERLAY_SAFE.test(p)) throw new Error(`cannot mount an overlay on ${JSON.stringify(p)}: the path has characters overlayfs options cannot carry`);
      const r = await runQuiet(o.nsenter, [`--mount=${mntns}`, '--', o.mount, '-t', 'overlay', '-o', `lowerdir=${m.lower},upperdir=${m.upper},workdir=${m.work}`, '--', 'overlay', m.target]);
      if (r.code !== 0) throw new Error(`mounting the image's overlay failed: ${r.err || `exit ${r.code}`}`);
    },
    close,
  };
}

/**
 * Whether kernel overlayfs mounts work here (a trial in a throwaway mount namespace): the image
 * executor's job roots are overlays over the cached image.
 */
export function detectOverlay(o: { unshare: string; mount: string; dir: string }): { ok: boolean; reason?: string } {
  let base: string | null = null;
  try {
    fs.mkdirSync(o.dir, { recursive: true, mode: 0o700 });
    base = fs.mkdtempSync(path.join(o.dir, 'overlay-trial-'));
    for (const d of ['lower', 'upper', 'work', 'merged']) fs.mkdirSync(path.join(base, d));
    fs.writeFileSync(path.join(base, 'lower', 'f'), 'x');
    const r = spawnSync(
      o.unshare,
      ['--mount', '--propagation', 'private', '--', o.mount, '-t', 'overlay', '-o', `lowerdir=${base}/lower,upperdir=${base}/upper,workdir=${base}/work`, '--', 'overlay', `${base}/merged`],
      { encoding: 'utf8', timeout: 10_000, env: HELPER_ENV, cwd: '/' },
    );
    if (r.status !== 0) return { ok: false, reason: `overlayfs mounts fail here: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}` };
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: `overlayfs trial failed: ${(err as Error).message}` };
  } finally {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  }
}
