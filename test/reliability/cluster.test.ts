// Three `cairn serve` nodes behind a real HAProxy, on one PostgreSQL, one S3 object store
// (s3rver) and one repository storage every node mounts (docs/deployment.md's layout). A mixed
// workload runs through the load balancer (git pushes and clones, API writes and reads, CI
// pipelines run by the built-in runners of two nodes) while one node with a runner is killed
// with SIGKILL and started again. Then: no acknowledged write is lost, every job ran once and
// finished (the jobs the dead node was running fail as runner system failures and their
// `retry:` runs them again), only requests in flight on the killed node failed, `git fsck` is
// clean. `npm test` runs a short form; `npm run test:soak` a long one with a kill per node.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setting } from '../../src/config.js';
import { openTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startS3 } from '../helpers/s3.js';
import { freePort, startServe } from '../helpers/serve.js';

const haproxy = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => fs.existsSync(p));
const SOAK = setting<boolean>('CAIRN_SOAK');
/**
 * How long the workload runs, and the stops it sees: node (index), when (fraction of the run),
 * how. SIGTERM is a rolling restart, which no client may notice; SIGKILL a crash.
 */
const RUN_MS = SOAK ? 150_000 : 30_000;
const KILLS: { node: number; at: number; signal: 'SIGKILL' | 'SIGTERM' }[] = SOAK
  ? [{ node: 1, at: 0.05, signal: 'SIGKILL' }, { node: 2, at: 0.2, signal: 'SIGTERM' }, { node: 0, at: 0.4, signal: 'SIGKILL' }, { node: 1, at: 0.6, signal: 'SIGTERM' }, { node: 2, at: 0.75, signal: 'SIGKILL' }]
  : [{ node: 1, at: 0.15, signal: 'SIGKILL' }, { node: 2, at: 0.4, signal: 'SIGTERM' }];
const TOKEN = 'cluster-root-token-1234567890';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A command's exit code and output (never throws). */
function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { ...process.env, GIT_TERMINAL_PROMPT: '0', ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    child.on('error', (err) => resolve({ code: -1, out: String(err) }));
    child.on('close', (code) => resolve({ code, out }));
  });
}

/** One client request's outcome, with when it started and ended. */
interface Outcome {
  kind: string;
  ok: boolean;
  start: number;
  end: number;
  detail?: string;
}

