// End to end over real HTTP: a Cairn server listening on loopback, a real `cairn runner`
// process registered with the instance registration token, a push of .gitlab-ci.yml. The
// runner clones with the job token, runs the jobs (bubblewrap when it works here), streams
// traces, uploads and downloads artifacts, reports statuses; a cancel stops a running job.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { registrationToken } from '../../src/ci/runners.js';
import type { Project } from '../../src/db/schema/core.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { startServeBuiltinRunner } from '../../src/runner/serve.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline } from '../helpers/ci.js';
import { freePort } from '../helpers/serve.js';
import { startWorker } from '../../src/jobs/queue.js';
import { until } from '../helpers/until.js';

const sandbox = detectSandbox();

function cli(args: string[], env: Record<string, string>): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/cairn.mjs', 'runner', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    child.on('close', (status) => resolve({ status, out }));
  });
}
describe('cairn runner against a Cairn server', () => {
  let t: TestContext;
  let url: string;
  let runner: ChildProcess | null = null;
  let runnerLog = '';
  let project: Project;
  let stopWorker: (() => Promise<void>) | null = null;

  before(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url });
    await t.app.listen({ host: '127.0.0.1', port });
    // The background queue, as `cairn serve` runs it (downstream pipelines are made there).
    stopWorker = startWorker(t.app.cairn, { idleMs: 100 });
    project = await t.createProject();
    const v = await t.post(`/api/v4/projects/${project.id}/variables`, { key: 'SECRET_TOKEN', value: 'very-secret-value-1', masked: true });
    assert.equal(v.status, 201, JSON.stringify(v.body));

    const config = path.join(t.tmpDir, 'runner-config', 'config.json');
    const env = { CAIRN_DATA_DIR: t.tmpDir, CAIRN_RUNNER_ALLOW_UNISOLATED: sandbox.available ? '' : '1' };
    const reg = await cli(['register', '--url', url, '--token', await registrationToken(t.app.cairn, { type: 'instance_type' }), '--description', 'e2e', '--config', config], env);
    assert.equal(reg.status, 0, reg.out);
    runner = spawn(process.execPath, ['bin/cairn.mjs', 'runner', 'run', '--config', config, '--concurrent', '2'], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    runner.stdout!.on('data', (b) => (runnerLog += b));
    runner.stderr!.on('data', (b) => (runnerLog += b));
  });

  after(async () => {
    if (runner && runner.exitCode === null) {
      runner.kill('SIGTERM');
      await new Promise((r) => runner!.once('exit', r));
    }
    if (process.env.TEST_LOG) console.log(runnerLog);
    await stopWorker?.();
    await t?.close();
  });

  const trace = async (jobId: number) => (await t.get(`/api/v4/projects/${project.id}/jobs/${jobId}/trace`)).text;

  test('a pushed pipeline runs: clone, masked variables, artifacts passed on, after_script, allowed failure', async () => {
    const sha = await commitFiles(t, project, {
      'README.md': 'hello\n',
      '.gitlab-ci.yml': [
        'stages: [build, test]',
        'build:',
        '  stage: build',
        '  script:',
        '    - mkdir -p out && echo "built $CI_COMMIT_SHA" > out/result.txt',
        '    - echo "secret=$SECRET_TOKEN"',
        '    - cat README.md',
        '  artifacts:',
        '    paths: [out/]',
        'test:',
        '  stage: test',
        '  script:',
        '    - cat out/result.txt',
        '  after_script:',
        '    - echo "after=$CI_JOB_STATUS"',
        'failing:',
        '  stage: test',
        '  allow_failure: true',
        '  script:',
        '    - exit 4',
        '',
      ].join('\n'),
    });
    const pipeline = await latestPipeline(t, project.id);
    assert.equal(pipeline.sha, sha);
    await until('the pipeline to finish', async () => {
      const p = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
      return ['success', 'failed', 'canceled'].includes(p.status) ? p : null;
    });
    const jobs = await jobsByName(t, pipeline.id);
    const logs = { build: await trace(jobs.build.id), test: await trace(jobs.test.id), failing: await trace(jobs.failing.id) };
    assert.equal(jobs.build.status, 'success', logs.build + runnerLog);
    assert.equal(jobs.test.status, 'success', logs.test);
    assert.equal(jobs.failing.status, 'failed');
    assert.equal(jobs.failing.failure_reason, 'script_failure');
    assert.match(logs.build, /secret=\[MASKED\]/);
    assert.ok(!logs.build.includes('very-secret-value-1'));
    assert.match(logs.build, /^hello$/m, 'cloned at the pushed commit');
    assert.match(logs.test, new RegExp(`built ${sha}`), 'the build artifacts were downloaded');
    assert.match(logs.test, /after=success/);
    if (sandbox.available) assert.match(logs.build, /Using bubblewrap isolation/);
    // This runner was given no forward for the server's loopback port: the log says so.
    if (sandbox.available && sandbox.pasta) assert.match(logs.build, /is on this machine's loopback, which jobs do not reach/);
    const artifacts = await t.db.selectFrom('ci_job_artifacts').selectAll().where('job_id', '=', jobs.build.id).execute();
    assert.ok(artifacts.some((a) => a.file_type === 'archive'), JSON.stringify(artifacts));
    const status = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
    assert.equal(status.status, 'success');
  });

  test('cancel through the API stops the running job', async () => {
    await commitFiles(t, project, {
      '.gitlab-ci.yml': ['slow:', '  script:', '    - echo started', '    - for i in $(seq 1 200); do echo tick $i; sleep 0.5; done', '    - echo finished', ''].join('\n'),
    });
    const pipeline = await latestPipeline(t, project.id);
    const job = (await jobsByName(t, pipeline.id)).slow;
    await until('the job to log', async () => (await trace(job.id)).includes('tick 1'));
    const started = Date.now();
    const res = await t.post(`/api/v4/projects/${project.id}/jobs/${job.id}/cancel`);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    // The runner learns it from its next trace PATCH (403) and kills the job's process group.
    await until('the runner to drop the job', async () => runnerLog.includes(`job ${job.id}: failed`) || runnerLog.includes(`job ${job.id}: aborting`), 20_000);
    assert.ok(Date.now() - started < 15_000);
    const row = await t.db.selectFrom('ci_builds').select('status').where('id', '=', job.id).executeTakeFirstOrThrow();
    assert.equal(row.status, 'canceled');
    assert.ok(!(await trace(job.id)).includes('finished'));
  });

  test('needs, rules, retry, timeout, manual/play and a child pipeline, run by the runner', async () => {
    await commitFiles(t, project, {
      'child.yml': ['child-job:', '  script:', '    - echo "in the child pipeline"', ''].join('\n'),
      '.gitlab-ci.yml': [
        'stages: [build, test, deploy]',
        'build:',
        '  stage: build',
        '  script:',
        '    - echo "from build" > shared.txt',
        '  artifacts:',
        '    paths: [shared.txt]',
        'quick:',
        '  stage: test',
        '  needs: [build]',
        '  script:',
        '    - cat shared.txt',
        'never:',
        '  stage: test',
        '  rules:',
        '    - if: \'$CI_COMMIT_BRANCH == "elsewhere"\'',
        '  script:',
        '    - echo never',
        'flaky:',
        '  stage: test',
        '  retry: 1',
        '  allow_failure: true',
        '  script:',
        '    - echo "attempt of $CI_JOB_NAME"',
        '    - exit 1',
        'slow:',
        '  stage: test',
        '  timeout: 3 seconds',
        '  allow_failure: true',
        '  script:',
        '    - sleep 60',
        'deploy:',
        '  stage: deploy',
        '  when: manual',
        '  script:',
        '    - echo deployed',
        'child:',
        '  stage: deploy',
        '  trigger:',
        '    include: child.yml',
        '    strategy: depend',
        '',
      ].join('\n'),
    });
    const pipeline = await latestPipeline(t, project.id);
    const finished = await until('the pipeline to finish', async () => {
      const p = await t.db.selectFrom('ci_pipelines').select('status').where('id', '=', pipeline.id).executeTakeFirstOrThrow();
      return ['success', 'failed', 'canceled', 'manual'].includes(p.status) ? p : null;
    }, 90_000);
    const jobs = await jobsByName(t, pipeline.id);
    assert.equal(finished.status, 'success', JSON.stringify(Object.fromEntries(Object.entries(jobs).map(([k, v]) => [k, [v.status, v.failure_reason]]))) + runnerLog);
    assert.equal(jobs.never, undefined, 'rules left the job out');
    assert.equal(jobs.quick.status, 'success');
    assert.match(await trace(jobs.quick.id), /from build/, 'needs brought the artifacts of build');
    // retry: 1 ran the failing job twice: the first attempt is kept as retried.
    const attempts = await t.db.selectFrom('ci_builds').select(['status', 'retried']).where('pipeline_id', '=', pipeline.id).where('name', '=', 'flaky').orderBy('id').execute();
    assert.deepEqual(attempts.map((a) => [a.status, a.retried]), [['failed', true], ['failed', false]]);
    assert.equal(jobs.slow.status, 'failed');
    assert.ok(['job_execution_timeout', 'stuck_or_timeout_failure'].includes(jobs.slow.failure_reason ?? ''), String(jobs.slow.failure_reason));
    // The bridge waited for its child pipeline (strategy: depend), which the runner ran.
    assert.equal(jobs.child.status, 'success');
    assert.ok(jobs.child.downstream_pipeline_id);
    const childJobs = await jobsByName(t, jobs.child.downstream_pipeline_id!);
    assert.match(await trace(childJobs['child-job'].id), /in the child pipeline/);
    // The manual job waits until played, then the runner runs it.
    assert.equal(jobs.deploy.status, 'manual');
    const played = await t.post(`/api/v4/projects/${project.id}/jobs/${jobs.deploy.id}/play`);
    assert.equal(played.status, 200, JSON.stringify(played.body));
    await until('the played job to finish', async () => {
      const row = await t.db.selectFrom('ci_builds').select('status').where('id', '=', jobs.deploy.id).executeTakeFirstOrThrow();
      return row.status === 'success' ? row : null;
    }, 30_000);
    assert.match(await trace(jobs.deploy.id), /deployed/);
  });

  test('SIGTERM stops the runner process', async () => {
    runner!.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => runner!.once('exit', (c) => r(c)));
    assert.equal(code, 0, runnerLog);
  });

  test('the built-in runner of `cairn serve` registers itself over HTTP and runs untagged jobs', async () => {
    const port = new URL(url).port;
    const messages: string[] = [];
    assert.equal(await startServeBuiltinRunner(t.app.cairn, { env: { CAIRN_BUILTIN_RUNNER: '0' }, log: (m) => messages.push(m) }), null);
    const builtin = await startServeBuiltinRunner(t.app.cairn, {
      port: Number(port),
      env: { CAIRN_RUNNER_ALLOW_UNISOLATED: sandbox.available ? '' : '1' },
      log: (m) => messages.push(m),
    });
    assert.ok(builtin, messages.join('\n'));
    try {
      const row = await t.db.selectFrom('ci_runners').selectAll().where('id', '=', builtin.id!).executeTakeFirstOrThrow();
      assert.equal(row.runner_type, 'instance_type');
      assert.equal(row.run_untagged, true);
      await commitFiles(t, project, { '.gitlab-ci.yml': ['hello:', '  script:', '    - echo from-the-builtin-runner', ''].join('\n') });
      const pipeline = await latestPipeline(t, project.id);
      const job = (await jobsByName(t, pipeline.id)).hello;
      const done = await until('the job to finish', async () => {
        const r = await t.db.selectFrom('ci_builds').select(['status', 'runner_id']).where('id', '=', job.id).executeTakeFirstOrThrow();
        return ['success', 'failed'].includes(r.status) ? r : null;
      });
      assert.equal(done.status, 'success', (await trace(job.id)) + messages.join('\n'));
      assert.equal(done.runner_id, builtin.id);
      assert.match(await trace(job.id), /from-the-builtin-runner/);
    } finally {
      await builtin.stop();
    }
  });

  test('a built-in runner that starts again fails the jobs its dead process was running (runner system failure)', async () => {
    const port = Number(new URL(url).port);
    // The job a process took just before it was killed: picked with the built-in runner's token.
    const saved = JSON.parse(fs.readFileSync(path.join(t.tmpDir, 'runner', 'builtin.json'), 'utf8')) as { token: string; id: number };
    await commitFiles(t, project, { '.gitlab-ci.yml': ['orphan:', '  script:', '    - sleep 600', ''].join('\n') });
    const job = (await jobsByName(t, (await latestPipeline(t, project.id)).id)).orphan;
    const picked = await fetch(`${url}/api/v4/jobs/request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: saved.token }) });
    assert.equal(picked.status, 201);
    assert.equal(((await picked.json()) as { id: number }).id, job.id);
    const messages: string[] = [];
    const builtin = await startServeBuiltinRunner(t.app.cairn, { port, env: { CAIRN_RUNNER_ALLOW_UNISOLATED: sandbox.available ? '' : '1' }, log: (m) => messages.push(m) });
    assert.ok(builtin, messages.join('\n'));
    try {
      assert.equal(builtin.id, saved.id, 'the same runner, with its saved token');
      const row = await t.db.selectFrom('ci_builds').select(['status', 'failure_reason']).where('id', '=', job.id).executeTakeFirstOrThrow();
      assert.deepEqual(row, { status: 'failed', failure_reason: 'runner_system_failure' });
      assert.ok(messages.some((m) => /1 job this runner was running when its process died/.test(m)), messages.join('\n'));
    } finally {
      await builtin.stop();
    }
  });
});
