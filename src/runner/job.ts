// One job on the shell executor: a fresh directory, the sources cloned with the job token, the
// dependencies' artifacts, before_script + script, after_script, artifacts, the final update.
// Everything the job runs is in its own process group (and, with bubblewrap, its own PID
// namespace and a read-only view of the machine).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CAIRN_VERSION } from '../version.js';
import { archiveArtifacts, extractArtifacts, type ArtifactWorkOptions } from './artifact_sandbox.js';
import { createOutput, DEFAULT_ARTIFACT_LIMITS, type ArtifactLimits } from './artifacts.js';
import { archiveCaches, CachePolicyError, restoreCaches, type CacheWork } from './cache.js';
import type { RunnerClient } from './client.js';
import type { Readable } from 'node:stream';
import { setting } from '../config.js';
import { createJobCgroup, detectCgroups, formatBytes, jobLimitsFromEnv, type CgroupSupport, type JobCgroup, type JobLimits } from './limits.js';
import { chownTree, removeTree } from './nofollow.js';
import { runProcess, type Running, type RunResult } from './process.js';
import { attachNetwork, isLoopbackHost, sandboxArgs, urlPort, type AttachedNetwork, type PortForward, type SandboxStatus } from './sandbox.js';
import { baseEnvironment, expandVariables, jobEnvironment, stepScript } from './script.js';
import { JobTrace } from './trace.js';
import type { JobArtifact, JobPayload, JobStep } from './types.js';

export interface ExecutorOptions {
  /** Where job directories are made (each job gets a fresh one, removed afterwards). */
  buildsDir: string;
  /** Isolation: bwrap status from detectSandbox(). */
  sandbox: SandboxStatus;
  /** Run jobs without bubblewrap when it is not available. */
  allowUnisolated: boolean;
  /** Paths jobs must not see (Cairn's data dir, the runner config); buildsDir is always added. */
  hiddenPaths: string[];
  /** Trace interval before the server gives one, ms (3000). */
  traceIntervalMs?: number;
  /** With no new output, how often the runner asks the server whether the job still runs (PUT state=running), ms (30000). */
  keepaliveMs?: number;
  /** Delay between retries of the final update, ms (1000). */
  retryDelayMs?: number;
  /** Default job timeout when the server gives none, seconds (3600). */
  defaultTimeoutSec?: number;
  /** after_script's own timeout, seconds (300). */
  afterScriptTimeoutSec?: number;
  /** Accept file:// repository URLs (tests and local setups; a server could otherwise make the runner copy local repositories). */
  allowFileUrls?: boolean;
  /** Bounds of one artifact archive, extracted or written (DEFAULT_ARTIFACT_LIMITS: 200,000 entries, 4 GiB expanded). */
  artifactLimits?: Partial<ArtifactLimits>;
  /** How long extracting or writing one archive may take, seconds (1800). */
  artifactTimeoutSec?: number;
  /** Keep job directories (debugging). */
  keepBuilds?: boolean;
  description?: string;
  log?: (msg: string) => void;
  /** The runner is shutting down and will not wait: the job is killed and reported failed. */
  signal?: AbortSignal;
  /** The job's network (CAIRN_RUNNER_JOB_NETWORK): `pasta` (outbound only; no pasta: none), `none`, `host`. */
  network?: 'pasta' | 'none' | 'host';
  /** Host loopback ports a job may reach (CAIRN_RUNNER_FORWARD_PORTS; the built-in runner adds its server's). */
  forwardPorts?: PortForward[];
  /** Processes, memory, file size (CAIRN_RUNNER_JOB_PIDS, _MEMORY, _FILE_SIZE). */
  limits?: JobLimits;
  /** Where job cgroups go (detectCgroups()); null: rlimits only. */
  cgroups?: CgroupSupport | null;
}

export interface JobOutcome {
  state: 'success' | 'failed';
  failureReason?: string;
  exitCode?: number;
  /** The server stopped the job (403 / canceled); the final update may have been refused. */
  aborted: boolean;
  canceled: boolean;
  timedOut: boolean;
}

const ALWAYS_SUPPORTED = new Set(['script_failure', 'runner_system_failure', 'job_execution_timeout']);
const COMPAT: Record<string, string> = { image_pull_failure: 'runner_system_failure', runner_configuration_error: 'script_failure' };

