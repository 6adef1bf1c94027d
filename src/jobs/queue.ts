import os from 'node:os';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import { backgroundJobDuration, backgroundJobRuns } from '../metrics/index.js';

/**
 * The durable background queue: rows in background_jobs, claimed with FOR UPDATE SKIP LOCKED so
 * any number of Cairn processes can work it. A job that throws is retried with backoff until
 * max_attempts; a job whose worker died is reclaimed after the lock timeout.
 */
export type JobHandler = (cairn: Cairn, payload: Record<string, any>, job: { id: number; attempts: number; maxAttempts: number }) => Promise<void>;

const handlers = new Map<string, JobHandler>();
/** Recurring kinds and their period in seconds. */
const recurring = new Map<string, number>();
const LOCK_TIMEOUT = '15 minutes';

/** Handlers are code, registered at import time by the module that owns the job kind. */
export function defineJob(kind: string, handler: JobHandler) {
  handlers.set(kind, handler);
}

/**
 * A job kind that runs every `everySeconds` for as long as any Cairn process works the queue
 * (artifact expiry, sweeps). Each run schedules the next when it ends, failed or not; a process
 * starting its worker creates the row when none is pending or running (scheduleRecurring).
 */
export function defineRecurring(kind: string, everySeconds: number, handler: JobHandler) {
  defineJob(kind, handler);
  recurring.set(kind, everySeconds);
}

async function scheduleNext(db: Database, kind: string, everySeconds: number) {
  await sql`insert into background_jobs (kind, recurring, run_at)
            values (${kind}, true, now() + ${`${everySeconds} seconds`}::interval)
            on conflict (kind) where recurring and state in ('pending', 'running') do nothing`.execute(db);
}

/** Makes sure every recurring kind has its next run scheduled (idempotent; any process may call it). */
export async function scheduleRecurring(db: Database): Promise<void> {
  for (const [kind, every] of recurring) await scheduleNext(db, kind, every);
}

export async function enqueue(db: Database, kind: string, payload: Record<string, unknown> = {}, opts: { runAt?: Date; queue?: string; maxAttempts?: number } = {}) {
  return db
    .insertInto('background_jobs')
    .values({ kind, payload: JSON.stringify(payload) as any, run_at: opts.runAt ?? new Date(), queue: opts.queue ?? 'default', max_attempts: opts.maxAttempts ?? 5 })
    .returning('id')
    .executeTakeFirstOrThrow();
}

const workerId = `${os.hostname()}:${process.pid}`;

/**
 * Work done in the request that asked for it, journalled so that a crash cannot lose it: the row
 * is created already running and locked by this process, so no worker takes it while the request
 * does the work; `finishInlineJob` deletes it when the work is done. If the process dies first,
 * the row is reclaimed like any running job of a dead worker (at once by a restarted process on
 * this host, after the lock timeout elsewhere) and the kind's handler finishes the work. So the
 * handler must be safe to run after a part of the work was done.
 */
export async function beginInlineJob(db: Database, kind: string, payload: Record<string, unknown>): Promise<number> {
  const row = await db
    .insertInto('background_jobs')
    .values({ kind, payload: JSON.stringify(payload) as any, state: 'running', locked_by: workerId, locked_at: sql`now()` as any, attempts: 1, run_at: new Date() } as any)
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(row.id);
}

/** What the journalled work knows now (a merge commit built, say), for the handler that may finish it. */
export async function updateInlineJob(db: Database, id: number, payload: Record<string, unknown>): Promise<void> {
  await db.updateTable('background_jobs').set({ payload: JSON.stringify(payload) as any }).where('id', '=', id).execute();
}

/** The journalled work is done (or turned out to be nothing): its row goes. */
export async function finishInlineJob(db: Database, id: number): Promise<void> {
  await db.deleteFrom('background_jobs').where('id', '=', id).where('locked_by', '=', workerId).where('state', '=', 'running').execute();
}

