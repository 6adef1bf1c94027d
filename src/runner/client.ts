// The runner side of gitlab-runner's HTTP protocol (POST /runners, /jobs/request, PUT /jobs/:id,
// PATCH /jobs/:id/trace, artifacts), spoken over real HTTP to any GitLab-compatible server.
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import { Readable } from 'node:stream';
import { CAIRN_VERSION } from '../version.js';
import type { JobPayload } from './types.js';

export class ProtocolError extends Error {
  constructor(message: string, readonly status: number | null) {
    super(message);
  }
}

/** A network failure (no HTTP answer at all): callers retry these, never a 4xx. */
export function isNetworkError(err: unknown): boolean {
  return err instanceof ProtocolError ? err.status === null || err.status >= 500 : true;
}

/** What the server says about a running job in a PUT or PATCH answer. */
export interface JobStateAnswer {
  status: number;
  /** Job-Status header: running, canceling, canceled, failed, success... */
  remoteState: string | null;
  /** X-GitLab-Trace-Update-Interval, milliseconds; null when absent or invalid. */
  updateIntervalMs: number | null;
  /** The job must stop now: 403, or Job-Status canceled/failed. */
  abort: boolean;
  /** The job is being canceled gracefully (Job-Status canceling). */
  cancelRequested: boolean;
}

export interface TracePatchAnswer extends JobStateAnswer {
  /** On 416 (or when accepted), the offset the server holds: the next byte it expects. */
  serverOffset: number | null;
}

export interface RegisterParams {
  description?: string;
  tagList?: string[];
  runUntagged?: boolean;
  locked?: boolean;
  paused?: boolean;
  accessLevel?: string;
  maximumTimeout?: number;
  maintenanceNote?: string;
}

export interface RunnerInfo {
  name: string;
  version: string;
  revision: string;
  platform: string;
  architecture: string;
  executor: string;
  shell: string;
  features: Record<string, boolean>;
}

export function runnerInfo(): RunnerInfo {
  return {
    name: 'cairn-runner',
    version: CAIRN_VERSION,
    revision: 'cairn',
    platform: os.platform(),
    architecture: os.arch() === 'x64' ? 'amd64' : os.arch(),
    executor: 'shell',
    shell: 'bash',
    features: {
      variables: true,
      artifacts: true,
      upload_multiple_artifacts: true,
      upload_raw_artifacts: true,
      masking: true,
      raw_variables: true,
      artifacts_exclude: true,
      multi_build_steps: true,
      trace_reset: true,
      trace_size: true,
      cancelable: true,
      return_exit_code: true,
      refspecs: true,
      shared: false,
      image: false,
      services: false,
      cache: true,
      fallback_cache_keys: true,
      session: false,
      terminal: false,
    },
  };
}

function parseInterval(value: string | null): number | null {
  if (value === null || !/^\d+$/.test(value.trim())) return null;
  const seconds = Number(value);
  return seconds > 0 ? Math.min(seconds, 15 * 60) * 1000 : null;
}

function stateAnswer(res: Response): JobStateAnswer {
  const remoteState = res.headers.get('job-status');
  return {
    status: res.status,
    remoteState,
    updateIntervalMs: parseInterval(res.headers.get('x-gitlab-trace-update-interval')),
    abort: res.status === 403 || remoteState === 'canceled' || remoteState === 'failed',
    cancelRequested: remoteState === 'canceling',
  };
}

async function errorText(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown };
    const m = body.message ?? body.error;
    if (m !== undefined) return typeof m === 'string' ? m : JSON.stringify(m);
  } catch {
    /* not JSON */
  }
  return text.slice(0, 200) || res.statusText;
}

export class RunnerClient {
  readonly baseUrl: string;
  /** The queue version the server last gave (X-GitLab-Last-Update), sent back as last_update. */
  lastUpdate: string | null = null;
  readonly info = runnerInfo();

