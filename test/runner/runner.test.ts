// Cairn's runner against a fake GitLab runner-protocol server over real HTTP: registration,
// jobs that succeed and fail, after_script, trace streaming and masking, timeout and cancel
// (the whole process group dies), artifacts, dependencies, bubblewrap isolation.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { RunnerClient } from '../../src/runner/client.js';
import { Runner, startBuiltinRunner } from '../../src/runner/runner.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import type { JobOutcome } from '../../src/runner/job.js';
import type { JobPayload, JobStep } from '../../src/runner/types.js';
import { FakeServer, makeRepo, tmpDir, type FakeJob } from './fake_server.js';

const sandbox = detectSandbox();
const root = tmpDir('cairn-runner-test-');
const dataDir = path.join(root, 'data');
const buildsDir = path.join(root, 'builds');
let server: FakeServer;
let repo: { url: string; sha: string };
let nextId = 100;

before(async () => {
  fs.mkdirSync(dataDir, { recursive: true });
  fs.writeFileSync(path.join(dataDir, 'secret.txt'), 'data-dir-secret');
  server = await new FakeServer().start();
  repo = makeRepo(path.join(root, 'git'), { 'README.md': 'hello from the repo\n', 'src/app.txt': 'app\n' });
  server.runnerRegistered = true;
});

after(async () => {
  await server.close();
  fs.rmSync(root, { recursive: true, force: true });
});

function payload(steps: { script: string[]; after?: string[] }, extra: Partial<JobPayload> = {}): JobPayload {
  const id = nextId++;
  const s: JobStep[] = [{ name: 'script', script: steps.script, timeout: 3600, when: 'on_success', allow_failure: false }];
  if (steps.after) s.push({ name: 'after_script', script: steps.after, timeout: 3600, when: 'always', allow_failure: true });
  return {
    id,
    token: `job-token-${id}-abcdefgh`,
    job_info: { name: `job${id}`, stage: 'test' },
    git_info: { repo_url: repo.url, ref: 'main', sha: repo.sha, ref_type: 'branch', refspecs: ['+refs/heads/main:refs/remotes/origin/main'], depth: 20 },
    runner_info: { timeout: 60 },
    variables: [
      { key: 'CI_JOB_ID', value: String(id), public: true, masked: false },
      { key: 'CI_JOB_TOKEN', value: `job-token-${id}-abcdefgh`, public: false, masked: true },
    ],
    steps: s,
    artifacts: [],
    dependencies: [],
    features: { trace_sections: true, failure_reasons: ['unknown_failure', 'script_failure', 'job_execution_timeout', 'runner_system_failure'] },
    ...extra,
  };
}

/** Runs one job through a real Runner polling the fake server; returns the outcome and what the server saw. */
async function runJob(p: JobPayload, opts: { loseBytesAfterFirstPatch?: number; during?: (job: FakeJob) => Promise<void>; allowUnisolated?: boolean; forceUnisolated?: boolean } = {}) {
  const job = server.addJob(p, { loseBytesAfterFirstPatch: opts.loseBytesAfterFirstPatch });
  let resolveDone!: (o: JobOutcome) => void;
  const done = new Promise<JobOutcome>((r) => (resolveDone = r));
  const runner = new Runner({
    url: server.url,
    token: server.runnerToken,
    buildsDir,
    hiddenPaths: [dataDir],
    allowUnisolated: opts.allowUnisolated ?? !sandbox.available,
    sandbox: opts.forceUnisolated ? { available: false, bwrap: null, reason: 'disabled by the test' } : sandbox,
    checkIntervalMs: 50,
    executor: { traceIntervalMs: 100, retryDelayMs: 50, keepaliveMs: 500, allowFileUrls: true, afterScriptTimeoutSec: 10 },
    log: process.env.TEST_LOG ? (m) => console.log(new Date().toISOString(), m) : () => {},
    onJobDone: (id, o) => {
      if (id === p.id) resolveDone(o);
    },
  });
  void runner.start();
  if (opts.during) await opts.during(job);
  const outcome = await done;
  await runner.stop();
  const final = job.updates.at(-1);
  return { outcome, job, trace: job.trace.toString(), final };
}