describe('three nodes behind HAProxy, restarted and killed mid-way', { skip: !process.env.DATABASE_URL ? 'needs DATABASE_URL (PostgreSQL)' : !haproxy ? 'needs haproxy' : false, timeout: RUN_MS + 300_000 }, () => {
  let testDb: TestDatabase;
  let s3: Awaited<ReturnType<typeof startS3>>;
  let root: string;
  let storage: string;
  let lb: { port: number; url: string; child: ChildProcess };
  const nodes: { port: number; dataDir: string; runner: boolean; child: ChildProcess | null }[] = [];
  let nodeEnv: NodeJS.ProcessEnv;

  const startNode = async (i: number) => {
    const n = nodes[i];
    const started = await startServe({ databaseUrl: testDb.databaseUrl!, dataDir: n.dataDir, rootToken: TOKEN, port: n.port, env: { ...nodeEnv, CAIRN_BUILTIN_RUNNER: n.runner ? '1' : '0' } });
    n.child = started.child;
  };

  const api = (method: string, p: string, body?: unknown) =>
    fetch(`${lb.url}/api/v4${p}`, {
      method,
      headers: { 'private-token': TOKEN, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });

  before(async () => {
    testDb = await openTestDatabase();
    s3 = await startS3();
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'cairn-cluster-'));
    storage = path.join(root, 'shared', 'repositories');
    const lbPort = await freePort();
    const lbUrl = `http://127.0.0.1:${lbPort}`;
    // What the nodes share: database, object store, repository storage, secret key, external URL.
    nodeEnv = {
      CAIRN_STORAGES: `default:${storage}`,
      CAIRN_OBJECT_STORE_URL: s3.url,
      CAIRN_SECRET_KEY_BASE: crypto.randomBytes(32).toString('hex'),
      CAIRN_EXTERNAL_URL: lbUrl,
      CAIRN_RUNNER_POLL_TIMEOUT: '2',
      CAIRN_BUILTIN_RUNNER_CONCURRENT: '2',
      CAIRN_SHUTDOWN_TIMEOUT: '5',
      // Longer than HAProxy takes to mark a stopping node down (check inter 500 fall 2): a restart loses nothing.
      CAIRN_SHUTDOWN_BLACKOUT: '3',
    };
    for (let i = 0; i < 3; i++) nodes.push({ port: await freePort(), dataDir: path.join(root, `node${i + 1}`), runner: i < 2, child: null });
    // Started one after the other: the first migrates and makes root, the others find it done.
    for (let i = 0; i < 3; i++) await startNode(i);

    const cfg = path.join(root, 'haproxy.cfg');
    fs.writeFileSync(cfg, [
      'global',
      '  maxconn 2000',
      'defaults',
      '  mode http',
      '  option forwardfor',
      '  option redispatch',
      '  retries 3',
      // A stopping node answers 503 to requests on kept-alive connections without running them.
      '  retry-on conn-failure 503',
      '  timeout connect 1s',
      // Runner long polls (CAIRN_RUNNER_POLL_TIMEOUT) and big pushes stay under these.
      '  timeout client 120s',
      '  timeout server 120s',
      // A loaded node may take a moment to answer its check: not a reason to take it out.
      '  timeout check 3s',
      'frontend cairn',
      `  bind 127.0.0.1:${lbPort}`,
      '  default_backend nodes',
      'backend nodes',
      '  balance roundrobin',
      '  option httpchk GET /-/readiness',
      '  http-check expect status 200',
      ...nodes.map((n, i) => `  server node${i + 1} 127.0.0.1:${n.port} check inter 500 fall 2 rise 2`),
      '',
    ].join('\n'));
    const check = await run(haproxy!, ['-c', '-f', cfg]);
    assert.equal(check.code, 0, check.out);
    const child = spawn(haproxy!, ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'inherit'] });
    lb = { port: lbPort, url: lbUrl, child };
    for (let i = 0; i < 100; i++) {
      try {
        if ((await fetch(`${lbUrl}/-/readiness`)).ok) break;
      } catch {}
      await sleep(100);
    }
  });

  after(async () => {
    const children = [lb?.child, ...nodes.map((n) => n.child)].filter((c): c is ChildProcess => !!c && c.exitCode === null && c.signalCode === null);
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r)))));
    await testDb?.drop();
    await s3?.close();
    if (root) fs.rmSync(root, { recursive: true, force: true });
  });

  it('keeps every acknowledged write, runs each job once, fails only requests in flight on the killed node', async (t) => {
    const remote = (p: string) => `http://root:${TOKEN}@127.0.0.1:${lb.port}/root/${p}.git`;
    // A project whose pushes run pipelines, and one of plain data that clones read.
    const yml = [
      'default:',
      '  retry: { max: 2, when: runner_system_failure }',
      'stages: [build, test]',
      'build:',
      '  stage: build',
      '  script: [echo "build ran $CI_JOB_ID"]',
      'test:',
      '  stage: test',
      '  script: [sleep 2, echo "test ran $CI_JOB_ID"]',
      '',
    ].join('\n');
    const ci = (await (await api('POST', '/projects', { name: 'cluster-ci', visibility: 'private' })).json()) as { id: number };
    const data = (await (await api('POST', '/projects', { name: 'cluster-data', visibility: 'private' })).json()) as { id: number };
    assert.ok(ci.id && data.id);
    const seed = await api('POST', `/projects/${data.id}/repository/commits`, {
      branch: 'main', commit_message: 'seed', actions: Array.from({ length: 50 }, (_, i) => ({ action: 'create', file_path: `dir${i % 5}/file${i}.txt`, content: `line ${i}\n`.repeat(200) })),
    });
    assert.equal(seed.status, 201);

    const outcomes: Outcome[] = [];
    const record = async (kind: string, fn: () => Promise<{ ok: boolean; detail?: string }>) => {
      const start = Date.now();
      let r: { ok: boolean; detail?: string };
      try {
        r = await fn();
      } catch (err) {
        r = { ok: false, detail: `${err} ${(err as { cause?: unknown }).cause ?? ''}` };
      }
      const o = { kind, ...r, start, end: Date.now() };
      outcomes.push(o);
      return o;
    };
    const issues: number[] = [];
    const pushed = new Map<string, string>(); // branch → sha, for pushes git said succeeded
    const started = Date.now();
    const deadline = started + RUN_MS;
    /** Each stop: signal sent (at), process gone (gone), serving again (back). */
    const kills: { node: number; signal: string; at: number; gone: number; back: number }[] = [];

    const work = path.join(root, 'work');
    const pushers = [ci.id, data.id].map(async (id, w) => {
      const dir = path.join(work, `pusher${w}`);
      fs.mkdirSync(dir, { recursive: true });
      await run('git', ['init', '-q', '-b', 'main', dir]);
      const g = (...args: string[]) => run('git', ['-C', dir, '-c', 'user.name=Cluster', '-c', 'user.email=cluster@example.com', ...args]);
      fs.writeFileSync(path.join(dir, '.gitlab-ci.yml'), w === 0 ? yml : 'not-ci:\n  script: [true]\n  rules: [{ when: never }]\n');
      for (let i = 0; Date.now() < deadline; i++) {
        fs.writeFileSync(path.join(dir, `push-${i}.txt`), `push ${i} of ${w}\n${crypto.randomBytes(2048).toString('hex')}\n`);
        await g('add', '-A');
        await g('commit', '-q', '-m', `push ${i}`);
        const sha = (await g('rev-parse', 'HEAD')).out.trim();
        const branch = `w${w}-${i}`;
        const o = await record('push', async () => {
          const r = await g('push', '-q', remote(w === 0 ? 'cluster-ci' : 'cluster-data'), `HEAD:refs/heads/${branch}`);
          return { ok: r.code === 0, detail: r.out };
        });
        if (o.ok) pushed.set(`${id}:${branch}`, sha);
        await sleep(w === 0 ? 700 : 200);
      }
    });
    const cloner = (async () => {
      for (let i = 0; Date.now() < deadline; i++) {
        const dir = path.join(work, `clone${i}`);
        await record('clone', async () => {
          const r = await run('git', ['clone', '-q', remote('cluster-data'), dir]);
          const ok = r.code === 0 && fs.existsSync(path.join(dir, 'dir0', 'file0.txt'));
          fs.rmSync(dir, { recursive: true, force: true });
          return { ok, detail: r.out };
        });
      }
    })();
    const writers = [0, 1].map(async (w) => {
      for (let i = 0; Date.now() < deadline; i++) {
        await record('api write', async () => {
          const res = await api('POST', `/projects/${data.id}/issues`, { title: `issue ${w}-${i}` });
          const body = (await res.json()) as { iid: number };
          if (res.status === 201) issues.push(body.iid);
          return { ok: res.status === 201, detail: `${res.status}` };
        });
      }
    });
    const readers = [0, 1].map(async (w) => {
      const paths = [`/projects/${data.id}`, `/projects/${data.id}/issues?per_page=20`, `/projects?per_page=20`, `/projects/${ci.id}/pipelines`, `/projects/${data.id}/repository/tree?path=dir${w}`];
      for (let i = 0; Date.now() < deadline; i++) {
        await record('api read', async () => {
          const res = await api('GET', paths[i % paths.length]);
          await res.arrayBuffer();
          return { ok: res.status === 200, detail: `${res.status}` };
        });
      }
    });
    const runningJobOn = async (node: number, ms: number) => {
      const { id } = JSON.parse(fs.readFileSync(path.join(nodes[node].dataDir, 'runner', 'builtin.json'), 'utf8')) as { id: number };
      for (const until = Date.now() + ms; Date.now() < until; await sleep(50)) {
        const job = await testDb.database.db.selectFrom('ci_builds').select('id').where('runner_id', '=', id).where('status', '=', 'running').executeTakeFirst();
        if (job) return true;
      }
      return false;
    };
    // Each stop at its time, but never the last node serving: a stop waits until at most one
    // other node is down (restarting nodes take a while on a loaded machine).
    const down = new Set<number>();
    const killers = KILLS.map(async ({ node, at, signal }) => {
      await sleep(Math.max(0, started + RUN_MS * at - Date.now()));
      while (down.has(node) || down.size > 1) await sleep(100);
      if (Date.now() > deadline - 2000) return;
      down.add(node);
      // A node with a runner dies while it runs a job, when it has one within a few seconds.
      if (signal === 'SIGKILL' && nodes[node].runner) await runningJobOn(node, 5000);
      const child = nodes[node].child!;
      const stoppedAt = Date.now();
      child.kill(signal);
      await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once('exit', r)));
      const gone = Date.now();
      if (signal === 'SIGKILL') await sleep(1000);
      await startNode(node);
      kills.push({ node, signal, at: stoppedAt, gone, back: Date.now() });
      down.delete(node);
    });
    await Promise.all([...pushers, cloner, ...writers, ...readers, ...killers]);

    // Only requests in flight on a killed node may fail: each failure began before a SIGKILL and
    // ended after it. HAProxy sends new requests elsewhere once a node refuses connections, and
    // retries the 503 a stopping node answers on a kept-alive connection: a rolling restart
    // (SIGTERM) fails nothing.
    assert.ok(['SIGKILL', 'SIGTERM'].every((sig) => kills.some((k) => k.signal === sig)), `the run saw a crash and a restart: ${JSON.stringify(kills)}`);
    const failures = outcomes.filter((o) => !o.ok);
    const inFlight = (o: Outcome) => kills.some((k) => k.signal === 'SIGKILL' && o.start <= k.gone && o.end >= k.at);
    for (const f of failures) assert.ok(inFlight(f), `a ${f.kind} failed that was not in flight at a kill: ${JSON.stringify(f).slice(0, 600)}; kills: ${JSON.stringify(kills)}`);

    // Every acknowledged write is there.
    const listed = new Set<number>();
    for (let page = 1; ; page++) {
      const res = await api('GET', `/projects/${data.id}/issues?per_page=100&page=${page}`);
      const rows = (await res.json()) as { iid: number }[];
      for (const r of rows) listed.add(r.iid);
      if (!res.headers.get('x-next-page')) break;
    }
    for (const iid of issues) assert.ok(listed.has(iid), `issue ${iid} answered 201 and is gone`);
    for (const [key, sha] of pushed) {
      const [id, branch] = key.split(':');
      const res = await api('GET', `/projects/${id}/repository/branches/${branch}`);
      assert.equal(res.status, 200, `branch ${branch} of project ${id} was pushed and is gone`);
      assert.equal(((await res.json()) as { commit: { id: string } }).commit.id, sha);
    }

    // Every pipeline finishes (within the time its jobs take), each job run once.
    const pipelinesDone = Date.now() + 120_000;
    let pipelines: { id: number; status: string; ref: string }[] = [];
    for (;;) {
      pipelines = (await (await api('GET', `/projects/${ci.id}/pipelines?per_page=100`)).json()) as typeof pipelines;
      if (pipelines.every((p) => ['success', 'failed', 'canceled'].includes(p.status)) || Date.now() > pipelinesDone) break;
      await sleep(500);
    }
    const pushedToCi = [...pushed.keys()].filter((k) => k.startsWith(`${ci.id}:`)).length;
    assert.ok(pipelines.length >= pushedToCi, `${pipelines.length} pipelines for ${pushedToCi} pushes`);
    const jobs = await testDb.database.db
      .selectFrom('ci_builds')
      .select(['id', 'name', 'status', 'failure_reason', 'runner_id', 'pipeline_id'])
      .where('project_id', '=', ci.id)
      .where('type', '=', 'Ci::Build')
      .execute();
    let orphaned = 0;
    for (const job of jobs) {
      assert.ok(['success', 'failed'].includes(job.status), `job ${job.id} (${job.name}) ended ${job.status}`);
      if (job.status === 'failed') {
        assert.equal(job.failure_reason, 'runner_system_failure', `job ${job.id} failed for ${job.failure_reason}`);
        orphaned++;
      }
      if (job.status === 'success') {
        const trace = await (await api('GET', `/projects/${ci.id}/jobs/${job.id}/trace`)).text();
        const ran = trace.split('\n').filter((l) => l.includes(`${job.name} ran ${job.id}`)).length;
        assert.equal(ran, 1, `job ${job.id} ran ${ran} times:\n${trace}`);
      }
    }
    for (const p of pipelines) assert.equal(p.status, 'success', `pipeline ${p.id} (${p.ref}) ended ${p.status}`);

    // The repositories every node wrote to are whole.
    for (const id of [ci.id, data.id]) {
      const project = await testDb.database.db.selectFrom('projects').select(['disk_path']).where('id', '=', id).executeTakeFirstOrThrow();
      const fsck = await run('git', ['--git-dir', path.join(storage, project.disk_path), 'fsck', '--full', '--no-dangling', '--no-progress']);
      assert.equal(fsck.code, 0, fsck.out);
    }

    const count = (kind: string, ok?: boolean) => outcomes.filter((o) => o.kind === kind && (ok === undefined || o.ok === ok)).length;
    const summary = ['push', 'clone', 'api write', 'api read'].map((k) => `${k}: ${count(k)} (${count(k, false)} failed)`).join(', ');
    const recover = kills.map((k) => `${k.signal} ${((k.back - k.at) / 1000).toFixed(1)} s`).join(', ');
    t.diagnostic(`${(RUN_MS / 1000).toFixed(0)} s, ${kills.length} stops: ${summary}; ${jobs.length} jobs (${orphaned} failed with their stopped node, retried); from stop to serving again: ${recover}`);
  });
});
