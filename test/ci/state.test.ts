import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { assignBuild, cancelBuild, cancelPipeline, compositeStatus, enqueueBuild, failTimedOut, finishBuild, onPipelineStatusChange, PIPELINE_TRANSITION_JOB, playBuild, processPipeline, retryBuild, retryPipeline } from '../../src/ci/jobs/state.js';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs } from '../../src/jobs/queue.js';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, pipeline, runJob, statuses, testRunner } from '../helpers/ci.js';

describe('CI job state machine', () => {
  let t: TestContext;

  before(async () => {
    t = await createTestContext();
  });
  after(async () => {
    await t?.close();
  });

  async function project(): Promise<Project> {
    return t.createProject();
  }

  async function pipelineFor(yaml: string, files: Record<string, string> = {}) {
    const p = await project();
    await commitFiles(t, p, { '.gitlab-ci.yml': yaml, ...files });
    return latestPipeline(t, p.id);
  }

  it('composite status follows GitLab', () => {
    const s = (status: string, allow_failure = false) => ({ status, allow_failure });
    assert.equal(compositeStatus([]), null);
    assert.equal(compositeStatus([s('success'), s('skipped')]), 'success');
    assert.equal(compositeStatus([s('success'), s('failed', true)]), 'success');
    assert.equal(compositeStatus([s('success'), s('failed')]), 'failed');
    assert.equal(compositeStatus([s('created'), s('created')]), 'created');
    assert.equal(compositeStatus([s('pending'), s('created')]), 'pending');
    assert.equal(compositeStatus([s('running'), s('created')]), 'running');
    assert.equal(compositeStatus([s('success'), s('created')]), 'running');
    assert.equal(compositeStatus([s('success'), s('manual')]), 'manual');
    assert.equal(compositeStatus([s('success'), s('manual', true)]), 'success');
    assert.equal(compositeStatus([s('canceled'), s('success')]), 'canceled');
    assert.equal(compositeStatus([s('skipped')]), 'skipped');
    assert.equal(compositeStatus([s('success'), s('scheduled')]), 'scheduled');
    assert.equal(compositeStatus([s('success'), s('skipped')], { dag: true }), 'skipped');
    assert.equal(compositeStatus([s('success'), s('running')], { dag: true }), 'pending');
  });

  it('runs stages in order and finishes the pipeline with timestamps', async () => {
    const p = await pipelineFor(`
stages: [build, test, deploy]
build: { stage: build, script: [make] }
unit: { stage: test, script: [test] }
lint: { stage: test, script: [lint] }
deploy: { stage: deploy, script: [deploy] }
`);
    assert.equal(p.status, 'pending');
    assert.equal(p.source, 'push');
    assert.equal(p.iid, 1);
    assert.deepEqual(await statuses(t, p.id), { build: 'pending', unit: 'created', lint: 'created', deploy: 'created' });
    const pending = await t.db.selectFrom('ci_pending_builds').selectAll().where('project_id', '=', p.project_id).execute();
    assert.equal(pending.length, 1);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'success');
    assert.deepEqual(await statuses(t, p.id), { build: 'success', unit: 'pending', lint: 'pending', deploy: 'created' });
    assert.equal((await pipeline(t, p.id)).status, 'running');
    assert.ok((await pipeline(t, p.id)).started_at);
    await runJob(t, jobs.unit, 'success');
    await runJob(t, jobs.lint, 'success');
    await runJob(t, jobs.deploy, 'success');
    const done = await pipeline(t, p.id);
    assert.equal(done.status, 'success');
    assert.ok(done.finished_at);
    assert.equal(typeof done.duration, 'number');
    assert.equal(typeof done.queued_duration, 'number');
    const stages = await t.db.selectFrom('ci_stages').select(['name', 'status']).where('pipeline_id', '=', p.id).orderBy('position').execute();
    assert.deepEqual(stages.map((s) => [s.name, s.status]), [['build', 'success'], ['test', 'success'], ['deploy', 'success']]);
    const finished = await jobsByName(t, p.id);
    assert.equal(finished.build.token_digest, null);
    assert.ok(finished.build.finished_at);
  });

  it('skips later stages after a failure; on_failure and always jobs run', async () => {
    const p = await pipelineFor(`
stages: [build, test, cleanup]
build: { stage: build, script: [make] }
test: { stage: test, script: [t] }
notify: { stage: cleanup, script: [n], when: on_failure }
clean: { stage: cleanup, script: [c], when: always }
`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'failed', { exitCode: 1 });
    assert.deepEqual(await statuses(t, p.id), { build: 'failed', test: 'skipped', notify: 'pending', clean: 'pending' });
    assert.equal((await jobsByName(t, p.id)).build.failure_reason, 'script_failure');
    await runJob(t, jobs.notify, 'success');
    await runJob(t, jobs.clean, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'failed');
  });

  it('allow_failure gives success with warnings; exit_codes decide', async () => {
    const p = await pipelineFor(`
a: { stage: test, script: [x], allow_failure: true }
b: { stage: test, script: [x], allow_failure: { exit_codes: [3] } }
c: { stage: deploy, script: [x] }
`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.a, 'failed');
    await runJob(t, jobs.b, 'failed', { exitCode: 3 });
    const after = await jobsByName(t, p.id);
    assert.equal(after.b.allow_failure, true);
    assert.equal(after.c.status, 'pending');
    await runJob(t, jobs.c, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');

    const q = await pipelineFor(`
b: { stage: test, script: [x], allow_failure: { exit_codes: [3] } }
c: { stage: deploy, script: [x] }
`);
    const qj = await jobsByName(t, q.id);
    await runJob(t, qj.b, 'failed', { exitCode: 1 });
    assert.deepEqual(await statuses(t, q.id), { b: 'failed', c: 'skipped' });
    assert.equal((await pipeline(t, q.id)).status, 'failed');
  });

  it('needs: a job starts when its needs finish, whatever the stage', async () => {
    const p = await pipelineFor(`
stages: [build, test, deploy]
build_a: { stage: build, script: [x] }
build_b: { stage: build, script: [x] }
test_a: { stage: test, script: [x], needs: [build_a] }
test_b: { stage: test, script: [x], needs: [build_b] }
deploy_a: { stage: deploy, script: [x], needs: [test_a] }
lone: { stage: deploy, script: [x], needs: [] }
`);
    assert.equal((await statuses(t, p.id)).lone, 'pending');
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build_a, 'success');
    assert.deepEqual(await statuses(t, p.id), { build_a: 'success', build_b: 'pending', test_a: 'pending', test_b: 'created', deploy_a: 'created', lone: 'pending' });
    await runJob(t, jobs.test_a, 'success');
    assert.equal((await statuses(t, p.id)).deploy_a, 'pending');
    await runJob(t, jobs.build_b, 'failed');
    assert.equal((await statuses(t, p.id)).test_b, 'skipped');
  });

  it('manual jobs: allowed ones do not block, blocking ones do; play runs them', async () => {
    const p = await pipelineFor(`
stages: [build, deploy, after]
build: { stage: build, script: [x] }
deploy: { stage: deploy, script: [x], when: manual }
after: { stage: after, script: [x] }
`);
    let jobs = await jobsByName(t, p.id);
    assert.equal(jobs.deploy.allow_failure, true);
    await runJob(t, jobs.build, 'success');
    assert.deepEqual(await statuses(t, p.id), { build: 'success', deploy: 'manual', after: 'pending' });
    await runJob(t, jobs.after, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');
    const played = await playBuild(t.app.cairn, jobs.deploy.id, null);
    assert.equal(played?.status, 'pending');
    assert.equal((await pipeline(t, p.id)).status, 'running');
    await runJob(t, jobs.deploy, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');

    const q = await pipelineFor(`
stages: [build, deploy, after]
build: { stage: build, script: [x] }
deploy: { stage: deploy, script: [x], when: manual, allow_failure: false }
after: { stage: after, script: [x] }
`);
    jobs = await jobsByName(t, q.id);
    await runJob(t, jobs.build, 'success');
    assert.deepEqual(await statuses(t, q.id), { build: 'success', deploy: 'manual', after: 'created' });
    assert.equal((await pipeline(t, q.id)).status, 'manual');
    await playBuild(t.app.cairn, jobs.deploy.id, null);
    await runJob(t, jobs.deploy, 'success');
    assert.equal((await statuses(t, q.id)).after, 'pending');
    // A job that is not manual cannot be played.
    assert.equal(await playBuild(t.app.cairn, jobs.after.id, null), null);
  });

  it('a job needing a manual job is skipped, and runs after the manual job is played', async () => {
    const p = await pipelineFor(`
deploy: { stage: test, script: [x], when: manual }
smoke: { stage: deploy, script: [x], needs: [deploy] }
`);
    assert.deepEqual(await statuses(t, p.id), { deploy: 'manual', smoke: 'skipped' });
    const jobs = await jobsByName(t, p.id);
    await playBuild(t.app.cairn, jobs.deploy.id, null);
    assert.deepEqual(await statuses(t, p.id), { deploy: 'pending', smoke: 'created' });
    await runJob(t, jobs.deploy, 'success');
    assert.equal((await statuses(t, p.id)).smoke, 'pending');
  });

  it('retry: automatic (retry: max) and by API; the old job is marked retried', async () => {
    const p = await pipelineFor(`
flaky: { stage: test, script: [x], retry: 1 }
next: { stage: deploy, script: [x] }
`);
    let jobs = await jobsByName(t, p.id);
    const first = jobs.flaky;
    await runJob(t, first, 'failed');
    jobs = await jobsByName(t, p.id);
    assert.notEqual(jobs.flaky.id, first.id);
    assert.equal(jobs.flaky.status, 'pending');
    assert.equal((await t.db.selectFrom('ci_builds').select('retried').where('id', '=', first.id).executeTakeFirstOrThrow()).retried, true);
    await runJob(t, jobs.flaky, 'failed');
    // max 1: no third attempt
    assert.deepEqual(await statuses(t, p.id), { flaky: 'failed', next: 'skipped' });
    assert.equal((await pipeline(t, p.id)).status, 'failed');
    const retried = await retryBuild(t.app.cairn, jobs.flaky.id, null);
    assert.ok(retried);
    assert.equal(retried.status, 'pending');
    assert.deepEqual(await statuses(t, p.id), { flaky: 'pending', next: 'created' });
    assert.equal((await pipeline(t, p.id)).status, 'pending');
    await runJob(t, retried, 'success');
    assert.equal((await statuses(t, p.id)).next, 'pending');
    // Retrying an old attempt or a running job: refused.
    assert.equal(await retryBuild(t.app.cairn, first.id, null), null);
    assert.equal(await retryBuild(t.app.cairn, (await jobsByName(t, p.id)).next.id, null), null);
  });

  it('retry: when limits which failures retry', async () => {
    const p = await pipelineFor(`
j: { script: [x], retry: { max: 2, when: [runner_system_failure] } }
`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.j, 'failed');
    assert.equal((await jobsByName(t, p.id)).j.id, jobs.j.id);
  });

  it('cancel: a job, a pipeline; the runner cannot finish a canceled job', async () => {
    const p = await pipelineFor(`
a: { stage: test, script: [x] }
b: { stage: test, script: [x] }
c: { stage: deploy, script: [x] }
`);
    const jobs = await jobsByName(t, p.id);
    const runner = await testRunner(t);
    await t.db.transaction().execute((trx) => assignBuild(trx, jobs.a.id, runner));
    const canceled = await cancelBuild(t.app.cairn, jobs.a.id);
    assert.equal(canceled?.status, 'canceled');
    assert.equal(await finishBuild(t.app.cairn, jobs.a.id, { status: 'success' }), false);
    await cancelPipeline(t.app.cairn, p.id);
    assert.deepEqual(await statuses(t, p.id), { a: 'canceled', b: 'canceled', c: 'canceled' });
    assert.equal((await pipeline(t, p.id)).status, 'canceled');
    assert.equal((await t.db.selectFrom('ci_pending_builds').selectAll().where('project_id', '=', p.project_id).execute()).length, 0);
    // A canceled job cannot be assigned any more.
    assert.equal(await t.db.transaction().execute((trx) => assignBuild(trx, jobs.b.id, runner)), null);
    // Pipeline retry brings canceled jobs back.
    assert.equal(await retryPipeline(t.app.cairn, p.id, null), true);
    assert.deepEqual(await statuses(t, p.id), { a: 'pending', b: 'pending', c: 'created' });
  });

  it('a job is taken once even when two takers race', async () => {
    const p = await pipelineFor(`a: { script: [x] }`);
    const jobs = await jobsByName(t, p.id);
    const runner = await testRunner(t);
    const results = await Promise.all([1, 2].map(() => t.db.transaction().execute((trx) => assignBuild(trx, jobs.a.id, runner))));
    assert.equal(results.filter(Boolean).length, 1);
    const token = results.find(Boolean)!.token;
    assert.match(token, /^glcbt-/);
    // processing twice changes nothing
    await Promise.all([processPipeline(t.app.cairn, p.id), processPipeline(t.app.cairn, p.id)]);
    assert.equal((await jobsByName(t, p.id)).a.status, 'running');
    assert.equal(await enqueueBuild(t.db, jobs.a.id), null);
  });

  it('delayed jobs are scheduled and enqueued by the queue at their time', async () => {
    const p = await pipelineFor(`
later: { script: [x], when: delayed, start_in: 1 second }
`);
    const jobs = await jobsByName(t, p.id);
    assert.equal(jobs.later.status, 'scheduled');
    assert.ok(jobs.later.scheduled_at);
    assert.equal((await pipeline(t, p.id)).status, 'scheduled');
    await new Promise((r) => setTimeout(r, 1200));
    await drainJobs(t.app.cairn);
    assert.equal((await jobsByName(t, p.id)).later.status, 'pending');
  });

  it('a running job past its timeout fails with stuck_or_timeout_failure', async () => {
    const p = await pipelineFor(`slow: { script: [x], timeout: 10 minutes }`);
    const jobs = await jobsByName(t, p.id);
    assert.equal(jobs.slow.timeout, 600);
    const runner = await testRunner(t);
    await t.db.transaction().execute((trx) => assignBuild(trx, jobs.slow.id, runner));
    assert.equal(await failTimedOut(t.app.cairn, jobs.slow.id), false);
    assert.equal(await failTimedOut(t.app.cairn, jobs.slow.id, new Date(Date.now() + 601_000)), true);
    const after = (await jobsByName(t, p.id)).slow;
    assert.equal(after.status, 'failed');
    assert.equal(after.failure_reason, 'stuck_or_timeout_failure');
  });

  it('coverage is read from the log with the job regex', async () => {
    const p = await pipelineFor(`cov: { script: [x], coverage: '/Total: (\\d+\\.\\d+)%/' }`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.cov, 'success', { trace: 'start\nTotal: 12.50%\nmore\nTotal: 87.25%\nend\n' });
    assert.equal((await jobsByName(t, p.id)).cov.coverage, 87.25);
  });

  it('child pipelines: trigger:include makes a downstream pipeline; strategy depend mirrors it', async () => {
    const p = await pipelineFor(
      `
build: { stage: build, script: [x] }
child: { stage: test, trigger: { include: child.yml, strategy: depend } }
after: { stage: deploy, script: [x] }
`,
      { 'child.yml': 'inner: { script: [y] }\n' },
    );
    const jobs = await jobsByName(t, p.id);
    assert.equal(jobs.child.type, 'Ci::Bridge');
    await runJob(t, jobs.build, 'success');
    await drainJobs(t.app.cairn);
    const bridge = (await jobsByName(t, p.id)).child;
    assert.ok(bridge.downstream_pipeline_id);
    const child = await pipeline(t, bridge.downstream_pipeline_id!);
    assert.equal(child.source, 'parent_pipeline');
    assert.equal(child.parent_pipeline_id, p.id);
    assert.equal(child.source_job_id, bridge.id);
    assert.equal(bridge.status, 'running');
    const inner = await jobsByName(t, child.id);
    await runJob(t, inner.inner, 'success');
    assert.equal((await pipeline(t, child.id)).status, 'success');
    assert.deepEqual(await statuses(t, p.id), { build: 'success', child: 'success', after: 'pending' });
  });

  it('a child pipeline without depend: the bridge succeeds once it is created', async () => {
    const p = await pipelineFor(`child: { trigger: { include: [{ local: child.yml }] } }`, { 'child.yml': 'inner: { script: [y] }\n' });
    await drainJobs(t.app.cairn);
    const bridge = (await jobsByName(t, p.id)).child;
    assert.equal(bridge.status, 'success');
    const broken = await pipelineFor(`child: { trigger: { include: missing.yml } }`);
    await drainJobs(t.app.cairn);
    const b2 = (await jobsByName(t, broken.id)).child;
    assert.equal(b2.status, 'failed');
    assert.equal(b2.failure_reason, 'downstream_pipeline_creation_failed');
  });

  it('a job ends and its pipeline moves on in one transaction; status changes a dead process did not announce are announced by the queue', async () => {
    const seen: string[] = [];
    onPipelineStatusChange(async (_cairn, pl, before, after) => {
      seen.push(`${pl.id}:${before}>${after}`);
    });
    const p = await pipelineFor(`
stages: [a, b]
one: { stage: a, script: [x] }
two: { stage: b, script: [y] }
`);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.one, 'success');
    assert.deepEqual(await statuses(t, p.id), { one: 'success', two: 'pending' });
    await runJob(t, (await jobsByName(t, p.id)).two, 'success');
    assert.equal((await pipeline(t, p.id)).status, 'success');
    assert.ok(seen.includes(`${p.id}:running>success`), seen.join(', '));
    const journals = () => t.db.selectFrom('background_jobs').select('id').where('kind', '=', PIPELINE_TRANSITION_JOB).execute();
    assert.equal((await journals()).length, 0, 'announced changes leave no journal');
    // What a process killed between the commit and its listeners leaves behind: the journal.
    seen.length = 0;
    await t.db.insertInto('background_jobs').values({ kind: PIPELINE_TRANSITION_JOB, payload: JSON.stringify({ pipelineId: p.id, before: 'running', after: 'success' }) as any, state: 'pending', run_at: new Date() } as any).execute();
    await drainJobs(t.app.cairn);
    assert.deepEqual(seen, [`${p.id}:running>success`]);
    assert.deepEqual((await t.db.selectFrom('background_jobs').select('state').where('kind', '=', PIPELINE_TRANSITION_JOB).execute()).map((r) => r.state), ['done']);
  });
});