describe('registration', () => {
  test('register, verify, unregister speak the protocol', async () => {
    const client = new RunnerClient(server.url);
    await assert.rejects(client.register('wrong', {}), /403/);
    const r = await client.register(server.registrationToken, { description: 'test', tagList: ['a', 'b'], runUntagged: false, locked: true });
    assert.equal(r.token, server.runnerToken);
    assert.equal(r.id, 7);
    const body = server.registerBodies.at(-1) as Record<string, unknown>;
    assert.equal(body.tag_list, 'a,b');
    assert.equal(body.run_untagged, false);
    assert.equal(body.locked, true);
    assert.equal((body.info as { executor: string }).executor, 'shell');
    assert.equal(await client.verify(r.token), true);
    assert.equal(await client.verify('nope'), false);
  });

  test('the CLI registers into a 0600 config file, and unregisters', async () => {
    const config = path.join(root, 'cli', 'config.json');
    const cli = (args: string[]) => runCli(args, { CAIRN_DATA_DIR: dataDir });
    const help = await cli(['register', '--help']);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /--tag-list/);
    const bad = await cli(['register', '--url', server.url, '--token', 'wrong', '--config', config]);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /forbidden/);
    const ok = await cli(['register', '--url', server.url, '--token', server.registrationToken, '--description', 'cli runner', '--tag-list', 'x,y', '--config', config]);
    assert.equal(ok.status, 0, ok.stderr);
    const saved = JSON.parse(fs.readFileSync(config, 'utf8'));
    assert.equal(saved.token, server.runnerToken);
    assert.equal(saved.id, 7);
    assert.deepEqual(saved.tag_list, ['x', 'y']);
    assert.equal(fs.statSync(config).mode & 0o777, 0o600);
    const verify = await cli(['verify', '--config', config]);
    assert.equal(verify.status, 0, verify.stderr);
    const un = await cli(['unregister', '--config', config]);
    assert.equal(un.status, 0, un.stderr);
    assert.equal(fs.existsSync(config), false);
    assert.equal(server.runnerRegistered, false);
    server.runnerRegistered = true;
  });

  test('run refuses to start without isolation unless allowed', async () => {
    const config = path.join(root, 'cli2', 'config.json');
    fs.mkdirSync(path.dirname(config), { recursive: true });
    fs.writeFileSync(config, JSON.stringify({ url: server.url, token: server.runnerToken, id: 7 }));
    const r = await runCli(['run', '--config', config], { CAIRN_RUNNER_BWRAP: '/nonexistent/bwrap', CAIRN_RUNNER_ALLOW_UNISOLATED: '' });
    assert.equal(r.status, 3, r.stderr);
    assert.match(r.stderr, /refusing to run jobs.*bubblewrap.*--allow-unisolated/s);
  });
});

