import { spawn, type ChildProcess } from 'node:child_process';
import { recordRepositoryRead } from '../cache/read_tracking.js';
import { spawnViaHelper, wrapChildProcess, type GitProcess } from './spawner.js';
import { gitCommandOf, gitProcessesSpawned } from '../metrics/index.js';

export type { GitProcess } from './spawner.js';

/**
 * The one place that starts git. Arguments are arrays (never a shell), user values that
 * look like options are refused, and every run has a timeout and a fixed environment.
 */
export class GitError extends Error {
  constructor(
    readonly args: string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    message?: string,
  ) {
    super(message ?? `git ${args[0] ?? ''} failed (exit ${exitCode}): ${stderr.trim().slice(0, 500)}`);
  }
}

/** A user-supplied value that would be dangerous on a git command line. */
export class UnsafeArgumentError extends Error {}

export interface GitOptions {
  /** The repository (bare) directory; passed as --git-dir. */
  gitDir?: string;
  cwd?: string;
  input?: Buffer | string;
  env?: Record<string, string | undefined>;
  timeoutMs?: number;
  /** Exit codes that are not failures (e.g. 1 for `merge-tree` conflicts). */
  okCodes?: number[];
  maxOutputBytes?: number;
}

export interface GitResult {
  stdout: Buffer;
  stderr: string;
  exitCode: number;
}

const DEFAULT_TIMEOUT_MS = 60_000;

export function gitEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ASKPASS: '/bin/false',
  };
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

/** Refuses values that git would read as an option or that carry NUL/control characters. */
export function assertSafeArg(value: string, what = 'argument'): string {
  if (typeof value !== 'string' || value.length === 0) throw new UnsafeArgumentError(`${what} is empty`);
  if (value.startsWith('-')) throw new UnsafeArgumentError(`${what} must not start with '-'`);
  if (/[\x00-\x1f\x7f]/.test(value)) throw new UnsafeArgumentError(`${what} contains control characters`);
  return value;
}

/**
 * `work`'s result, or `fallback` when git fails: a repository directory that is missing or
 * broken reads as "nothing there". Other errors propagate.
 */
export async function orWhenGitFails<T>(work: () => Promise<T>, fallback: T): Promise<T> {
  try {
    return await work();
  } catch (e) {
    if (e instanceof GitError) return fallback;
    throw e;
  }
}

function fullArgs(args: string[], opts: GitOptions): string[] {
  return opts.gitDir ? ['--git-dir', opts.gitDir, ...args] : args;
}

export function spawnGit(args: string[], opts: GitOptions = {}): ChildProcess {
  gitProcessesSpawned.inc({ command: gitCommandOf(args) });
  return spawn('git', fullArgs(args, opts), {
    cwd: opts.cwd ?? opts.gitDir,
    env: gitEnv(opts.env),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/**
 * Runs git to completion and collects its output. Started through the spawner (see startGit):
 * forking a server that holds an embedded database costs tens of milliseconds a call.
 */
/** git commands after which readers of the repository may see something else. */
const WRITE_COMMANDS = new Set(['update-ref', 'symbolic-ref', 'fetch', 'clone', 'init', 'tag', 'branch', 'replace', 'receive-pack', 'remote', 'push', 'reset', 'checkout', 'merge']);
const repositoryWriteObservers = new Set<(repository: string) => Promise<void>>();

/**
 * Calls `observer` after each git command that may have changed a repository (with the
 * repository's directory), before that command's caller goes on; the server records it so that
 * caches drop what they computed from repositories (src/cache/read_tracking.ts). Returns the
 * function that stops observing.
 */
export function onRepositoryWrite(observer: (repository: string) => Promise<void>): () => void {
  repositoryWriteObservers.add(observer);
  return () => repositoryWriteObservers.delete(observer);
}

/** Tells the observers that `repository` may have changed (receive-pack, which runs through startGit). */
export async function repositoryWritten(repository: string): Promise<void> {
  for (const observe of repositoryWriteObservers) await observe(repository);
}

/** Whether these arguments can change the repository (`symbolic-ref -q HEAD` only reads it). */
function writesRepository(args: string[]): boolean {
  const command = gitCommandOf(args);
  if (!WRITE_COMMANDS.has(command)) return false;
  if (command !== 'symbolic-ref') return true;
  return args.slice(args.indexOf('symbolic-ref') + 1).filter((a) => !a.startsWith('-')).length >= 2;
}

export async function git(args: string[], opts: GitOptions = {}): Promise<GitResult> {
  if (repositoryWriteObservers.size && writesRepository(args)) {
    // Whether it succeeded or not: a failed command may have done part of its work.
    try {
      return await runGit(args, opts);
    } finally {
      await repositoryWritten(opts.gitDir ?? opts.cwd ?? '.');
    }
  }
  return runGit(args, opts);
}

async function runGit(args: string[], opts: GitOptions): Promise<GitResult> {
  const proc = await startGit(args, opts);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let outBytes = 0;
  let overflow = false;
  let timedOut = false;
  const limit = opts.maxOutputBytes ?? 512 * 1024 * 1024;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill();
  }, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  proc.stdout.on('data', (b: Buffer) => {
    outBytes += b.length;
    if (outBytes > limit) {
      overflow = true;
      proc.kill();
    } else if (!overflow) out.push(b);
  });
  proc.stderr.on('data', (b: Buffer) => err.push(b));
  proc.stdout.on('error', () => {});
  proc.stdin.on('error', () => {});
  if (opts.input !== undefined) proc.stdin.end(opts.input);
  else proc.stdin.end();
  const { code, signal } = await proc.exited;
  clearTimeout(timer);
  const stderr = Buffer.concat(err).toString('utf8');
  if (overflow) throw new GitError(args, code, stderr, `git ${args[0]} output exceeded ${limit} bytes`);
  if (timedOut) throw new GitError(args, null, stderr, `git ${args[0]} timed out`);
  if (signal || code === null) throw new GitError(args, null, stderr, `git ${args[0]} ended by ${signal ?? 'an error'}`);
  if (code !== 0 && !(opts.okCodes ?? []).includes(code)) throw new GitError(args, code, stderr);
  return { stdout: Buffer.concat(out), stderr, exitCode: code };
}

export async function gitText(args: string[], opts: GitOptions = {}): Promise<string> {
  return (await git(args, opts)).stdout.toString('utf8');
}

/**
 * Starts a git whose stdin and stdout the caller streams (smart HTTP services). It is started
 * by Cairn's small spawner process, because forking this (large) process is slow; when that
 * helper is unavailable, it is spawned directly.
 */
export async function startGit(args: string[], opts: GitOptions = {}): Promise<GitProcess> {
  // A cached value computed from a repository depends on it, which no table write describes.
  recordRepositoryRead();
  try {
    const proc = await spawnViaHelper(fullArgs(args, opts), opts.cwd ?? opts.gitDir, gitEnv(opts.env));
    gitProcessesSpawned.inc({ command: gitCommandOf(args) });
    return proc;
  } catch {
    return wrapChildProcess(spawnGit(args, opts));
  }
}
