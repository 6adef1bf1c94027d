// A job's log on its way to the server: masked as it is written, sent with PATCH
// /jobs/:id/trace at the interval the server asks for (X-GitLab-Trace-Update-Interval, 3 s by
// default), resynced from the Range header on 416, and the job's fate (cancel, abort) read
// from every answer.
import { isNetworkError, type JobStateAnswer, type RunnerClient } from './client.js';
import { Masker } from './mask.js';

export const DEFAULT_UPDATE_INTERVAL_MS = 3000;
const MAX_PATCH_BYTES = 1024 * 1024;
/** With no trace to send, a PUT state=running tells the server the job is alive this often. */
const KEEPALIVE_MS = 30_000;
const FINAL_UPDATE_TRIES = 10;

export interface TraceOptions {
  client: RunnerClient;
  jobId: number;
  jobToken: string;
  maskedValues: string[];
  /** Interval before the server has said one (tests make it short). */
  updateIntervalMs?: number;
  /** Largest log kept; beyond it the output is dropped with a notice. */
  outputLimit?: number;
  /** The server says stop: 403, Job-Status canceled/failed, 404. */
  onAbort: (why: string) => void;
  /** The server says canceling: stop the script, run after_script. */
  onCancel: () => void;
  /** With nothing to send, how often a PUT state=running asks the server about the job (30 s). */
  keepaliveMs?: number;
  /** Delay between final-update tries (tests make it short). */
  retryDelayMs?: number;
  log?: (msg: string) => void;
}

export class JobTrace {
  private chunks: Buffer[] = [];
  private size = 0;
  private sent = 0;
  private readonly masker: Masker;
  private intervalMs: number;
  private timer: NodeJS.Timeout | null = null;
  private sending: Promise<void> | null = null;
  private lastContact = Date.now();
  private limitHit = false;
  private stopped = false;
  aborted = false;
  cancelRequested = false;

  constructor(private readonly o: TraceOptions) {
    this.masker = new Masker(o.maskedValues);
    this.intervalMs = o.updateIntervalMs ?? DEFAULT_UPDATE_INTERVAL_MS;
  }

  start() {
    this.schedule();
  }

  write(data: Buffer | string) {
    const b = typeof data === 'string' ? Buffer.from(data) : data;
    this.append(this.masker.write(b));
  }

  private append(b: Buffer) {
    if (!b.length || this.limitHit) return;
    const limit = this.o.outputLimit ?? 16 * 1024 * 1024;
    if (this.size + b.length > limit) {
      const head = b.subarray(0, Math.max(0, limit - this.size));
      const note = Buffer.from(`\n\x1b[31;1mJob's log exceeded limit of ${limit} bytes.\x1b[0;m\n`);
      this.chunks.push(head, note);
      this.size += head.length + note.length;
      this.limitHit = true;
      return;
    }
    this.chunks.push(b);
    this.size += b.length;
  }

  /** Everything written so far, as the server should hold it. */
  contents(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  get byteSize() {
    return this.size;
  }

  private schedule() {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.tick().finally(() => this.schedule());
    }, this.intervalMs);
    this.timer.unref?.();
  }

  private async tick() {
    if (this.aborted) return;
    await this.sendPending();
    if (!this.aborted && Date.now() - this.lastContact >= (this.o.keepaliveMs ?? KEEPALIVE_MS)) {
      try {
        const a = await this.o.client.updateJob(this.o.jobId, this.o.jobToken, { state: 'running', bytesize: this.size });
        this.lastContact = Date.now();
        this.react(a);
      } catch (err) {
        this.o.log?.(`job ${this.o.jobId}: keep-alive failed: ${(err as Error).message}`);
      }
    }
  }

  private react(a: JobStateAnswer) {
    if (a.updateIntervalMs) this.intervalMs = a.updateIntervalMs;
    if (a.abort || a.status === 404) {
      if (!this.aborted) {
        this.aborted = true;
        this.o.onAbort(a.status === 403 ? 'the server refused the job token (403): job canceled or finished' : `job status ${a.remoteState ?? a.status}`);
      }
    } else if (a.cancelRequested && !this.cancelRequested) {
      this.cancelRequested = true;
      this.o.onCancel();
    }
  }

  /** Sends what the server has not got yet (one sender at a time). */
  sendPending(): Promise<void> {
    if (!this.sending) {
      this.sending = this.doSend().finally(() => {
        this.sending = null;
      });
    }
    return this.sending;
  }

  private async doSend() {
    let rounds = 0;
    while (!this.aborted && this.sent < this.size && rounds++ < 64) {
      const all = this.contents();
      const from = this.sent;
      const piece = all.subarray(from, Math.min(all.length, from + MAX_PATCH_BYTES));
      let a;
      try {
        a = await this.o.client.patchTrace(this.o.jobId, this.o.jobToken, from, Buffer.from(piece));
      } catch (err) {
        this.o.log?.(`job ${this.o.jobId}: sending the trace failed: ${(err as Error).message}`);
        return;
      }
      this.lastContact = Date.now();
      this.react(a);
      if (this.aborted) return;
      if (a.status === 202 || a.status === 200) {
        this.sent = from + piece.length;
      } else if (a.status === 416) {
        // The server holds a different length: go on from where it is.
        const at = a.serverOffset ?? 0;
        this.o.log?.(`job ${this.o.jobId}: trace range mismatch, server has ${at} bytes, we sent from ${from}`);
        this.sent = Math.min(at, this.size);
        if (at > this.size) return;
      } else {
        this.o.log?.(`job ${this.o.jobId}: trace patch answered ${a.status}`);
        return;
      }
    }
  }

  /** The job ended: release what the masker held, send everything now. */
  async flush() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.append(this.masker.end());
    for (let i = 0; i < 5 && !this.aborted && this.sent < this.size; i++) {
      await this.sendPending();
      if (this.sent < this.size && !this.aborted) await sleep(Math.min(this.o.retryDelayMs ?? 1000, this.intervalMs));
    }
  }

  stop() {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /**
   * The final PUT: state, failure_reason, exit_code. Retried on network errors and 5xx, like
   * gitlab-runner; a 403/404 (the job is not running any more) ends it.
   */
  async finish(final: { state: 'success' | 'failed'; failureReason?: string; exitCode?: number }, tries = FINAL_UPDATE_TRIES): Promise<JobStateAnswer | null> {
    await this.flush();
    let delay = this.o.retryDelayMs ?? 1000;
    for (let attempt = 1; attempt <= tries; attempt++) {
      try {
        const a = await this.o.client.updateJob(this.o.jobId, this.o.jobToken, { ...final, bytesize: this.size });
        if (a.status === 200 || a.status === 403 || a.status === 404 || a.abort) return a;
        if (a.status < 500 && a.status !== 202 && a.status !== 412) return a;
        this.o.log?.(`job ${this.o.jobId}: final update answered ${a.status}, retrying`);
        if (a.status === 412) this.sent = 0; // trace validation failed: send it all again
        await this.sendPending();
      } catch (err) {
        if (!isNetworkError(err)) throw err;
        this.o.log?.(`job ${this.o.jobId}: final update failed (${(err as Error).message}), retrying`);
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 60_000);
    }
    return null;
  }
}

export function sleep(ms: number) {
  return new Promise<void>((resolve) => setTimeout(resolve, ms));
}
