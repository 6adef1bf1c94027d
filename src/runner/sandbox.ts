// Job isolation with bubblewrap: the root filesystem read-only, only the job's own directory
// (and a private /tmp) writable, Cairn's data directory, the runner's configuration and other
// jobs' directories hidden under empty tmpfs mounts, a new PID namespace so that the job's
// processes all die with it. The network stays (jobs fetch dependencies).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface SandboxStatus {
  available: boolean;
  /** The bwrap binary used, when available. */
  bwrap: string | null;
  /** Why it is not available (shown to the operator). */
  reason: string | null;
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
export function detectSandbox(opts: { refresh?: boolean; bwrapPath?: string } = {}): SandboxStatus {
  if (cached && !opts.refresh && !opts.bwrapPath) return cached;
  const bwrap = opts.bwrapPath ?? process.env.CAIRN_RUNNER_BWRAP ?? findOnPath('bwrap');
  let status: SandboxStatus;
  if (!bwrap) {
    status = { available: false, bwrap: null, reason: 'bubblewrap (bwrap) is not installed; on Debian/Ubuntu: apt-get install bubblewrap' };
  } else {
    const r = spawnSync(bwrap, ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--unshare-pid', '--die-with-parent', '--', 'true'], {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    status =
      r.status === 0
        ? { available: true, bwrap, reason: null }
        : { available: false, bwrap: null, reason: `bubblewrap (${bwrap}) cannot create a sandbox here: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()} (are unprivileged user namespaces disabled?)` };
  }
  if (!opts.bwrapPath) cached = status;
  return status;
}

export interface SandboxSpec {
  bwrap: string;
  /** The job's own directory: build dir, scripts, file variables, HOME. Writable. */
  jobDir: string;
  /** Working directory inside. */
  cwd: string;
  /** Directories and files the job must not see (Cairn's data dir, config, all builds). */
  hidden: string[];
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
  args.push('--unshare-pid', '--die-with-parent', '--chdir', spec.cwd, '--', ...command);
  return args;
}