describe('jobs', () => {
  test('a job that succeeds: clone at the sha, variables, before_script + script, final PUT success', async () => {
    const p = payload({ script: ['echo "before $GREETING"', 'cat README.md', 'git rev-parse HEAD', 'echo "file var: $(cat "$MY_FILE")"', 'echo "expanded: $EXPANDED"', 'pwd'] }, {});
    p.variables!.push(
      { key: 'GREETING', value: 'hi there', public: true },
      { key: 'MY_FILE', value: 'file contents', file: true },
      { key: 'EXPANDED', value: '$GREETING!', public: true },
      { key: 'RAWVAR', value: '$GREETING', raw: true },
    );
    const { outcome, trace, final, job } = await runJob(p);
    assert.equal(outcome.state, 'success', trace);
    assert.equal(final?.state, 'success');
    assert.equal(final?.headerToken, p.token);
    assert.match(trace, /\$ echo "before \$GREETING"/);
    assert.match(trace, /before hi there/);
    assert.match(trace, /hello from the repo/);
    assert.ok(trace.includes(repo.sha), 'checked out the sha');
    assert.match(trace, /file var: file contents/);
    assert.match(trace, /expanded: hi there!/);
    assert.match(trace, new RegExp(`${buildsDir}/job-${p.id}-[^/]+/build`));
    // The job token never shows in clear.
    assert.ok(!trace.includes(p.token));
    // Every accepted patch started where the previous one ended.
    let at = 0;
    for (const patch of job.patches.filter((x) => x.status === 202)) {
      assert.equal(patch.range, `${at}-${at + patch.length - 1}`);
      at += patch.length;
    }
    assert.equal(at, job.trace.length);
    // The job directory is gone afterwards.
    assert.deepEqual(fs.readdirSync(buildsDir).filter((d) => d.startsWith(`job-${p.id}-`)), []);
  });

  test('a job that fails: exit code, script_failure, later commands not run', async () => {
    const { outcome, trace, final } = await runJob(payload({ script: ['echo one', 'true | true', 'exit 3', 'echo never'] }));
    assert.equal(outcome.state, 'failed');
    assert.equal(final?.state, 'failed');
    assert.equal(final?.failure_reason, 'script_failure');
    assert.equal(final?.exit_code, 3);
    assert.match(trace, /one/);
    assert.doesNotMatch(trace, /^never$/m);
  });

  test('the final update is retried after network errors', async () => {
    server.dropFinalUpdates = 2;
    const { final, outcome } = await runJob(payload({ script: ['echo retried'] }));
    assert.equal(server.droppedFinalUpdates, 2);
    assert.equal(outcome.state, 'success');
    assert.equal(final?.state, 'success');
  });

  test('pipefail: a failing command in a pipeline fails the job', async () => {
    const { final } = await runJob(payload({ script: ['false | cat'] }));
    assert.equal(final?.state, 'failed');
    assert.equal(final?.exit_code, 1);
  });

  test('after_script runs with CI_JOB_STATUS, and its failure does not fail the job', async () => {
    const ok = await runJob(payload({ script: ['echo main'], after: ['echo "after status=$CI_JOB_STATUS"', 'exit 7'] }));
    assert.equal(ok.final?.state, 'success', ok.trace);
    assert.match(ok.trace, /after status=success/);
    assert.match(ok.trace, /after_script failed/);
    const failed = await runJob(payload({ script: ['exit 2'], after: ['echo "after status=$CI_JOB_STATUS"'] }));
    assert.equal(failed.final?.state, 'failed');
    assert.equal(failed.final?.exit_code, 2);
    assert.match(failed.trace, /after status=failed/);
  });

  test('trace streams while the job runs, honours the server interval, and resyncs on 416', async () => {
    server.traceInterval = '1';
    try {
      const { trace, job, final } = await runJob(payload({ script: ['echo first-part', 'sleep 1.6', 'echo second-part', 'sleep 1.3', 'echo third-part'] }), { loseBytesAfterFirstPatch: 5 });
      assert.equal(final?.state, 'success');
      assert.ok(job.patches.filter((x) => x.status === 202).length >= 2, `several patches: ${JSON.stringify(job.patches)}`);
      // The server "lost" 5 bytes after the first patch: the next one got 416 and the runner resent from the server's offset.
      const mismatch = job.patches.findIndex((x) => x.status === 416);
      assert.ok(mismatch > 0, JSON.stringify(job.patches));
      const next = job.patches[mismatch + 1];
      assert.equal(next.status, 202);
      // The whole log arrived, once, in order.
      for (const s of ['first-part', 'second-part', 'third-part']) assert.equal(trace.split(`\n${s}`).length, 2, `${s} once in:\n${trace}`);
      assert.ok(trace.indexOf('first-part') < trace.indexOf('second-part'));
      // The first part reached the server before the job ended (streamed, not all at the end).
      const firstAccepted = job.patches[0];
      assert.ok(firstAccepted.length < job.trace.length);
    } finally {
      server.traceInterval = null;
    }
  });

  test('masked variables are [MASKED] in the trace, also when split across writes', async () => {
    const p = payload({ script: ['echo "secret is $SECRET_VALUE"', 'printf "%s" "${SECRET_VALUE:0:5}"; sleep 0.3; printf "%s\\n" "${SECRET_VALUE:5}"', 'echo "plain $PLAIN"'] });
    p.variables!.push({ key: 'SECRET_VALUE', value: 's3cr3t-Value-42', masked: true }, { key: 'PLAIN', value: 'visible-value', masked: false });
    const { trace, final } = await runJob(p);
    assert.equal(final?.state, 'success', trace);
    assert.ok(!trace.includes('s3cr3t-Value-42'), trace);
    assert.match(trace, /secret is \[MASKED\]/);
    assert.equal(trace.split('[MASKED]').length - 1 >= 2, true);
    assert.match(trace, /plain visible-value/);
  });

  test('timeout kills the whole process group (background processes too): job_execution_timeout', async () => {
    const marker = `${40 + Math.floor(Math.random() * 50)}.${Date.now() % 1000}`;
    const p = payload({ script: [`sleep ${marker}1 &`, `sleep ${marker}2`] });
    p.runner_info = { timeout: 2 };
    const started = Date.now();
    const { final, trace } = await runJob(p);
    assert.ok(Date.now() - started < 15_000);
    assert.equal(final?.state, 'failed', trace);
    assert.equal(final?.failure_reason, 'job_execution_timeout');
    assert.match(trace, /execution took longer than 2 seconds/);
    await new Promise((r) => setTimeout(r, 200));
    const ps = execFileSync('ps', ['-eo', 'args']).toString();
    assert.ok(!ps.includes(`sleep ${marker}`), `left running:\n${ps.split('\n').filter((l) => l.includes(marker)).join('\n')}`);
  });

  test('cancel: a 403 on the trace PATCH kills the job and its children', async () => {
    const marker = `${40 + Math.floor(Math.random() * 50)}.${(Date.now() + 7) % 1000}`;
    const p = payload({ script: ['echo started', `sleep ${marker}1 &`, 'for i in $(seq 1 200); do echo tick; sleep 0.2; done', 'echo not-reached'] });
    const started = Date.now();
    const { outcome, job } = await runJob(p, {
      during: async (j) => {
        while (!j.trace.toString().includes('started')) await new Promise((r) => setTimeout(r, 50));
        j.canceled = true;
      },
    });
    assert.ok(Date.now() - started < 15_000);
    assert.equal(outcome.aborted, true);
    assert.equal(outcome.state, 'failed');
    assert.ok(job.patches.some((x) => x.status === 403));
    assert.ok(!job.trace.toString().includes('not-reached'));
    await new Promise((r) => setTimeout(r, 200));
    const ps = execFileSync('ps', ['-eo', 'args']).toString();
    assert.ok(!ps.includes(`sleep ${marker}`), 'nothing left running');
  });

  test('cancel of a silent job: the keep-alive PUT gets 403 and the job is killed', async () => {
    const marker = `${40 + Math.floor(Math.random() * 50)}.${(Date.now() + 11) % 1000}`;
    const p = payload({ script: ['echo started', `sleep ${marker}1`] });
    const started = Date.now();
    const { outcome } = await runJob(p, {
      during: async (j) => {
        while (!j.trace.toString().includes('started')) await new Promise((r) => setTimeout(r, 50));
        j.canceled = true;
      },
    });
    assert.ok(Date.now() - started < 10_000);
    assert.equal(outcome.aborted, true);
    const ps = execFileSync('ps', ['-eo', 'args']).toString();
    assert.ok(!ps.includes(`sleep ${marker}`), 'nothing left running');
  });

  test('artifacts: a zip of the declared paths (globs, exclude), nothing outside the build dir', async () => {
    fs.writeFileSync(path.join(root, 'outside.txt'), 'outside');
    const p = payload({
      script: [
        'mkdir -p out/sub logs',
        'echo a > out/a.txt',
        'echo b > out/sub/b.txt',
        'echo skip > out/skip.tmp',
        'echo l > logs/1.log',
        `ln -s ${path.join(root, 'outside.txt')} out/escape-link`,
        'ln -s a.txt out/inside-link',
        'echo "<testsuite/>" > report.xml',
      ],
    });
    p.artifacts = [
      { name: 'art', paths: ['out/', 'logs/*.log', '../outside.txt', '/etc/passwd', 'missing/'], exclude: ['out/**/*.tmp'], when: 'on_success', artifact_type: 'archive', artifact_format: 'zip', expire_in: '1 week' },
      { name: 'junit', paths: ['report.xml'], when: 'always', artifact_type: 'junit', artifact_format: 'gzip', expire_in: '1 week' },
    ];
    const { final, job, trace } = await runJob(p);
    assert.equal(final?.state, 'success', trace);
    assert.equal(job.uploads.length, 2, trace);
    const [archive, junit] = job.uploads;
    assert.equal(archive.query.artifact_type, 'archive');
    assert.equal(archive.query.artifact_format, 'zip');
    assert.equal(archive.query.expire_in, '1 week');
    assert.equal(archive.fields.artifact_type, 'archive');
    assert.equal(archive.fileName, 'artifacts.zip');
    const entries = await zipEntries(archive.file);
    assert.deepEqual(Object.keys(entries).sort(), ['logs/1.log', 'out/a.txt', 'out/inside-link', 'out/sub/b.txt']);
    assert.equal(entries['out/a.txt'], 'a\n');
    assert.match(trace, /escape-link: symlink pointing outside/);
    assert.match(trace, /\.\.\/outside\.txt: path is outside the build directory/);
    assert.equal(junit.query.artifact_type, 'junit');
    assert.equal(junit.query.artifact_format, 'gzip');
    assert.equal((await import('node:zlib')).gunzipSync(junit.file).toString(), '<testsuite/>\n');
  });

  test('artifacts when: on_failure uploads only for a failed job', async () => {
    const p = payload({ script: ['echo x > f.txt', 'exit 1'] });
    p.artifacts = [
      { name: 'a', paths: ['f.txt'], when: 'on_success', artifact_type: 'archive', artifact_format: 'zip' },
      { name: 'b', paths: ['f.txt'], when: 'on_failure', artifact_type: 'archive', artifact_format: 'zip' },
    ];
    const { job, final } = await runJob(p);
    assert.equal(final?.state, 'failed');
    assert.equal(job.uploads.length, 1);
  });

  test('dependencies: artifacts downloaded with the dependency token and extracted safely (no zip-slip)', async () => {
    const zip = await makeZip({ 'dist/out.txt': 'built', '../evil.txt': 'evil', '/abs.txt': 'abs', 'dist/deep/../ok.txt': 'ok' });
    server.served.set(55, { token: 'dep-token-55-xxxxxx', body: zip });
    const p = payload({ script: ['cat dist/out.txt; echo', 'cat dist/ok.txt; echo'] });
    p.dependencies = [{ id: 55, token: 'dep-token-55-xxxxxx', name: 'build', artifacts_file: { filename: 'artifacts.zip', size: zip.length } }];
    const { final, trace } = await runJob(p);
    assert.equal(final?.state, 'success', trace);
    assert.match(trace, /^built$/m);
    assert.match(trace, /^ok$/m);
    assert.match(trace, /\.\.\/evil\.txt: entry would be extracted outside/);
    assert.ok(!fs.existsSync(path.join(buildsDir, 'evil.txt')));
    // A wrong token: the job fails before its script.
    const bad = payload({ script: ['echo should-not-run'] });
    bad.dependencies = [{ id: 55, token: 'wrong-token-abcdefgh', name: 'build', artifacts_file: { filename: 'artifacts.zip', size: 1 } }];
    const r = await runJob(bad);
    assert.equal(r.final?.state, 'failed');
    assert.doesNotMatch(r.trace, /^should-not-run$/m);
  });
});

