import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { beginInlineJob, defineJob, defineRecurring, drainJobs, enqueue, finishInlineJob, runOneJob, scheduleRecurring, startWorker, updateInlineJob } from '../src/jobs/queue.js';
import { createTestContext, type TestContext } from './helpers/app.js';
import { defineSlowJob, SLOW_JOB, SLOW_JOB_RAN } from './helpers/queue_jobs.js';

describe('background job queue', () => {
  let t: TestContext;
  const seen: unknown[] = [];
  let failuresLeft = 1;
  before(async () => {
    t = await createTestContext();
    defineJob('test.record', async (_c, payload) => { seen.push(payload.n); });
    defineJob('test.flaky', async () => {
      if (failuresLeft-- > 0) throw new Error('transient');
      seen.push('flaky-ok');
    });
    defineSlowJob();
  });
  after(async () => { await t.close(); });

  it('runs enqueued jobs once, in order', async () => {
    await enqueue(t.db, 'test.record', { n: 1 });
    await enqueue(t.db, 'test.record', { n: 2 });
    assert.equal(await drainJobs(t.app.cairn), 2);
    assert.deepEqual(seen, [1, 2]);
    assert.equal(await runOneJob(t.app.cairn), false);
  });

  it('claims a due job of a higher priority before older due jobs', async () => {
    const order: string[] = [];
    defineJob('test.order', async (_c, payload) => { order.push(payload.name); });
    const past = new Date(Date.now() - 60_000);
    await enqueue(t.db, 'test.order', { name: 'old-a' }, { queue: 'prio', runAt: past });
    await enqueue(t.db, 'test.order', { name: 'old-b' }, { queue: 'prio', runAt: past });
    await enqueue(t.db, 'test.order', { name: 'urgent' }, { queue: 'prio', priority: 1 });
    // Not due yet: priority does not make a job run before its time.
    await enqueue(t.db, 'test.order', { name: 'later' }, { queue: 'prio', priority: 5, runAt: new Date(Date.now() + 3_600_000) });
    assert.equal(await drainJobs(t.app.cairn, 'prio'), 3);
    assert.deepEqual(order, ['urgent', 'old-a', 'old-b']);
  });

  it('a worker runs several jobs at once: a long job does not hold up the next', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const done: string[] = [];
    defineJob('test.hold', async () => { await held; done.push('long'); });
    defineJob('test.quick', async () => { done.push('quick'); });
    await enqueue(t.db, 'test.hold', {}, { queue: 'parallel' });
    await enqueue(t.db, 'test.quick', {}, { queue: 'parallel' });
    const stop = startWorker(t.app.cairn, { queue: 'parallel', concurrency: 2, idleMs: 50 });
    try {
      for (let i = 0; i < 200 && !done.includes('quick'); i++) await new Promise((r) => setTimeout(r, 25));
      assert.deepEqual(done, ['quick'], 'the quick job ran while the long one was still running');
      release();
      for (let i = 0; i < 200 && done.length < 2; i++) await new Promise((r) => setTimeout(r, 25));
      assert.deepEqual(done, ['quick', 'long']);
    } finally {
      release();
      await stop();
    }
  });

  it('retries a failing job later and records the error', async () => {
    const { id } = await enqueue(t.db, 'test.flaky');
    await drainJobs(t.app.cairn);
    const row = await t.db.selectFrom('background_jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(row.state, 'pending');
    assert.match(row.last_error ?? '', /transient/);
    await t.db.updateTable('background_jobs').set({ run_at: new Date(0) }).where('id', '=', id).execute();
    await drainJobs(t.app.cairn);
    assert.ok(seen.includes('flaky-ok'));
    assert.equal((await t.db.selectFrom('background_jobs').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state, 'done');
  });

  it('an unknown job kind fails instead of looping', async () => {
    const { id } = await enqueue(t.db, 'test.unknown', {}, { maxAttempts: 1 });
    await drainJobs(t.app.cairn);
    assert.equal((await t.db.selectFrom('background_jobs').select('state').where('id', '=', id).executeTakeFirstOrThrow()).state, 'failed');
  });

  it('a recurring kind keeps exactly one scheduled run, and each run schedules the next, failed or not', async () => {
    let runs = 0;
    defineRecurring('test.recurring', 60, async () => {
      runs++;
      if (runs === 2) throw new Error('boom');
    });
    // Two processes starting at once ask for it twice: one row.
    await Promise.all([scheduleRecurring(t.db), scheduleRecurring(t.db)]);
    const pending = () => t.db.selectFrom('background_jobs').selectAll().where('kind', '=', 'test.recurring').where('state', '=', 'pending').execute();
    assert.equal((await pending()).length, 1);
    // Not due yet.
    await drainJobs(t.app.cairn);
    assert.equal(runs, 0);
    for (const expected of [1, 2, 3]) {
      await t.db.updateTable('background_jobs').set({ run_at: new Date(0) }).where('kind', '=', 'test.recurring').where('state', '=', 'pending').execute();
      await drainJobs(t.app.cairn);
      assert.equal(runs, expected);
      const next = await pending();
      assert.equal(next.length, 1, 'the next run is scheduled');
      assert.ok(new Date(next[0].run_at as any).getTime() > Date.now() + 50_000);
    }
    const states = (await t.db.selectFrom('background_jobs').select('state').where('kind', '=', 'test.recurring').orderBy('id').execute()).map((r) => r.state);
    assert.deepEqual(states, ['done', 'failed', 'done', 'pending']);
  });

  // A claim is fenced and kept alive.
  const row = (id: number) => t.db.selectFrom('background_jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  /** What another worker does when it reclaims a job after the lock timeout. */
  const reclaimElsewhere = (id: number) =>
    t.db.updateTable('background_jobs').set({ locked_by: 'elsewhere:1', locked_at: new Date(), attempts: sql`attempts + 1` as any }).where('id', '=', id).execute();

  it('a worker whose job was reclaimed cannot finish it, nor fail it: the new owner\'s row stands', async () => {
    const warnings: string[] = [];
    const log = { warn: (_obj: Record<string, unknown>, msg: string) => { warnings.push(msg); } };
    defineJob('test.stolen', async (_c, payload, job) => {
      await reclaimElsewhere(job.id);
      if (payload.fail) throw new Error('late failure');
    });
    for (const fail of [false, true]) {
      const { id } = await enqueue(t.db, 'test.stolen', { fail }, { queue: 'stolen' });
      assert.equal(await runOneJob(t.app.cairn, { queue: 'stolen', log }), true);
      const after = await row(id);
      assert.equal(after.state, 'running', `fail=${fail}: not marked ${fail ? 'pending/failed' : 'done'} by the old owner`);
      assert.equal(after.locked_by, 'elsewhere:1');
      assert.equal(after.attempts, 2);
      assert.equal(after.last_error, null);
      assert.equal(after.finished_at, null);
    }
    assert.equal(warnings.filter((w) => /losing its lock/.test(w)).length, 2);
  });

  it('the heartbeat keeps a long job\'s lock, and finding it lost aborts the handler without touching the new owner\'s lock', async () => {
    const warnings: string[] = [];
    const log = { warn: (_obj: Record<string, unknown>, msg: string) => { warnings.push(msg); } };
    let second: boolean[] = [];
    let lockedAtAfterTheft = 0;
    let aborted = false;
    defineJob('test.long', async (cairn, _payload, job) => {
      // Two and a half lock timeouts long: no other claim may take it meanwhile.
      const until = Date.now() + 1500;
      while (Date.now() < until) {
        second.push(await runOneJob(cairn, { queue: 'long', lockTimeoutMs: 600, log }));
        await new Promise((r) => setTimeout(r, 100));
      }
      await reclaimElsewhere(job.id);
      lockedAtAfterTheft = new Date((await row(job.id)).locked_at as any).getTime();
      await new Promise<void>((resolve) => {
        // A heartbeat may have found the theft already, while row() above was reading.
        if (job.signal.aborted) { aborted = true; return resolve(); }
        // Long enough for a heartbeat on a loaded machine; the abort ends the wait at once.
        const timer = setTimeout(resolve, 8000);
        job.signal.addEventListener('abort', () => { aborted = true; clearTimeout(timer); resolve(); });
      });
      await new Promise((r) => setTimeout(r, 250));
    });
    const { id } = await enqueue(t.db, 'test.long', {}, { queue: 'long' });
    assert.equal(await runOneJob(t.app.cairn, { queue: 'long', lockTimeoutMs: 600, heartbeatMs: 50, log }), true);
    assert.ok(second.length >= 5 && second.every((claimed) => !claimed), `claimed again while running: ${second}`);
    assert.ok(aborted, 'the handler was told');
    assert.ok(warnings.some((w) => /lock lost/.test(w)), warnings.join('; '));
    const after = await row(id);
    assert.equal(after.locked_by, 'elsewhere:1');
    assert.equal(new Date(after.locked_at as any).getTime(), lockedAtAfterTheft, 'the new owner\'s lock was not extended by the old heartbeat');
    assert.equal(after.state, 'running');
  });

  it('a request\'s journal (an inline job) keeps its lock while the request works; a reclaimed one is neither updated nor removed by it', async () => {
    const id = await beginInlineJob(t.db, 'test.inline', { n: 1 }, { heartbeatMs: 50 });
    const until = Date.now() + 1500;
    while (Date.now() < until) {
      await runOneJob(t.app.cairn, { lockTimeoutMs: 600 });
      await new Promise((r) => setTimeout(r, 100));
    }
    const held = await row(id);
    assert.equal(held.state, 'running');
    assert.equal(held.attempts, 1, 'no worker reclaimed it');
    await updateInlineJob(t.db, id, { n: 2 });
    assert.deepEqual((await row(id)).payload, { n: 2 });
    await finishInlineJob(t.db, id);
    assert.equal(await t.db.selectFrom('background_jobs').select('id').where('id', '=', id).executeTakeFirst(), undefined);

    const stolen = await beginInlineJob(t.db, 'test.inline', { n: 1 }, { heartbeatMs: 50 });
    await reclaimElsewhere(stolen);
    await updateInlineJob(t.db, stolen, { n: 2 });
    await finishInlineJob(t.db, stolen);
    const after = await row(stolen);
    assert.equal(after.locked_by, 'elsewhere:1');
    assert.deepEqual(after.payload, { n: 1 });
    await t.db.deleteFrom('background_jobs').where('id', '=', stolen).execute();
  });

  it('two processes: a live worker keeps its slow job past the lock timeout; a stalled one loses it and cannot finish it', { skip: !process.env.DATABASE_URL && 'needs PostgreSQL (DATABASE_URL): two processes share the database' }, async () => {
    // Heartbeats every 150 ms against a 1.2 s lock timeout: only a stall of a second loses a job.
    const LOCK_MS = 1200;
    const HEARTBEAT_MS = 150;
    const queue = 'two-processes';
    const children: ChildProcess[] = [];
    const spawnWorker = async () => {
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'helpers/queue_worker.ts'), t.databaseUrl!, queue, String(LOCK_MS), String(HEARTBEAT_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      let out = '';
      child.stdout!.on('data', (d) => { out += d; });
      await waitFor(() => out.includes('ready'), 20_000, 'the worker process started');
      return { child, output: () => out };
    };
    const runs = async (id: number) =>
      (await t.db.selectFrom('background_jobs').select('payload').where('kind', '=', SLOW_JOB_RAN).orderBy('id').execute()).map((r) => r.payload as any).filter((p) => p.job === id);
    const stopLocal: Array<() => Promise<void>> = [];
    try {
      // 1. Both processes poll; one takes the job and keeps it through two lock timeouts.
      const other = await spawnWorker();
      stopLocal.push(startWorker(t.app.cairn, { queue, lockTimeoutMs: LOCK_MS, heartbeatMs: HEARTBEAT_MS, idleMs: 50 }));
      const { id: slow } = await enqueue(t.db, SLOW_JOB, { ms: 2 * LOCK_MS }, { queue });
      await waitFor(async () => (await row(slow)).state === 'done', 15_000, 'the slow job finished');
      assert.equal((await runs(slow)).length, 1, 'it ran once: neither worker reclaimed it from the other');
      assert.equal((await row(slow)).attempts, 1);

      // 2. A worker that stops (SIGSTOP: no heartbeat) loses its job to the other after the lock timeout.
      await stopLocal.pop()!();
      const { id: stalled } = await enqueue(t.db, SLOW_JOB, { ms: 300 }, { queue });
      await waitFor(async () => (await runs(stalled)).length === 1, 10_000, 'the other process took the job');
      assert.equal((await runs(stalled))[0].pid, other.child.pid);
      other.child.kill('SIGSTOP');
      const stoppedAt = Date.now();
      stopLocal.push(startWorker(t.app.cairn, { queue, lockTimeoutMs: LOCK_MS, heartbeatMs: HEARTBEAT_MS, idleMs: 50 }));
      await waitFor(async () => (await row(stalled)).state === 'done', 10_000, 'this process reclaimed and finished it');
      assert.ok(Date.now() - stoppedAt >= LOCK_MS - 100, 'not before the lock timed out');
      const done = await row(stalled);
      assert.equal(done.attempts, 2);
      assert.deepEqual((await runs(stalled)).map((r) => r.pid), [other.child.pid, process.pid]);
      // The stalled process wakes up, finishes its handler and finds the job is not its own any more.
      other.child.kill('SIGCONT');
      await waitFor(() => /losing its lock|lock lost/.test(other.output()), 10_000, 'the woken worker noticed');
      await waitFor(() => /losing its lock/.test(other.output()), 10_000, 'the woken worker dropped its result');
      const last = await row(stalled);
      assert.equal(last.state, 'done');
      assert.equal(last.attempts, 2);
      assert.equal(new Date(last.finished_at as any).getTime(), new Date(done.finished_at as any).getTime(), 'the old worker did not write over it');
    } finally {
      for (const stop of stopLocal) await stop();
      for (const c of children) {
        c.kill('SIGCONT');
        c.kill('SIGTERM');
      }
    }
  });
});

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const until = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
