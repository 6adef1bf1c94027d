// One job: a fresh directory, the sources cloned with the job token, the dependencies' artifacts,
// before_script + script, after_script, artifacts, the final update. The steps run in bubblewrap
// over a read-only view of the machine (the shell executor), or in the job's image with its
// services beside them (the image executor, container.ts); either way in the job's own network
// namespace (job_namespace.ts), each command in its own process group.
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
import { runProcess, watchProcess, type Running, type RunResult } from './process.js';
import { attachNetwork, findOnPath, isLoopbackHost, sandboxArgs, setprivArgs, urlPort, type AttachedNetwork, type PortForward, type SandboxStatus } from './sandbox.js';
import { runReleaseNatively } from './release.js';
import { baseEnvironment, expandVariables, jobVariables, stepScript } from './script.js';
import {
  buildEntrypoint, containerArgv, containerEnvironment, containerProjectDir, containerSandboxOptions, ContainerError, DETECT_SHELL, derivedServiceNames,
  hostsFile, PORT_PROBE, resolvConf, resolveImageUser, splitAliases, validHostName, type ContainerSandboxSpec, type ImageUser,
} from './container.js';
import type { ImageExecutor } from './executor.js';
import { imageFailureReason, type PreparedImage } from './image_source.js';
import { createJobNamespace, HELPER_ENV, type JobNamespace } from './job_namespace.js';
import { JobTrace } from './trace.js';
import type { JobArtifact, JobPayload, JobStep } from './types.js';

/** Exit 0 when the job's environment has glab or release-cli (the release step's script can run). */
const RELEASE_TOOL_PROBE = 'command -v glab > /dev/null 2>&1 || command -v release-cli > /dev/null 2>&1';

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
  /** The image executor (detectExecutor().image); null: a job's image and services are ignored (the shell executor). */
  image?: ImageExecutor | null;
  /** Why there is no image executor, said in the log of a job that names an image. */
  imageUnavailable?: string | null;
  /** With the image executor, the image of jobs that name none (CAIRN_RUNNER_DEFAULT_IMAGE); null: they run in the shell sandbox. */
  defaultImage?: string | null;
  /** How long services get to answer on their ports, seconds (CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT; 0: no wait). */
  waitForServicesTimeoutSec?: number;
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
// A job its runner's shutdown stopped is a runner system failure to a server without
// runner_interrupted (GitLab's): `retry: when: runner_system_failure` runs it again, as it runs a
// job whose runner's process died (src/runner/serve.ts failOrphanedJobs).
const COMPAT: Record<string, string> = { image_pull_failure: 'runner_system_failure', runner_configuration_error: 'script_failure', runner_interrupted: 'runner_system_failure' };

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

/** A job's `image:` or one of its `services:` as the payload gives it, checked. */
interface ImageSpec {
  name: string;
  entrypoint: string[] | null;
  pullPolicy: string[] | null;
  /** docker.user */
  user: string | null;
}
interface ServiceSpec extends ImageSpec {
  alias: string | null;
  command: string[] | null;
  variables: Record<string, string>;
}

const PULL_POLICIES = new Set(['always', 'if-not-present', 'never']);
const IMAGE_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,511}$/;

function stringArray(v: unknown, what: string): string[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && !x.includes('\0'))) throw new JobError(`${what} must be a list of strings`, 'runner_configuration_error');
  return v as string[];
}

/** $VAR and ${VAR} of the job's variables in an image name or user, as gitlab-runner expands them. */
function expandWith(s: string, vars: Map<string, { value: string }>): string {
  return s.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, a?: string, b?: string) => (m === '$$' ? '$' : (vars.get((a ?? b)!)?.value ?? '')));
}

function parseImageSpec(v: unknown, what: string, vars: Map<string, { value: string }>): ImageSpec | null {
  if (v === undefined || v === null) return null;
  const o = (typeof v === 'string' ? { name: v } : v) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) throw new JobError(`${what} is not an image definition`, 'runner_configuration_error');
  if (o.name === undefined || o.name === null || o.name === '') return null;
  if (typeof o.name !== 'string') throw new JobError(`${what}: the image name must be a string`, 'runner_configuration_error');
  const name = expandWith(o.name, vars).trim();
  if (!IMAGE_NAME.test(name)) throw new JobError(`${what}: invalid image name ${JSON.stringify(name.slice(0, 200))}`, 'runner_configuration_error');
  const pull = o.pull_policy === undefined || o.pull_policy === null ? null : typeof o.pull_policy === 'string' ? [o.pull_policy] : stringArray(o.pull_policy, `${what}: pull_policy`);
  if (pull && (!pull.length || !pull.every((p) => PULL_POLICIES.has(p)))) throw new JobError(`${what}: invalid pull_policy ${JSON.stringify(pull)}: expected always, if-not-present or never`, 'runner_configuration_error');
  const docker = ((o.executor_opts as Record<string, unknown> | undefined)?.docker ?? {}) as Record<string, unknown>;
  let user: string | null = null;
  if (typeof docker.user === 'string' && docker.user !== '') {
    user = expandWith(docker.user, vars);
    if (!/^[A-Za-z0-9._-]{1,64}(:[A-Za-z0-9._-]{1,64})?$/.test(user)) throw new JobError(`${what}: invalid docker user ${JSON.stringify(user.slice(0, 100))}`, 'runner_configuration_error');
  }
  return { name, entrypoint: stringArray(o.entrypoint, `${what}: entrypoint`), pullPolicy: pull, user };
}

