// The poll loop: one long-polling POST /jobs/request at a time while fewer than `concurrent`
// jobs run, each job executed on its own; plus the built-in runner that `cairn serve` starts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ProtocolError, RunnerClient } from './client.js';
import { readRunnerConfig, writeRunnerConfig } from './config.js';
import { executeJob, type ExecutorOptions, type JobOutcome } from './job.js';
import { detectSandbox, type PortForward, type SandboxStatus } from './sandbox.js';
import { detectExecutor, type ExecutorChoice } from './executor.js';
import { openImageStore, type ImageSource } from './image_source.js';
import { jobLimitsFromEnv } from './limits.js';
import { sleep } from './trace.js';
import { setting } from '../config.js';

export interface RunnerOptions {
  url: string;
  token: string;
  concurrent?: number;
  buildsDir?: string;
  allowUnisolated?: boolean;
  hiddenPaths?: string[];
  /** Wait after an empty answer that came back at once (the server did not long-poll), ms. */
  checkIntervalMs?: number;
  /** Longest wait for an answer to POST /jobs/request, ms (120000). */
  requestTimeoutMs?: number;
  sandbox?: SandboxStatus;
  /**
   * Where jobs' images come from (an ImageStore, images.ts); null or absent: no image executor,
   * for `imagesUnavailable`'s reason.
   */
  images?: ImageSource | null;
  imagesUnavailable?: string;
  /** The image store's directory: hidden from shell jobs like the builds directory. */
  imagesDir?: string;
  /** Image of jobs that name none, with the image executor (CAIRN_RUNNER_DEFAULT_IMAGE). */
  defaultImage?: string | null;
  executor?: Partial<ExecutorOptions>;
  description?: string;
  log?: (msg: string) => void;
  onJobDone?: (jobId: number, outcome: JobOutcome) => void;
}

export class NoIsolationError extends Error {}

