import assert from 'node:assert/strict';
import { execFile as execFileCb, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServe } from '../helpers/serve.js';

const execFile = promisify(execFileCb);
const TOKEN = 'storage-move-root-token-123';
const PROJECTS = 50;
const GIT_ENV = { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' };
const gitSync = (args: string[]) => execFileSync('git', args, { env: GIT_ENV }).toString('utf8');
const gitAsync = (args: string[]) => execFile('git', args, { env: GIT_ENV });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A bulk move of 50 projects between two storages on a real `cairn serve`, with pushes and reads
// going on, then a move interrupted by kill -9 and finished after a restart. PostgreSQL only
// (the kill and restart need a database that outlives the process, as in two_processes).
describe('bulk repository storage moves under load', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL' }, () => {
  let testDb: TestDatabase;
  let dataDir: string;
  let storages: Record<string, string>;
  let server: { url: string; child: ChildProcess };
  const projects: { id: number; path: string }[] = [];
  let work: string;

  const start = () =>
    startServe({ databaseUrl: testDb.databaseUrl!, dataDir, rootToken: TOKEN, env: { CAIRN_STORAGES: Object.entries(storages).map(([n, d]) => `${n}:${d}`).join(',') } });
  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${server.url}/api/v4${p}`, {
      method,
      headers: { 'private-token': TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  const remote = (p: { path: string }) => `${server.url.replace('http://', `http://root:${TOKEN}@`)}/root/${p.path}.git`;
  const rows = () => testDb.database.db.selectFrom('projects').select(['id', 'repository_storage', 'repository_read_only', 'disk_path']).where('id', 'in', projects.map((p) => p.id)).orderBy('id').execute();
  const moves = () => testDb.database.db.selectFrom('repository_storage_moves').selectAll().where('container_type', '=', 'Project').orderBy('id').execute();
  const repoDir = (r: { repository_storage: string; disk_path: string }) => path.join(storages[r.repository_storage], r.disk_path);

  async function waitForMoves(total: number, timeoutMs: number) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const all = await moves();
      const open = all.filter((m) => ['initial', 'scheduled', 'started', 'replicated'].includes(m.state));
      if (all.length >= total && open.length === 0) return all;
      if (Date.now() > until) throw new Error(`moves still open: ${open.map((m) => `${m.id}:${m.state}`).join(', ')}`);
      await sleep(100);
    }
  }

  before(async () => {
    testDb = await openTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-moves-'));
    storages = { default: path.join(dataDir, 'storage-a'), other: path.join(dataDir, 'storage-b') };
    server = await start();
    work = path.join(dataDir, 'work');
    gitSync(['init', '-q', '-b', 'main', work]);
    fs.writeFileSync(path.join(work, 'README.md'), 'hello\n');
    gitSync(['-C', work, 'add', '-A']);
    gitSync(['-C', work, 'commit', '-q', '-m', 'first']);
    const tag = Date.now().toString(36);
    for (let i = 0; i < PROJECTS; i++) {
      const res = await api('POST', '/projects', { name: `moving-${tag}-${i}`, path: `moving-${tag}-${i}` });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      projects.push({ id: res.body.id, path: res.body.path });
    }
    // Initial content over HTTP, eight pushes at a time.
    const queue = [...projects];
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let p = queue.shift(); p; p = queue.shift()) await gitAsync(['-C', work, 'push', '-q', remote(p), 'main']);
    }));
  });
  after(async () => {
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await new Promise((r) => server.child.once('exit', r));
    }
    await testDb?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('moves 50 projects while pushes and reads go on: nothing lost, fsck clean, writes during the move refused cleanly', async () => {
    const refused: string[] = [];
    const landed = new Map<string, { project: { id: number; path: string }; branch: string; sha: string }>();
    const readFailures: string[] = [];
    const unexpected: string[] = [];
    let stop = false;
    const pushers = projects.slice(0, 3).map(async (p, n) => {
      const dir = path.join(dataDir, `pusher-${n}`);
      gitSync(['clone', '-q', remote(p), dir]);
      for (let k = 0; !stop; k++) {
        fs.writeFileSync(path.join(dir, `f${k}.txt`), `${n}:${k}\n`);
        gitSync(['-C', dir, 'add', '-A']);
        gitSync(['-C', dir, 'commit', '-q', '-m', `push ${k}`]);
        const sha = gitSync(['-C', dir, 'rev-parse', 'HEAD']).trim();
        const branch = `live-${k}`;
        try {
          await gitAsync(['-C', dir, 'push', '-q', remote(p), `HEAD:refs/heads/${branch}`]);
          landed.set(`${p.id}:${branch}`, { project: p, branch, sha });
        } catch (e) {
          const stderr = String((e as { stderr?: string }).stderr ?? e);
          if (/The repository is temporarily read-only\. Please try again later\./.test(stderr)) refused.push(stderr);
          else unexpected.push(stderr);
        }
        await sleep(50);
      }
    });
    const readers = projects.slice(0, 4).map(async (p) => {
      while (!stop) {
        const res = await fetch(`${server.url}/api/v4/projects/${p.id}/repository/files/README.md/raw?ref=main`, { headers: { 'private-token': TOKEN } });
        const text = await res.text();
        if (res.status !== 200 || text !== 'hello\n') readFailures.push(`${p.id}: ${res.status} ${text}`);
        try {
          await gitAsync(['ls-remote', remote(p), 'refs/heads/main']);
        } catch (e) {
          readFailures.push(`ls-remote ${p.id}: ${String((e as { stderr?: string }).stderr ?? e)}`);
        }
        await sleep(50);
      }
    });
    await sleep(300);
    try {
    const bulk = await api('POST', '/project_repository_storage_moves', { source_storage_name: 'default', destination_storage_name: 'other' });
    assert.equal(bulk.status, 202);
    // The moves are scheduled (read-only) together and run one after another: the last one waits.
    let last: { id: number; state: string } | undefined;
    for (let i = 0; i < 100 && !last; i++) {
      last = (await moves()).find((m) => Number(m.container_id) === projects[PROJECTS - 1].id && m.state === 'scheduled');
      if (!last) await sleep(50);
    }
    assert.ok(last, 'the last project is scheduled');
    const lastProject = projects[PROJECTS - 1];
    const push = await gitAsync(['-C', work, 'push', '-q', remote(lastProject), 'main:refs/heads/refused']).then(() => null, (e) => String(e.stderr));
    assert.match(push ?? 'pushed', /The repository is temporarily read-only\. Please try again later\./);
    const commit = await api('POST', `/projects/${lastProject.id}/repository/commits`, { branch: 'main', commit_message: 'x', actions: [{ action: 'create', file_path: 'x.txt', content: 'x' }] });
    assert.equal(commit.status, 403);
    assert.match(commit.body.message, /temporarily read-only/);
    const read = await api('GET', `/projects/${lastProject.id}/repository/tree`);
    assert.equal(read.status, 200);

    } finally {
      await waitForMoves(PROJECTS, 240_000).catch(() => {});
      stop = true;
      await Promise.all([...pushers, ...readers]);
    }
    const done = await moves();
    assert.deepEqual(unexpected, []);

    assert.deepEqual(done.map((m) => m.state), done.map(() => 'finished'), JSON.stringify(done.filter((m) => m.state !== 'finished')));
    assert.deepEqual(readFailures, []);
    const after = await rows();
    for (const r of after) {
      assert.equal(r.repository_storage, 'other');
      assert.equal(r.repository_read_only, false);
      gitSync(['--git-dir', repoDir(r), 'fsck', '--no-dangling', '--no-progress']);
      assert.equal(fs.existsSync(path.join(storages.default, r.disk_path)), false);
    }
    for (const { project, branch, sha } of landed.values()) {
      const r = after.find((x) => x.id === project.id)!;
      assert.equal(gitSync(['--git-dir', repoDir(r), 'rev-parse', `refs/heads/${branch}`]).trim(), sha, `${project.path} ${branch} was lost`);
    }
    assert.ok(landed.size > 0);
    console.log(`# ${PROJECTS} moved: ${landed.size} pushes landed during the move, ${refused.length} refused as read-only`);
    const left = await api('GET', '/projects?repository_storage=default&per_page=100');
    assert.deepEqual(left.body, []);
    const moved = await api('GET', '/projects?repository_storage=other&per_page=100');
    assert.equal(moved.body.length, PROJECTS);
  });

  it('a move interrupted by kill -9 of the server finishes or fails cleanly after a restart', async () => {
    const before = new Map((await rows()).map((r) => [r.id, gitSync(['--git-dir', repoDir(r), 'for-each-ref'])]));
    const already = (await moves()).length;
    const bulk = await api('POST', '/project_repository_storage_moves', { source_storage_name: 'other', destination_storage_name: 'default' });
    assert.equal(bulk.status, 202);
    let started = false;
    for (let i = 0; i < 3000 && !started; i++) {
      const all = (await moves()).slice(already);
      // One under way, one past its switch (replicated: its source copy goes CAIRN_STORAGE_MOVE_CLEANUP_DELAY later).
      started = all.some((m) => m.state === 'started') && all.some((m) => m.state === 'replicated' || m.state === 'finished');
      if (!started) await sleep(10);
    }
    assert.ok(started, 'a move was under way');
    server.child.kill('SIGKILL');
    await new Promise((r) => (server.child.exitCode !== null || server.child.signalCode ? r(null) : server.child.once('exit', r)));
    const interrupted = (await moves()).slice(already).filter((m) => m.state !== 'finished');
    assert.ok(interrupted.length > 0);

    server = await start();
    const done = (await waitForMoves(already + PROJECTS, 240_000)).slice(already);
    assert.equal(done.length, PROJECTS);
    for (const m of done) assert.ok(['finished', 'failed'].includes(m.state), `${m.id}: ${m.state}`);
    for (const r of await rows()) {
      const m = done.find((x) => Number(x.container_id) === r.id)!;
      assert.equal(r.repository_read_only, false);
      assert.equal(r.repository_storage, m.state === 'finished' ? 'default' : 'other');
      gitSync(['--git-dir', repoDir(r), 'fsck', '--no-dangling', '--no-progress']);
      assert.equal(gitSync(['--git-dir', repoDir(r), 'for-each-ref']), before.get(r.id), `refs of project ${r.id}`);
      // No half copy left behind: the other storage has nothing of it.
      const otherStorage = r.repository_storage === 'default' ? 'other' : 'default';
      assert.equal(fs.existsSync(path.join(storages[otherStorage], r.disk_path)), false);
      assert.equal(fs.existsSync(path.join(storages[otherStorage], r.disk_path + '.moving')), false);
    }
    // Pushes work again everywhere.
    const p = projects[0];
    await gitAsync(['-C', work, 'push', '-q', remote(p), 'main:refs/heads/after-restart']);
    const failed = done.filter((m) => m.state === 'failed').length;
    console.log(`# killed with ${interrupted.length} moves unfinished; after the restart ${PROJECTS - failed} finished, ${failed} failed`);
    const onOther = await api('GET', '/projects?repository_storage=other&per_page=100');
    assert.equal(onOther.body.length, failed);
  });
});
