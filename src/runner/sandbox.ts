// Job isolation with bubblewrap: the root filesystem read-only, only the job's own directory
// (and a private /tmp) writable, Cairn's data directory, the runner's configuration and other
// jobs' directories hidden under empty tmpfs mounts, a new PID namespace so that the job's
// processes all die with it. The network stays (jobs fetch dependencies).
import { spawnSync } from 'node:child_process';
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
}

let cached: SandboxStatus | null = null;

function findOnPath(name: string): string | null {
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
  if (!opts.bwrapPath) cached = status;
  return status;
}

function setprivArgs(runAs: { uid: number; gid: number; setpriv: string }): string[] {
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
}

/** The bwrap argument list that runs `command` isolated (arguments, never a shell string). */
export function sandboxArgs(spec: SandboxSpec, command: string[]): string[] {
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/var/tmp'];
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
  if (spec.runAs) return [...args, '--', ...setprivArgs(spec.runAs), ...command];
  return [...args, '--cap-drop', 'ALL', '--', ...command];
}
