import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServe as startCairn } from '../helpers/serve.js';

const TOKEN = 'two-process-root-token-123';

const startServe = (databaseUrl: string, dataDir: string) => startCairn({ databaseUrl, dataDir, rootToken: TOKEN, env: { CAIRN_ARCHIVE_RATE_LIMIT: '6', CAIRN_RUNNER_POLL_TIMEOUT: '1' } });

// Two Cairn processes share one PostgreSQL (PGlite is one process by nature, so this runs on PostgreSQL only).
describe('two cairn serve processes on one PostgreSQL', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL' }, () => {
  let testDb: TestDatabase;
  let dataDir: string;
  let a: { url: string; child: ChildProcess };
  let b: { url: string; child: ChildProcess };

  before(async () => {
    testDb = await openTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-two-'));
    // Started together: migrations and root's bootstrap must not race.
    [a, b] = await Promise.all([startServe(testDb.databaseUrl!, dataDir), startServe(testDb.databaseUrl!, dataDir)]);
  });
  after(async () => {
    for (const s of [a, b]) s?.child.kill('SIGTERM');
    await Promise.all([a, b].map((s) => s && new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)))));
    await testDb?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** Cache listener connections of the Cairn processes on this database. */
  const listeners = async () =>
    Number((await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where application_name = 'cairn listener' and datname = current_database()`.execute(testDb.database.db)).rows[0].n);

  const waitForListeners = async (n: number) => {
    for (let i = 0; i < 100 && (await listeners()) !== n; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(await listeners(), n);
  };

  const call = (base: string, method: string, p: string, body?: unknown) =>
    fetch(`${base}/api/v4${p}`, {
      method,
      headers: { 'private-token': TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  it('a write through one process is read through the other', async () => {
    const created = await call(a.url, 'POST', '/users', { username: 'twoproc', name: 'Two Proc', email: 'twoproc@example.com', password: 'two-proc-pass-1' });
    assert.equal(created.status, 201);
    const user = (await created.json()) as { id: number };
    const read = await call(b.url, 'GET', `/users/${user.id}`);
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { username: string }).username, 'twoproc');
    const root = await call(b.url, 'GET', '/user');
    assert.equal(((await root.json()) as { username: string }).username, 'root');
  });

  it('a token revoked through one process is refused by the other', async () => {
    const created = await call(a.url, 'POST', '/users/1/personal_access_tokens', { name: 'short', scopes: ['api'] });
    assert.equal(created.status, 201);
    const { id, token } = (await created.json()) as { id: number; token: string };
    const ok = await fetch(`${b.url}/api/v4/user`, { headers: { 'private-token': token } });
    assert.equal(ok.status, 200);
    assert.equal((await call(a.url, 'DELETE', `/personal_access_tokens/${id}`)).status, 204);
    const refused = await fetch(`${b.url}/api/v4/user`, { headers: { 'private-token': token } });
    assert.equal(refused.status, 401);
  });

  it('cached reads in one process follow writes made through the other', async () => {
    const created = await call(a.url, 'POST', '/projects', { name: 'cached-two', visibility: 'private' });
    assert.equal(created.status, 201);
    const project = (await created.json()) as { id: number };
    for (let i = 0; i < 20; i++) {
      // Read twice through b (the second read is served from b's memory), then write through a.
      for (let r = 0; r < 2; r++) assert.equal((await call(b.url, 'GET', `/projects/${project.id}`)).status, 200);
      assert.equal((await call(a.url, 'PUT', `/projects/${project.id}`, { description: `version ${i}` })).status, 200);
      const read = (await (await call(b.url, 'GET', `/projects/${project.id}`)).json()) as { description: string };
      assert.equal(read.description, `version ${i}`);
    }
  });

  it('list pages kept by one process follow writes made through the other', async () => {
    const group = (await (await call(a.url, 'POST', '/groups', { name: 'Listed Two', path: 'listed-two', visibility: 'private' })).json()) as { id: number };
    const project = (await (await call(a.url, 'POST', '/projects', { name: 'listed-two', namespace_id: group.id })).json()) as { id: number };
    const total = async (p: string) => {
      const res = await call(b.url, 'GET', p);
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      return Number(res.headers.get('x-total'));
    };
    for (let i = 0; i < 5; i++) {
      const user = (await (await call(a.url, 'POST', '/users', { username: `listed${i}`, name: `Listed ${i}`, email: `listed${i}@example.com`, password: 'listed-pass-1' })).json()) as { id: number };
      const before = await total(`/groups/${group.id}/members`);
      // Read twice through b (the second read is served from b's memory), then write through a.
      assert.equal(await total(`/groups/${group.id}/members`), before);
      const allBefore = await total(`/projects/${project.id}/members/all`);
      assert.equal(await total(`/projects/${project.id}/members/all`), allBefore);
      const listed = async () => ((await (await call(b.url, 'GET', '/users?per_page=100')).json()) as { id: number }[]).some((u) => u.id === user.id);
      assert.equal(await listed(), true);
      assert.equal(await listed(), true);
      assert.equal((await call(a.url, 'POST', `/groups/${group.id}/members`, { user_id: user.id, access_level: 30 })).status, 201);
      assert.equal(await total(`/groups/${group.id}/members`), before + 1);
      assert.equal(await total(`/projects/${project.id}/members/all`), allBefore + 1);
      assert.equal((await call(a.url, 'DELETE', `/users/${user.id}`)).status, 204);
      assert.equal(await listed(), false);
      assert.equal(await total(`/groups/${group.id}/members`), before);
    }
  });

  it('membership granted and removed through one process is honoured by the other at once', async () => {
    const project = (await (await call(a.url, 'POST', '/projects', { name: 'cached-members', visibility: 'private' })).json()) as { id: number };
    const user = (await (await call(a.url, 'POST', '/users', { username: 'cachedmember', name: 'Cached', email: 'cachedmember@example.com', password: 'cached-member-1' })).json()) as { id: number };
    const token = ((await (await call(a.url, 'POST', `/users/${user.id}/personal_access_tokens`, { name: 't', scopes: ['api'] })).json()) as { token: string }).token;
    const asUser = (base: string) => fetch(`${base}/api/v4/projects/${project.id}`, { headers: { 'private-token': token } });
    assert.equal((await asUser(b.url)).status, 404);
    assert.equal((await call(a.url, 'POST', `/projects/${project.id}/members`, { user_id: user.id, access_level: 30 })).status, 201);
    assert.equal((await asUser(b.url)).status, 200);
    assert.equal((await asUser(b.url)).status, 200);
    assert.equal((await call(a.url, 'DELETE', `/projects/${project.id}/members/${user.id}`)).status, 204);
    assert.equal((await asUser(b.url)).status, 404);
  });

  it('a process whose cache listener is cut off serves fresh reads, then listens again', async () => {
    const db = testDb.database.db;
    const project = (await (await call(a.url, 'POST', '/projects', { name: 'cached-listener', visibility: 'private' })).json()) as { id: number };
    await call(b.url, 'GET', `/projects/${project.id}`);
    await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'cairn listener' and datname = current_database()`.execute(db);
    await waitForListeners(0);
    // Without its listener a process serves nothing from memory.
    assert.equal((await call(a.url, 'PUT', `/projects/${project.id}`, { description: 'while cut off' })).status, 200);
    assert.equal(((await (await call(b.url, 'GET', `/projects/${project.id}`)).json()) as { description: string }).description, 'while cut off');
    // Both reconnect, and caching resumes with invalidation intact.
    await waitForListeners(2);
    for (let i = 0; i < 3; i++) {
      await call(b.url, 'GET', `/projects/${project.id}`);
      assert.equal((await call(a.url, 'PUT', `/projects/${project.id}`, { description: `after ${i}` })).status, 200);
      assert.equal(((await (await call(b.url, 'GET', `/projects/${project.id}`)).json()) as { description: string }).description, `after ${i}`);
    }
  });

  it('writes do not wait for a process that crashed', async () => {
    const c = await startServe(testDb.databaseUrl!, dataDir);
    await waitForListeners(3);
    c.child.kill('SIGKILL');
    await new Promise((r) => c.child.once('exit', r));
    await waitForListeners(2);
    const project = (await (await call(a.url, 'POST', '/projects', { name: 'after-crash' })).json()) as { id: number };
    const started = Date.now();
    assert.equal((await call(a.url, 'PUT', `/projects/${project.id}`, { description: 'quick' })).status, 200);
    assert.ok(Date.now() - started < 1000, `the write took ${Date.now() - started} ms`);
  });

  /** A project with a first commit on main, created through a. */
  const projectWithMain = async (name: string, files: Record<string, string> = { 'README.md': '# two\n' }) => {
    const project = (await (await call(a.url, 'POST', '/projects', { name, visibility: 'private' })).json()) as { id: number; runners_token: string };
    const first = await call(a.url, 'POST', `/projects/${project.id}/repository/commits`, {
      branch: 'main', commit_message: 'initial', actions: Object.entries(files).map(([file_path, content]) => ({ action: 'create', file_path, content })),
    });
    assert.equal(first.status, 201);
    return project;
  };

  it('merges of one merge request through both processes: exactly one succeeds', async () => {
    const project = await projectWithMain('two-merge');
    for (let i = 0; i < 5; i++) {
      assert.equal((await call(b.url, 'POST', `/projects/${project.id}/repository/commits`, { branch: `m${i}`, start_branch: 'main', commit_message: `m${i}`, actions: [{ action: 'create', file_path: `m${i}`, content: 'x' }] })).status, 201);
      const mr = (await (await call(a.url, 'POST', `/projects/${project.id}/merge_requests`, { source_branch: `m${i}`, target_branch: 'main', title: `m${i}` })).json()) as { iid: number };
      const statuses = await Promise.all([a, b, a, b].map(async (s) => (await call(s.url, 'PUT', `/projects/${project.id}/merge_requests/${mr.iid}/merge`, {})).status));
      assert.equal(statuses.filter((x) => x === 200).length, 1, JSON.stringify(statuses));
      assert.ok(statuses.every((x) => x === 200 || x === 405), JSON.stringify(statuses));
    }
    const merges = ((await (await call(b.url, 'GET', `/projects/${project.id}/repository/commits?ref_name=main&per_page=100`)).json()) as { parent_ids: string[] }[]).filter((c) => c.parent_ids.length === 2);
    assert.equal(merges.length, 5);
  });

  it('concurrent API commits to one branch through both processes: none lost, refusals clean', async () => {
    const project = await projectWithMain('two-commits');
    const landed: string[] = [];
    const statuses: number[] = [];
    await Promise.all(Array.from({ length: 16 }, async (_, i) => {
      const res = await call(i % 2 ? a.url : b.url, 'POST', `/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: `c${i}`, actions: [{ action: 'create', file_path: `c${i}.txt`, content: `${i}` }] });
      statuses.push(res.status);
      if (res.status === 201) landed.push(((await res.json()) as { id: string }).id);
      else await res.arrayBuffer();
    }));
    assert.ok(statuses.every((x) => [201, 400, 409].includes(x)), JSON.stringify(statuses));
    assert.ok(landed.length >= 1);
    const history = ((await (await call(a.url, 'GET', `/projects/${project.id}/repository/commits?ref_name=main&per_page=100`)).json()) as { id: string }[]).map((c) => c.id);
    for (const sha of landed) assert.ok(history.includes(sha), `commit ${sha} answered 201 is on main`);
    // Every file whose commit landed is in the tree: no commit overwrote another's.
    const tree = ((await (await call(b.url, 'GET', `/projects/${project.id}/repository/tree?per_page=100`)).json()) as { path: string }[]).map((e) => e.path);
    assert.equal(tree.filter((p) => /^c\d+\.txt$/.test(p)).length, landed.length);
  });

  it('runners polling both processes: each job is picked once', async () => {
    const yml = Array.from({ length: 12 }, (_, i) => `job${i}:\n  script: [echo ${i}]\n`).join('');
    const project = await projectWithMain('two-runners', { '.gitlab-ci.yml': yml });
    const tokens: string[] = [];
    for (const s of [a, b, a]) {
      const reg = await fetch(`${s.url}/api/v4/runners`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: project.runners_token, description: 'two' }) });
      assert.equal(reg.status, 201);
      tokens.push(((await reg.json()) as { token: string }).token);
    }
    const picked: number[] = [];
    let idle = 0;
    await Promise.all(tokens.flatMap((token) => [a, b].map(async (s) => {
      while (idle < 6) {
        const res = await fetch(`${s.url}/api/v4/jobs/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
        if (res.status !== 201) {
          await res.arrayBuffer();
          idle++;
          continue;
        }
        const job = (await res.json()) as { id: number; token: string };
        picked.push(job.id);
        const done = await fetch(`${s === a ? b.url : a.url}/api/v4/jobs/${job.id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: job.token, state: 'success' }) });
        assert.equal(done.status, 200);
        await done.arrayBuffer();
      }
    })));
    assert.equal(picked.length, 12);
    assert.equal(new Set(picked).size, 12, 'no job was picked twice');
    const pipelines = (await (await call(b.url, 'GET', `/projects/${project.id}/pipelines`)).json()) as { status: string }[];
    assert.equal(pipelines[0].status, 'success');
  });

  it('the archive rate limit counts downloads through both processes together', async () => {
    const project = await projectWithMain('two-archive');
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await call(i % 2 ? a.url : b.url, 'GET', `/projects/${project.id}/repository/archive.tar.gz`);
      statuses.push(res.status);
      await res.arrayBuffer();
    }
    // CAIRN_ARCHIVE_RATE_LIMIT=6 per user per minute, whichever process answers.
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 200, 429, 429]);
  });
});
