// The cache's guarantee under races and broken connections: once a write has answered, no
// process serves what it replaced (src/cache/shared_cache.ts).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { CompiledQuery, DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, sql } from 'kysely';
import type { DB } from '../../src/db/types.js';
import { SharedCache } from '../../src/cache/index.js';
import { invalidationOnOwnHub, startProcessCache } from '../helpers/cache.js';
import { openDatabase, type OpenedDatabase } from '../../src/db/index.js';
import { writesWatchedTable } from '../../src/db/write_observer.js';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

const quiet = { warn() {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pgOnly = { skip: process.env.DATABASE_URL ? false : 'PostgreSQL only' };

describe('cached reads through HTTP', () => {
  let t: TestContext;
  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t.close();
  });

  it('a write that commits while a read renders does not leave that read’s JSON behind', async () => {
    const project = await t.createProject({ visibility: 20 });
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { description: 'before' })).status, 200);
    const cache = t.app.cairn.cache;
    const load = cache.load.bind(cache);
    let racing = true;
    // The GET has read the project row; another request's PUT commits and answers before the
    // GET renders and stores the JSON.
    cache.load = (async (key: string, fn: () => Promise<unknown>, opts?: object) => {
      if (racing && key.startsWith('project-json:')) {
        racing = false;
        assert.equal((await t.put(`/api/v4/projects/${project.id}`, { description: 'after' })).status, 200);
      }
      return load(key, fn, opts);
    }) as typeof cache.load;
    try {
      await t.get(`/api/v4/projects/${project.id}`);
    } finally {
      cache.load = load;
    }
    assert.equal((await t.get(`/api/v4/projects/${project.id}`)).body.description, 'after');
  });

  it('a schema change that alters access drops what it made stale', async () => {
    const member = await t.createUser();
    const project = await t.createProject({ visibility: 0 });
    await t.addMember(project, member.user, 20);
    const asMember = () => t.get(`/api/v4/projects/${project.id}`, { token: member.token });
    assert.equal((await asMember()).status, 200);
    assert.equal((await asMember()).status, 200);
    const original = (await sql<{ def: string }>`select pg_get_functiondef('project_access_level(integer,integer)'::regprocedure) as def`.execute(t.db)).rows[0].def;
    await sql`create or replace function project_access_level(uid integer, pid integer) returns integer
              language plpgsql stable as $$ begin return 0; end $$`.execute(t.db);
    try {
      assert.equal((await asMember()).status, 404);
    } finally {
      await sql.raw(original).execute(t.db);
    }
    assert.equal((await asMember()).status, 200);
  });
});

describe('writesWatchedTable', () => {
  // Compiles queries only.
  const db = new Kysely<DB>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });

  it('a Kysely select whose CTE updates a watched table is a write', () => {
    const query = db
      .with('touched', (db) => db.updateTable('projects').set({ description: 'x' }).where('id', '=', 1).returning('id'))
      .selectFrom('touched')
      .selectAll()
      .compile();
    assert.equal(writesWatchedTable(query), true);
    assert.equal(writesWatchedTable(db.selectFrom('projects').select('updated_at').where('name', '=', 'update x').compile()), false);
  });

  it('truncate of several tables is a write when any of them is watched', () => {
    assert.equal(writesWatchedTable(CompiledQuery.raw('truncate sessions, projects')), true);
    assert.equal(writesWatchedTable(CompiledQuery.raw('truncate table sessions, "rate_limit_counters"')), false);
  });
});

