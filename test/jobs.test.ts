import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defineJob, defineRecurring, drainJobs, enqueue, runOneJob, scheduleRecurring } from '../src/jobs/queue.js';
import { createTestContext, type TestContext } from './helpers/app.js';

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
  });
  after(async () => { await t.close(); });

  it('runs enqueued jobs once, in order', async () => {
    await enqueue(t.db, 'test.record', { n: 1 });
    await enqueue(t.db, 'test.record', { n: 2 });
    assert.equal(await drainJobs(t.app.cairn), 2);
    assert.deepEqual(seen, [1, 2]);
    assert.equal(await runOneJob(t.app.cairn), false);
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
});