/** The user an image store's files belong to: the job user of a root runner, else the runner's own. */
export function jobOwner(sandbox: SandboxStatus): { uid: number; gid: number } {
  if (sandbox.runAs) return { uid: sandbox.runAs.uid, gid: sandbox.runAs.gid };
  return { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
}

/** Why a runner has no image executor when nothing gave it an image store. */
export const NO_IMAGE_STORE = 'this runner was given no image store (skopeo and umoci pull and unpack images)';

export function defaultBuildsDir(): string {
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return path.join(os.tmpdir(), `cairn-builds-${uid}`);
}

/** Whether jobs may run without bubblewrap: the option, or CAIRN_RUNNER_ALLOW_UNISOLATED=1. */
export function unisolatedAllowed(option?: boolean, env: NodeJS.ProcessEnv = process.env): boolean {
  return option === true || setting<boolean>('CAIRN_RUNNER_ALLOW_UNISOLATED', env);
}

export class Runner {
  readonly client: RunnerClient;
  private readonly running = new Map<number, Promise<JobOutcome>>();
  private stopping = false;
  private poll: AbortController | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private readonly killJobs = new AbortController();
  readonly sandbox: SandboxStatus;
  /** What this runner runs jobs with (the image executor, the shell sandbox, or none), decided at its start. */
  readonly executorChoice: ExecutorChoice;
  private readonly log: (msg: string) => void;
  fatal: Error | null = null;

  constructor(private readonly o: RunnerOptions) {
    this.client = new RunnerClient(o.url);
    this.sandbox = o.sandbox ?? detectSandbox();
    this.log = o.log ?? ((m) => console.log(`[runner] ${m}`));
    const defaultImage = o.defaultImage === undefined ? setting<string | null>('CAIRN_RUNNER_DEFAULT_IMAGE') : o.defaultImage;
    this.executorChoice = detectExecutor({
      sandbox: this.sandbox,
      images: o.images ? { source: o.images } : { source: null, reason: o.imagesUnavailable ?? NO_IMAGE_STORE },
      workDir: o.buildsDir ?? defaultBuildsDir(),
      defaultImage,
    });
  }

  get activeJobs() {
    return this.running.size;
  }

  /** Starts polling; refuses (NoIsolationError) when jobs could not be isolated and that is not allowed. */
  start(): Promise<void> {
    if (!this.sandbox.available && !this.o.allowUnisolated) {
      throw new NoIsolationError(
        `refusing to run jobs: ${this.sandbox.reason}. Install bubblewrap, or allow unisolated jobs (--allow-unisolated or CAIRN_RUNNER_ALLOW_UNISOLATED=1) if every job this runner can get is trusted.`,
      );
    }
    if (!this.sandbox.available) this.log(`WARNING: jobs run WITHOUT isolation (${this.sandbox.reason})`);
    else if (!this.loop) this.log(this.executorChoice.summary);
    this.loop ??= this.run();
    return this.loop;
  }

  private async run() {
    const concurrent = Math.max(1, this.o.concurrent ?? 1);
    let backoff = 1000;
    while (!this.stopping) {
      if (this.running.size >= concurrent) {
        await new Promise<void>((r) => (this.wake = r));
        this.wake = null;
        continue;
      }
      this.poll = new AbortController();
      const started = Date.now();
      let job;
      try {
        // A long poll the server never answers must not hang the runner.
        job = await this.client.requestJob(this.o.token, AbortSignal.any([this.poll.signal, AbortSignal.timeout(this.o.requestTimeoutMs ?? 120_000)]));
        backoff = 1000;
      } catch (err) {
        if (this.stopping) break;
        if (err instanceof ProtocolError && err.status === 403) {
          this.fatal = err;
          this.log(err.message);
          break;
        }
        this.log(`checking for jobs failed: ${(err as Error).message}; retrying in ${backoff / 1000}s`);
        await this.pause(backoff);
        backoff = Math.min(backoff * 2, 60_000);
        continue;
      } finally {
        this.poll = null;
      }
      if (!job) {
        // A server that long-polls answered after a while; one that does not gets a breather.
        if (Date.now() - started < 1000) await this.pause(this.o.checkIntervalMs ?? 3000);
        continue;
      }
      this.log(`job ${job.id} received (${job.job_info?.name ?? 'unnamed'})`);
      const p = executeJob(this.client, job, {
        buildsDir: this.o.buildsDir ?? defaultBuildsDir(),
        sandbox: this.sandbox,
        allowUnisolated: !!this.o.allowUnisolated,
        hiddenPaths: [...(this.o.hiddenPaths ?? []), ...(this.o.imagesDir ? [this.o.imagesDir] : [])],
        description: this.o.description,
        log: this.log,
        signal: this.killJobs.signal,
        image: this.executorChoice.image,
        imageUnavailable: this.executorChoice.imageUnavailable,
        defaultImage: this.executorChoice.image ? (this.o.defaultImage === undefined ? setting<string | null>('CAIRN_RUNNER_DEFAULT_IMAGE') : this.o.defaultImage) : null,
        ...this.o.executor,
      })
        .catch((err): JobOutcome => {
          this.log(`job ${job.id} crashed: ${(err as Error).stack ?? err}`);
          return { state: 'failed', failureReason: 'runner_system_failure', aborted: false, canceled: false, timedOut: false };
        })
        .then((outcome) => {
          this.running.delete(job.id);
          this.o.onJobDone?.(job.id, outcome);
          this.wake?.();
          return outcome;
        });
      this.running.set(job.id, p);
    }
  }

  private pause(ms: number) {
    return new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    }).finally(() => (this.wake = null));
  }

  /**
   * Stops asking for jobs and waits for the running ones to finish; with `killJobs`, kills
   * them instead (each is reported failed: runner_interrupted where the server knows it, else runner_system_failure).
   */
  async stop(opts: { killJobs?: boolean } = {}) {
    this.stopping = true;
    this.poll?.abort();
    this.wake?.();
    if (opts.killJobs) this.killJobs.abort();
    await this.loop?.catch(() => undefined);
    await Promise.all(this.running.values());
  }
}

export interface BuiltinRunnerOptions {
  /** The server's own base URL (its external URL, or loopback). */
  url: string;
  /** The instance registration token, used when there is no valid runner token yet. */
  registrationToken?: string;
  /** An existing runner token (skips registration). */
  runnerToken?: string;
  /** Cairn's data directory: hidden from jobs; the built-in runner's token is kept under it. */
  dataDir: string;
  concurrent?: number;
  allowUnisolated?: boolean;
  buildsDir?: string;
  env?: NodeJS.ProcessEnv;
  log?: (msg: string) => void;
  /** What an operator must act on (no executor here); `log` when not given. */
  warn?: (msg: string) => void;
  executor?: Partial<ExecutorOptions>;
  /** Host loopback ports its jobs may reach (the server's job listener), on top of CAIRN_RUNNER_FORWARD_PORTS. */
  forwardPorts?: PortForward[];
  /** Where jobs' images come from; absent: the runner's image store (images.ts) when skopeo and umoci are here; null: none. */
  images?: ImageSource | null;
  imagesUnavailable?: string;
  /** The image store's directory (default `<dataDir>/runner/images`, hidden from jobs either way). */
  imagesDir?: string;
}