function parseServiceSpecs(v: unknown, vars: Map<string, { value: string }>): ServiceSpec[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new JobError('services must be a list', 'runner_configuration_error');
  const out: ServiceSpec[] = [];
  v.forEach((s, i) => {
    const what = `services[${i}]`;
    const img = parseImageSpec(s, what, vars);
    if (!img) return;
    const o = (typeof s === 'string' ? {} : s) as Record<string, unknown>;
    const variables: Record<string, string> = {};
    if (Array.isArray(o.variables)) {
      for (const e of o.variables as { key?: unknown; value?: unknown }[]) {
        if (e && typeof e.key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(e.key)) variables[e.key] = String(e.value ?? '');
      }
    }
    out.push({ ...img, alias: typeof o.alias === 'string' ? o.alias : null, command: stringArray(o.command, `${what}: command`), variables });
  });
  return out;
}

/** What the log keeps of a service's output: its last bytes. */
class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly max: number) {}
  push(b: Buffer) {
    this.chunks.push(b);
    this.size += b.length;
    while (this.size - this.chunks[0].length >= this.max) this.size -= this.chunks.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.chunks);
    return all.subarray(Math.max(0, all.length - this.max)).toString('utf8');
  }
}

/** A service of the job: its process in the job's namespace, its names, its output. */
interface RunningService {
  name: string;
  names: string[];
  ports: number[];
  output: TailBuffer;
  proc: Running | null;
  exited: RunResult | null;
}

