// A small GitLab runner-protocol server over real HTTP (node:http) for the runner's tests: it
// hands out queued jobs, checks every trace PATCH's Content-Range against what it holds,
// records job updates and artifact uploads, serves dependencies' artifacts by job token,
// and can cancel a job (403 to its next PATCH/PUT).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { JobPayload } from '../../src/runner/types.js';

export interface Patch {
  range: string | null;
  status: number;
  length: number;
}
export interface Update {
  state: string;
  failure_reason?: string;
  exit_code?: number;
  token: string;
  headerToken: string | null;
}
export interface Upload {
  query: Record<string, string>;
  fields: Record<string, string>;
  fileName: string | null;
  file: Buffer;
  contentType: string | null;
}

export interface FakeJob {
  payload: JobPayload;
  trace: Buffer;
  patches: Patch[];
  updates: Update[];
  uploads: Upload[];
  canceled: boolean;
  /** After accepting the first patch, drop this many bytes (the server "lost" them): the next PATCH gets 416. */
  loseBytesAfterFirstPatch?: number;
  final: Promise<Update>;
  resolveFinal: (u: Update) => void;
}

export class FakeServer {
  readonly server: http.Server;
  url = '';
  registrationToken = 'reg-token-123';
  runnerToken = 'glrt-runner-token-abc';
  runnerRegistered = false;
  registerBodies: unknown[] = [];
  requestBodies: Record<string, unknown>[] = [];
  readonly jobs = new Map<number, FakeJob>();
  private queue: number[] = [];
  /** Artifacts served by GET /jobs/:id/artifacts: job id -> {token, zip}. */
  readonly served = new Map<number, { token: string; body: Buffer }>();
  /** The next final updates (success/failed) this many times: the connection is dropped (a network error). */
  dropFinalUpdates = 0;
  droppedFinalUpdates = 0;
  /** X-GitLab-Trace-Update-Interval sent with trace answers, when set. */
  traceInterval: string | null = null;
  lastUpdate = 0;
  /** What happened to jobs, in order: `handed <id>` (answered to a job request), `final <id>` (success or failed received). */
  readonly events: string[] = [];

