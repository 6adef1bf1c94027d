import os from 'node:os';
import { sql } from 'kysely';
import type { Cairn } from '../context.js';
import type { Database } from '../db/index.js';
import { Wakeup } from '../db/notifications.js';
import { backgroundJobDuration, backgroundJobRuns } from '../metrics/index.js';

/**
 * The durable background queue: rows in background_jobs, claimed with FOR UPDATE SKIP LOCKED so
 * any number of Cairn processes can work it. A job that throws is retried with backoff until
 * max_attempts; a job whose worker died is reclaimed after the lock timeout.
 *
 * A claim is fenced by (locked_by, attempts): every claim increments attempts, and the worker
 * extends its lock (locked_at) with a heartbeat while the handler runs, so only a worker that
 * stopped heartbeating (died, hung, cut off from the database) loses its job to another. Ending a
 * job (done, retry, failed) is an update conditional on the claim, so a worker whose job was
 * reclaimed cannot overwrite what the new owner does: it logs and its result is dropped.
 */
export interface JobContext {
  id: number;
  attempts: number;
  maxAttempts: number;
  /** Aborted when this worker finds that it no longer holds the job (another worker reclaimed it). */
  signal: AbortSignal;
}
export type JobHandler = (cairn: Cairn, payload: Record<string, any>, job: JobContext) => Promise<void>;

export interface QueueLog {
  warn(obj: Record<string, unknown>, msg: string): void;
}

export interface WorkOptions {
  queue?: string;
  /** A running job whose lock is older than this is taken to be abandoned and is claimed again (default 15 minutes). */
  lockTimeoutMs?: number;
  /** How often a running job's lock is extended (default a third of the lock timeout). */
  heartbeatMs?: number;
  log?: QueueLog;
}

const handlers = new Map<string, JobHandler>();
/** Recurring kinds and their period in seconds. */
const recurring = new Map<string, number>();
export const DEFAULT_LOCK_TIMEOUT_MS = 15 * 60_000;
const consoleLog: QueueLog = { warn: (obj, msg) => console.warn(`${msg} ${JSON.stringify(obj)}`) };

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

/** Workers wait on this channel (payload: the queue's name); enqueue notifies it when its transaction commits. */
export const QUEUE_CHANNEL = 'cairn_background_jobs';

/**
 * Queues a job. `priority`: due jobs of a higher one are claimed before older due jobs of a lower
 * one (default 0), for short work that must not wait behind a long backlog.
 */
export async function enqueue(db: Database, kind: string, payload: Record<string, unknown> = {}, opts: { runAt?: Date; queue?: string; maxAttempts?: number; priority?: number } = {}) {
  const queue = opts.queue ?? 'default';
  const row = await db
    .insertInto('background_jobs')
    .values({ kind, payload: JSON.stringify(payload) as any, run_at: opts.runAt ?? new Date(), queue, max_attempts: opts.maxAttempts ?? 5, priority: opts.priority ?? 0 })
    // The wakeup rides on the insert (no extra round trip); delivered on commit, to every process.
    .returning(['id', sql<void>`pg_notify(${QUEUE_CHANNEL}, ${queue})`.as('notified')])
    .executeTakeFirstOrThrow();
  return { id: row.id };
}

const workerId = `${os.hostname()}:${process.pid}`;

/**
 * Work done in the request that asked for it, journalled so that a crash cannot lose it: the row
 * is created already running and locked by this process, so no worker takes it while the request
 * does the work; `finishInlineJob` deletes it when the work is done. If the process dies first,
 * the row is reclaimed like any running job of a dead worker (at once by a restarted process on
 * this host, after the lock timeout elsewhere) and the kind's handler finishes the work. So the
 * handler must be safe to run after a part of the work was done. `db` is the pool, never a
 * transaction: the journal's heartbeat runs on it while the request works.
 */
export async function beginInlineJob(db: Database, kind: string, payload: Record<string, unknown>, opts: { heartbeatMs?: number; log?: QueueLog; trx?: Database } = {}): Promise<number> {
  // In the caller's transaction when given: the journal exists exactly when the caller's own
  // writes do (the heartbeat, on the pool, first beats long after that transaction commits).
  const row = await (opts.trx ?? db)
    .insertInto('background_jobs')
    .values({ kind, payload: JSON.stringify(payload) as any, state: 'running', locked_by: workerId, locked_at: sql`now()` as any, attempts: 1, run_at: new Date() } as any)
    .returning('id')
    .executeTakeFirstOrThrow();
  const id = Number(row.id);
  // A request can hold its journal longer than the lock timeout (a big push over a slow link):
  // the lock is kept alive as a worker's is, until finishInlineJob (callers call it in finally).
  inlineHeartbeats.set(id, startHeartbeat(db, { id, attempts: 1, kind }, opts.heartbeatMs ?? DEFAULT_LOCK_TIMEOUT_MS / 3, new AbortController(), opts.log ?? consoleLog));
  return id;
}

/** This process's journalled work in progress and how to stop keeping each one's lock. */
const inlineHeartbeats = new Map<number, () => Promise<void>>();