/** gitlab-runner's rule: a reason the server does not list is replaced by one it knows. */
export function supportedFailureReason(reason: string, supported: string[] | undefined): string {
  // A server that lists nothing is assumed to know GitLab's oldest reasons only.
  const known = supported ?? ['unknown_failure'];
  if (ALWAYS_SUPPORTED.has(reason) || known.includes(reason)) return reason;
  const compat = COMPAT[reason];
  if (compat && (ALWAYS_SUPPORTED.has(compat) || known.includes(compat))) return compat;
  return known.includes('unknown_failure') ? 'unknown_failure' : 'script_failure';
}

class JobError extends Error {
  constructor(message: string, readonly reason: string, readonly exitCode?: number) {
    super(message);
  }
}

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const SAFE_REFSPEC = /^\+?[^\s\0-\x1f~^:?*\[\\-][^\s\0-\x1f~^?*\[\\]*(:[^\s\0-\x1f~^:?*\[\\-][^\s\0-\x1f~^:?*\[\\]*)?$/;

function cleanUrl(u: string): string {
  try {
    const url = new URL(u);
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return '[invalid URL]';
  }
}

const color = {
  section: (s: string) => `\x1b[32;1m${s}\x1b[0;m\n`,
  info: (s: string) => `${s}\n`,
  warn: (s: string) => `\x1b[0;33mWARNING: ${s}\x1b[0;m\n`,
  error: (s: string) => `\x1b[31;1mERROR: ${s}\x1b[0;m\n`,
};

export async function executeJob(client: RunnerClient, job: JobPayload, o: ExecutorOptions): Promise<JobOutcome> {
  const log = o.log ?? (() => {});
  let current: Running | null = null;
  let aborted = false;
  let canceled = false;
  let timedOut = false;
  let interruptedByRunner = false;
  const stopCurrent = () => current?.kill();
  const onRunnerStop = () => {
    interruptedByRunner = true;
    log(`job ${job.id}: the runner is stopping, killing the job`);
    stopCurrent();
  };
  o.signal?.addEventListener('abort', onRunnerStop, { once: true });

  const vars = expandVariables(job.variables ?? []);
  const masked = [...vars.values()].filter((v) => v.masked).map((v) => v.value);
  masked.push(job.token);
  for (const d of job.dependencies ?? []) if (d.token) masked.push(d.token);
  try {
    const u = new URL(job.git_info.repo_url);
    if (u.password) masked.push(decodeURIComponent(u.password), u.password);
  } catch {
    /* reported at clone time */
  }

  const trace = new JobTrace({
    client,
    jobId: job.id,
    jobToken: job.token,
    maskedValues: masked,
    updateIntervalMs: o.traceIntervalMs,
    retryDelayMs: o.retryDelayMs,
    keepaliveMs: o.keepaliveMs,
    log,
    onAbort: (why) => {
      aborted = true;
      log(`job ${job.id}: aborting: ${why}`);
      stopCurrent();
    },
    onCancel: () => {
      canceled = true;
      log(`job ${job.id}: cancel requested`);
      stopCurrent();
    },
  });
  trace.start();
  trace.write(color.info(`Running with cairn-runner ${CAIRN_VERSION}`) + color.info(`  on ${o.description ?? os.hostname()}`));

  const timeoutSec = job.runner_info?.timeout && job.runner_info.timeout > 0 ? job.runner_info.timeout : (o.defaultTimeoutSec ?? 3600);
  const deadline = setTimeout(() => {
    timedOut = true;
    log(`job ${job.id}: timed out after ${timeoutSec}s`);
    stopCurrent();
  }, timeoutSec * 1000);

  let jobDir: string | null = null;
  let cgroup: JobCgroup | null = null;
  let outcome: JobOutcome;
  try {
    fs.mkdirSync(o.buildsDir, { recursive: true, mode: 0o700 });
    jobDir = fs.mkdtempSync(path.join(fs.realpathSync(o.buildsDir), `job-${job.id}-`));
    const buildDir = path.join(jobDir, 'build');
    const tmpDir = path.join(jobDir, 'tmp');
    const homeDir = path.join(jobDir, 'home');
    for (const d of [buildDir, tmpDir, homeDir]) fs.mkdirSync(d, { mode: 0o700 });

    const isolated = o.sandbox.available;
    const runAs = isolated ? (o.sandbox.runAs ?? null) : null;
    /** Hands a path the runner made (as root) to the job's user. */
    const own = (p: string) => {
      if (runAs) chownTree(p, runAs.uid, runAs.gid);
    };
    trace.write(color.section('Preparing the "shell" executor'));
    if (isolated) trace.write(color.info(`Using bubblewrap isolation (${o.sandbox.bwrap})${runAs ? `, jobs run as uid ${runAs.uid}` : ''}`));
    else if (o.allowUnisolated) trace.write(color.warn(`running WITHOUT isolation: ${o.sandbox.reason}`));
    else throw new JobError(`this runner refuses to run jobs without isolation: ${o.sandbox.reason}`, 'runner_system_failure');
    const network = isolated ? (o.network ?? setting<'pasta' | 'none' | 'host'>('CAIRN_RUNNER_JOB_NETWORK')) : 'host';
    const pasta = network === 'pasta' ? (o.sandbox.pasta ?? null) : null;
    const forward = o.forwardPorts ?? setting<PortForward[]>('CAIRN_RUNNER_FORWARD_PORTS');
    if (isolated) {
      if (pasta) trace.write(color.info(`Network: a namespace of its own, outbound connections through pasta; this machine's loopback is not reachable${forward.length ? ` except port${forward.length > 1 ? 's' : ''} ${forward.map((f) => f.jobPort).join(', ')} (forwarded)` : ''}`));
      if (pasta) {
        // A server on this machine's loopback that no forward reaches: the job's API calls fail.
        try {
          const server = new URL(vars.get('CI_SERVER_URL')?.value ?? '');
          if (isLoopbackHost(server.hostname) && !forward.some((f) => f.jobPort === urlPort(server))) {
            trace.write(color.warn(`${server.origin} is on this machine's loopback, which jobs do not reach: the runner can forward it to the server's job listener (CAIRN_RUNNER_FORWARD_PORTS=${urlPort(server)}:<the server's CAIRN_JOB_PORT>)`));
          }
        } catch {
          /* no server URL */
        }
      }
      else if (network === 'pasta') trace.write(color.warn(`this job has no network: ${o.sandbox.pastaReason ?? 'pasta is not available'}`));
      else if (network === 'none') trace.write(color.info('Network: none (CAIRN_RUNNER_JOB_NETWORK=none)'));
      else trace.write(color.warn("the job shares this machine's network, loopback services included (CAIRN_RUNNER_JOB_NETWORK=host)"));
    }
    const limits = o.limits ?? jobLimitsFromEnv();
    cgroup = createJobCgroup(o.cgroups === undefined ? detectCgroups() : o.cgroups, `job-${job.id}-${path.basename(jobDir).slice(-6)}`, limits);
    const prlimit = isolated ? (o.sandbox.prlimit ?? null) : null;
    const rlimits = prlimit ? { prlimit, fsize: limits.fileSize, nproc: cgroup ? null : limits.pids, data: cgroup ? null : limits.memory } : null;
    if (cgroup) trace.write(color.info(`Limits: ${cgroup.description}${rlimits ? `; files up to ${formatBytes(limits.fileSize)}` : ''}`));
    else if (rlimits) trace.write(color.info(`Limits (no cgroup here): at most ${limits.pids} processes of the job's user, ${formatBytes(limits.memory)} of data per process, files up to ${formatBytes(limits.fileSize)}`));
    else trace.write(color.warn('no process, memory or file size limits: neither a cgroup nor prlimit is available'));
    trace.write(color.info(`Running on ${os.hostname()}...`));

    const base = baseEnvironment();
    const extra: Record<string, string> = {
      CI_PROJECT_DIR: buildDir,
      CI_BUILDS_DIR: jobDir,
      CI_SERVER: 'yes',
      CI_RUNNER_VERSION: CAIRN_VERSION,
      CI_RUNNER_EXECUTABLE_ARCH: `${os.platform()}/${os.arch()}`,
      CI_DISPOSABLE_ENVIRONMENT: 'true',
      HOME: homeDir,
    };
    if (!isolated) extra.TMPDIR = tmpDir;
    const env = jobEnvironment(vars, { tmpDir, base, extra });
    const hidden = [...o.hiddenPaths, o.buildsDir];

    let runs = 0;
    const run = async (file: string, args: string[], cwd: string, runEnv: NodeJS.ProcessEnv, sandboxed: boolean, limitSec?: number): Promise<RunResult> => {
      const enter = sandboxed ? (cgroup?.enter ?? []) : [];
      const withNetwork = sandboxed && isolated && !!pasta;
      let cmd = file;
      let argv = args;
      if (sandboxed && isolated) {
        const spec = {
          bwrap: o.sandbox.bwrap!, jobDir: jobDir!, cwd, hidden, runAs,
          network: network === 'host' ? ('host' as const) : ('none' as const),
          syncFds: withNetwork ? { info: 3, block: 4 } : undefined,
          tmpSize: o.sandbox.tmpfsSize ? limits.fileSize : null,
          tmpSticky: !!o.sandbox.tmpfsPerms,
          rlimits,
        };
        [cmd, argv] = [o.sandbox.bwrap!, sandboxArgs(spec, [file, ...args])];
      }
      if (enter.length) [cmd, argv] = [enter[0], [...enter.slice(1), cmd, ...argv]];
      const proc = runProcess(cmd, argv, { cwd, env: runEnv, onOutput: (b) => trace.write(b), extraPipes: withNetwork ? 2 : 0 });
      current = proc;
      let attached: AttachedNetwork | null = null;
      if (withNetwork) {
        const block = proc.stdio[4] as NodeJS.WritableStream;
        try {
          const pid = await sandboxPid(proc.stdio[3] as Readable);
          attached = await attachNetwork(pid, { pasta: pasta!, forward, wrap: enter, pidFile: path.join(tmpDir, `pasta-${++runs}.pid`) });
        } catch (err) {
          trace.write(color.warn(`this step has no network: ${(err as Error).message}`));
        } finally {
          // The namespace is ready (or stays without network): bwrap runs the command.
          block.end('1');
        }
      }
      let own: NodeJS.Timeout | null = null;
      let ownTimedOut = false;
      if (limitSec) {
        own = setTimeout(() => {
          ownTimedOut = true;
          proc.kill();
        }, limitSec * 1000);
      }
      // A stop that arrived while nothing was running applies to this one too.
      if (aborted || canceled || timedOut || interruptedByRunner) proc.kill();
      return proc.done.then((r) => {
        attached?.close();
        if (own) clearTimeout(own);
        if (current === proc) current = null;
        return ownTimedOut ? { ...r, killed: true, exitCode: null } : r;
      });
    };
    const interrupted = () => aborted || canceled || timedOut || interruptedByRunner;

    // Sources.
    trace.write(color.section('Getting source from Git repository'));
    await fetchSources(job, buildDir, { run, trace, allowFileUrls: !!o.allowFileUrls, interrupted });

    // From here on the job's own user works in build/ and home/ (dependencies' artifacts are
    // extracted as that user). The job directory and tmp/ stay the runner's (traversable
    // only), so the job cannot plant a symlink where the runner writes its scripts and archives.
    if (runAs) {
      own(buildDir);
      own(homeDir);
      if (fs.existsSync(path.join(tmpDir, 'variables'))) own(path.join(tmpDir, 'variables'));
      fs.chmodSync(jobDir, 0o711);
      fs.chmodSync(tmpDir, 0o711);
    }

    // Artifact work on the job's files: inside the job's sandbox, as the job's user.
    const artifactWork = (): ArtifactWorkOptions => ({
      sandbox: isolated ? { bwrap: o.sandbox.bwrap!, jobDir: jobDir!, hidden, runAs } : null,
      limits: { ...DEFAULT_ARTIFACT_LIMITS, ...o.artifactLimits },
      timeoutSec: o.artifactTimeoutSec ?? 1800,
      onStart: (r) => {
        current = r;
        if (interrupted()) r.kill();
        void r.done.then(() => {
          if (current === r) current = null;
        });
      },
    });

    // Caches (cache.ts): restored here, saved after after_script.
    const cacheWork = (): CacheWork => ({ client, job, vars, buildDir, tmpDir, write: (text) => trace.write(text), work: artifactWork, interrupted });
    try {
      await restoreCaches(cacheWork());
    } catch (err) {
      if (err instanceof CachePolicyError) throw new JobError(err.message, 'script_failure');
      throw err;
    }

    // Dependencies' artifacts.
    const deps = (job.dependencies ?? []).filter((d) => d.artifacts_file?.filename);
    if (deps.length) {
      trace.write(color.section('Downloading artifacts'));
      for (const d of deps) {
        if (interrupted()) break;
        const zipPath = path.join(tmpDir, `dependency-${d.id}.zip`);
        trace.write(color.info(`Downloading artifacts for ${d.name ?? d.id} (${d.id})...`));
        try {
          await client.downloadArtifacts(d.id, d.token, zipPath);
          const r = await extractArtifacts(zipPath, buildDir, artifactWork());
          if (interrupted()) break;
          trace.write(color.info(`  ${r.count} files extracted`));
          for (const w of r.warnings) trace.write(color.warn(w));
        } catch (err) {
          if (interrupted()) throw new JobError('interrupted', 'script_failure');
          throw new JobError(`downloading artifacts of ${d.name ?? d.id}: ${(err as Error).message}`, 'runner_system_failure');
        } finally {
          fs.rmSync(zipPath, { force: true });
        }
      }
    }

    // Steps.
    const steps: JobStep[] = job.steps ?? [];
    let failure: JobError | null = null;
    for (const step of steps.filter((s) => s.name !== 'after_script')) {
      if (interrupted()) break;
      const when = step.when ?? 'on_success';
      const runIt = failure ? when === 'on_failure' || when === 'always' : when === 'on_success' || when === 'always' || when === '';
      if (!runIt) continue;
      trace.write(color.section(step.name === 'script' ? 'Executing "step_script" stage of the job script' : `Executing "${step.name}" stage of the job script`));
      const r = await runStep(step, 'script', { run, jobDir, buildDir, tmpDir, env, own });
      if (interrupted()) break;
      if (r.exitCode !== 0 && !step.allow_failure) {
        failure = new JobError(`Job failed: exit code ${r.exitCode ?? (r.signal ? `signal ${r.signal}` : 'unknown')}`, 'script_failure', r.exitCode ?? undefined);
      }
    }

    const status = aborted || interruptedByRunner ? 'failed' : canceled ? 'canceled' : failure || timedOut ? 'failed' : 'success';
    const after = steps.find((s) => s.name === 'after_script' && s.script?.length);
    if (after && !aborted && !interruptedByRunner) {
      trace.write(color.section('Running after_script'));
      const afterEnv = { ...env, CI_JOB_STATUS: status };
      const limit = Math.min(after.timeout && after.timeout > 0 ? after.timeout : Infinity, o.afterScriptTimeoutSec ?? 300);
      // The job's deadline does not cut after_script short; its own limit does.
      const wasTimedOut = timedOut;
      timedOut = false;
      const r = await runStep(after, 'after_script', { run, jobDir, buildDir, tmpDir, env: afterEnv, own }, limit);
      timedOut = wasTimedOut;
      if (r.exitCode !== 0) trace.write(color.warn(`after_script failed, but the job's status does not change: exit code ${r.exitCode ?? r.signal ?? 'unknown'}`));
    }

    if (timedOut) failure = new JobError(`Job failed: execution took longer than ${timeoutSec} seconds`, 'job_execution_timeout');
    else if (canceled) failure = new JobError('Job canceled', 'job_canceled');
    else if (aborted) failure = new JobError('Job stopped: the server no longer runs it (canceled)', 'job_canceled');
    else if (interruptedByRunner) failure = new JobError('Job stopped: the runner was shut down', 'runner_interrupted');

    // Caches.
    if (!aborted && !interruptedByRunner) {
      try {
        await archiveCaches(cacheWork(), !failure);
      } catch (err) {
        if (!(err instanceof CachePolicyError)) throw err;
        trace.write(color.error(err.message));
        failure ??= new JobError(err.message, 'script_failure');
      }
    }

    // Artifacts.
    if (!aborted && !interruptedByRunner) {
      const ok = !failure;
      for (const a of job.artifacts ?? []) {
        const when = a.when || 'on_success';
        if (!(ok ? when === 'on_success' || when === 'always' : when === 'on_failure' || when === 'always')) continue;
        try {
          await uploadArtifact(client, job, a, { buildDir, tmpDir, trace, work: artifactWork() });
        } catch (err) {
          trace.write(color.error((err as Error).message));
          failure ??= new JobError('Job failed: uploading artifacts failed', 'script_failure');
        }
      }
    }

    if (failure) throw failure;
    trace.write(color.section('Job succeeded'));
    outcome = { state: 'success', aborted, canceled, timedOut };
  } catch (err) {
    let e = err instanceof JobError ? err : new JobError(`${(err as Error).message}`, 'runner_system_failure');
    if (timedOut && e.reason !== 'job_execution_timeout') e = new JobError(`Job failed: execution took longer than ${timeoutSec} seconds`, 'job_execution_timeout');
    else if (interruptedByRunner && e.message === 'interrupted') e = new JobError('Job stopped: the runner was shut down', 'runner_interrupted');
    else if ((aborted || canceled) && e.message === 'interrupted') e = new JobError('Job canceled', 'job_canceled');
    if (!(err instanceof JobError)) log(`job ${job.id}: ${(err as Error).stack ?? err}`);
    trace.write(color.error(e.message));
    outcome = {
      state: 'failed',
      failureReason: supportedFailureReason(timedOut ? 'job_execution_timeout' : aborted || canceled ? 'job_canceled' : e.reason, job.features?.failure_reasons),
      exitCode: e.exitCode,
      aborted,
      canceled,
      timedOut,
    };
  } finally {
    clearTimeout(deadline);
    o.signal?.removeEventListener('abort', onRunnerStop);
    // Whatever the job left running (a fork bomb's last children, a daemon) dies here.
    await cgroup?.destroy().catch((err) => log(`job ${job.id}: removing its cgroup: ${(err as Error).message}`));
  }

  try {
    // A runner shutting down does not wait minutes for a server that may be going away too.
    await trace.finish({ state: outcome.state, failureReason: outcome.failureReason, exitCode: outcome.exitCode }, o.signal?.aborted ? 2 : undefined);
  } catch (err) {
    log(`job ${job.id}: final update failed: ${(err as Error).message}`);
  } finally {
    trace.stop();
    // Never following a link the job left in it.
    try {
      if (jobDir && !o.keepBuilds) removeTree(jobDir);
    } catch (err) {
      log(`job ${job.id}: removing ${jobDir} failed: ${(err as Error).message}`);
    }
  }
  log(`job ${job.id}: ${outcome.state}${outcome.failureReason ? ` (${outcome.failureReason})` : ''}`);
  return outcome;
}

/** The sandbox's pid, from bwrap's --info-fd JSON. */
function sandboxPid(info: Readable): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => done(new Error('bwrap did not report its sandbox in time')), 10_000);
    const done = (err: Error | null, pid?: number) => {
      clearTimeout(timer);
      info.removeAllListeners('data');
      info.removeAllListeners('end');
      info.resume();
      if (err) reject(err);
      else resolve(pid!);
    };
    info.on('data', (b: Buffer) => {
      text += b;
      const m = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (m) done(null, Number(m[1]));
    });
    info.on('end', () => done(new Error('bwrap exited before its sandbox was ready')));
  });
}

