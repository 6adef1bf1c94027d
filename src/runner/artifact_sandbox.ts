// Where the runner does artifact work on a job's files: inside the job's sandbox as the job's
// user when there is one (artifact_helper.ts through bwrap, the same sandbox the job's steps
// get), in this process otherwise. Either way artifacts.ts walks the job's tree without
// following links; the sandbox adds the kernel's checks of the job's own rights (a root
// runner's jobs run as an unprivileged user) and a timeout that can kill the work.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ArtifactLimitError,
  collectArtifactFiles,
  createOutput,
  extractZip,
  RESULT_MARK,
  untrackedFiles,
  writeGzipConcat,
  writeZip,
  type ArtifactLimits,
  type HelperRequest,
  type HelperResult,
} from './artifacts.js';
import type { Running, RunResult } from './process.js';
import { sandboxArgs, type SandboxSpec } from './sandbox.js';

export interface ArtifactWorkOptions {
  /** The job's sandbox (its cwd is ignored), or null: the work runs in this process. */
  sandbox: Omit<SandboxSpec, 'cwd'> | null;
  limits: ArtifactLimits;
  /** The sandboxed work is killed after this long. */
  timeoutSec: number;
  /** Told the running helper, so that a cancel can kill it. */
  onStart?: (r: Running) => void;
}

export interface ArtifactWorkResult {
  /** Entries extracted, or files archived (0: none, and nothing was written). */
  count: number;
  warnings: string[];
}

const HERE = fileURLToPath(import.meta.url);

let tsxBundle: Promise<string> | null = null;

/**
 * How to start artifact_helper: the bundle bin/cairn.mjs builds next to its own; when this
 * module runs as TypeScript (tests, CAIRN_TSX=1) a bundle this process builds once (tsx itself
 * cannot run in the sandbox: it writes to /tmp, which the job's user may not).
 */
export async function helperCommand(): Promise<string[]> {
  const dir = path.dirname(HERE);
  if (!HERE.endsWith('.ts')) return [process.execPath, path.join(dir, 'artifact_helper.mjs')];
  tsxBundle ??= (async () => {
    const esbuild = await import('esbuild');
    const outDir = path.resolve(dir, '../../.cache/tsx-helpers');
    fs.mkdirSync(outDir, { recursive: true, mode: 0o755 });
    const out = path.join(outDir, 'artifact_helper.mjs');
    const tmp = `${out}.${process.pid}.tmp.mjs`;
    await esbuild.build({ entryPoints: [path.join(dir, 'artifact_helper.ts')], outfile: tmp, bundle: true, platform: 'node', format: 'esm', target: 'node20', packages: 'external', logLevel: 'error' });
    fs.chmodSync(tmp, 0o644);
    fs.renameSync(tmp, out);
    return out;
  })();
  return [process.execPath, await tsxBundle];
}

const MAX_STDERR = 4 * 1024 * 1024;

async function runSandboxed(req: HelperRequest, o: ArtifactWorkOptions & { sandbox: Omit<SandboxSpec, 'cwd'> }, stdin: number | 'ignore', stdout: number | 'ignore'): Promise<HelperResult> {
  const cmd = await helperCommand();
  const jobDir = path.resolve(o.sandbox.jobDir);
  const argv = sandboxArgs({ ...o.sandbox, cwd: jobDir }, [...cmd, JSON.stringify(req)]);
  // A fresh environment: nothing of the job's (NODE_OPTIONS would run the job's code) or the runner's.
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin', LC_ALL: 'C.UTF-8' };
  const child = spawn(o.sandbox.bwrap, argv, { cwd: jobDir, env, detached: true, stdio: [stdin, stdout, 'pipe'] });
  let killed = false;
  const kill = () => {
    killed = true;
    try {
      if (child.pid) process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  };
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    kill();
  }, o.timeoutSec * 1000);
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (s: string) => {
    if (stderr.length < MAX_STDERR) stderr += s;
  });
  const done = new Promise<RunResult>((resolve) => {
    child.once('error', (err) => resolve({ exitCode: null, signal: null, killed, spawnError: err }));
    child.once('close', (code, signal) => resolve({ exitCode: code, signal, killed, spawnError: null }));
  });
  o.onStart?.({ pid: child.pid, done, kill, stdio: child.stdio });
  return done.then((r) => {
    clearTimeout(timer);
    if (timedOut) return { ok: false, error: `the artifact work took longer than ${o.timeoutSec}s: stopped`, limit: true };
    if (r.killed) return { ok: false, error: 'interrupted', limit: false };
    const line = stderr
      .split('\n')
      .reverse()
      .find((l) => l.startsWith(RESULT_MARK));
    if (line) return JSON.parse(line.slice(RESULT_MARK.length)) as HelperResult;
    const why = r.spawnError?.message ?? `exit ${r.exitCode ?? r.signal}`;
    return { ok: false, error: `the artifact helper failed in the sandbox (${why}): ${stderr.trim().split('\n').slice(-5).join(' | ')}`, limit: false };
  });
}

function answer(r: HelperResult): ArtifactWorkResult {
  if (r.ok) return { count: r.count, warnings: r.warnings };
  throw r.limit ? new ArtifactLimitError(r.error) : new Error(r.error);
}

/** Extracts the zip at zipPath (a file the runner owns) into buildDir. */
export async function extractArtifacts(zipPath: string, buildDir: string, o: ArtifactWorkOptions): Promise<ArtifactWorkResult> {
  if (!o.sandbox) {
    const r = await extractZip(zipPath, buildDir, o.limits);
    return { count: r.extracted, warnings: r.warnings };
  }
  const fd = fs.openSync(zipPath, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    return answer(await runSandboxed({ op: 'extract', dest: path.resolve(buildDir), limits: o.limits }, { ...o, sandbox: o.sandbox }, fd, 'ignore'));
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Collects the declared paths in buildDir and writes them to outPath (created by the runner,
 * exclusively) as a zip or concatenated gzip members. count 0: nothing matched, nothing written.
 */
export async function archiveArtifacts(buildDir: string, spec: { paths: string[]; exclude: string[]; format: 'zip' | 'gzip'; untracked?: boolean }, outPath: string, o: ArtifactWorkOptions): Promise<ArtifactWorkResult> {
  if (!o.sandbox) {
    const untracked = spec.untracked ? untrackedFiles(buildDir) : null;
    const c = collectArtifactFiles(buildDir, spec.paths, spec.exclude, o.limits, untracked?.files ?? []);
    if (untracked?.warning) c.warnings.push(untracked.warning);
    if (!c.files.length) return { count: 0, warnings: c.warnings };
    const w = spec.format === 'zip' ? await writeZip(buildDir, c.files, outPath, o.limits) : await writeGzipConcat(buildDir, c.files, outPath, o.limits);
    return { count: w.written, warnings: [...c.warnings, ...w.skipped] };
  }
  const fd = createOutput(outPath);
  try {
    return answer(
      await runSandboxed({ op: 'archive', buildDir: path.resolve(buildDir), paths: spec.paths, exclude: spec.exclude, format: spec.format, limits: o.limits, untracked: !!spec.untracked }, { ...o, sandbox: o.sandbox }, 'ignore', fd),
    );
  } finally {
    fs.closeSync(fd);
  }
}
