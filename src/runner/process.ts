// Runs one command of a job in its own process group (detached), streaming its output, and
// kills the whole group when asked, when it times out, or when its leader exits (so a
// background `sleep &` does not outlive the step).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Killed by us (timeout, cancel, abort). */
  killed: boolean;
  /** The spawn itself failed (no such binary...). */
  spawnError: Error | null;
}

export interface Running {
  pid: number | undefined;
  /** The child's stdio; entries 3.. are the `extraPipes`. */
  stdio: ChildProcess['stdio'];
  done: Promise<RunResult>;
  kill(): void;
}

function killGroup(pid: number | undefined) {
  if (!pid) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    /* already gone */
  }
}

export function runProcess(file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; onOutput: (b: Buffer) => void; extraPipes?: number }): Running {
  let killed = false;
  const extra = Array.from({ length: opts.extraPipes ?? 0 }, () => 'pipe' as const);
  const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe', ...extra] });
  // An extra pipe the other side closed early must not throw.
  for (const s of child.stdio.slice(3)) s?.on('error', () => {});
  const pid = child.pid;
  child.stdout?.on('data', (b: Buffer) => opts.onOutput(b));
  child.stderr?.on('data', (b: Buffer) => opts.onOutput(b));
  const done = new Promise<RunResult>((resolve) => {
    let spawnError: Error | null = null;
    child.once('error', (err) => {
      spawnError = err;
      resolve({ exitCode: null, signal: null, killed, spawnError });
    });
    child.once('exit', (code, signal) => {
      // Whatever the step left running in its group goes with it.
      killGroup(pid);
      // Output still buffered in the pipes arrives before 'close'; a process that left the
      // group (setsid) could hold them open, so do not wait for it for long.
      const closed = new Promise<void>((r) => child.once('close', () => r()));
      const timer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
      }, 2000);
      void closed.then(() => {
        clearTimeout(timer);
        resolve({ exitCode: code, signal, killed, spawnError });
      });
      setTimeout(() => resolve({ exitCode: code, signal, killed, spawnError }), 2500).unref();
    });
  });
  return {
    pid,
    stdio: child.stdio,
    done,
    kill() {
      killed = true;
      killGroup(pid);
    },
  };
}

/** Field 22 of /proc/<pid>/stat (the start time) and the state, or null when there is no such process. */
function procStat(pid: number): { state: string; start: string } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: the fields follow its last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0], start: rest[19] };
  } catch {
    return null;
  }
}

/**
 * A process that ends after its parent: a sandbox's pid namespace init (bwrap --unshare-pid) goes
 * with bwrap, by its parent-death signal, a moment after bwrap's own exit, and the kernel ends
 * every other process of the namespace before the init exits. `watch` notes the process now; its
 * `gone()` resolves when it has exited (no longer there, or a zombie), or after `timeoutMs`.
 */
export function watchProcess(pid: number): { gone(timeoutMs?: number): Promise<boolean> } {
  const first = procStat(pid);
  return {
    async gone(timeoutMs = 5_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const now = procStat(pid);
        // Gone, a zombie, or another process that took the number.
        if (!first || !now || now.state === 'Z' || now.start !== first.start) return true;
        if (Date.now() >= until) return false;
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}