describe('the poll loop', () => {
  test('runs up to --concurrent jobs at once, and sends back X-GitLab-Last-Update as last_update', async () => {
    const a = server.addJob(payload({ script: ['date +%s.%N > /dev/null; echo start-a; sleep 1.2; echo end-a'] }));
    const b = server.addJob(payload({ script: ['echo start-b; sleep 1.2; echo end-b'] }));
    const requestsBefore = server.requestBodies.length;
    const runner = new Runner({
      url: server.url,
      token: server.runnerToken,
      concurrent: 2,
      buildsDir,
      hiddenPaths: [dataDir],
      allowUnisolated: !sandbox.available,
      sandbox,
      checkIntervalMs: 50,
      executor: { traceIntervalMs: 100, retryDelayMs: 50, allowFileUrls: true },
      log: () => {},
    });
    void runner.start();
    const [fa, fb] = await Promise.all([a.final, b.final]);
    await runner.stop();
    assert.equal(fa.state, 'success');
    assert.equal(fb.state, 'success');
    // Both ran at once: each job was taken while the other still ran (its final update not yet
    // sent). Told by the order of events, not by a duration, which a loaded machine stretches.
    const at = (e: string) => server.events.indexOf(e);
    const [ida, idb] = [a.payload.id, b.payload.id];
    assert.ok(at(`handed ${idb}`) >= 0 && at(`handed ${idb}`) < at(`final ${ida}`), `both ran at once: ${server.events.join(', ')}`);
    assert.ok(at(`handed ${ida}`) >= 0 && at(`handed ${ida}`) < at(`final ${idb}`), `both ran at once: ${server.events.join(', ')}`);
    const later = server.requestBodies.slice(requestsBefore + 1);
    assert.ok(later.some((r) => r.last_update === String(server.lastUpdate)), JSON.stringify(later.map((r) => r.last_update)));
  });

  test('stop({killJobs}) kills running jobs and reports them failed', async () => {
    const job = server.addJob(payload({ script: ['echo started', 'sleep 30'] }));
    const runner = new Runner({ url: server.url, token: server.runnerToken, buildsDir, allowUnisolated: !sandbox.available, sandbox, checkIntervalMs: 50, executor: { traceIntervalMs: 100, retryDelayMs: 50, allowFileUrls: true }, log: process.env.TEST_LOG ? (m) => console.log(new Date().toISOString(), m) : () => {} });
    void runner.start();
    while (!job.trace.toString().includes('started')) await new Promise((r) => setTimeout(r, 50));
    const t = Date.now();
    await runner.stop({ killJobs: true });
    assert.ok(Date.now() - t < 5000);
    const final = await job.final;
    assert.equal(final.state, 'failed');
    // A server that knows no runner_interrupted (GitLab) hears a system failure, which `retry: when` covers.
    assert.equal(final.failure_reason, 'runner_system_failure');
  });

  test('a runner token the server refuses stops the loop', async () => {
    const runner = new Runner({ url: server.url, token: 'not-a-runner-token', buildsDir, allowUnisolated: true, sandbox, log: () => {} });
    await runner.start();
    assert.match(String(runner.fatal?.message), /403/);
  });
});