type RunFn = (file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, sandboxed: boolean, limitSec?: number) => Promise<RunResult>;

async function runStep(step: JobStep, name: string, c: { run: RunFn; jobDir: string; buildDir: string; tmpDir: string; env: NodeJS.ProcessEnv; own: (p: string) => void }, limitSec?: number): Promise<RunResult> {
  const file = path.join(c.tmpDir, `${name}.sh`);
  // Neither the script's name nor tmp/ itself is followed if the job made a link of it.
  const fd = createOutput(file, 0o700);
  try {
    fs.writeFileSync(fd, stepScript(step.script ?? []));
  } finally {
    fs.closeSync(fd);
  }
  c.own(file);
  return c.run('bash', ['--noprofile', '--norc', file], c.buildDir, c.env, true, limitSec);
}

async function fetchSources(job: JobPayload, buildDir: string, c: { run: RunFn; trace: JobTrace; allowFileUrls: boolean; interrupted: () => boolean }) {
  const g = job.git_info;
  let url: URL;
  try {
    url = new URL(g.repo_url);
  } catch {
    throw new JobError('the job has no valid repository URL', 'runner_system_failure');
  }
  if (!(url.protocol === 'http:' || url.protocol === 'https:' || (c.allowFileUrls && url.protocol === 'file:'))) {
    throw new JobError(`repository URL scheme ${url.protocol} is not allowed`, 'runner_system_failure');
  }
  const sha = String(g.sha ?? '').toLowerCase();
  if (!SHA.test(sha)) throw new JobError('the job has no valid commit sha', 'runner_system_failure');
  const ref = g.ref ?? '';
  let refspecs = g.refspecs?.length ? g.refspecs : ref ? [g.ref_type === 'tag' ? `+refs/tags/${ref}:refs/tags/${ref}` : `+refs/heads/${ref}:refs/remotes/origin/${ref}`] : [];
  refspecs = refspecs.filter((r) => SAFE_REFSPEC.test(r));
  const depth = Number.isInteger(g.depth) && g.depth! > 0 ? g.depth! : 0;
  // git runs as the runner, outside the sandbox, in a directory nothing of the job has touched
  // yet (each job's directory is new, and git runs before the job's code and its dependencies'
  // artifacts). Still no configuration but ours, no hooks, no fsmonitor command.
  const gitEnv: NodeJS.ProcessEnv = { ...baseEnvironment(), HOME: path.dirname(buildDir), GIT_TERMINAL_PROMPT: '0', LC_ALL: 'C', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
  const git = async (args: string[], show = true) => {
    if (c.interrupted()) throw new JobError('interrupted', 'script_failure');
    const r = await c.run('git', ['-c', 'advice.detachedHead=false', '-c', 'init.defaultBranch=main', '-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.file.allow=' + (c.allowFileUrls ? 'always' : 'never'), ...args], buildDir, gitEnv, false);
    if (show && r.exitCode !== 0 && !c.interrupted()) c.trace.write(`git ${args[0]} exited with ${r.exitCode ?? r.signal}\n`);
    return r.exitCode === 0;
  };
  c.trace.write(depth ? `Fetching changes with git depth set to ${depth}...\n` : 'Fetching changes...\n');
  c.trace.write(`Initialized empty Git repository in ${buildDir}/.git/\nCreated fresh repository.\n`);
  if (!(await git(['init', '-q', buildDir]))) throw new JobError('git init failed', 'runner_system_failure');
  if (!(await git(['remote', 'add', 'origin', url.toString()]))) throw new JobError('git remote add failed', 'runner_system_failure');
  const depthArgs = depth ? [`--depth=${depth}`] : [];
  const fetched = refspecs.length ? await git(['fetch', '--quiet', '--prune', ...depthArgs, 'origin', ...refspecs]) : false;
  c.trace.write(`Checking out ${sha.slice(0, 8)} as ${ref ? `detached HEAD (ref is ${ref})` : 'detached HEAD'}...\n`);
  let ok = fetched && (await git(['checkout', '-f', '-q', sha], false));
  if (!ok && !c.interrupted()) {
    // The ref moved on past the depth, or no refspec: ask for the commit itself.
    ok = (await git(['fetch', '--quiet', ...depthArgs, 'origin', sha])) && (await git(['checkout', '-f', '-q', sha]));
  }
  if (c.interrupted()) throw new JobError('interrupted', 'script_failure');
  if (!ok) throw new JobError(`fetching the sources from ${cleanUrl(g.repo_url)} failed`, 'script_failure');
  c.trace.write('Skipping Git submodules setup\n');
}

async function uploadArtifact(client: RunnerClient, job: JobPayload, a: JobArtifact, c: { buildDir: string; tmpDir: string; trace: JobTrace; work: ArtifactWorkOptions }) {
  const type = a.artifact_type || 'archive';
  const format = a.artifact_format || (type === 'archive' ? 'zip' : 'gzip');
  c.trace.write(color.section(type === 'archive' ? 'Uploading artifacts for job' : `Uploading artifacts as "${type}"`));
  if (a.untracked) c.trace.write(color.warn('artifacts:untracked is not supported by this runner, ignored'));
  if (format !== 'zip' && format !== 'gzip') throw new Error(`artifact format ${format} is not supported by this runner`);
  const fileName = format === 'zip' ? (type === 'archive' ? 'artifacts.zip' : `${type}.zip`) : `${type}.gz`;
  // Written by the job's user inside its sandbox, into a file the runner created (tmp/ is the runner's).
  const out = path.join(c.tmpDir, `upload-${type}.${format === 'zip' ? 'zip' : 'gz'}`);
  try {
    const r = await archiveArtifacts(c.buildDir, { paths: a.paths ?? [], exclude: a.exclude ?? [], format }, out, c.work);
    for (const w of r.warnings) c.trace.write(color.warn(w));
    if (!r.count) {
      c.trace.write(color.error('No files to upload'));
      return;
    }
    c.trace.write(color.info(`${r.count} files found`));
    await client.uploadArtifact(job.id, job.token, out, { fileName, type, format, expireIn: a.expire_in ?? null });
    c.trace.write(color.info(`Uploading artifacts (${type}) to coordinator... 201 Created`));
  } finally {
    fs.rmSync(out, { force: true });
  }
}