export async function executeJob(client: RunnerClient, job: JobPayload, o: ExecutorOptions): Promise<JobOutcome> {
  const log = o.log ?? (() => {});
  let current: Running | null = null;
  /** Processes that are not the current step but die with a stop (health checks). */
  const sidecars = new Set<Running>();
  const jobAbort = new AbortController();
  let aborted = false;
  let canceled = false;
  let timedOut = false;
  let interruptedByRunner = false;
  const stopCurrent = () => {
    current?.kill();
    for (const p of sidecars) p.kill();
    // An image pull in progress stops too.
    if (interrupted()) jobAbort.abort();
  };
  const interrupted = () => aborted || canceled || timedOut || interruptedByRunner;
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
  let ns: JobNamespace | null = null;
  let nsStarting: Promise<JobNamespace> | null = null;
  const services: RunningService[] = [];
  let touchTimer: NodeJS.Timeout | null = null;
  let outcome: JobOutcome;
  try {
    fs.mkdirSync(o.buildsDir, { recursive: true, mode: 0o711 });
    jobDir = fs.mkdtempSync(path.join(fs.realpathSync(o.buildsDir), `job-${job.id}-`));
    const buildDir = path.join(jobDir, 'build');
    const tmpDir = path.join(jobDir, 'tmp');
    const homeDir = path.join(jobDir, 'home');
    for (const d of [buildDir, tmpDir, homeDir]) fs.mkdirSync(d, { mode: 0o700 });

    const isolated = o.sandbox.available;
    const runAs = isolated ? (o.sandbox.runAs ?? null) : null;
    const root = typeof process.getuid === 'function' && process.getuid() === 0;
    /** Hands a path the runner made (as root) to the job's user. */
    const own = (p: string) => {
      if (runAs) chownTree(p, runAs.uid, runAs.gid);
    };

    // Which executor runs this job: its image (or the runner's default one) when this runner has
    // the image executor, else the shell sandbox, which ignores image and services as
    // gitlab-runner's shell executor does (with a warning here).
    const imageSpec = parseImageSpec(job.image, 'image', vars);
    const serviceSpecs = parseServiceSpecs(job.services, vars);
    const imageExecutor = isolated && runAs && root && o.image ? o.image : null;
    const imageName = imageSpec?.name ?? (imageExecutor ? (o.defaultImage ?? null) : null);
    const inImage = !!(imageExecutor && imageName);
    trace.write(color.section(`Preparing the "${inImage ? 'image' : 'shell'}" executor`));
    if (!inImage && (imageSpec || serviceSpecs.length)) {
      const why = o.imageUnavailable ?? (isolated ? 'it runs jobs on its own filesystem (shell executor)' : 'jobs are not isolated here');
      if (imageSpec) trace.write(color.warn(`this runner has no image executor (${why}): the job's image ${imageSpec.name} is ignored and the job runs on the runner's machine`));
      if (serviceSpecs.length) trace.write(color.warn(`this runner has no image executor: the job's services (${serviceSpecs.map((s) => s.name).join(', ')}) are not started`));
    }
    if (isolated) trace.write(color.info(`Using bubblewrap isolation (${o.sandbox.bwrap})${runAs ? `, jobs run as uid ${runAs.uid}` : ''}`));
    else if (o.allowUnisolated) trace.write(color.warn(`running WITHOUT isolation: ${o.sandbox.reason}`));
    else throw new JobError(`this runner refuses to run jobs without isolation: ${o.sandbox.reason}`, 'runner_system_failure');

    const network = isolated ? (o.network ?? setting<'pasta' | 'none' | 'host'>('CAIRN_RUNNER_JOB_NETWORK')) : 'host';
    const pasta = network === 'pasta' ? (o.sandbox.pasta ?? null) : null;
    const forward = o.forwardPorts ?? setting<PortForward[]>('CAIRN_RUNNER_FORWARD_PORTS');
    const limits = o.limits ?? jobLimitsFromEnv();
    cgroup = createJobCgroup(o.cgroups === undefined ? detectCgroups() : o.cgroups, `job-${job.id}-${path.basename(jobDir).slice(-6)}`, limits);
    const prlimit = isolated ? (o.sandbox.prlimit ?? null) : null;
    const rlimits = prlimit ? { prlimit, fsize: limits.fileSize, nproc: cgroup ? null : limits.pids, data: cgroup ? null : limits.memory } : null;
    const enterCgroup = cgroup?.enter ?? [];

    // One network namespace for the whole job (its steps, services and health checks), held by a
    // process of its own; a runner that is not root cannot enter namespaces and keeps one per step.
    const nsenter = imageExecutor?.nsenter ?? (root && isolated ? findOnPath('nsenter') : null);
    const mountBin = imageExecutor?.mount ?? findOnPath('mount');
    // Made while the images are looked up (it takes a few bwrap and nsenter starts).
    if (isolated && root && nsenter && mountBin && (inImage || network !== 'host')) {
      nsStarting = createJobNamespace({ bwrap: o.sandbox.bwrap!, nsenter, mount: mountBin, network, pasta, forward, wrap: enterCgroup, tmpDir, label: path.basename(jobDir) });
      nsStarting.catch(() => {});
    }
    // Images first (services', then the job's, as gitlab-runner pulls them): a pull failure
    // fails the job before anything else happens.
    let jobImage: PreparedImage | null = null;
    const serviceImages: PreparedImage[] = [];
    if (inImage) {
      trace.write(color.info(`Using the image executor with image ${imageName} ...`));
      const pull = async (name: string, policy: string[] | null) => {
        try {
          return await imageExecutor!.source.prepare(name, {
            pullPolicy: policy,
            variables: [...vars.values()].map((v) => ({ key: v.key, value: v.value })),
            signal: jobAbort.signal,
            onLog: (line) => trace.write(color.info(line)),
          });
        } catch (err) {
          if (interrupted()) throw new JobError('interrupted', 'script_failure');
          throw new JobError(`${(err as Error).message}`.split('\n')[0], imageFailureReason(err));
        }
      };
      for (const s of serviceSpecs) {
        trace.write(color.info(`Starting service ${s.name} ...`));
        serviceImages.push(await pull(s.name, s.pullPolicy));
      }
      jobImage = await pull(imageName!, imageSpec?.pullPolicy ?? null);
      // A job that runs for days keeps its images out of the store's eviction.
      const inUse = [jobImage, ...serviceImages];
      touchTimer = setInterval(() => {
        for (const image of inUse) imageExecutor!.source.touch?.(image);
      }, 3600_000);
      touchTimer.unref();
    }

    if (nsStarting) {
      try {
        ns = await nsStarting;
      } catch (err) {
        if (inImage) throw new JobError(`the job's namespace could not be made: ${(err as Error).message}`, 'runner_system_failure');
        trace.write(color.warn(`the job's namespace could not be made (${(err as Error).message}): each step gets its own`));
      }
    }
    /** Per-step network namespaces with pasta (a runner that is not root). */
    const perStepPasta = isolated && !ns && !!pasta;
    if (isolated) {
      const attached = ns ? !!ns.network : perStepPasta;
      if (attached) {
        trace.write(color.info(`Network: a namespace of its own${ns ? ' for the job' : ''}, outbound connections through pasta; this machine's loopback is not reachable${forward.length ? ` except port${forward.length > 1 ? 's' : ''} ${forward.map((f) => f.jobPort).join(', ')} (forwarded)` : ''}`));
        // A server on this machine's loopback that no forward reaches: the job's API calls fail.
        try {
          const server = new URL(vars.get('CI_SERVER_URL')?.value ?? '');
          if (isLoopbackHost(server.hostname) && !forward.some((f) => f.jobPort === urlPort(server))) {
            trace.write(color.warn(`${server.origin} is on this machine's loopback, which jobs do not reach: the runner can forward it to the server's job listener (CAIRN_RUNNER_FORWARD_PORTS=${urlPort(server)}:<the server's CAIRN_JOB_PORT>)`));
          }
        } catch {
          /* no server URL */
        }
      } else if (network === 'pasta') trace.write(color.warn(`this job has no network: ${ns?.networkProblem ?? o.sandbox.pastaReason ?? 'pasta is not available'}`));
      else if (network === 'none') trace.write(color.info('Network: none (CAIRN_RUNNER_JOB_NETWORK=none)'));
      else trace.write(color.warn("the job shares this machine's network, loopback services included (CAIRN_RUNNER_JOB_NETWORK=host)"));
    }
    if (cgroup) trace.write(color.info(`Limits: ${cgroup.description}${rlimits ? `; files up to ${formatBytes(limits.fileSize)}` : ''}`));
    else if (rlimits) trace.write(color.info(`Limits (no cgroup here): at most ${limits.pids} processes of the job's user, ${formatBytes(limits.memory)} of data per process, files up to ${formatBytes(limits.fileSize)}`));
    else trace.write(color.warn('no process, memory or file size limits: neither a cgroup nor prlimit is available'));

    // The containers' roots: an overlay per image, the cached image read-only below, the job's
    // changes in its own directory above; mounted in the job namespace's mount namespace only.
    const rootsDir = path.join(jobDir, 'roots');
    const mountRoot = async (name: string, image: PreparedImage): Promise<string> => {
      fs.mkdirSync(rootsDir, { recursive: true, mode: 0o711 });
      const dir = path.join(rootsDir, name);
      fs.mkdirSync(dir, { mode: 0o711 });
      const [upper, work, merged] = ['upper', 'work', 'merged'].map((d) => path.join(dir, d));
      fs.mkdirSync(upper, { mode: 0o755 });
      fs.mkdirSync(work, { mode: 0o700 });
      fs.mkdirSync(merged, { mode: 0o755 });
      fs.chownSync(upper, runAs!.uid, runAs!.gid);
      await ns!.mountOverlay({ lower: image.rootfs, upper, work, target: merged });
      return merged;
    };

    // Inside a container the job sees GitLab's paths: /builds/<namespace>/<project>, its file
    // variables and scripts in <project dir>.tmp (read-only), the generated /etc/hosts.
    const projectDirInside = inImage ? containerProjectDir(vars.get('CI_PROJECT_PATH')?.value, vars.get('CI_PROJECT_ID')?.value) : buildDir;
    const ciDir = path.join(tmpDir, 'ci');
    const netDir = path.join(tmpDir, 'net');
    let hostsPath: string | null = null;
    let resolvPath: string | null = null;
    let jobRoot: string | null = null;
    let jobUser: ImageUser | null = null;
    const hostname = (() => {
      const short = vars.get('CI_RUNNER_SHORT_TOKEN')?.value ?? '';
      const name = `runner-${/^[A-Za-z0-9]{1,16}$/.test(short) ? `${short}-` : ''}project-${vars.get('CI_PROJECT_ID')?.value ?? '0'}-concurrent-0`;
      return validHostName(name) ? name : 'runner';
    })();
    const serviceNames: string[][] = [];
    if (inImage) {
      if (!ns) throw new JobError("the image executor needs the job's namespace", 'runner_system_failure');
      fs.chmodSync(jobDir, 0o711);
      fs.chmodSync(tmpDir, 0o711);
      // bwrap (as the job's user) must reach the job's directory to bind its parts.
      const ownBuilds = fs.realpathSync(o.buildsDir);
      for (let d = jobDir; d !== path.dirname(d); d = path.dirname(d)) {
        let st = fs.statSync(d);
        // An older runner made its builds directory 0700; traversable now (each job's directory
        // is 0711, named at random, its parts the job user's or read-only).
        if (d === ownBuilds && st.uid === process.getuid!() && !(st.mode & 0o001)) {
          fs.chmodSync(d, (st.mode & 0o777) | 0o011);
          st = fs.statSync(d);
        }
        if (!(st.mode & 0o001) && st.uid !== runAs!.uid) throw new JobError(`the builds directory ${o.buildsDir} is not reachable by the job user (uid ${runAs!.uid}): ${d} has mode ${(st.mode & 0o777).toString(8)} (it needs o+x)`, 'runner_system_failure');
      }
      fs.mkdirSync(ciDir, { mode: 0o755 });
      fs.mkdirSync(netDir, { mode: 0o755 });
      // Names: each service's aliases and the names GitLab derives from its image; a name taken
      // by an earlier service is skipped, as gitlab-runner does.
      const taken = new Set<string>([hostname, 'localhost']);
      serviceSpecs.forEach((s, i) => {
        const names: string[] = [];
        for (const n of [...derivedServiceNames(s.name), ...splitAliases(s.alias)]) {
          if (!validHostName(n)) trace.write(color.warn(`Skipping alias "${n}" for service "${s.name}" (services[${i}]): not a valid host name.`));
          else if (taken.has(n)) {
            if (!names.includes(n)) trace.write(color.warn(`Skipping alias "${n}" for service "${s.name}" (services[${i}]): alias is already in use by another service.`));
          } else {
            taken.add(n);
            names.push(n);
          }
        }
        serviceNames.push(names);
      });
      hostsPath = path.join(netDir, 'hosts');
      fs.writeFileSync(hostsPath, hostsFile([hostname, ...serviceNames.flat()]), { mode: 0o644 });
      const resolv = resolvConf();
      if (resolv.warning && ns.network) trace.write(color.warn(resolv.warning));
      resolvPath = path.join(netDir, 'resolv.conf');
      fs.writeFileSync(resolvPath, resolv.text, { mode: 0o644 });
      jobRoot = await mountRoot('job', jobImage!);
      try {
        jobUser = resolveImageUser(jobImage!.rootfs, imageSpec?.user ?? jobImage!.config.user ?? '');
      } catch (err) {
        if (err instanceof ContainerError) throw new JobError(err.message, 'runner_configuration_error');
        throw err;
      }
    }
    trace.write(color.section('Preparing environment'));
    trace.write(color.info(`Running on ${inImage ? `${hostname} via ` : ''}${os.hostname()}...`));

    const base = baseEnvironment();
    const extra: Record<string, string> = {
      CI_PROJECT_DIR: projectDirInside,
      CI_BUILDS_DIR: inImage ? '/builds' : jobDir,
      CI_SERVER: 'yes',
      CI_RUNNER_VERSION: CAIRN_VERSION,
      CI_RUNNER_EXECUTABLE_ARCH: `${os.platform()}/${os.arch()}`,
      CI_DISPOSABLE_ENVIRONMENT: 'true',
    };
    if (inImage && !vars.has('CI_JOB_IMAGE')) extra.CI_JOB_IMAGE = imageName!;
    if (!inImage) extra.HOME = homeDir;
    if (!isolated) extra.TMPDIR = tmpDir;
    // The job's variables. Never in the environment of the runner's own commands that run
    // privileged (the cgroup shell, nsenter, bwrap and setpriv as root: LD_PRELOAD or
    // LD_LIBRARY_PATH=. would load the job's code into them): the shell exports them at the top
    // of each step's script; a container gets them from bwrap once it runs as the job's user.
    const jobVars = jobVariables(vars, inImage ? { fileDir: ciDir, fileDirShown: `${projectDirInside}.tmp` } : { fileDir: path.join(tmpDir, 'variables') });
    const scriptExports: Record<string, string> = {};
    for (const [k, v] of Object.entries(jobVars)) if (!(k in extra)) scriptExports[k] = v;
    const processEnv: NodeJS.ProcessEnv = { ...base, ...extra };
    const hidden = [...o.hiddenPaths, o.buildsDir];

    let runs = 0;
    /** Starts a command (the argv already wrapped), tracked as the job's current process. */
    const track = async (argv: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; limitSec?: number; argsData?: string[]; syncPasta?: boolean }): Promise<RunResult> => {
      const onOutput = (b: Buffer) => trace.write(b);
      const proc = opts.argsData
        ? startContainer(argv, opts.argsData, onOutput)
        : runProcess(argv[0], argv.slice(1), { cwd: opts.cwd, env: opts.env, onOutput, extraPipes: opts.syncPasta ? 2 : 0 });
      current = proc;
      let attached: AttachedNetwork | null = null;
      if (opts.syncPasta) {
        const block = proc.stdio[4] as NodeJS.WritableStream;
        try {
          const pid = await sandboxPid(proc.stdio[3] as Readable);
          attached = await attachNetwork(pid, { pasta: pasta!, forward, wrap: enterCgroup, pidFile: path.join(tmpDir, `pasta-${++runs}.pid`) });
        } catch (err) {
          trace.write(color.warn(`this step has no network: ${(err as Error).message}`));
        } finally {
          // The namespace is ready (or stays without network): bwrap runs the command.
          block.end('1');
        }
      }
      let limitTimer: NodeJS.Timeout | null = null;
      let ownTimedOut = false;
      if (opts.limitSec) {
        limitTimer = setTimeout(() => {
          ownTimedOut = true;
          proc.kill();
        }, opts.limitSec * 1000);
      }
      // A stop that arrived while nothing was running applies to this one too.
      if (interrupted()) proc.kill();
      return proc.done.then((r) => {
        attached?.close();
        if (limitTimer) clearTimeout(limitTimer);
        if (current === proc) current = null;
        return ownTimedOut ? { ...r, killed: true, exitCode: null } : r;
      });
    };
    /** A command on the runner's side (git): not sandboxed, in the job's process group rules. */
    const runHost = (file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) => track([file, ...args], { cwd, env });
    /** A step's shell in the shell sandbox: the machine read-only, the job's directory writable. */
    const runShell = (scriptFile: string, env: NodeJS.ProcessEnv, limitSec?: number) => {
      const command = ['bash', '--noprofile', '--norc', scriptFile];
      if (!isolated) return track(command, { cwd: buildDir, env, limitSec });
      const spec = {
        bwrap: o.sandbox.bwrap!, jobDir: jobDir!, cwd: buildDir, hidden, runAs,
        // In the job's namespace already (nsenter), or a namespace of its own.
        network: ns || network === 'host' ? ('host' as const) : ('none' as const),
        syncFds: perStepPasta ? { info: 3, block: 4 } : undefined,
        tmpSize: o.sandbox.tmpfsSize ? limits.fileSize : null,
        tmpSticky: !!o.sandbox.tmpfsPerms,
        rlimits,
      };
      const argv = [...enterCgroup, ...(ns ? ns.enter() : []), o.sandbox.bwrap!, ...sandboxArgs(spec, command)];
      return track(argv, { cwd: '/', env, limitSec, syncPasta: perStepPasta });
    };
    /** The wrapped command line and bwrap options of a process in a container (a step or a service). */
    const containerCommand = (spec: ContainerSandboxSpec, command: string[]) => {
      const limited = rlimits ? [rlimits.prlimit, ...(rlimits.nproc ? [`--nproc=${rlimits.nproc}`] : []), ...(rlimits.data ? [`--data=${rlimits.data}`] : []), `--fsize=${rlimits.fsize}`, '--'] : [];
      // Into the job's namespaces as root, then the job's user for good: bwrap and all it starts
      // run unprivileged; root in the container is that user in a user namespace of its own.
      const argv = [...enterCgroup, ...ns!.enter({ mount: true }), ...setprivArgs(runAs!), ...limited, o.sandbox.bwrap!, '--args', '3', '--info-fd', '4', '--', ...command];
      return { argv, argsData: containerSandboxOptions(spec) };
    };
    const containerBinds = () => [
      { src: buildDir, dest: projectDirInside },
      { src: ciDir, dest: `${projectDirInside}.tmp`, readOnly: true },
      { src: hostsPath!, dest: '/etc/hosts', readOnly: true },
      { src: resolvPath!, dest: '/etc/resolv.conf', readOnly: true },
    ];
    /** A step's script in the job's container, through the image's entrypoint as the docker executor runs it. */
    const runContainerStep = (scriptName: string, env: Record<string, string>, limitSec?: number) => {
      const spec: ContainerSandboxSpec = {
        root: jobRoot!, user: jobUser!, hostname, binds: containerBinds(), cwd: projectDirInside,
        env: containerEnvironment(jobImage!.config.env, jobUser!, env, extra),
        shmSize: 64 * 1024 ** 2, disableUserns: imageExecutor!.disableUserns,
      };
      const command = [...buildEntrypoint(jobImage!.config, imageSpec?.entrypoint), 'sh', '-c', DETECT_SHELL, 'sh', `${projectDirInside}.tmp/${scriptName}`];
      const { argv, argsData } = containerCommand(spec, command);
      return track(argv, { cwd: '/', env: HELPER_ENV, limitSec, argsData });
    };
    // Sources.
    trace.write(color.section('Getting source from Git repository'));
    await fetchSources(job, buildDir, { run: runHost, trace, allowFileUrls: !!o.allowFileUrls, interrupted });

    // From here on the job's own user works in build/ and home/ (dependencies' artifacts are
    // extracted as that user). The job directory and tmp/ stay the runner's (traversable
    // only), so the job cannot plant a symlink where the runner writes its scripts and archives.
    if (runAs) {
      own(buildDir);
      own(homeDir);
      for (const d of [path.join(tmpDir, 'variables'), ciDir]) {
        if (!fs.existsSync(d)) continue;
        for (const f of fs.readdirSync(d)) own(path.join(d, f));
        if (d !== ciDir) own(d);
      }
      fs.chmodSync(jobDir, 0o711);
      fs.chmodSync(tmpDir, 0o711);
    }

    const waitForService = async (svc: RunningService, waitSec: number) => {
      let problem: string | null = null;
      if (svc.exited?.spawnError || !svc.proc) problem = `the service could not start: ${svc.exited?.spawnError?.message ?? 'unknown'}`;
      else if (svc.ports.length) {
        const argv = [...enterCgroup, ...ns!.enter(), ...setprivArgs(runAs!), process.execPath, '-e', PORT_PROBE, String(waitSec * 1000), ...svc.ports.map(String)];
        const probe = runProcess(argv[0], argv.slice(1), { cwd: '/', env: HELPER_ENV, onOutput: () => {} });
        sidecars.add(probe);
        const exitedFirst = svc.proc.done.then(() => 'exited' as const);
        const r = await Promise.race([probe.done, exitedFirst]);
        probe.kill();
        sidecars.delete(probe);
        if (r === 'exited') problem = `the service exited${svc.exited?.exitCode !== null && svc.exited?.exitCode !== undefined ? ` with code ${svc.exited.exitCode}` : svc.exited?.signal ? ` (${svc.exited.signal})` : ''} before it answered on port ${svc.ports.join(', ')}`;
        else if (r.exitCode !== 0 && !interrupted()) problem = `service "${svc.names[0] ?? svc.name}" timeout: no TCP connection to port ${svc.ports.join(', ')} within ${waitSec} seconds`;
      }
      if (!problem || interrupted()) return;
      trace.write(
        `\n\x1b[0;33m*** WARNING:\x1b[0;m Service ${svc.name} probably didn't start properly.\n\nHealth check error:\n${problem}\n\nService container logs:\n${svc.output.text().trimEnd()}\n\n\x1b[0;33m*********\x1b[0;m\n\n`,
      );
    };

    // Services: started once the sources are there (a service sees the build directory, and git
    // runs as the runner: nothing of the job may exist there before it), in the job's network
    // namespace, answering on their names; the runner waits for their ports.
    if (inImage && serviceSpecs.length) {
      for (const [i, s] of serviceSpecs.entries()) {
        const image = serviceImages[i];
        const svc: RunningService = { name: s.name, names: serviceNames[i], ports: image.config.exposedPorts.filter((p) => Number.isInteger(p) && p > 0 && p < 65536), output: new TailBuffer(64 * 1024), proc: null, exited: null };
        services.push(svc);
        const argv = containerArgv(image.config, s.entrypoint, s.command);
        if (!argv.length) {
          svc.exited = { exitCode: null, signal: null, killed: false, spawnError: new Error('the service image has no command (no ENTRYPOINT or CMD, and none given)') };
          continue;
        }
        let user: ImageUser;
        try {
          user = resolveImageUser(image.rootfs, s.user ?? image.config.user ?? '');
        } catch (err) {
          svc.exited = { exitCode: null, signal: null, killed: false, spawnError: err as Error };
          continue;
        }
        const root = await mountRoot(`service-${i}`, image);
        const spec: ContainerSandboxSpec = {
          root, user, hostname, binds: containerBinds(), cwd: image.config.workingDir || '/',
          env: containerEnvironment(image.config.env, user, { ...jobVars, ...s.variables }, extra),
          shmSize: 64 * 1024 ** 2, disableUserns: imageExecutor!.disableUserns,
        };
        const { argv: wrapped, argsData } = containerCommand(spec, argv);
        const debug = /^(1|true)$/i.test(vars.get('CI_DEBUG_SERVICES')?.value ?? '');
        const label = svc.names[0] ?? `service-${i}`;
        const proc = startContainer(wrapped, argsData, (b) => {
          svc.output.push(b);
          if (debug) trace.write(b.toString('utf8').split(/(?<=\n)/).map((l) => `[service:${label}] ${l}`).join(''));
        });
        svc.proc = proc;
        void proc.done.then((r) => (svc.exited = r));
      }
      const waitSec = o.waitForServicesTimeoutSec ?? setting<number>('CAIRN_RUNNER_WAIT_FOR_SERVICES_TIMEOUT');
      if (waitSec > 0) {
        trace.write(color.info(`Waiting for services to be up and running (timeout ${waitSec} seconds)...`));
        await Promise.all(services.map((svc) => waitForService(svc, waitSec)));
      }
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

    /** Writes a step's script (never following a link) and runs it where the job runs. */
    const runStep = async (step: JobStep, name: string, status: string | null, limitSec?: number, echo = true): Promise<RunResult> => {
      const stepVars = status ? { ...scriptExports, CI_JOB_STATUS: status } : scriptExports;
      const file = path.join(inImage ? ciDir : tmpDir, `${name}.sh`);
      // Neither the script's name nor its directory is followed if the job made a link of it.
      const fd = createOutput(file, 0o700);
      try {
        fs.writeFileSync(fd, stepScript(step.script ?? [], inImage ? {} : stepVars, { echo }));
      } finally {
        fs.closeSync(fd);
      }
      own(file);
      if (inImage) return runContainerStep(`${name}.sh`, status ? { ...jobVars, CI_JOB_STATUS: status } : jobVars, limitSec);
      return runShell(file, processEnv, limitSec);
    };

    // Steps.
    const steps: JobStep[] = job.steps ?? [];
    let failure: JobError | null = null;
    for (const step of steps.filter((s) => s.name !== 'after_script')) {
      if (interrupted()) break;
      const when = step.when ?? 'on_success';
      const runIt = failure ? when === 'on_failure' || when === 'always' : when === 'on_success' || when === 'always' || when === '';
      if (!runIt) continue;
      trace.write(color.section(step.name === 'script' ? 'Executing "step_script" stage of the job script' : `Executing "${step.name}" stage of the job script`));
      // The release step (a job's release:): performed by the runner when the job's environment
      // has neither glab nor release-cli (asked there, with the job's PATH), else its script runs.
      if (step.name === 'release' && (await runStep({ name: 'release-probe', script: [RELEASE_TOOL_PROBE] }, 'release-probe', null, 60, false)).exitCode !== 0) {
        if (interrupted()) break;
        const made = await runReleaseNatively(step.script ?? [], {
          apiUrl: client.url('').replace(/\/+$/, ''),
          jobToken: job.token,
          projectId: vars.get('CI_PROJECT_ID')?.value ?? String(job.job_info?.project_id ?? ''),
          projectDir: buildDir,
          vars,
          write: (text) => trace.write(text),
        });
        if (!made && !step.allow_failure) failure = new JobError('Job failed: exit code 1', 'script_failure', 1);
        continue;
      }
      const r = await runStep(step, 'script', null);
      if (interrupted()) break;
      if (r.exitCode !== 0 && !step.allow_failure) {
        failure = new JobError(`Job failed: exit code ${r.exitCode ?? (r.signal ? `signal ${r.signal}` : 'unknown')}`, 'script_failure', r.exitCode ?? undefined);
      }
    }

    const status = aborted || interruptedByRunner ? 'failed' : canceled ? 'canceled' : failure || timedOut ? 'failed' : 'success';
    const after = steps.find((s) => s.name === 'after_script' && s.script?.length);
    if (after && !aborted && !interruptedByRunner) {
      trace.write(color.section('Running after_script'));
      const limit = Math.min(after.timeout && after.timeout > 0 ? after.timeout : Infinity, o.afterScriptTimeoutSec ?? 300);
      // The job's deadline does not cut after_script short; its own limit does.
      const wasTimedOut = timedOut;
      timedOut = false;
      const r = await runStep(after, 'after_script', status, limit);
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
    if (touchTimer) clearInterval(touchTimer);
    o.signal?.removeEventListener('abort', onRunnerStop);
    for (const s of services) s.proc?.kill();
    for (const p of sidecars) p.kill();
    // A container's processes are gone once its done settles (startContainer).
    await Promise.all(services.map((s) => s.proc?.done));
    // The holder goes, and with it the namespace and the overlays mounted in it (also one still
    // starting when the job failed).
    ns?.close();
    if (!ns && nsStarting) await nsStarting.then((n) => n.close(), () => {});
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

/**
 * A container's bwrap (its options on fd 3, its --info-fd on fd 4). Killing it (a SIGKILL to its
 * process group) ends bwrap at once, but the container's processes are in a pid namespace and a
 * session of their own: they go a moment later, with the namespace's init. `done` settles only
 * then, so a container that is over leaves nothing running.
 */
function startContainer(argv: string[], argsData: string[], onOutput: (b: Buffer) => void): Running {
  const proc = runProcess(argv[0], argv.slice(1), { cwd: '/', env: HELPER_ENV, extraPipes: 2, onOutput });
  (proc.stdio[3] as NodeJS.WritableStream).end(argsData.map((a) => `${a}\0`).join(''));
  const init = sandboxPid(proc.stdio[4] as Readable).then(
    (pid) => watchProcess(pid),
    () => null,
  );
  return {
    ...proc,
    done: proc.done.then(async (r) => {
      await (await init)?.gone();
      return r;
    }),
  };
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

type RunFn = (file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv) => Promise<RunResult>;

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
    const r = await c.run('git', ['-c', 'advice.detachedHead=false', '-c', 'init.defaultBranch=main', '-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'protocol.file.allow=' + (c.allowFileUrls ? 'always' : 'never'), ...args], buildDir, gitEnv);
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