describe('isolation', { skip: sandbox.available ? false : `bubblewrap cannot run here: ${sandbox.reason}` }, () => {
  test('a job cannot see the data dir, cannot write outside its build dir, can write its build dir and /tmp', async () => {
    const other = path.join(buildsDir, 'job-999-other');
    fs.mkdirSync(other, { recursive: true });
    fs.writeFileSync(path.join(other, 'theirs.txt'), 'other job');
    const p = payload({
      script: [
        `cat ${path.join(dataDir, 'secret.txt')} && echo READ-SECRET || echo no-secret`,
        `ls ${dataDir} | wc -l | sed 's/^/data-entries:/'`,
        `cat ${path.join(other, 'theirs.txt')} && echo READ-OTHER || echo no-other-job`,
        `touch ${path.join(process.cwd(), 'cairn-escape-test')} && echo WROTE-OUTSIDE || echo no-write-outside`,
        // Under /tmp the job writes into its private tmpfs, never the host's /tmp.
        `touch ${path.join(root, 'escaped')} && echo wrote-private-tmp`,
        'touch /etc/cairn-test && echo WROTE-ETC || echo no-write-etc',
        'echo x > in-build.txt && echo wrote-build',
        'echo y > /tmp/t.txt && echo wrote-tmp',
        'echo "pid=$$"',
        'echo "home=$HOME"',
        'env | awk \'/^CAIRN_/{n++} END{print "cairn-vars:" n+0}\'',
        'echo "uid=$(id -u)"',
        'cat /etc/shadow > /dev/null 2>&1 && echo READ-SHADOW || echo no-shadow',
        'mount -o remount,rw / 2>/dev/null && echo REMOUNTED || echo no-remount',
        'echo "file var: $(cat "$SANDBOX_FILE")"',
      ],
    });
    p.variables!.push({ key: 'SANDBOX_FILE', value: 'file-variable-content', file: true });
    process.env.CAIRN_SHOULD_NOT_LEAK = 'x';
    const { final, trace } = await runJob(p);
    delete process.env.CAIRN_SHOULD_NOT_LEAK;
    assert.equal(final?.state, 'success', trace);
    assert.match(trace, /no-secret/);
    assert.doesNotMatch(trace, /^(READ-SECRET|data-dir-secret|READ-OTHER|WROTE-OUTSIDE|WROTE-ETC|READ-SHADOW|REMOUNTED)$/m);
    assert.match(trace, /data-entries:0/);
    assert.match(trace, /no-other-job/);
    assert.match(trace, /no-write-outside/);
    assert.match(trace, /no-write-etc/);
    assert.match(trace, /wrote-build/);
    assert.match(trace, /wrote-tmp/);
    assert.match(trace, /pid=\d\b/, 'a new PID namespace');
    assert.match(trace, /cairn-vars:0/);
    assert.match(trace, /^no-remount$/m, 'no capabilities');
    assert.match(trace, /file var: file-variable-content/);
    if (process.getuid?.() === 0 && sandbox.runAs) {
      assert.match(trace, new RegExp(`^uid=${sandbox.runAs.uid}$`, 'm'), 'a root runner runs jobs unprivileged');
      assert.match(trace, /^no-shadow$/m);
    }
    assert.ok(!fs.existsSync(path.join(root, 'escaped')));
    assert.ok(!fs.existsSync(path.join(process.cwd(), 'cairn-escape-test')));
    assert.ok(!fs.existsSync('/etc/cairn-test'));
    assert.match(trace, /Using bubblewrap isolation/);
  });

  test('without bubblewrap, jobs only run when allowed, with a warning in the log', async () => {
    const { final, trace } = await runJob(payload({ script: ['echo unisolated-ran'] }), { forceUnisolated: true, allowUnisolated: true });
    assert.equal(final?.state, 'success', trace);
    assert.match(trace, /WITHOUT isolation/);
    const runner = new Runner({ url: server.url, token: server.runnerToken, sandbox: { available: false, bwrap: null, reason: 'no bwrap' }, allowUnisolated: false });
    assert.throws(() => runner.start(), /refusing to run jobs: no bwrap/);
  });
});