/** The row is still this request's journal (not reclaimed and worked by another worker meanwhile). */
const inlineClaim = (id: number) => heldBy({ id, attempts: 1 });

/** What the journalled work knows now (a merge commit built, say), for the handler that may finish it. */
export async function updateInlineJob(db: Database, id: number, payload: Record<string, unknown>): Promise<void> {
  await db.updateTable('background_jobs').set({ payload: JSON.stringify(payload) as any }).where(inlineClaim(id)).execute();
}

/** The journalled work is done (or turned out to be nothing): its row goes. */
export async function finishInlineJob(db: Database, id: number): Promise<void> {
  const stop = inlineHeartbeats.get(id);
  inlineHeartbeats.delete(id);
  await stop?.();
  await db.deleteFrom('background_jobs').where(inlineClaim(id)).execute();
}

/**
 * Does the journalled work of `beginInlineJob` here and now with the kind's own handler (the one
 * that would finish it after a crash), then ends the journal. A failure is logged, not thrown: the
 * caller's own work is done and stays done.
 */
export async function runInlineJob(cairn: Cairn, id: number, kind: string, payload: Record<string, unknown>, log: QueueLog = consoleLog): Promise<void> {
  const handler = handlers.get(kind);
  try {
    if (!handler) throw new Error(`no handler for background job kind ${kind}`);
    await handler(cairn, payload, { id, attempts: 1, maxAttempts: 1, signal: new AbortController().signal });
  } catch (err) {
    log.warn({ jobId: id, kind, err: (err as Error).message }, 'inline background job failed');
  } finally {
    await finishInlineJob(cairn.db, id);
  }
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

/** One claim of a job: the row is ours while locked_by and attempts are still these. */
interface Claim {
  id: number;
  attempts: number;
}

function heldBy(claim: Claim) {
  return sql<boolean>`id = ${claim.id} and state = 'running' and locked_by = ${workerId} and attempts = ${claim.attempts}`;
}

/**
 * Extends the claim's lock every `everyMs` until stopped. When the row is no longer this claim's
 * (reclaimed after a stall, or its state changed under it) it logs, aborts `lost` and stops: the
 * new owner's lock is left alone. A failed heartbeat (database briefly unreachable) is retried at
 * the next tick.
 */
function startHeartbeat(db: Database, claim: Claim & { kind: string }, everyMs: number, lost: AbortController, log: QueueLog): () => Promise<void> {
  let beating: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    beating = (async () => {
      try {
        const res = await sql`update background_jobs set locked_at = now() where ${heldBy(claim)}`.execute(db);
        if (Number(res.numAffectedRows ?? 0) === 0 && !lost.signal.aborted) {
          clearInterval(timer);
          log.warn({ jobId: claim.id, kind: claim.kind, attempts: claim.attempts, worker: workerId }, 'background job lock lost: another worker holds it now');
          lost.abort(new Error(`background job ${claim.id} was reclaimed by another worker`));
        }
      } catch {
        // The next tick tries again; the lock timeout is several heartbeats long.
      }
    })();
  }, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await beating;
  };
}

/** Claims and runs one due job; false when none was due. */
export async function runOneJob(cairn: Cairn, opts: string | WorkOptions = 'default'): Promise<boolean> {
  const o: WorkOptions = typeof opts === 'string' ? { queue: opts } : opts;
  const queue = o.queue ?? 'default';
  const lockTimeoutMs = o.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
  const log = o.log ?? consoleLog;
  const claimed = await sql<{ id: number; kind: string; payload: Record<string, any>; attempts: number; max_attempts: number; recurring: boolean }>`
    update background_jobs set state = 'running', locked_at = now(), locked_by = ${workerId}, attempts = attempts + 1
     where id = (
       select id from background_jobs
        where queue = ${queue}
          and ((state = 'pending' and run_at <= now()) or (state = 'running' and locked_at < now() - ${`${lockTimeoutMs} milliseconds`}::interval))
        order by priority desc, run_at, id
        for update skip locked
        limit 1)
    returning id, kind, payload, attempts, max_attempts, recurring`.execute(cairn.db);
  const job = claimed.rows[0];
  if (!job) return false;
  const claim = { id: Number(job.id), attempts: job.attempts, kind: job.kind };
  const handler = handlers.get(job.kind);
  // Kinds without a handler are not a label of their own (a bounded set of kinds).
  const kind = handler ? job.kind : 'unknown';
  const started = performance.now();
  const lost = new AbortController();
  const stopHeartbeat = startHeartbeat(cairn.db, claim, o.heartbeatMs ?? Math.max(1, Math.floor(lockTimeoutMs / 3)), lost, log);
  let ended: { numUpdatedRows: bigint } | undefined;
  let outcome: 'done' | 'failed' | 'retried';
  try {
    if (!handler) throw new Error(`no handler for job kind "${job.kind}"`);
    await handler(cairn, job.payload, { id: claim.id, attempts: job.attempts, maxAttempts: job.max_attempts, signal: lost.signal });
    await stopHeartbeat();
    outcome = 'done';
    ended = await cairn.db
      .updateTable('background_jobs')
      .set({ state: 'done', finished_at: new Date(), locked_at: null, last_error: null })
      .where(heldBy(claim))
      .executeTakeFirst();
  } catch (err) {
    await stopHeartbeat();
    // A recurring run is not retried: the next scheduled run does the work again.
    const failed = job.recurring || job.attempts >= job.max_attempts;
    outcome = failed ? 'failed' : 'retried';
    const backoffSeconds = Math.min(3600, 2 ** job.attempts * 5);
    ended = await cairn.db
      .updateTable('background_jobs')
      .set({
        state: failed ? 'failed' : 'pending',
        last_error: String((err as Error)?.stack ?? err).slice(0, 4000),
        locked_at: null,
        run_at: sql`now() + ${`${backoffSeconds} seconds`}::interval` as any,
        finished_at: failed ? new Date() : null,
      })
      .where(heldBy(claim))
      .executeTakeFirst();
  }
  backgroundJobDuration.observe({ kind }, (performance.now() - started) / 1000);
  if (Number(ended?.numUpdatedRows ?? 0) === 0) {
    // Reclaimed while it ran: the row is the new owner's, and so is scheduling a recurring kind's next run.
    log.warn({ jobId: claim.id, kind: job.kind, attempts: claim.attempts, worker: workerId, outcome }, 'background job finished after losing its lock; its result is dropped');
    backgroundJobRuns.inc({ kind, outcome: 'lost' });
    return true;
  }
  backgroundJobRuns.inc({ kind, outcome });
  const every = job.recurring ? recurring.get(job.kind) : undefined;
  if (every !== undefined) await scheduleNext(cairn.db, job.kind, every);
  return true;
}

