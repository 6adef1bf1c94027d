import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { SharedCache } from '../../src/cache/index.js';
import { invalidationOnOwnHub, startProcessCache } from '../helpers/cache.js';
import { openDatabase, type OpenedDatabase } from '../../src/db/index.js';
import { writesWatchedTable } from '../../src/db/write_observer.js';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';

const quiet = { warn() {} };

/** On PostgreSQL a cache serves once its listener's first ping has come back. */
async function untilServing(cache: SharedCache) {
  for (let i = 0; i < 200 && !cache.serving; i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cache.serving);
}
const raw = (text: string) => CompiledQuery.raw(text);

describe('SharedCache', () => {
  it('serves a kept value until cleared, and only while enabled', async () => {
    const cache = new SharedCache();
    let loads = 0;
    const load = async () => ({ n: ++loads });
    assert.deepEqual(await cache.load('k', load), { n: 1 }, 'disabled: loads every time');
    assert.deepEqual(await cache.load('k', load), { n: 2 });
    cache.servingUntil = Infinity;
    assert.deepEqual(await cache.load('k', load), { n: 3 });
    assert.deepEqual(await cache.load('k', load), { n: 3 }, 'enabled: served from memory');
    cache.clear();
    assert.deepEqual(await cache.load('k', load), { n: 4 });
    assert.equal(await cache.load('missing', async () => undefined), undefined);
    assert.equal(cache.size, 1, 'undefined is not kept');
  });

  it('does not keep a value whose load raced with a clear', async () => {
    const cache = new SharedCache();
    cache.servingUntil = Infinity;
    let release!: () => void;
    const slow = cache.load('k', () => new Promise<string>((r) => (release = () => r('stale'))));
    cache.clear(); // a write committed while the load was reading
    release();
    assert.equal(await slow, 'stale', 'the racing caller still gets its answer');
    assert.equal(await cache.load('k', async () => 'fresh'), 'fresh');
  });

  it('freezes what it keeps, so callers cannot change a shared value', async () => {
    const cache = new SharedCache();
    cache.servingUntil = Infinity;
    const value = await cache.load('k', async () => ({ a: { b: [1] } }));
    assert.throws(() => {
      (value as any).a.b.push(2);
    }, TypeError);
  });

  it('lets callers of a key being loaded wait for that load, until a clear', async () => {
    const cache = new SharedCache();
    cache.servingUntil = Infinity;
    let loads = 0;
    const releases: (() => void)[] = [];
    const load = () => new Promise<{ n: number }>((r) => {
      const n = ++loads;
      releases.push(() => r({ n }));
    });
    const first = cache.load('k', load);
    const second = cache.load('k', load);
    assert.equal(loads, 1, 'the second caller waits for the first load');
    cache.clear(); // a write committed: what the first load read may be stale
    const third = cache.load('k', load);
    assert.equal(loads, 2, 'after a clear a new load starts');
    for (const release of releases) release();
    assert.deepEqual(await first, { n: 1 });
    assert.equal(await second, await first, 'the waiting caller gets the same (frozen) value');
    assert.ok(Object.isFrozen(await second));
    assert.deepEqual(await third, { n: 2 });
    assert.deepEqual(await cache.load('k', async () => ({ n: -1 })), { n: 2 }, 'only the load after the clear was kept');
  });

  it('does not let callers wait for a load whose inputs were read before a clear', async () => {
    const cache = new SharedCache();
    cache.servingUntil = Infinity;
    const since = cache.generation;
    cache.clear();
    let release!: () => void;
    const stale = cache.load('k', () => new Promise<string>((r) => (release = () => r('stale'))), { since });
    assert.equal(await cache.load('k', async () => 'fresh'), 'fresh');
    release();
    assert.equal(await stale, 'stale');
    assert.equal(await cache.load('k', async () => 'other'), 'fresh');
  });

  it('a failed load fails its waiting callers and is not kept', async () => {
    const cache = new SharedCache();
    cache.servingUntil = Infinity;
    let fail!: (e: Error) => void;
    const first = cache.load('k', () => new Promise<string>((_r, reject) => (fail = reject)));
    const second = cache.load('k', async () => 'unused');
    fail(new Error('boom'));
    await assert.rejects(first, /boom/);
    await assert.rejects(second, /boom/);
    assert.equal(await cache.load('k', async () => 'later'), 'later');
  });

  it('keeps large values within its byte budget, oldest out first', async () => {
    const cache = new SharedCache({ maxBytes: 1000 });
    cache.servingUntil = Infinity;
    const size = (v: string) => v.length;
    for (let i = 0; i < 6; i++) await cache.load(`big${i}`, async () => String(i).repeat(200), { size });
    assert.equal(await cache.load('big0', async () => 'reloaded', { size }), 'reloaded', 'the oldest went out');
    assert.equal(await cache.load('big5', async () => 'reloaded', { size }), '5'.repeat(200), 'the newest stayed');
    assert.equal(await cache.load('huge', async () => 'x'.repeat(300), { size }), 'x'.repeat(300));
    assert.equal(await cache.load('huge', async () => 'again', { size }), 'again', 'a value over a quarter of the budget is not kept');
  });

  it('stays within its size', async () => {
    const cache = new SharedCache({ maxEntries: 10 });
    cache.servingUntil = Infinity;
    for (let i = 0; i < 25; i++) await cache.load(`k${i}`, async () => i);
    assert.ok(cache.size <= 10);
    assert.equal(await cache.load('k24', async () => -1), 24, 'the newest entries stay');
  });
});