describe('built-in runner', () => {
  test('registers over HTTP with the registration token, keeps its token, runs untagged jobs; CAIRN_BUILTIN_RUNNER=0 turns it off', async () => {
    assert.equal(await startBuiltinRunner({ url: server.url, registrationToken: server.registrationToken, dataDir, env: { CAIRN_BUILTIN_RUNNER: '0' } }), null);
    server.runnerRegistered = false;
    const before = server.registerBodies.length;
    const b = await startBuiltinRunner({
      url: server.url,
      registrationToken: server.registrationToken,
      dataDir,
      buildsDir,
      env: {},
      allowUnisolated: !sandbox.available,
      log: () => {},
      executor: { traceIntervalMs: 100, retryDelayMs: 50, allowFileUrls: true },
    });
    assert.ok(b);
    const reg = server.registerBodies.at(-1) as Record<string, unknown>;
    assert.equal(server.registerBodies.length, before + 1);
    assert.equal(reg.run_untagged, true);
    assert.equal(reg.tag_list, undefined);
    const saved = path.join(dataDir, 'runner', 'builtin.json');
    assert.equal(fs.statSync(saved).mode & 0o777, 0o600);
    const job = server.addJob(payload({ script: ['echo builtin-ran'] }));
    const final = await job.final;
    assert.equal(final.state, 'success');
    assert.match(job.trace.toString(), /builtin-ran/);
    await b.stop();
    // A second start reuses the saved token (verify), no new registration.
    const again = await startBuiltinRunner({ url: server.url, registrationToken: server.registrationToken, dataDir, buildsDir, env: {}, allowUnisolated: !sandbox.available, log: () => {} });
    assert.ok(again);
    assert.equal(server.registerBodies.length, before + 1);
    await again.stop();
  });
});

