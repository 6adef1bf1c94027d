// The process's one listening connection (src/db/notifications.ts): channels, keyed wakeups, what
// happens when the connection is lost, and the waits built on it (the background worker).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { NotificationHub, SAFETY_NET_MS } from '../../src/db/notifications.js';
import { defineJob, enqueue, startWorker } from '../../src/jobs/queue.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

const quiet = { warn() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pgOnly = { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' };

async function until(ok: () => boolean, ms: number, what: string) {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(10);
  }
}

describe('notification hub', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t.close();
  });

  const notify = (channel: string, payload: string) => sql`select pg_notify(${channel}, ${payload})`.execute(t.db);

  it("wakes a key's waiters and no other key's, well before the safety net", async () => {
    const hub = t.app.cairn.notifications;
    const one = hub.wakeup('cairn_test_keyed', '1');
    const two = hub.wakeup('cairn_test_keyed', '2');
    try {
      await until(() => hub.listensTo('cairn_test_keyed'), 5_000, 'the channel is listened');
      const since1 = one.generation;
      const since2 = two.generation;
      const started = Date.now();
      const waited = one.wait(since1, 60_000);
      await notify('cairn_test_keyed', '1');
      await waited;
      const ms = Date.now() - started;
      assert.ok(ms < SAFETY_NET_MS / 10, `woken by the notification (${ms} ms)`);
      assert.equal(two.generation, since2, 'another key is not woken');
    } finally {
      one.close();
      two.close();
    }
  });

  it('an idle worker picks an enqueued job up at once, without a poll tick', async () => {
    let ranAt = 0;
    defineJob('test.hub_wakeup', async () => {
      ranAt = Date.now();
    });
    // No poll would find the job for a minute: only the enqueue's notification can wake the worker.
    const stop = startWorker(t.app.cairn, { queue: 'hub-test', idleMs: 60_000 });
    try {
      await sleep(300); // the worker found nothing and sleeps
      const enqueuedAt = Date.now();
      await enqueue(t.db, 'test.hub_wakeup', {}, { queue: 'hub-test' });
      await until(() => ranAt > 0, 10_000, 'the job ran');
      const latency = ranAt - enqueuedAt;
      if (process.env.TEST_TIMINGS) console.log(`# enqueue to run: ${latency} ms`);
      assert.ok(latency < 2_000, `picked up at once (${latency} ms)`);
    } finally {
      await stop();
    }
  });

  it('an idle worker wakes when a delayed job comes due', async () => {
    let ranAt = 0;
    defineJob('test.hub_delayed', async () => {
      ranAt = Date.now();
    });
    const stop = startWorker(t.app.cairn, { queue: 'hub-delayed', idleMs: 60_000 });
    try {
      await sleep(200);
      const due = Date.now() + 700;
      await enqueue(t.db, 'test.hub_delayed', {}, { queue: 'hub-delayed', runAt: new Date(due) });
      await until(() => ranAt > 0, 10_000, 'the delayed job ran');
      assert.ok(ranAt >= due - 50 && ranAt - due < 2_000, `ran when due (${ranAt - due} ms after)`);
    } finally {
      await stop();
    }
  });

  it('a lost listening connection is re-established, and subscribers are told to look again', pgOnly, async () => {
    const hub = await NotificationHub.start({ url: t.databaseUrl! }, quiet);
    const events: string[] = [];
    const got: string[] = [];
    const ups: number[] = [];
    await hub.subscribe('cairn_test_reconnect', {
      message: (p) => got.push(p),
      listening: () => events.push('listening'),
      lost: () => events.push('lost'),
    });
    hub.watch({ up: (pid) => ups.push(pid), down: () => events.push('down') });
    const wakeup = hub.wakeup('cairn_test_reconnect');
    try {
      await until(() => ups.length === 1, 5_000, 'the watcher saw the connection up');
      const firstPid = hub.backendPid;
      assert.ok(firstPid > 0);
      await notify('cairn_test_reconnect', 'before');
      await until(() => got.includes('before'), 5_000, 'a notification arrives');

      const since = wakeup.generation;
      const waiting = wakeup.wait(since, 60_000);
      await sql`select pg_terminate_backend(${firstPid})`.execute(t.db);
      await until(() => events.includes('lost') && events.includes('down'), 5_000, 'the loss is reported');
      assert.equal(hub.connected, false);
      assert.equal(hub.listensTo('cairn_test_reconnect'), false);
      await waiting; // waiters are released when the connection goes
      // Sent while nobody listens: lost, so the reconnect must tell subscribers to look again.
      await notify('cairn_test_reconnect', 'during');
      const sinceDown = wakeup.generation;
      await until(() => ups.length === 2, 10_000, 'the connection is back');
      assert.notEqual(hub.backendPid, firstPid, 'a new server process');
      assert.ok(hub.listensTo('cairn_test_reconnect'));
      assert.ok(events.lastIndexOf('listening') > events.indexOf('lost'), 'subscribers were told to look again');
      assert.ok(wakeup.generation > sinceDown, 'waiters were woken to look again');
      await notify('cairn_test_reconnect', 'after');
      await until(() => got.includes('after'), 5_000, 'notifications arrive again');
    } finally {
      wakeup.close();
      await hub.close();
    }
  });

  it('while a channel is not listened, waits poll instead of sleeping long', async () => {
    const hub = NotificationHub.inert();
    const w = hub.wakeup('cairn_test_inert');
    const started = Date.now();
    await w.wait(w.generation, 60_000);
    const ms = Date.now() - started;
    assert.ok(ms >= 900 && ms < 3_000, `a fallback poll (${ms} ms)`);
    w.close();
  });
});