describe('barriers across processes', pgOnly, () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await openTestDatabase();
  });
  after(async () => {
    await testDb.drop();
  });

  /** A second "process": its own pool, cache and listener; `mode` makes it slow or deaf. */
  async function peer() {
    const other: OpenedDatabase = await openDatabase({ databaseUrl: testDb.databaseUrl, dataDir: '' });
    const cache = new SharedCache();
    const invalidation = await invalidationOnOwnHub(cache, other.db, testDb.databaseUrl!, quiet);
    const state = { delayMs: 0, deaf: false };
    const handle = (invalidation as any).onNotification.bind(invalidation);
    let queue = Promise.resolve();
    (invalidation as any).onNotification = (channel: string, payload: string) => {
      if (state.deaf) return; // as when a NAT silently drops the idle listening connection
      queue = queue.then(() => sleep(state.delayMs)).then(() => handle(channel, payload));
    };
    await invalidation.start();
    for (let i = 0; i < 100 && !cache.serving; i++) await sleep(10);
    assert.ok(cache.serving, 'the peer serves once its first ping came back');
    return {
      cache,
      invalidation,
      state,
      close: async () => {
        await invalidation.close();
        await other.close();
      },
    };
  }

  /** A value computed from the users table (what touchUsers writes). */
  const fromUsers = (v: string) => async () => {
    await sql`select 1 from users limit 1`.execute(testDb.database.db);
    return v;
  };
  const touchUsers = () => testDb.database.db.updateTable('users').set({ name: sql`name` }).where('id', '=', -1).execute();

  it("a write made while the writer's own listener is down still outlasts every peer's stale reads", async () => {
    const writerCache = new SharedCache();
    const writer = await invalidationOnOwnHub(writerCache, testDb.database.db, testDb.databaseUrl!, quiet);
    const observer = () => writerCache.barrier();
    testDb.database.writeObservers.add(observer);
    await writer.start();
    const reader = await peer();
    reader.state.delayMs = 150;
    try {
      assert.equal(await reader.cache.load('k', fromUsers('old')), 'old');
      await sql`select pg_terminate_backend(${(writer as any).backendPid})`.execute(testDb.database.db);
      for (let i = 0; i < 100 && (writer as any).hub.connected; i++) await sleep(10);
      assert.equal((writer as any).hub.connected, false, 'the writer noticed its listener is gone');
      await touchUsers();
      assert.equal(await reader.cache.load('k', fromUsers('new')), 'new');
    } finally {
      testDb.database.writeObservers.delete(observer);
      await reader.close();
      await writer.close();
    }
  });

  it('a peer that stops hearing notifications stops serving before a writer stops waiting for it', async () => {
    const stopWriter = await startProcessCache(new SharedCache(), testDb.database, quiet);
    const reader = await peer();
    try {
      assert.equal(await reader.cache.load('k', fromUsers('old')), 'old');
      assert.equal(await reader.cache.load('k', fromUsers('other')), 'old');
      reader.state.deaf = true;
      const started = Date.now();
      await touchUsers();
      assert.ok(Date.now() - started >= 1900, 'the writer waited for the silent reader until its timeout');
      assert.equal(reader.cache.serving, false, "the silent reader's lease has run out");
      assert.equal(await reader.cache.load('k', fromUsers('new')), 'new');
    } finally {
      await reader.close();
      await stopWriter();
    }
  });

  it('a peer whose heartbeat lapsed stops serving before writers stop waiting for it', async () => {
    const stopWriter = await startProcessCache(new SharedCache(), testDb.database, quiet);
    const reader = await peer();
    reader.state.delayMs = 150;
    try {
      // Heartbeats failing for 30 s (a saturated pool): the row ages, and so does the process's own record of it.
      (reader.invalidation as any).beat = async () => {};
      (reader.invalidation as any).lastBeatAt = performance.now() - 30_000;
      await sql`update cache_listeners set heartbeat_at = now() - interval '30 seconds' where id = ${reader.invalidation.id}`.execute(testDb.database.db);
      await sleep(1_100); // leases granted before the lapse run out
      assert.equal(await reader.cache.load('k', fromUsers('old')), 'old');
      await touchUsers();
      assert.equal(await reader.cache.load('k', fromUsers('new')), 'new');
    } finally {
      await reader.close();
      await stopWriter();
    }
  });

  it('a listener lost while connect() is registering leaves the cache off', async () => {
    const cache = new SharedCache();
    const invalidation = await invalidationOnOwnHub(cache, testDb.database.db, testDb.databaseUrl!, quiet);
    const beat = (invalidation as any).beat.bind(invalidation);
    let first = true;
    (invalidation as any).beat = async () => {
      if (first) {
        first = false;
        await sql`select pg_terminate_backend(${(invalidation as any).backendPid})`.execute(testDb.database.db);
        for (let i = 0; i < 100 && (invalidation as any).hub.connected; i++) await sleep(10);
      }
      return beat();
    };
    try {
      await invalidation.start();
      await sleep(100);
      assert.equal((invalidation as any).hub.connected, false, 'the listener is gone');
      assert.equal(cache.serving, false);
    } finally {
      await invalidation.close();
    }
  });
});