  constructor() {
    this.server = http.createServer((req, res) => {
      void this.handle(req, res).catch((err) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
  }

  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close() {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  addJob(payload: JobPayload, opts: Partial<Pick<FakeJob, 'loseBytesAfterFirstPatch'>> = {}): FakeJob {
    let resolveFinal!: (u: Update) => void;
    const final = new Promise<Update>((r) => (resolveFinal = r));
    const job: FakeJob = { payload, trace: Buffer.alloc(0), patches: [], updates: [], uploads: [], canceled: false, final, resolveFinal, ...opts };
    this.jobs.set(payload.id, job);
    this.queue.push(payload.id);
    this.lastUpdate++;
    return job;
  }

  private async body(req: http.IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  private json(res: http.ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}) {
    res.writeHead(status, { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers });
    res.end(body !== undefined ? JSON.stringify(body) : undefined);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const url = new URL(req.url!, 'http://x');
    const p = url.pathname;
    const method = req.method!;
    let m: RegExpExecArray | null;
    if (method === 'POST' && p === '/api/v4/runners') {
      const b = JSON.parse((await this.body(req)).toString());
      this.registerBodies.push(b);
      if (b.token !== this.registrationToken) return this.json(res, 403, { message: '403 Forbidden' });
      this.runnerRegistered = true;
      return this.json(res, 201, { id: 7, token: this.runnerToken, token_expires_at: null });
    }
    if (method === 'POST' && p === '/api/v4/runners/verify') {
      const b = JSON.parse((await this.body(req)).toString());
      return this.json(res, b.token === this.runnerToken && this.runnerRegistered ? 200 : 403, { id: 7, token: b.token, token_expires_at: null });
    }
    if (method === 'DELETE' && p === '/api/v4/runners') {
      const b = JSON.parse((await this.body(req)).toString());
      if (b.token !== this.runnerToken || !this.runnerRegistered) return this.json(res, 403, { message: '403 Forbidden' });
      this.runnerRegistered = false;
      return this.json(res, 204);
    }
    if (method === 'POST' && p === '/api/v4/jobs/request') {
      const b = JSON.parse((await this.body(req)).toString());
      this.requestBodies.push(b);
      if (b.token !== this.runnerToken) return this.json(res, 403, { message: '403 Forbidden' });
      const headers = { 'x-gitlab-last-update': String(this.lastUpdate) };
      // Long polling, briefly: wait for a job up to 200 ms.
      let gone = false;
      res.once('close', () => (gone = true));
      for (let i = 0; i < 20 && !this.queue.length && !gone; i++) await new Promise((r) => setTimeout(r, 10));
      // A runner that hung up does not get the job (it would be lost).
      if (gone) return;
      const id = this.queue.shift();
      if (id === undefined) return this.json(res, 204, undefined, headers);
      this.events.push(`handed ${id}`);
      return this.json(res, 201, this.jobs.get(id)!.payload, headers);
    }
    if ((m = /^\/api\/v4\/jobs\/(\d+)$/.exec(p)) && method === 'PUT') {
      const job = this.jobs.get(Number(m[1]));
      const b = JSON.parse((await this.body(req)).toString());
      if (!job || b.token !== job.payload.token) return this.json(res, 403, { message: '403 Forbidden' });
      if ((b.state === 'success' || b.state === 'failed') && this.dropFinalUpdates > 0) {
        this.dropFinalUpdates--;
        this.droppedFinalUpdates++;
        req.socket.destroy();
        return;
      }
      const u: Update = { state: b.state, failure_reason: b.failure_reason, exit_code: b.exit_code, token: b.token, headerToken: (req.headers['job-token'] as string) ?? null };
      if (job.canceled) return this.json(res, 403, { message: '403 Forbidden - Job is not running' }, { 'job-status': 'canceled' });
      job.updates.push(u);
      if (b.state === 'success' || b.state === 'failed') {
        this.events.push(`final ${job.payload.id}`);
        job.resolveFinal(u);
      }
      return this.json(res, 200, undefined, { 'job-status': b.state });
    }
    if ((m = /^\/api\/v4\/jobs\/(\d+)\/trace$/.exec(p)) && method === 'PATCH') {
      const job = this.jobs.get(Number(m[1]));
      const body = await this.body(req);
      if (!job || req.headers['job-token'] !== job.payload.token) return this.json(res, 403, { message: '403 Forbidden' });
      const range = (req.headers['content-range'] as string) ?? null;
      const headers: Record<string, string> = { 'job-status': job.canceled ? 'canceled' : 'running' };
      if (this.traceInterval) headers['x-gitlab-trace-update-interval'] = this.traceInterval;
      if (job.canceled) {
        job.patches.push({ range, status: 403, length: body.length });
        return this.json(res, 403, { message: '403 Forbidden - Job is not running' }, headers);
      }
      const rm = range ? /^(\d+)-(\d+)$/.exec(range) : null;
      if (!rm || Number(rm[1]) !== job.trace.length || Number(rm[2]) !== Number(rm[1]) + body.length - 1) {
        job.patches.push({ range, status: 416, length: body.length });
        return this.json(res, 416, { message: '416 Range Not Satisfiable' }, { ...headers, range: `0-${job.trace.length}` });
      }
      job.trace = Buffer.concat([job.trace, body]);
      job.patches.push({ range, status: 202, length: body.length });
      if (job.loseBytesAfterFirstPatch && job.patches.length === 1) job.trace = job.trace.subarray(0, Math.max(0, job.trace.length - job.loseBytesAfterFirstPatch));
      return this.json(res, 202, undefined, { ...headers, range: `0-${job.trace.length}` });
    }
    if ((m = /^\/api\/v4\/jobs\/(\d+)\/artifacts$/.exec(p)) && method === 'POST') {
      const job = this.jobs.get(Number(m[1]));
      const raw = await this.body(req);
      if (!job || req.headers['job-token'] !== job.payload.token) return this.json(res, 403, { message: '403 Forbidden' });
      const request = new Request('http://x/', { method: 'POST', headers: { 'content-type': req.headers['content-type'] as string }, body: new Uint8Array(raw) });
      const form = await request.formData();
      const fields: Record<string, string> = {};
      let file = Buffer.alloc(0);
      let fileName: string | null = null;
      for (const [k, v] of form.entries()) {
        if (typeof v === 'string') fields[k] = v;
        else if (k === 'file') {
          file = Buffer.from(await v.arrayBuffer());
          fileName = v.name;
        }
      }
      job.uploads.push({ query: Object.fromEntries(url.searchParams), fields, fileName, file, contentType: (req.headers['content-type'] as string) ?? null });
      return this.json(res, 201, {});
    }
    if ((m = /^\/api\/v4\/jobs\/(\d+)\/artifacts$/.exec(p)) && method === 'GET') {
      const a = this.served.get(Number(m[1]));
      if (!a) return this.json(res, 404, { message: '404 Not Found' });
      if (req.headers['job-token'] !== a.token) return this.json(res, 403, { message: '403 Forbidden' });
      res.writeHead(200, { 'content-type': 'application/zip', 'content-length': String(a.body.length) });
      return res.end(a.body);
    }
    this.json(res, 404, { message: '404 Not Found' });
  }
}

/** A bare repository with one commit (files given), for file:// clones. */
export function makeRepo(dir: string, files: Record<string, string>): { url: string; sha: string } {
  const work = path.join(dir, 'work');
  const bare = path.join(dir, 'repo.git');
  fs.mkdirSync(work, { recursive: true });
  const env = { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' };
  const git = (args: string[], cwd = work) => execFileSync('git', args, { cwd, env }).toString().trim();
  git(['init', '-q', '-b', 'main']);
  for (const [f, c] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
    fs.writeFileSync(path.join(work, f), c);
  }
  git(['add', '-A']);
  git(['commit', '-q', '-m', 'first']);
  const sha = git(['rev-parse', 'HEAD']);
  git(['clone', '-q', '--bare', work, bare], dir);
  return { url: `file://${bare}`, sha };
}

export function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}