function deadOnThisHost(lockedBy: string | null): boolean {
  if (!lockedBy) return false;
  const i = lockedBy.lastIndexOf(':');
  if (lockedBy.slice(0, i) !== os.hostname()) return false;
  const pid = Number(lockedBy.slice(i + 1));
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Running jobs whose worker was a process on this host that no longer exists (killed, crashed)
 * go back to pending at once instead of after the lock timeout: a restarted server resumes what
 * it was doing (a storage move, say) within a second. Workers on other hosts are left to the
 * lock timeout. Returns how many were reclaimed.
 */
export async function reclaimDeadLocalJobs(db: Database): Promise<number> {
  const running = await db.selectFrom('background_jobs').select(['id', 'locked_by']).where('state', '=', 'running').where('locked_by', 'like', `${os.hostname()}:%`).execute();
  let n = 0;
  for (const job of running) {
    if (!deadOnThisHost(job.locked_by)) continue;
    const res = await db
      .updateTable('background_jobs')
      .set({ state: 'pending', locked_at: null, run_at: new Date() })
      .where('id', '=', job.id)
      .where('state', '=', 'running')
      .where('locked_by', '=', job.locked_by)
      .executeTakeFirst();
    n += Number(res.numUpdatedRows);
  }
  return n;
}

/** Claims and runs one due job; false when none was due. */
export async function runOneJob(cairn: Cairn, queue = 'default'): Promise<boolean> {
  const claimed = await sql<{ id: number; kind: string; payload: Record<string, any>; attempts: number; max_attempts: number; recurring: boolean }>`
    update background_jobs set state = 'running', locked_at = now(), locked_by = ${workerId}, attempts = attempts + 1
     where id = (
       select id from background_jobs
        where queue = ${queue}
          and ((state = 'pending' and run_at <= now()) or (state = 'running' and locked_at < now() - ${LOCK_TIMEOUT}::interval))
        order by run_at, id
        for update skip locked
        limit 1)
    returning id, kind, payload, attempts, max_attempts, recurring`.execute(cairn.db);
  const job = claimed.rows[0];
  if (!job) return false;
  const handler = handlers.get(job.kind);
  // Kinds without a handler are not a label of their own (a bounded set of kinds).
  const kind = handler ? job.kind : 'unknown';
  const started = performance.now();
  try {
    if (!handler) throw new Error(`no handler for job kind "${job.kind}"`);
    await handler(cairn, job.payload, { id: Number(job.id), attempts: job.attempts, maxAttempts: job.max_attempts });
    await cairn.db.updateTable('background_jobs').set({ state: 'done', finished_at: new Date(), locked_at: null, last_error: null }).where('id', '=', job.id).execute();
    backgroundJobRuns.inc({ kind, outcome: 'done' });
  } catch (err) {
    // A recurring run is not retried: the next scheduled run does the work again.
    const failed = job.recurring || job.attempts >= job.max_attempts;
    backgroundJobRuns.inc({ kind, outcome: failed ? 'failed' : 'retried' });
    const backoffSeconds = Math.min(3600, 2 ** job.attempts * 5);
    await cairn.db
      .updateTable('background_jobs')
      .set({
        state: failed ? 'failed' : 'pending',
        last_error: String((err as Error)?.stack ?? err).slice(0, 4000),
        locked_at: null,
        run_at: sql`now() + ${`${backoffSeconds} seconds`}::interval` as any,
        finished_at: failed ? new Date() : null,
      })
      .where('id', '=', job.id)
      .execute();
  }
  backgroundJobDuration.observe({ kind }, (performance.now() - started) / 1000);
  const every = job.recurring ? recurring.get(job.kind) : undefined;
  if (every !== undefined) await scheduleNext(cairn.db, job.kind, every);
  return true;
}

/** Runs due jobs until none is left (tests, and `cairn` commands that must finish their work). */
export async function drainJobs(cairn: Cairn, queue = 'default', max = 1000): Promise<number> {
  let n = 0;
  while (n < max && (await runOneJob(cairn, queue))) n++;
  return n;
}

/** Polls the queue in the background until stopped. */
export function startWorker(cairn: Cairn, opts: { queue?: string; idleMs?: number } = {}): () => Promise<void> {
  let stopped = false;
  if ((opts.queue ?? 'default') === 'default') void scheduleRecurring(cairn.db).catch(() => {});
  let wake: (() => void) | null = null;
  let reclaimedAt = 0;
  const loop = (async () => {
    while (!stopped) {
      let worked = false;
      try {
        if (Date.now() - reclaimedAt > 10_000) {
          reclaimedAt = Date.now();
          await reclaimDeadLocalJobs(cairn.db);
        }
        worked = await runOneJob(cairn, opts.queue);
      } catch {
        // The database may be briefly unreachable; keep polling.
      }
      if (!worked && !stopped) await new Promise<void>((r) => { wake = r; setTimeout(r, opts.idleMs ?? 1000).unref(); });
    }
  })();
  return async () => {
    stopped = true;
    (wake as (() => void) | null)?.();
    await loop;
  };
}