export interface BuiltinRunner {
  runner: Runner;
  id: number | null;
  /** Stops polling; running jobs are killed (and reported failed) unless `waitForJobs`. */
  stop(opts?: { waitForJobs?: boolean }): Promise<void>;
}

/**
 * The runner `cairn serve` starts: an instance runner for untagged jobs, talking to the server
 * over HTTP like any other runner. It keeps its token in <dataDir>/runner/builtin.json (0600)
 * and registers again when the server does not know that token any more. Returns null when
 * CAIRN_BUILTIN_RUNNER=0, or when jobs could not be isolated and unisolated jobs are not
 * allowed (it says why through `log`).
 */
export async function startBuiltinRunner(opts: BuiltinRunnerOptions): Promise<BuiltinRunner | null> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((m: string) => console.log(`[builtin runner] ${m}`));
  if (!setting<boolean>('CAIRN_BUILTIN_RUNNER', env)) return null;
  const allowUnisolated = unisolatedAllowed(opts.allowUnisolated, env);
  const sandbox = detectSandbox();
  if (!sandbox.available && !allowUnisolated) {
    (opts.warn ?? log)(`not started: no executor here (${sandbox.reason}). Jobs stay pending for other runners; set CAIRN_RUNNER_ALLOW_UNISOLATED=1 to run them here without isolation.`);
    return null;
  }
  const imagesDir = opts.imagesDir ?? setting<string | null>('CAIRN_RUNNER_IMAGE_DIR', env) ?? path.join(opts.dataDir, 'runner', 'images');
  const store =
    opts.images !== undefined
      ? opts.images
        ? { source: opts.images }
        : { source: null, reason: opts.imagesUnavailable ?? NO_IMAGE_STORE }
      : openImageStore({ dir: imagesDir, owner: jobOwner(sandbox), dockerAuthConfig: setting<string | null>('CAIRN_RUNNER_DOCKER_AUTH_CONFIG', env), log });
  const client = new RunnerClient(opts.url);
  const file = path.join(opts.dataDir, 'runner', 'builtin.json');
  let token = opts.runnerToken ?? null;
  let id: number | null = null;
  if (!token && fs.existsSync(file)) {
    try {
      const saved = readRunnerConfig(file);
      if (saved.url === client.baseUrl && (await client.verify(saved.token))) {
        token = saved.token;
        id = saved.id;
      }
    } catch (err) {
      log(`the saved built-in runner token could not be used: ${(err as Error).message}`);
    }
  }
  if (!token) {
    if (!opts.registrationToken) throw new Error('startBuiltinRunner needs a registration token or a runner token');
    const r = await client.register(opts.registrationToken, { description: `cairn built-in runner (${os.hostname()})`, runUntagged: true, tagList: [], locked: false });
    token = r.token;
    id = r.id;
    writeRunnerConfig(file, { url: client.baseUrl, token, id, token_expires_at: r.token_expires_at, run_untagged: true, tag_list: [] });
    log(`registered as runner ${id}`);
  }
  const runner = new Runner({
    url: opts.url,
    token,
    concurrent: opts.concurrent ?? setting<number>('CAIRN_BUILTIN_RUNNER_CONCURRENT', env),
    allowUnisolated,
    buildsDir: opts.buildsDir,
    hiddenPaths: [opts.dataDir],
    sandbox,
    images: store.source,
    imagesUnavailable: store.source ? undefined : store.reason,
    imagesDir,
    defaultImage: setting<string | null>('CAIRN_RUNNER_DEFAULT_IMAGE', env),
    description: 'cairn built-in runner',
    log,
    executor: {
      network: setting<'pasta' | 'none' | 'host'>('CAIRN_RUNNER_JOB_NETWORK', env),
      limits: jobLimitsFromEnv(env),
      waitForServicesTimeoutSec: setting<number>('CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT', env),
      forwardPorts: [...setting<PortForward[]>('CAIRN_RUNNER_FORWARD_PORTS', env), ...(opts.forwardPorts ?? [])],
      ...opts.executor,
    },
  });
  void runner.start().catch((err) => log(`stopped: ${(err as Error).message}`));
  return {
    runner,
    id,
    async stop(o = {}) {
      await runner.stop({ killJobs: !o.waitForJobs });
    },
  };
}

/** Waits for `ms` (exported for the CLI's signal handling). */
export { sleep };
