import { PassThrough } from 'node:stream';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import { readTraceFrom } from '../ci/trace.js';
import { LIVE_STATUSES, idParam, loadJob } from './ci.js';
import { requireAbility, type PageContext, type ProjectPage } from './context.js';
import { LogText } from './job_log.js';

/**
 * The live log of a job page: one long-lived server-sent events response per open page
 * (GET /<project>/-/jobs/:id/trace/stream?offset=<bytes the page shows>).
 *
 * A job's log lives in the database (ci_build_trace_chunks, appended by the runner protocol's
 * PATCH /jobs/:id/trace in whichever Cairn process the runner talks to), so the stream follows
 * the store: it reads the job's status and the log's length (one small statement), and when the
 * log grew, the new bytes; then it waits for the job's notification on JOB_LOG_CHANNEL (a trigger
 * on ci_builds sends it when the status or the log's length changes, in any process: migration
 * 0960) through the process's listening connection, or at most the hub's safety-net interval. It
 * sends
 * - `append`: JSON text, the log from where the page (or the previous event) stopped, with
 *   the escape sequences and section markers taken out (src/web/job_log.ts); its `id` is the
 *   byte offset reached, so a browser that reconnects (EventSource does by itself) resumes
 *   there through Last-Event-ID instead of repeating text;
 * - `status`: JSON status, when the job's status changes;
 * - `end`, once the job finished and the rest of its log was sent;
 * and a comment every HEARTBEAT_MS so proxies keep the connection. It stops when the client
 * goes away, when the app closes, and after MAX_LIFETIME_MS (the browser reconnects and
 * resumes). Access: read_build, as GET /api/v4/projects/:id/jobs/:job_id/trace.
 */
export const JOB_LOG_CHANNEL = 'cairn_ci_job_log';
const HEARTBEAT_MS = 15_000;
const MAX_LIFETIME_MS = 60 * 60 * 1000;
/** At most this much log per read (a page that reconnects far behind catches up in steps). */
const READ_LIMIT = 512 * 1024;

/** Streams of each app, stopped when it closes. */
const open = new WeakMap<Cairn, Set<() => void>>();

/** How many live log streams this app serves now. */
export function openLogStreams(cairn: Cairn): number {
  return open.get(cairn)?.size ?? 0;
}

/** Ends every live log stream of this app (its preClose hook: held responses would hold the close up). */
export function stopLogStreams(cairn: Cairn) {
  for (const stop of open.get(cairn) ?? []) stop();
}

function event(name: string, data: unknown, id?: number): string {
  return `event: ${name}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}

async function jobState(cairn: Cairn, jobId: number) {
  const r = await sql<{ status: string; size: string | number }>`
    select b.status, (select coalesce(sum(octet_length(c.data)), 0) from ci_build_trace_chunks c where c.build_id = b.id)::bigint as size
      from ci_builds b where b.id = ${jobId}`.execute(cairn.db);
  const row = r.rows[0];
  return row ? { status: row.status, size: Number(row.size) } : null;
}

export async function jobLogStream(ctx: PageContext, page: ProjectPage) {
  requireAbility(ctx, page, 'read_build');
  const job = await loadJob(ctx, page, idParam(ctx));
  const cairn = ctx.cairn;
  const resume = ctx.request.headers['last-event-id'];
  const asked = typeof resume === 'string' && /^\d{1,15}$/.test(resume) ? resume : ctx.query.offset;
  const first = await jobState(cairn, job.id);
  const start = /^\d{1,15}$/.test(asked ?? '') ? Math.min(Number(asked), first?.size ?? 0) : 0;

  const headers = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
  // A HEAD request learns that the stream is there, and follows nothing.
  if (ctx.request.method === 'HEAD') return ctx.reply.code(200).headers(headers).send('');

  const out = new PassThrough();
  const streams = open.get(cairn) ?? new Set<() => void>();
  open.set(cairn, streams);
  let stopped = false;
  const changed = cairn.notifications.wakeup(JOB_LOG_CHANNEL, String(job.id));
  const stop = () => {
    if (stopped) return;
    stopped = true;
    streams.delete(stop);
    changed.close();
    if (!out.writableEnded) out.end();
  };
  streams.add(stop);
  // The client went away (the response closes early; Fastify then destroys the stream too).
  out.on('close', stop);
  ctx.reply.raw.on('close', stop);

  const write = async (text: string) => {
    if (stopped) return;
    if (!out.write(text)) await new Promise<void>((resolve) => {
      const done = () => {
        out.off('drain', done);
        out.off('close', done);
        resolve();
      };
      out.on('drain', done);
      out.on('close', done);
    });
  };

  const follow = async () => {
    const log = new LogText(start);
    const began = Date.now();
    let lastBeat = began;
    let lastStatus = job.status as string;
    await write(`retry: 2000\n: following job ${job.id}\n\n`);
    while (!stopped) {
      const since = changed.generation;
      const state = await jobState(cairn, job.id);
      if (!state || state.size < log.readTo) {
        // The job or its log is gone (erased): nothing more to follow.
        await write(event('status', state?.status ?? lastStatus));
        await write(event('end', null));
        break;
      }
      const live = LIVE_STATUSES.includes(state.status);
      while (!stopped && state.size > log.readTo) {
        const bytes = await readTraceFrom(cairn.db, job.id, log.readTo, READ_LIMIT);
        if (!bytes.length) break;
        const text = log.push(bytes);
        if (text) await write(event('append', text, log.offset));
      }
      if (!live) {
        const rest = log.flush();
        if (rest) await write(event('append', rest, log.offset));
        await write(event('status', state.status));
        await write(event('end', null));
        break;
      }
      if (state.status !== lastStatus) {
        lastStatus = state.status;
        await write(event('status', state.status));
      }
      const now = Date.now();
      if (now - began > MAX_LIFETIME_MS) break;
      if (now - lastBeat >= HEARTBEAT_MS) {
        lastBeat = now;
        await write(': heartbeat\n\n');
      }
      // Until the job's next change (or the heartbeat is due; the hub caps every wait).
      await changed.wait(since, lastBeat + HEARTBEAT_MS - Date.now());
    }
  };

  ctx.reply.code(200).headers(headers);
  follow()
    .catch((err) => {
      if (!stopped) ctx.request.log.warn({ err }, 'job log stream failed');
    })
    .finally(stop);
  return ctx.reply.send(out);
}
