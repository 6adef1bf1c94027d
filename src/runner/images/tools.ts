// The programs images are pulled and unpacked with: skopeo (registry client: manifests, blobs,
// credentials, TLS) and umoci (OCI layers onto a directory, whiteouts and all). Each runs with
// an argument array, a minimal environment of our making, in its own process group killed on
// abort, with its output collected up to a bound.
import { spawn, spawnSync } from 'node:child_process';
import { findOnPath } from '../sandbox.js';

export interface ImageSupport {
  available: boolean;
  skopeo?: string;
  umoci?: string;
  /** setpriv (util-linux): how a root runner unpacks as the rootfs's owner. */
  setpriv?: string;
  reason?: string;
}

let detected: ImageSupport | null = null;

function works(binary: string): string | null {
  const r = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  if (r.status === 0) return null;
  return (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n')[0];
}

/** Whether images can be pulled and unpacked here: skopeo and umoci installed and running (cached). */
export function detectImageSupport(opts: { refresh?: boolean } = {}): ImageSupport {
  if (detected && !opts.refresh) return detected;
  const skopeo = findOnPath('skopeo');
  const umoci = findOnPath('umoci');
  const setpriv = findOnPath('setpriv') ?? undefined;
  const missing = [!skopeo && 'skopeo', !umoci && 'umoci'].filter(Boolean) as string[];
  if (missing.length) {
    detected = { available: false, reason: `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not installed (Debian/Ubuntu: apt-get install ${missing.join(' ')})` };
  } else {
    const broken = [skopeo!, umoci!].map((b) => [b, works(b)] as const).find(([, why]) => why !== null);
    detected = broken
      ? { available: false, reason: `${broken[0]} does not run: ${broken[1]}` }
      : { available: true, skopeo: skopeo!, umoci: umoci!, ...(setpriv ? { setpriv } : {}) };
  }
  return detected;
}

export interface ToolResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  /** Killed because the signal aborted. */
  aborted: boolean;
  spawnError: Error | null;
}

/** Runs `file args` in its own process group; the group is killed when `signal` aborts. */
export function runTool(
  file: string,
  args: string[],
  o: { cwd: string; env: NodeJS.ProcessEnv; signal?: AbortSignal; stdoutMax?: number },
): Promise<ToolResult> {
  return new Promise((resolve) => {
    if (o.signal?.aborted) return resolve({ code: null, stdout: Buffer.alloc(0), stderr: '', aborted: true, spawnError: null });
    const child = spawn(file, args, { cwd: o.cwd, env: o.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let outLength = 0;
    let err = '';
    let aborted = false;
    const max = o.stdoutMax ?? 8 * 1024 * 1024;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    };
    const onAbort = () => {
      aborted = true;
      killGroup();
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout!.on('data', (b: Buffer) => {
      outLength += b.length;
      if (outLength <= max) out.push(b);
      else killGroup();
    });
    child.stderr!.on('data', (b: Buffer) => {
      err = (err + b.toString('utf8')).slice(-16_000);
    });
    let spawnError: Error | null = null;
    child.once('error', (e) => (spawnError = e));
    child.once('close', (code) => {
      o.signal?.removeEventListener('abort', onAbort);
      killGroup();
      const stdoutTooBig = outLength > max;
      resolve({
        code: stdoutTooBig ? null : code,
        stdout: Buffer.concat(out),
        stderr: stdoutTooBig ? `output larger than ${max} bytes` : err,
        aborted,
        spawnError,
      });
    });
  });
}

/**
 * The message of a failed skopeo run, one line: its last logrus `msg="..."` (or last line),
 * without the prefixes that only repeat the image name.
 */
export function skopeoMessage(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  let msg = '';
  for (let i = lines.length - 1; i >= 0 && !msg; i--) {
    const m = /\bmsg="((?:[^"\\]|\\.)*)"/.exec(lines[i]);
    if (m) {
      try {
        msg = JSON.parse(`"${m[1]}"`) as string;
      } catch {
        msg = m[1];
      }
    }
  }
  if (!msg) msg = lines[lines.length - 1] ?? 'unknown error';
  return msg
    .replace(/^Error parsing image name "[^"]*": /, '')
    .replace(/^initializing source [^:]*:\/\/\S+: /, '')
    .replace(/^Error initializing source [^:]*:\/\/\S+: /, '')
    .replace(/\s+/g, ' ')
    .trim();
}