  constructor(url: string, private readonly fetchImpl: typeof fetch = fetch) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`server URL must be http(s): ${url}`);
    this.baseUrl = u.toString().replace(/\/+$/, '');
  }

  url(path: string): string {
    return `${this.baseUrl}/api/v4/${path}`;
  }

  private async send(method: string, path: string, init: { json?: unknown; headers?: Record<string, string>; body?: BodyInit; signal?: AbortSignal; duplex?: boolean }): Promise<Response> {
    const headers: Record<string, string> = { 'user-agent': `cairn-runner ${CAIRN_VERSION}`, ...init.headers };
    let body = init.body;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    let res: Response;
    try {
      res = await this.fetchImpl(this.url(path), {
        method,
        headers,
        body,
        signal: init.signal,
        ...(init.duplex ? { duplex: 'half' } : {}),
      } as RequestInit);
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw new ProtocolError(`${method} ${path}: ${(err as Error).message}${(err as { cause?: Error }).cause ? ` (${(err as { cause: Error }).cause.message})` : ''}`, null);
    }
    const lu = res.headers.get('x-gitlab-last-update');
    if (lu) this.lastUpdate = lu;
    return res;
  }

  /** POST /runners: 201 {id, token, token_expires_at}; 403 for a wrong registration token. */
  async register(registrationToken: string, p: RegisterParams): Promise<{ id: number; token: string; token_expires_at: string | null }> {
    const res = await this.send('POST', 'runners', {
      json: {
        token: registrationToken,
        description: p.description,
        maintenance_note: p.maintenanceNote,
        tag_list: p.tagList?.length ? p.tagList.join(',') : undefined,
        run_untagged: p.runUntagged ?? !p.tagList?.length,
        locked: p.locked ?? false,
        paused: p.paused ?? false,
        access_level: p.accessLevel,
        maximum_timeout: p.maximumTimeout,
        info: this.info,
      },
    });
    if (res.status !== 201) {
      const why = res.status === 403 ? 'forbidden (check the registration token)' : await errorText(res);
      throw new ProtocolError(`registering the runner failed: ${res.status} ${why}`, res.status);
    }
    const body = (await res.json()) as { id: number; token: string; token_expires_at?: string | null };
    if (typeof body.token !== 'string' || !body.token) throw new ProtocolError('registration answer has no token', res.status);
    return { id: body.id, token: body.token, token_expires_at: body.token_expires_at ?? null };
  }

  /** POST /runners/verify: true when the server knows the token (200), false on 403. */
  async verify(token: string): Promise<boolean> {
    const res = await this.send('POST', 'runners/verify', { json: { token, info: this.info } });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status === 200) return true;
    if (res.status === 403) return false;
    throw new ProtocolError(`verifying the runner failed: ${res.status}`, res.status);
  }

  /** DELETE /runners with the runner token: 204. */
  async unregister(token: string): Promise<boolean> {
    const res = await this.send('DELETE', 'runners', { json: { token } });
    await res.arrayBuffer().catch(() => undefined);
    if (res.status === 204) return true;
    if (res.status === 403) return false;
    throw new ProtocolError(`unregistering the runner failed: ${res.status}`, res.status);
  }

  /**
   * POST /jobs/request. The server may hold it open (long polling); 201 gives a job, 204 none.
   * 403 means the runner token is not valid any more.
   */
  async requestJob(token: string, signal?: AbortSignal): Promise<JobPayload | null> {
    const json: Record<string, unknown> = { token, info: this.info };
    if (this.lastUpdate) json.last_update = this.lastUpdate;
    const res = await this.send('POST', 'jobs/request', { json, signal });
    if (res.status === 201) return (await res.json()) as JobPayload;
    await res.arrayBuffer().catch(() => undefined);
    if (res.status === 204) return null;
    if (res.status === 403) throw new ProtocolError('the server refused the runner token (403): is the runner still registered?', 403);
    throw new ProtocolError(`requesting a job failed: ${res.status}`, res.status);
  }

  /** PUT /jobs/:id: the job's state (running as a keep-alive, or the final success/failed). */
  async updateJob(jobId: number, jobToken: string, update: { state: 'running' | 'success' | 'failed'; failureReason?: string; exitCode?: number; bytesize?: number }): Promise<JobStateAnswer> {
    const json: Record<string, unknown> = { token: jobToken, state: update.state, info: this.info, output: { bytesize: update.bytesize ?? 0 } };
    if (update.failureReason) json.failure_reason = update.failureReason;
    if (update.exitCode !== undefined) json.exit_code = update.exitCode;
    const res = await this.send('PUT', `jobs/${jobId}`, { json, headers: { 'job-token': jobToken } });
    await res.arrayBuffer().catch(() => undefined);
    return stateAnswer(res);
  }

  /** PATCH /jobs/:id/trace with Content-Range start-end (inclusive); 202 accepted, 416 gives Range 0-<size>. */
  async patchTrace(jobId: number, jobToken: string, offset: number, bytes: Buffer): Promise<TracePatchAnswer> {
    const res = await this.send('PATCH', `jobs/${jobId}/trace?debug_trace=false`, {
      headers: {
        'job-token': jobToken,
        'content-type': 'text/plain',
        'content-range': `${offset}-${offset + bytes.length - 1}`,
      },
      body: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length) as unknown as BodyInit,
    });
    await res.arrayBuffer().catch(() => undefined);
    const answer = stateAnswer(res);
    let serverOffset: number | null = null;
    const range = res.headers.get('range');
    const m = range ? /^(?:bytes=)?\d+-(\d+)$/.exec(range.trim()) : null;
    if (m) serverOffset = Number(m[1]);
    return { ...answer, serverOffset };
  }

  /**
   * POST /jobs/:id/artifacts: multipart with the archive as field "file", streamed from disk;
   * artifact_type, artifact_format and expire_in as query parameters and form fields.
   */
  async uploadArtifact(jobId: number, jobToken: string, filePath: string, opts: { fileName: string; type: string; format: string; expireIn?: string | null }): Promise<void> {
    const boundary = `----cairn-runner-${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
    const fields: Record<string, string> = { artifact_type: opts.type, artifact_format: opts.format };
    if (opts.expireIn) fields.expire_in = opts.expireIn;
    const safeName = opts.fileName.replace(/["\r\n\\]/g, '_');
    let head = '';
    for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    head += `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="${safeName}"\r\ncontent-type: application/octet-stream\r\n\r\n`;
    const tail = `\r\n--${boundary}--\r\n`;
    const size = (await fs.promises.stat(filePath)).size;
    async function* parts() {
      yield Buffer.from(head);
      const stream = fs.createReadStream(filePath);
      for await (const chunk of stream) yield chunk as Buffer;
      yield Buffer.from(tail);
    }
    const query = new URLSearchParams(fields).toString();
    const stop = new AbortController();
    const res = await this.send('POST', `jobs/${jobId}/artifacts?${query}`, {
      headers: {
        'job-token': jobToken,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(Buffer.byteLength(head) + size + Buffer.byteLength(tail)),
      },
      body: Readable.toWeb(Readable.from(parts())) as unknown as BodyInit,
      duplex: true,
      signal: stop.signal,
    });
    if (res.status === 201) {
      await res.arrayBuffer().catch(() => undefined);
      return;
    }
    const why = res.status === 413 ? 'too large' : await errorText(res);
    stop.abort(); // an early refusal: the rest of the file is not sent
    throw new ProtocolError(`uploading artifacts (${opts.type}) failed: ${res.status} ${why}`, res.status);
  }

  /**
   * GET /jobs/:id/cache?key= (Cairn's cache storage) with the job token, streamed into `fd` (a
   * file the caller created). false: the server has no archive for the key (404).
   */
  async downloadCache(jobId: number, jobToken: string, key: string, fd: number): Promise<boolean> {
    const res = await this.send('GET', `jobs/${jobId}/cache?key=${encodeURIComponent(key)}`, { headers: { 'job-token': jobToken } });
    if (res.status === 404) {
      await res.arrayBuffer().catch(() => undefined);
      return false;
    }
    if (res.status !== 200 || !res.body) {
      const why = res.status === 403 ? 'forbidden' : await errorText(res);
      throw new ProtocolError(`downloading cache ${key} failed: ${res.status} ${why}`, res.status);
    }
    const out = fs.createWriteStream('', { fd, autoClose: false });
    const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
    body.pipe(out);
    await Promise.race([once(out, 'finish'), once(body, 'error').then(([e]) => Promise.reject(e))]);
    return true;
  }

  /** PUT /jobs/:id/cache?key= with the archive at filePath as the body (application/zip, streamed). */
  async uploadCache(jobId: number, jobToken: string, key: string, filePath: string): Promise<void> {
    const size = (await fs.promises.stat(filePath)).size;
    const stop = new AbortController();
    const res = await this.send('PUT', `jobs/${jobId}/cache?key=${encodeURIComponent(key)}`, {
      headers: { 'job-token': jobToken, 'content-type': 'application/zip', 'content-length': String(size) },
      body: Readable.toWeb(fs.createReadStream(filePath)) as unknown as BodyInit,
      duplex: true,
      signal: stop.signal,
    });
    if (res.status === 201) {
      await res.arrayBuffer().catch(() => undefined);
      return;
    }
    const why = res.status === 413 ? 'the archive is larger than the server accepts' : res.status === 404 ? 'this server does not store caches' : await errorText(res);
    stop.abort(); // an early refusal: the rest of the archive is not sent
    throw new ProtocolError(`uploading cache ${key} failed: ${res.status} ${why}`, res.status);
  }

  /** GET /jobs/:id/artifacts with a job token, written to filePath (streamed). */
  async downloadArtifacts(jobId: number, jobToken: string, filePath: string): Promise<void> {
    const res = await this.send('GET', `jobs/${jobId}/artifacts`, { headers: { 'job-token': jobToken } });
    if (res.status !== 200 || !res.body) {
      const why = res.status === 403 ? 'forbidden' : res.status === 404 ? 'not found' : await errorText(res);
      throw new ProtocolError(`downloading artifacts of job ${jobId} failed: ${res.status} ${why}`, res.status);
    }
    const out = fs.createWriteStream(filePath, { mode: 0o600 });
    const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
    body.pipe(out);
    await Promise.race([once(out, 'finish'), once(body, 'error').then(([e]) => Promise.reject(e))]);
  }
}
