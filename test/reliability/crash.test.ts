import assert from 'node:assert/strict';
import { execFile as execFileCb, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startServe } from '../helpers/serve.js';

// Crash safety (issue #15, part 3): a real `cairn serve` on PostgreSQL killed with SIGKILL in the
// middle of a large push, API commits, merges, a pipeline run and an artifact upload. After each
// restart: `git fsck --full` is clean, the database agrees with the repositories, the journalled
// work (post-receive, merges) and the queue finish, nothing acknowledged is lost, and the
// leftovers of the kill are removed by the leftover sweep. Storage moves killed mid-way are
// test/integration/storage_moves.test.ts. The short form kills once per scenario; the long form
// (CAIRN_SOAK=1, `npm run test:soak`) kills CAIRN_SOAK_KILLS times (default 20) at seeded random
// points (CAIRN_SOAK_SEED) and prints the figures.

const execFile = promisify(execFileCb);
const SOAK = process.env.CAIRN_SOAK === '1';
const KILLS = SOAK ? Number(process.env.CAIRN_SOAK_KILLS ?? 20) : 5;
const SEED = Number(process.env.CAIRN_SOAK_SEED ?? 15);
const TOKEN = 'crash-root-token-1234567';
const GIT_ENV = { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'A', GIT_AUTHOR_EMAIL: 'a@example.com', GIT_COMMITTER_NAME: 'A', GIT_COMMITTER_EMAIL: 'a@example.com' };
const git = (args: string[], input?: string) => execFileSync('git', args, { env: GIT_ENV, input, maxBuffer: 1 << 28 }).toString('utf8');
const gitOk = (args: string[]) => {
  try {
    execFileSync('git', args, { env: GIT_ENV, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CI = 'build:\n  stage: build\n  script: [echo build]\ntest:\n  stage: test\n  script: [echo test]\n';

/** A small seeded generator (mulberry32), so a long run can be repeated. */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Scenario = 'push' | 'commits' | 'merges' | 'pipeline' | 'artifacts';
const SCENARIOS: Scenario[] = (process.env.CRASH_ONLY?.split(',') as Scenario[] | undefined) ?? ['push', 'commits', 'merges', 'pipeline', 'artifacts'];

describe('kill -9 of the server during writes', { skip: process.env.DATABASE_URL ? false : 'needs DATABASE_URL' }, () => {
  let testDb: TestDatabase;
  let dataDir: string;
  let tmpDir: string;
  let server: { url: string; child: ChildProcess };
  const rand = random(SEED);
  const figures = { kills: 0, attempted: 0, acknowledged: 0, lost: 0, leftovers: 0, restartMs: 0 };
  const started = Date.now();

  const start = async () => {
    const t = Date.now();
    server = await startServe({ databaseUrl: testDb.databaseUrl!, dataDir, rootToken: TOKEN, env: { TMPDIR: tmpDir, CAIRN_RUNNER_POLL_TIMEOUT: '1' } });
    if (figures.kills > 0) figures.restartMs = Math.max(figures.restartMs, Date.now() - t);
  };
  const kill = async () => {
    const child = server.child;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    figures.kills++;
  };
  const api = async (method: string, p: string, body?: unknown, headers: Record<string, string> = { 'private-token': TOKEN }) => {
    const res = await fetch(`${server.url}/api/v4${p}`, {
      method,
      headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    let parsed: any = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed };
  };
  const db = () => testDb.database.db;
  const repoDir = async (projectId: number) => {
    const p = await db().selectFrom('projects').select(['repository_storage', 'disk_path']).where('id', '=', projectId).executeTakeFirstOrThrow();
    return path.join(dataDir, 'repositories', p.disk_path);
  };
  const remote = (p: string) => `${server.url.replace('http://', `http://root:${TOKEN}@`)}/root/${p}.git`;
  const newProject = async (name: string) => {
    const res = await api('POST', '/projects', { name, path: name, initialize_with_readme: true });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    return res.body as { id: number; path: string; runners_token?: string };
  };

  /** Leftover candidates: what the sweep removes once old (services/leftovers.ts). */
  function leftovers(): string[] {
    const found: string[] = [];
    const walk = (dir: string, depth: number) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory() && e.name.endsWith('.git')) {
          for (const o of fs.readdirSync(path.join(p, 'objects'))) if (/^(tmp_objdir-)?incoming-/.test(o)) found.push(path.join(p, 'objects', o));
          for (const f of fs.readdirSync(p)) if (f.endsWith('.lock')) found.push(path.join(p, f));
          const refs = (d: string) => {
            for (const r of fs.readdirSync(d, { withFileTypes: true })) {
              if (r.isDirectory()) refs(path.join(d, r.name));
              else if (r.name.endsWith('.lock')) found.push(path.join(d, r.name));
            }
          };
          refs(path.join(p, 'refs'));
          for (const f of fs.readdirSync(path.join(p, 'objects', 'pack'))) {
            const fp = path.join(p, 'objects', 'pack', f);
            if (f.startsWith('tmp_') || f.startsWith('.tmp-') || (f.endsWith('.keep') && fs.readFileSync(fp, 'latin1').startsWith('receive-pack '))) found.push(fp);
          }
        } else if (e.isDirectory() && depth < 6) walk(p, depth + 1);
      }
    };
    walk(path.join(dataDir, 'repositories'), 0);
    for (const e of fs.readdirSync(tmpDir)) if (e.startsWith('cairn-index-')) found.push(path.join(tmpDir, e));
    const store = path.join(dataDir, 'artifacts');
    const files = (d: string) => {
      if (!fs.existsSync(d)) return;
      for (const e of fs.readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) files(path.join(d, e.name));
        else if (e.name.endsWith('.tmp')) found.push(path.join(d, e.name));
      }
    };
    files(store);
    return found;
  }

  /** After a restart: leftovers aged past the sweep's age, the start-up sweep run, all gone. */
  async function sweptAfterRestart(found: string[]) {
    const old = new Date(Date.now() - 2 * 3600_000);
    for (const f of found) fs.utimesSync(f, old, old);
    const since = new Date();
    await start();
    for (let i = 0; i < 200; i++) {
      const done = await db().selectFrom('background_jobs').select('id').where('kind', '=', 'housekeeping.leftovers').where('state', '=', 'done').where('finished_at', '>=', since).executeTakeFirst();
      if (done) break;
      await sleep(50);
    }
    const remaining = found.filter((f) => fs.existsSync(f));
    assert.deepEqual(remaining, [], 'leftovers of the kill removed by the sweep at start');
    figures.leftovers += found.length;
  }

  /** The journals and due background work of the killed process finish after the restart. */
  async function queueSettles() {
    for (let i = 0; i < 400; i++) {
      const open = await db()
        .selectFrom('background_jobs')
        .select(['id', 'kind', 'state'])
        .where('recurring', '=', false)
        .where((eb) => eb.or([eb('state', '=', 'running'), eb.and([eb('state', '=', 'pending'), eb('run_at', '<=', new Date())])]))
        .execute();
      if (!open.length) return;
      await sleep(50);
    }
    assert.fail('background work still open after the restart');
  }

  /** The database agrees with the repository of `projectId`, and the repository is sound. */
  async function consistent(projectId: number) {
    const dir = await repoDir(projectId);
    git(['--git-dir', dir, 'fsck', '--full', '--no-dangling', '--no-progress']);
    const project = await db().selectFrom('projects').select(['default_branch', 'empty_repo']).where('id', '=', projectId).executeTakeFirstOrThrow();
    const branches = git(['--git-dir', dir, 'for-each-ref', '--format=%(refname:short)', 'refs/heads']).split('\n').filter(Boolean);
    assert.equal(project.empty_repo, branches.length === 0);
    if (branches.length) assert.ok(branches.includes(project.default_branch!), `default branch ${project.default_branch} exists`);
    const mrs = await db().selectFrom('merge_requests').selectAll().where('target_project_id', '=', projectId).execute();
    for (const mr of mrs) {
      assert.notEqual(mr.state_id, 4, `merge request !${mr.iid} is not left locked`);
      const target = git(['--git-dir', dir, 'rev-parse', `refs/heads/${mr.target_branch}`]).trim();
      if (mr.state_id === 3) {
        assert.ok(mr.merge_commit_sha, `merged !${mr.iid} has its merge commit`);
        assert.ok(gitOk(['--git-dir', dir, 'merge-base', '--is-ancestor', mr.merge_commit_sha!, target]), `!${mr.iid}'s merge commit is in ${mr.target_branch}`);
      } else if (mr.state_id === 1 && mr.head_sha) {
        assert.ok(!gitOk(['--git-dir', dir, 'merge-base', '--is-ancestor', mr.head_sha, target]), `open !${mr.iid} is not in its target already`);
      }
    }
    for (const p of await db().selectFrom('ci_pipelines').select(['id', 'sha']).where('project_id', '=', projectId).execute()) {
      assert.ok(gitOk(['--git-dir', dir, 'cat-file', '-e', `${p.sha}^{commit}`]), `pipeline ${p.id}'s commit exists`);
    }
  }

  before(async () => {
    testDb = await openTestDatabase();
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-crash-'));
    tmpDir = path.join(dataDir, 'tmp');
    fs.mkdirSync(tmpDir);
    await start();
  });
  after(async () => {
    if (server?.child.exitCode === null) {
      server.child.kill('SIGTERM');
      await new Promise((r) => server.child.once('exit', r));
    }
    await testDb?.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  // -------------------------------------------------------------------------------------------
  // Scenarios: each does its writes, has the server killed at a point `at` (0..1) of the way,
  // restarts it and checks what it acknowledged. Returns [attempted, acknowledged, lost].

  let pushSeq = 0;
  /** A push of `commits` commits (made with git fast-import) killed while receive-pack runs. */
  async function pushScenario(at: number): Promise<[number, number, number]> {
    const n = ++pushSeq;
    const project = await newProject(`pushed-${n}`);
    const work = path.join(dataDir, `push-${n}`);
    git(['init', '-q', '--bare', work]);
    const commits = SOAK ? 20_000 : 5_000;
    let stream = '';
    for (let i = 1; i <= commits; i++) {
      const data = `file ${i} ${'x'.repeat(200)}\n`;
      const msg = `c${i}`;
      stream += `commit refs/heads/big\nmark :${i}\ncommitter A <a@example.com> ${1700000000 + i} +0000\ndata ${msg.length}\n${msg}\n${i > 1 ? `from :${i - 1}\n` : ''}M 100644 inline f${i % 500}.txt\ndata ${Buffer.byteLength(data)}\n${data}\n`;
    }
    git(['--git-dir', work, 'fast-import', '--quiet'], stream);
    const tip = git(['--git-dir', work, 'rev-parse', 'refs/heads/big']).trim();
    const dir = await repoDir(project.id);
    const push = execFile('git', ['--git-dir', work, 'push', '-q', remote(project.path), 'big'], { env: GIT_ENV }).then(() => true, () => false);
    // Killed once receive-pack has its quarantine (or at a point of the push in the long form).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const q = fs.readdirSync(path.join(dir, 'objects')).some((o) => /^(tmp_objdir-)?incoming-/.test(o));
      if (q || Date.now() > deadline) break;
      await sleep(5);
    }
    await sleep(at * 300);
    await kill();
    const pushed = await push;
    await sweptAfterRestart(leftovers());
    await queueSettles();
    const branch = git(['--git-dir', dir, 'for-each-ref', '--format=%(objectname)', 'refs/heads/big']).trim();
    let lost = 0;
    if (pushed && branch !== tip) lost++;
    assert.ok(branch === '' || branch === tip, 'the branch is where it was or at the pushed tip');
    await consistent(project.id);
    // Pushed again: it lands whole.
    await execFile('git', ['--git-dir', work, 'push', '-q', remote(project.path), 'big'], { env: GIT_ENV });
    assert.equal(git(['--git-dir', dir, 'rev-parse', 'refs/heads/big']).trim(), tip);
    await consistent(project.id);
    return [2, 1 + (pushed ? 1 : 0), lost];
  }

  let commitSeq = 0;
  /** Four writers committing through the API (two on one branch), killed at a random moment. */
  async function commitsScenario(at: number): Promise<[number, number, number]> {
    const n = ++commitSeq;
    const project = await newProject(`commits-${n}`);
    const ci = await api('POST', `/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: 'ci', actions: [{ action: 'create', file_path: '.gitlab-ci.yml', content: CI }] });
    assert.equal(ci.status, 201);
    const acked: { branch: string; sha: string }[] = [];
    let attempted = 0;
    let stop = false;
    const writer = async (w: number, branch: string) => {
      for (let k = 0; !stop; k++) {
        attempted++;
        try {
          const res = await api('POST', `/projects/${project.id}/repository/commits`, {
            branch, start_branch: 'main', commit_message: `w${w} ${k}`, actions: [{ action: 'create', file_path: `w${w}/${k}.txt`, content: `${w}:${k}\n` }],
          });
          if (res.status === 201) acked.push({ branch, sha: res.body.id });
          else assert.ok([400, 409].includes(res.status), `a refused commit is a clean 400/409, not ${res.status}`);
        } catch {
          return; // the server is gone
        }
      }
    };
    const writers = [writer(0, 'main'), writer(1, 'main'), writer(2, 'side-a'), writer(3, 'side-b')];
    await sleep(300 + at * 1500);
    await kill();
    stop = true;
    await Promise.all(writers);
    await sweptAfterRestart(leftovers());
    await queueSettles();
    const dir = await repoDir(project.id);
    let lost = 0;
    for (const c of acked) {
      if (!gitOk(['--git-dir', dir, 'merge-base', '--is-ancestor', c.sha, `refs/heads/${c.branch}`])) lost++;
    }
    // Every commit on every branch has its push pipeline: post-receive work of a commit whose
    // ref moved before the kill was replayed from its journal.
    for (const branch of ['main', 'side-a', 'side-b']) {
      const tip = git(['--git-dir', dir, 'for-each-ref', '--format=%(objectname)', `refs/heads/${branch}`]).trim();
      if (!tip) continue;
      const pipelines = await db().selectFrom('ci_pipelines').select('id').where('project_id', '=', project.id).where('sha', '=', tip).where('ref', '=', branch).execute();
      assert.equal(pipelines.length, 1, `${branch}'s tip has exactly one pipeline`);
    }
    await consistent(project.id);
    assert.equal((await api('POST', `/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: 'after', actions: [{ action: 'create', file_path: 'after.txt', content: 'x' }] })).status, 201);
    return [attempted, acked.length, lost];
  }

  let mergeSeq = 0;
  /** Merge requests merged one after another (two at a time), killed part way. */
  async function mergesScenario(at: number): Promise<[number, number, number]> {
    const n = ++mergeSeq;
    const project = await newProject(`merges-${n}`);
    const count = 12;
    const iids: number[] = [];
    for (let i = 0; i < count; i++) {
      const c = await api('POST', `/projects/${project.id}/repository/commits`, { branch: `b${i}`, start_branch: 'main', commit_message: `b${i}`, actions: [{ action: 'create', file_path: `b${i}.txt`, content: `${i}\n` }] });
      assert.equal(c.status, 201);
      const mr = await api('POST', `/projects/${project.id}/merge_requests`, { source_branch: `b${i}`, target_branch: 'main', title: `b${i}` });
      assert.equal(mr.status, 201);
      iids.push(mr.body.iid);
    }
    const acked = new Set<number>();
    let attempted = 0;
    const queue = [...iids];
    const merger = async () => {
      for (let iid = queue.shift(); iid !== undefined; iid = queue.shift()) {
        attempted++;
        try {
          const res = await api('PUT', `/projects/${project.id}/merge_requests/${iid}/merge`, {});
          if (res.status === 200) acked.add(iid);
        } catch {
          return;
        }
      }
    };
    const mergers = [merger(), merger()];
    await sleep(100 + at * 600);
    await kill();
    await Promise.all(mergers);
    await sweptAfterRestart(leftovers());
    await queueSettles();
    let lost = 0;
    for (const iid of acked) {
      const row = await db().selectFrom('merge_requests').select('state_id').where('target_project_id', '=', project.id).where('iid', '=', iid).executeTakeFirstOrThrow();
      if (row.state_id !== 3) lost++;
    }
    await consistent(project.id);
    // The rest merge now.
    for (const iid of iids) {
      const row = await db().selectFrom('merge_requests').select('state_id').where('target_project_id', '=', project.id).where('iid', '=', iid).executeTakeFirstOrThrow();
      if (row.state_id === 1) assert.equal((await api('PUT', `/projects/${project.id}/merge_requests/${iid}/merge`, {})).status, 200);
    }
    await consistent(project.id);
    return [attempted, acked.size, lost];
  }

  /** A runner in this test process: takes jobs, appends a log, reports success; survives restarts. */
  async function runnerFor(project: { id: number }) {
    const token = (await api('GET', `/projects/${project.id}`)).body.runners_token as string;
    const reg = await api('POST', '/runners', { token, description: 'crash test runner' }, {});
    assert.equal(reg.status, 201, JSON.stringify(reg.body));
    return reg.body.token as string;
  }
  const retry = async <T>(fn: () => Promise<T>, until: number): Promise<T> => {
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (Date.now() > until) throw e;
        await sleep(100);
      }
    }
  };

  let pipelineSeq = 0;
  let stranded = 0;
  /** A pipeline of three stages run by a runner that keeps going while the server is killed. */
  async function pipelineScenario(at: number): Promise<[number, number, number]> {
    const n = ++pipelineSeq;
    const project = await newProject(`pipeline-${n}`);
    const runnerToken = await runnerFor(project);
    const yml = Array.from({ length: 6 }, (_, i) => `job${i}:\n  stage: ${['build', 'test', 'deploy'][i % 3]}\n  script: [echo ${i}]\n`).join('');
    const c = await api('POST', `/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: 'ci', actions: [{ action: 'create', file_path: '.gitlab-ci.yml', content: yml }] });
    assert.equal(c.status, 201);
    const taken = new Map<number, number>();
    let finished = 0;
    let stop = false;
    const until = Date.now() + 60_000;
    const runner = (async () => {
      while (!stop && Date.now() < until) {
        let job: { id: number; token: string } | null = null;
        try {
          const res = await fetch(`${server.url}/api/v4/jobs/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: runnerToken }) });
          if (res.status === 201) job = (await res.json()) as { id: number; token: string };
          else await res.arrayBuffer();
        } catch {
          await sleep(100);
          continue;
        }
        if (!job) continue;
        taken.set(job.id, (taken.get(job.id) ?? 0) + 1);
        await sleep(30);
        await retry(async () => {
          const res = await fetch(`${server.url}/api/v4/jobs/${job!.id}/trace`, { method: 'PATCH', headers: { 'job-token': job!.token, 'content-range': '0-5' }, body: 'hello\n' });
          await res.arrayBuffer();
          if (res.status >= 500) throw new Error(String(res.status));
        }, until);
        await retry(async () => {
          const res = await fetch(`${server.url}/api/v4/jobs/${job!.id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: job!.token, state: 'success', exit_code: 0 }) });
          await res.arrayBuffer();
          if (res.status >= 500) throw new Error(String(res.status));
        }, until);
        finished++;
      }
    })();
    await sleep(200 + at * 800);
    await kill();
    await sweptAfterRestart(leftovers());
    await queueSettles();
    let pipeline: { id: number; status: string } | undefined;
    for (let i = 0; i < 150; i++) {
      pipeline = await db().selectFrom('ci_pipelines').select(['id', 'status']).where('project_id', '=', project.id).orderBy('id', 'desc').executeTakeFirst();
      if (pipeline?.status === 'success') break;
      await sleep(100);
    }
    stop = true;
    await runner;
    const jobs = await db().selectFrom('ci_builds').select(['id', 'status', 'started_at', 'updated_at']).where('pipeline_id', '=', pipeline!.id).execute();
    assert.equal(jobs.length, 6);
    // A job whose assignment was committed but whose answer to the runner died with the server
    // is running on a runner that never heard of it: the stuck-job sweep fails it after an hour
    // (as GitLab's does). Everything else finished, each job picked once.
    const unreceived = jobs.filter((j) => j.status === 'running' && !taken.has(j.id));
    for (const j of unreceived) assert.equal(new Date(j.updated_at).getTime(), new Date(j.started_at!).getTime(), `job ${j.id} was never updated by a runner`);
    assert.ok(unreceived.length <= 1);
    stranded += unreceived.length;
    if (!unreceived.length) assert.equal(pipeline?.status, 'success', 'the pipeline finishes after the restart');
    for (const j of jobs) {
      if (unreceived.includes(j)) continue;
      if (j.status === 'created') assert.ok(unreceived.length, 'a job waits only behind an unreceived one');
      else {
        assert.equal(j.status, 'success');
        assert.equal(taken.get(j.id), 1, `job ${j.id} was picked once`);
      }
    }
    await consistent(project.id);
    return [jobs.length, finished, 0];
  }

  let artifactSeq = 0;
  /** An artifact upload of 24 MB cut off by the kill; the runner's retry then stores it whole. */
  async function artifactsScenario(at: number): Promise<[number, number, number]> {
    const n = ++artifactSeq;
    const project = await newProject(`artifacts-${n}`);
    const runnerToken = await runnerFor(project);
    const c = await api('POST', `/projects/${project.id}/repository/commits`, { branch: 'main', commit_message: 'ci', actions: [{ action: 'create', file_path: '.gitlab-ci.yml', content: 'pack:\n  script: [echo]\n  artifacts:\n    paths: [out]\n' }] });
    assert.equal(c.status, 201);
    let job: { id: number; token: string } | null = null;
    for (let i = 0; i < 100 && !job; i++) {
      const res = await fetch(`${server.url}/api/v4/jobs/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: runnerToken }) });
      if (res.status === 201) job = (await res.json()) as { id: number; token: string };
      else await res.arrayBuffer();
    }
    assert.ok(job, 'the runner took the job');
    const payload = crypto.randomBytes(24 * 1024 * 1024);
    const digest = crypto.createHash('sha256').update(payload).digest('hex');
    const boundary = `----crash${n}`;
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="artifacts.zip"\r\nContent-Type: application/octet-stream\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    const upload = (slowly: boolean) =>
      new Promise<number>((resolve) => {
        const url = new URL(`${server.url}/api/v4/jobs/${job!.id}/artifacts?artifact_format=zip&artifact_type=archive`);
        const req = http.request(url, { method: 'POST', headers: { 'job-token': job!.token, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': head.length + payload.length + tail.length } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', () => resolve(0));
        req.write(head);
        let off = 0;
        const more = () => {
          while (off < payload.length) {
            const chunk = payload.subarray(off, off + 256 * 1024);
            off += chunk.length;
            if (!req.write(chunk)) return void req.once('drain', () => (slowly ? setTimeout(more, 5) : more()));
            if (slowly) return void setTimeout(more, 5);
          }
          req.end(tail);
        };
        more();
      });
    const first = upload(true);
    await sleep(150 + at * 300);
    // On a loaded machine the upload may not have reached the store yet: the kill is meant to land mid-object.
    for (let i = 0; i < 200 && !leftovers().some((f) => f.endsWith('.tmp')); i++) await sleep(50);
    await kill();
    assert.equal(await first, 0, 'the cut-off upload got no answer');
    const found = leftovers();
    assert.ok(found.some((f) => f.endsWith('.tmp')), 'the cut-off upload left a half-written object');
    await sweptAfterRestart(found);
    await queueSettles();
    const rows = await db().selectFrom('ci_job_artifacts').select(['id']).where('job_id', '=', job!.id).execute();
    assert.equal(rows.length, 0, 'no artifact row for the cut-off upload');
    // The runner uploads again: stored whole, served byte for byte.
    assert.equal(await upload(false), 201);
    const stored = await db().selectFrom('ci_job_artifacts').select(['file_sha256', 'size']).where('job_id', '=', job!.id).where('file_type', '=', 'archive').executeTakeFirstOrThrow();
    assert.equal(stored.file_sha256, digest);
    assert.equal(Number(stored.size), payload.length);
    const res = await fetch(`${server.url}/api/v4/jobs/${job!.id}/artifacts`, { headers: { 'job-token': job!.token } });
    assert.equal(res.status, 200);
    assert.equal(crypto.createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex'), digest);
    await consistent(project.id);
    return [2, 1, 0];
  }

  const run: Record<Scenario, (at: number) => Promise<[number, number, number]>> = {
    push: pushScenario, commits: commitsScenario, merges: mergesScenario, pipeline: pipelineScenario, artifacts: artifactsScenario,
  };

  it(`survives ${KILLS} kills -9 (${SOAK ? `seeded ${SEED}` : 'one per scenario'}): fsck clean, database and repositories agree, nothing acknowledged lost, leftovers swept`, { timeout: SOAK ? 3600_000 : 300_000 }, async () => {
    const plan: Scenario[] = SOAK ? Array.from({ length: KILLS }, (_, i) => (i < SCENARIOS.length ? SCENARIOS[i] : SCENARIOS[Math.floor(rand() * SCENARIOS.length)])) : SCENARIOS;
    const per: Record<string, number> = {};
    for (const scenario of plan) {
      const [attempted, acked, lost] = await run[scenario](rand());
      figures.attempted += attempted;
      figures.acknowledged += acked;
      figures.lost += lost;
      per[scenario] = (per[scenario] ?? 0) + 1;
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(
      `# crash: ${figures.kills} kills (${Object.entries(per).map(([k, v]) => `${k} ${v}`).join(', ')}), ${figures.attempted} operations attempted, ` +
        `${figures.acknowledged} acknowledged, ${figures.lost} lost, ${figures.leftovers} leftovers swept, ${stranded} jobs left to the stuck-job sweep, slowest restart ${figures.restartMs} ms, ${seconds} s`,
    );
    assert.equal(figures.lost, 0, 'no acknowledged operation was lost');
  });
});