describe('writesWatchedTable', () => {
  it('tells writes to watched tables from reads and from busy unwatched tables', () => {
    assert.equal(writesWatchedTable(raw('select * from projects for update skip locked')), false);
    assert.equal(writesWatchedTable(raw('with recursive t as (select 1) select * from t')), false);
    assert.equal(writesWatchedTable(raw('update "projects" set "name" = $1')), true);
    assert.equal(writesWatchedTable(raw('insert into "users" ("name") values ($1) on conflict do update set name = excluded.name')), true);
    assert.equal(writesWatchedTable(raw('delete from members where id = 1')), true);
    assert.equal(writesWatchedTable(raw('update "background_jobs" set "state" = $1')), false);
    assert.equal(writesWatchedTable(raw('insert into rate_limit_counters (key) values ($1) on conflict (key) do update set hits = hits + 1')), false);
    assert.equal(writesWatchedTable(raw('with j as (select id from background_jobs for update skip locked) update background_jobs set state = 1')), false);
    assert.equal(writesWatchedTable(raw('create table x (id int)')), true, 'unknown statements count as writes');
  });
});

describe('cache invalidation through the database', () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await openTestDatabase();
  });
  after(async () => {
    await testDb.drop();
  });

  it('a committed write clears the cache before the write returns', async () => {
    const cache = new SharedCache();
    const stop = await startProcessCache(cache, testDb.database, quiet);
    await untilServing(cache);
    // A value computed from the users and projects tables.
    const from = (v: string) => async () => {
      await sql`select 1 from users u, projects p limit 1`.execute(testDb.database.db);
      return v;
    };
    try {
      assert.equal(await cache.load('k', from('old')), 'old');
      await testDb.database.db.updateTable('users').set({ name: sql`name` }).where('id', '=', -1).execute();
      assert.equal(await cache.load('k', from('new')), 'new', 'a statement on a watched table clears, even one changing no row');
      await testDb.database.db.transaction().execute(async (trx) => {
        await trx.updateTable('projects').set({ name: sql`name` }).where('id', '=', -1).execute();
        assert.equal(await cache.load('k', from('newer')), 'new', 'not before the transaction commits');
      });
      assert.equal(await cache.load('k', from('newer')), 'newer');
      await testDb.database.db.transaction().execute(async (trx) => {
        await trx.updateTable('projects').set({ name: sql`name` }).where('id', '=', -1).execute();
      });
      await sql`update background_jobs set attempts = attempts where id = -1`.execute(testDb.database.db);
      assert.equal(await cache.load('k', from('x')), 'x');
      await sql`update background_jobs set attempts = attempts where id = -1`.execute(testDb.database.db);
      assert.equal(await cache.load('k', from('y')), 'x', 'writes to unwatched tables keep the cache');
      // Only what read the written table goes.
      assert.equal(await cache.load('labels', async () => {
        await sql`select 1 from labels limit 1`.execute(testDb.database.db);
        return 'labels';
      }), 'labels');
      await testDb.database.db.updateTable('users').set({ name: sql`name` }).where('id', '=', -1).execute();
      assert.equal(await cache.load('labels', async () => 'other'), 'labels', 'a value that did not read users stays');
      assert.equal(await cache.load('k', from('z')), 'z', 'a value that read users goes');
      // A table without a trigger (its writes announce nothing): what read it goes with any write.
      assert.equal(await cache.load('jobs', async () => {
        await sql`select 1 from background_jobs limit 1`.execute(testDb.database.db);
        return 'a';
      }), 'a');
      await testDb.database.db.updateTable('labels').set({ title: sql`title` }).where('id', '=', -1).execute();
      assert.equal(await cache.load('jobs', async () => 'b'), 'b', 'a value read from an unwatched table goes with any write');
    } finally {
      await stop();
    }
  });

  it('a write waits until another process has dropped what it made stale', { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' }, async () => {
    // Two "processes": two pools, two caches, two listeners on one database.
    const other: OpenedDatabase = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: '' });
    const writerCache = new SharedCache();
    const readerCache = new SharedCache();
    const stopWriter = await startProcessCache(writerCache, testDb.database, quiet);
    const reader = await invalidationOnOwnHub(readerCache, other.db, testDb.databaseUrl!, quiet);
    await reader.start();
    await untilServing(readerCache);
    // The reader handles notifications late (in order), as a busy process would.
    const handle = (reader as any).onNotification.bind(reader);
    let queue = Promise.resolve();
    (reader as any).onNotification = (channel: string, payload: string) => {
      queue = queue.then(() => new Promise((r) => setTimeout(r, 150))).then(() => handle(channel, payload));
    };
    try {
      assert.equal(await readerCache.load('k', async () => { await sql`select 1 from users limit 1`.execute(other.db); return 'old'; }), 'old');
      const started = Date.now();
      await testDb.database.db.updateTable('users').set({ name: sql`name` }).where('id', '=', -1).execute();
      const waited = Date.now() - started;
      assert.equal(await readerCache.load('k', async () => { await sql`select 1 from users limit 1`.execute(other.db); return 'new'; }), 'new', 'the reader let go before the write returned');
      assert.ok(waited >= 140 && waited < 1500, `the writer waited for the reader (${waited} ms)`);
      // A writer never waits for a process that is gone.
      await reader.close();
      const again = Date.now();
      await testDb.database.db.updateTable('users').set({ name: sql`name` }).where('id', '=', -1).execute();
      assert.ok(Date.now() - again < 140, 'a closed process is no longer waited for');
    } finally {
      await reader.close();
      await stopWriter();
      await other.close();
    }
  });
});
