// What a CI job can reach, measured from inside real jobs of the built-in runner (issue #25):
// Cairn's API and git with its job token through CI_API_V4_URL / CI_REPOSITORY_URL (the job
// listener, forwarded into the job's network namespace), and nothing else on this machine's
// loopback: not a TCP port the test opens (a database's stand-in), not a socket under /run, not
// /-/metrics; its X-Forwarded-For is not believed. A fork bomb stays inside its own job.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { JOB_CLIENT_ADDRESS, startJobListener } from '../../src/plugins/job_listener.js';
import { detectCgroups } from '../../src/runner/limits.js';
import { startBuiltinRunner, type BuiltinRunner } from '../../src/runner/runner.js';
import { registrationToken } from '../../src/ci/runners.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { startServeBuiltinRunner } from '../../src/runner/serve.js';
import { ipAuthState } from '../../src/services/auth_failures.js';
import { createTestContext, ROOT_TOKEN, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';
import { freePort } from '../helpers/serve.js';

const sandbox = detectSandbox();
const cgroups = detectCgroups();

// Runs inside the job (node is on the read-only root the job sees).
const PROBE = `
import fs from 'node:fs';
import net from 'node:net';
const out = (k, v) => console.log(k + '=' + v);
const api = process.env.CI_API_V4_URL, server = process.env.CI_SERVER_URL;
const job = await fetch(api + '/job', { headers: { 'JOB-TOKEN': process.env.CI_JOB_TOKEN } });
out('api', job.status);
out('job_id', (await job.json()).id);
out('metrics', (await fetch(server + '/-/metrics')).status);
out('metrics_xff', (await fetch(server + '/-/metrics', { headers: { 'X-Forwarded-For': '127.0.0.1' } })).status);
const connect = (o) => new Promise((resolve) => {
  const s = net.connect(o);
  s.setTimeout(2000, () => { s.destroy(); resolve('unreachable:timeout'); });
  s.once('connect', () => { s.destroy(); resolve('reachable'); });
  s.once('error', (e) => resolve('unreachable:' + e.code));
});
out('db', await connect({ host: '127.0.0.1', port: Number(process.env.DB_PORT) }));
out('socket', await connect({ path: process.env.HOST_SOCKET }));
out('run_postgresql', fs.existsSync('/run/postgresql') ? 'visible' : 'hidden');
// Failed git authentications claiming to come from elsewhere: all count against the job.
for (const n of [1, 2, 3]) {
  const r = await fetch(server + '/' + process.env.CI_PROJECT_PATH + '.git/info/refs?service=git-upload-pack', {
    headers: { authorization: 'Basic ' + Buffer.from('someone:wrong-password').toString('base64'), 'X-Forwarded-For': '203.0.113.' + n },
  });
  out('git_auth_' + n, r.status);
}
`;

const noSandbox = sandbox.available ? false : `bubblewrap cannot run here: ${sandbox.reason}`;

describe('what a CI job can reach', () => {
  let t: TestContext;
  let project: Project;
  let builtin: BuiltinRunner | null = null;
  let db: net.Server;
  let dbConnections = 0;
  let hostSocket: net.Server;
  let jobPort: number;
  const socketPath = `/run/cairn-reach-test-${process.pid}.sock`;
  const messages: string[] = [];

  before(async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // A short long poll: the runner's last one does not hold the server's close up.
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url, failedAuthMaxRetry: 2, runnerPollTimeout: 1 });
    await t.app.listen({ host: '127.0.0.1', port });
    jobPort = (await startJobListener(t.app)).port;
    db = net.createServer((s) => {
      dbConnections++;
      s.end('a database\n');
    });
    await new Promise<void>((r) => db.listen(0, '127.0.0.1', () => r()));
    hostSocket = net.createServer((s) => s.end('a host service\n'));
    fs.rmSync(socketPath, { force: true });
    await new Promise<void>((r) => hostSocket.listen(socketPath, () => r()));
    fs.chmodSync(socketPath, 0o777);
    project = await t.createProject();
    if (!sandbox.available) return;
    builtin = await startServeBuiltinRunner(t.app.cairn, {
      port,
      jobPort,
      env: { CAIRN_BUILTIN_RUNNER_CONCURRENT: '2', CAIRN_RUNNER_JOB_PIDS: '64' },
      log: (m) => (messages.push(m), process.env.TEST_LOG && console.log(m)),
    });
    assert.ok(builtin, messages.join('\n'));
  });

  after(async () => {
    await builtin?.stop();
    if (db) await new Promise((r) => db.close(r));
    if (hostSocket) await new Promise((r) => hostSocket.close(r));
    fs.rmSync(socketPath, { force: true });
    if (process.env.TEST_LOG) console.log(messages.join('\n'));
    await t?.close();
  });

  const trace = async (jobId: number) => (await t.get(`/api/v4/projects/${project.id}/jobs/${jobId}/trace`)).text;
  const finished = async (jobId: number, ms = 60_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const row = await t.db.selectFrom('ci_builds').select(['status', 'failure_reason']).where('id', '=', jobId).executeTakeFirstOrThrow();
      if (['success', 'failed', 'canceled'].includes(row.status)) return row;
      if (Date.now() > end) throw new Error(`job ${jobId} did not finish: ${row.status}\n${await trace(jobId)}\n${messages.join('\n')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  test('the job listener: requests come from 100::1 whatever X-Forwarded-For says, and never read metrics', async () => {
    const viaJobs = await fetch(`http://127.0.0.1:${jobPort}/-/metrics`, { headers: { 'X-Forwarded-For': '127.0.0.1', Forwarded: 'for=127.0.0.1' } });
    assert.equal(viaJobs.status, 404);
    const version = await fetch(`http://127.0.0.1:${jobPort}/api/v4/version`, { headers: { 'PRIVATE-TOKEN': ROOT_TOKEN } });
    assert.equal(version.status, 200, 'the whole API is there');
    const other = (await t.get(`/api/v4/projects/${(await t.createProject()).id}`)).body as { path_with_namespace: string };
    const gitUrl = `http://127.0.0.1:${jobPort}/${other.path_with_namespace}.git/info/refs?service=git-upload-pack`;
    const wrong = { authorization: `Basic ${Buffer.from('someone:wrong').toString('base64')}`, 'X-Forwarded-For': '198.51.100.7' };
    assert.equal((await fetch(gitUrl, { headers: wrong })).status, 401);
    assert.equal((await fetch(gitUrl, { headers: wrong })).status, 401);
    assert.equal((await ipAuthState(t.app.cairn, 'git_http', JOB_CLIENT_ADDRESS)).bannedFor > 0, true, 'both failures counted against 100::1');
    assert.equal((await ipAuthState(t.app.cairn, 'git_http', '198.51.100.7')).bannedFor, 0);
    // The jobs below start with the address clean.
    await t.db.deleteFrom('rate_limit_counters').where('key', 'like', `%:ip:${JOB_CLIENT_ADDRESS}`).execute();
    // The main listener is unchanged: loopback is a trusted proxy and may read metrics.
    assert.equal((await fetch(`http://127.0.0.1:${t.config.port}/-/metrics`)).status, 200);
  });

  test('Cairn with the job token, yes; the loopback, /run, metrics and a forged X-Forwarded-For, no', { skip: noSandbox }, async () => {
    await commitFiles(t, project, {
      'README.md': 'cloned inside the job\n',
      'probe.mjs': PROBE,
      '.gitlab-ci.yml': [
        'reach:',
        '  variables:',
        `    NODE: "${process.execPath}"`,
        `    DB_PORT: "${(db.address() as net.AddressInfo).port}"`,
        `    HOST_SOCKET: "${socketPath}"`,
        '  script:',
        '    - git clone -q "$CI_REPOSITORY_URL" clone && echo "clone=$(cat clone/README.md)"',
        '    - \'"$NODE" probe.mjs\'',
        '',
      ].join('\n'),
    });
    const job = (await jobsByName(t, (await latestPipeline(t, project.id)).id)).reach;
    const row = await finished(job.id);
    const log = await trace(job.id);
    if (process.env.TEST_LOG) console.log(log);
    assert.equal(row.status, 'success', log + messages.join('\n'));
    if (sandbox.pasta) assert.match(log, /Network: a namespace of its own/);
    assert.match(log, /^clone=cloned inside the job$/m, 'cloned through CI_REPOSITORY_URL');
    assert.match(log, /^api=200$/m, 'the API answers the job token');
    assert.match(log, new RegExp(`^job_id=${job.id}$`, 'm'));
    assert.match(log, /^db=unreachable/m);
    assert.equal(dbConnections, 0);
    assert.match(log, /^socket=unreachable/m);
    assert.match(log, /^run_postgresql=hidden$/m);
    assert.match(log, /^metrics=404$/m);
    assert.match(log, /^metrics_xff=404$/m, 'X-Forwarded-For: 127.0.0.1 is not believed');
    // The forged addresses were not believed: the failures counted against the job's address,
    // which the second one banned (403), and not against 203.0.113.x or the machine's loopback.
    assert.match(log, /^git_auth_1=401$/m);
    assert.match(log, /^git_auth_3=403$/m);
    assert.ok((await ipAuthState(t.app.cairn, 'git_http', JOB_CLIENT_ADDRESS)).bannedFor > 0);
    for (const ip of ['203.0.113.1', '203.0.113.3', '127.0.0.1']) assert.equal((await ipAuthState(t.app.cairn, 'git_http', ip)).bannedFor, 0, ip);
    // The main listener still believes its loopback proxy and lets loopback read metrics.
    const metrics = await fetch(`http://127.0.0.1:${t.config.port}/-/metrics`);
    assert.equal(metrics.status, 200);
  });

  test('a fork bomb ends with its job; the server answers and another job succeeds meanwhile', { skip: noSandbox || (cgroups ? false : 'no cgroup can be made here (the rlimit fallback limits the job user, all jobs together)') }, async () => {
    await commitFiles(t, project, {
      '.gitlab-ci.yml': [
        'bomb:',
        '  timeout: 4 seconds',
        '  script:',
        "    - 'b() { b | b & }; b'",
        '    - sleep 60',
        'calm:',
        '  script:',
        '    - sleep 1',
        '    - echo calm-ok',
        '',
      ].join('\n'),
    });
    const jobs = await jobsByName(t, (await latestPipeline(t, project.id)).id);
    const started = Date.now();
    // While the bomb goes off, the server answers.
    for (let i = 0; i < 5; i++) {
      const t0 = Date.now();
      const res = await t.get('/api/v4/version');
      assert.equal(res.status, 200);
      assert.ok(Date.now() - t0 < 2000, `the server took ${Date.now() - t0} ms`);
      await new Promise((r) => setTimeout(r, 300));
    }
    const calm = await finished(jobs.calm.id);
    assert.equal(calm.status, 'success', await trace(jobs.calm.id));
    assert.match(await trace(jobs.calm.id), /^calm-ok$/m);
    const bomb = await finished(jobs.bomb.id);
    if (process.env.TEST_LOG) console.log(await trace(jobs.bomb.id));
    assert.equal(bomb.status, 'failed');
    assert.equal(bomb.failure_reason, 'job_execution_timeout');
    assert.ok(Date.now() - started < 20_000);
    assert.match(await trace(jobs.bomb.id), /Limits: cgroup v\d: at most 64 processes/);
    // Every process of the bomb is gone: its cgroup could be removed (only an empty one can).
    const parents = cgroups!.version === 2 ? [cgroups!.dir] : [cgroups!.pids, cgroups!.memory].filter((d): d is string => !!d);
    for (const dir of parents) assert.deepEqual(fs.readdirSync(dir).filter((n) => n.startsWith(`job-${jobs.bomb.id}-`)), [], dir);
  });

  test('without pasta a job has no network at all, without a cgroup rlimits bound it, and its log says so', { skip: noSandbox }, async () => {
    await builtin?.stop();
    builtin = null;
    const fallback = await startBuiltinRunner({
      url: `http://127.0.0.1:${t.config.port}`,
      registrationToken: await registrationToken(t.app.cairn, { type: 'instance_type' }),
      dataDir: fs.mkdtempSync(path.join(t.tmpDir, 'fallback-')),
      env: {},
      forwardPorts: [{ jobPort: t.config.port, hostPort: jobPort }],
      log: (m) => messages.push(m),
      executor: {
        sandbox: { ...sandbox, pasta: null, pastaReason: 'pasta is not installed (the test hides it)' },
        cgroups: null,
        limits: { pids: 4096, memory: 1024 ** 3, fileSize: 64 * 1024 ** 2 },
      },
    });
    assert.ok(fallback, messages.join('\n'));
    try {
      await commitFiles(t, project, {
        '.gitlab-ci.yml': [
          'offline:',
          '  script:',
          "    - '(exec 3<>/dev/tcp/127.0.0.1/${CI_SERVER_URL##*:}) 2>/dev/null && echo cairn=reachable || echo cairn=unreachable'",
          '    - echo "nproc=$(ulimit -u) fsize=$(ulimit -f)"',
          '',
        ].join('\n'),
      });
      const job = (await jobsByName(t, (await latestPipeline(t, project.id)).id)).offline;
      const row = await finished(job.id);
      const log = await trace(job.id);
      assert.equal(row.status, 'success', log);
      assert.match(log, /WARNING: this job has no network: pasta is not installed \(the test hides it\)/);
      assert.match(log, /^cairn=unreachable$/m, 'not even the forwarded port: there is no pasta to forward it');
      assert.match(log, /Limits \(no cgroup here\): at most 4096 processes/);
      if (sandbox.prlimit) assert.match(log, /^nproc=4096 fsize=65536$/m);
    } finally {
      await fallback.stop();
    }
  });
});
