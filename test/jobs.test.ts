import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { defineJob, drainJobs, enqueue, runOneJob } from '../src/jobs/queue.js';
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
});