/** The CLI as a child process (asynchronously: the fake server answers from this process). */
function runCli(args: string[], env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/cairn.mjs', 'runner', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b) => (stdout += b));
    child.stderr.on('data', (b) => (stderr += b));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

function zipEntries(buf: Buffer): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      const out: Record<string, string> = {};
      zip!.on('entry', (e: yauzl.Entry) => {
        if (e.fileName.endsWith('/')) return zip!.readEntry();
        zip!.openReadStream(e, (err2, s) => {
          if (err2) return reject(err2);
          const chunks: Buffer[] = [];
          s!.on('data', (c: Buffer) => chunks.push(c));
          s!.on('end', () => {
            out[e.fileName] = Buffer.concat(chunks).toString();
            zip!.readEntry();
          });
        });
      });
      zip!.on('end', () => resolve(out));
      zip!.readEntry();
    });
  });
}

/** A zip with entry names as given, even hostile ones (yazl refuses them, so they are patched in afterwards). */
async function makeZip(files: Record<string, string>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  const renames: [string, string][] = [];
  let i = 0;
  for (const [name, content] of Object.entries(files)) {
    // Same-length placeholder, replaced in the bytes below.
    const placeholder = String.fromCharCode(97 + i++).repeat(name.length);
    renames.push([placeholder, name]);
    zip.addBuffer(Buffer.from(content), placeholder);
  }
  zip.end();
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  let buf = Buffer.concat(chunks);
  for (const [from, to] of renames) {
    let at = 0;
    while ((at = buf.indexOf(from, at)) !== -1) {
      Buffer.from(to).copy(buf, at);
      at += to.length;
    }
  }
  return buf;
}