/** Runs due jobs until none is left (tests, and `cairn` commands that must finish their work). */
export async function drainJobs(cairn: Cairn, queue: string | WorkOptions = 'default', max = 1000): Promise<number> {
  let n = 0;
  while (n < max && (await runOneJob(cairn, queue))) n++;
  return n;
}

/**
 * How long an idle worker may sleep: until the queue's next pending run_at or the next lock
 * expiry of a running job (a dead worker's job to reclaim), whichever comes first; null when
 * there is neither.
 */
async function msUntilNextDue(db: Database, queue: string, lockTimeoutMs: number): Promise<number | null> {
  const r = await sql<{ ms: number | string | null }>`
    select extract(epoch from (least(
             min(run_at) filter (where state = 'pending'),
             min(locked_at) filter (where state = 'running') + ${`${lockTimeoutMs} milliseconds`}::interval
           ) - now())) * 1000 as ms
      from background_jobs where queue = ${queue} and state in ('pending', 'running')`.execute(db);
  const ms = r.rows[0]?.ms;
  return ms === null || ms === undefined ? null : Math.max(0, Math.ceil(Number(ms)));
}

/** How often an idle worker looks even without a notification (also the hub's safety net caps it). */
const IDLE_SAFETY_NET_MS = 15_000;
/** Dead local workers' jobs are looked for this often. */
const RECLAIM_EVERY_MS = 10_000;

/**
 * Works the queue in the background until stopped, running up to `concurrency` jobs at once
 * (default 1): one long job (a storage move, a large import) does not hold up the rest. Idle, a
 * loop waits for an enqueue's notification (QUEUE_CHANNEL, through the process's listening
 * connection), for the next job to come due, or at most `idleMs` (default IDLE_SAFETY_NET_MS;
 * without a listening connection the hub makes waits poll every second).
 */
export function startWorker(cairn: Cairn, opts: WorkOptions & { idleMs?: number; concurrency?: number } = {}): () => Promise<void> {
  let stopped = false;
  const queue = opts.queue ?? 'default';
  if (queue === 'default') void scheduleRecurring(cairn.db).catch(() => {});
  // A Cairn without a listening connection (a bare worker process) polls.
  const wakeup = cairn.notifications?.wakeup(QUEUE_CHANNEL, queue) ?? new Wakeup();
  const idleMs = opts.idleMs ?? IDLE_SAFETY_NET_MS;
  let reclaimedAt = 0;
  const work = async () => {
    while (!stopped) {
      const since = wakeup.generation;
      let worked = false;
      let waitMs = idleMs;
      try {
        if (Date.now() - reclaimedAt > RECLAIM_EVERY_MS) {
          reclaimedAt = Date.now();
          await reclaimDeadLocalJobs(cairn.db);
        }
        worked = await runOneJob(cairn, opts);
        if (!worked) {
          const due = await msUntilNextDue(cairn.db, queue, opts.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS);
          if (due !== null) waitMs = Math.min(waitMs, due + 5);
        }
      } catch {
        // The database may be briefly unreachable: look again after a second.
        waitMs = Math.min(waitMs, 1000);
      }
      waitMs = Math.min(waitMs, Math.max(1, reclaimedAt + RECLAIM_EVERY_MS - Date.now()));
      if (!worked && !stopped) await wakeup.wait(since, waitMs);
    }
  };
  const loops = Array.from({ length: Math.max(1, opts.concurrency ?? 1) }, () => work());
  return async () => {
    stopped = true;
    wakeup.close();
    await Promise.all(loops);
  };
}
