// The job artifacts API over HTTP, with artifacts made by real pipeline runs: a listening Cairn,
// its built-in runner executing pushed .gitlab-ci.yml jobs (a parent pipeline and a child
// pipeline), uploads through the runner protocol; then every endpoint and error with
// permission cases, on local disk and on a real S3-speaking server (s3rver).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import yauzl from 'yauzl';
import { assignBuild } from '../../src/ci/jobs/state.js';
import type { Project } from '../../src/db/schema/core.js';
import { drainJobs, runOneJob } from '../../src/jobs/queue.js';
import { detectSandbox } from '../../src/runner/sandbox.js';
import { startServeBuiltinRunner } from '../../src/runner/serve.js';
import type { BuiltinRunner } from '../../src/runner/runner.js';
import { destroyExpiredArtifacts, DESTROY_EXPIRED_ARTIFACTS_JOB } from '../../src/services/artifacts.js';
import { artifactStore } from '../../src/storage/index.js';
import type { S3ObjectStore } from '../../src/storage/s3.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, testRunner } from '../helpers/ci.js';
import { startS3 } from '../helpers/s3.js';
import { freePort } from '../helpers/serve.js';
import { until } from '../helpers/until.js';

const sandbox = detectSandbox();

const PARENT_YML = [
  'stages: [build, trigger]',
  'build:',
  '  stage: build',
  '  script:',
  '    - mkdir -p out/deep',
  '    - echo "parent $CI_PIPELINE_ID" > out/a.txt',
  '    - echo "<script>alert(1)</script>" > out/page.html',
  '    - echo deep > out/deep/d.txt',
  '  artifacts:',
  '    paths: [out/]',
  'private:',
  '  stage: build',
  '  script: [echo secret > s.txt]',
  '  artifacts:',
  '    paths: [s.txt]',
  '    access: developer',
  'plain:',
  '  stage: build',
  '  script: [echo no artifacts]',
  'child:',
  '  stage: trigger',
  '  trigger:',
  '    include: child.yml',
  '    strategy: depend',
  '',
].join('\n');
const CHILD_YML = [
  'build:',
  '  script: [mkdir -p out, echo child > out/a.txt]',
  '  artifacts:',
  '    paths: [out/]',
  'child-only:',
  '  script: [echo only > c.txt]',
  '  artifacts:',
  '    paths: [c.txt]',
  '',
].join('\n');

function zipNames(body: string | Buffer): Promise<string[]> {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body, 'binary');
  return new Promise((resolve, reject) =>
    yauzl.fromBuffer(buf, { lazyEntries: true }, (err, zip) => {
      if (err) return reject(err);
      const names: string[] = [];
      zip!.on('entry', (e: yauzl.Entry) => {
        names.push(e.fileName);
        zip!.readEntry();
      });
      zip!.on('end', () => resolve(names.sort()));
      zip!.on('error', reject);
      zip!.readEntry();
    }),
  );
}

/** A Cairn listening on a free port with its built-in runner and queue worker. */
async function startInstance(overrides: Record<string, unknown> = {}) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const t = await createTestContext({ host: '127.0.0.1', port, externalUrl: url, runnerPollTimeout: 1, ...overrides });
  await t.app.listen({ host: '127.0.0.1', port });
  const messages: string[] = [];
  const runner = await startServeBuiltinRunner(t.app.cairn, { port, env: { CAIRN_RUNNER_ALLOW_UNISOLATED: sandbox.available ? '' : '1' }, log: (m) => messages.push(m) });
  assert.ok(runner, messages.join('\n'));
  return { t, runner: runner as BuiltinRunner, messages };
}

/** Pushes the parent and child configuration and waits for the pipeline (and its child) to succeed. */
async function runPipeline(t: TestContext, project: Project, marker: string, messages: string[]) {
  await commitFiles(t, project, { '.gitlab-ci.yml': PARENT_YML, 'child.yml': CHILD_YML, 'marker.txt': marker });
  const parent = await until('the pipeline', () =>
    t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).where('parent_pipeline_id', 'is', null).orderBy('id', 'desc').executeTakeFirst(),
  );
  const done = await until('the pipeline to finish', async () => {
    await drainJobs(t.app.cairn);
    const p = await t.db.selectFrom('ci_pipelines').selectAll().where('id', '=', parent.id).executeTakeFirstOrThrow();
    return ['success', 'failed', 'canceled'].includes(p.status) ? p : null;
  });
  const jobs = await jobsByName(t, parent.id);
  const child = await t.db.selectFrom('ci_pipelines').selectAll().where('parent_pipeline_id', '=', parent.id).executeTakeFirstOrThrow();
  const childJobs = await jobsByName(t, child.id);
  assert.equal(done.status, 'success', JSON.stringify({ jobs: Object.values(jobs).map((j) => [j.name, j.status]), child: Object.values(childJobs).map((j) => [j.name, j.status]) }) + messages.join('\n'));
  return { parent: done, child, jobs, childJobs };
}

describe('job artifacts on local disk', () => {
  let t: TestContext;
  let runner: BuiltinRunner;
  let messages: string[];
  let project: Project;
  let users: Record<'guest' | 'reporter' | 'developer' | 'maintainer' | 'outsider', TestUser>;
  let first: Awaited<ReturnType<typeof runPipeline>>;
  let second: Awaited<ReturnType<typeof runPipeline>>;
  const api = (p: string) => `/api/v4/projects/${project.id}${p}`;

  before(async () => {
    ({ t, runner, messages } = await startInstance());
    project = await t.createProject();
    users = {
      guest: await t.createUser(),
      reporter: await t.createUser(),
      developer: await t.createUser(),
      maintainer: await t.createUser(),
      outsider: await t.createUser(),
    };
    await t.addMember(project, users.guest.user, 10);
    await t.addMember(project, users.reporter.user, 20);
    await t.addMember(project, users.developer.user, 30);
    await t.addMember(project, users.maintainer.user, 40);
    first = await runPipeline(t, project, 'one', messages);
    second = await runPipeline(t, project, 'two', messages);
    await runner.stop();
  });
  after(async () => {
    await runner?.stop().catch(() => {});
    // The runner's idle keep-alive connections would hold the close for the keep-alive timeout.
    t?.app.server.closeAllConnections();
    await t?.close();
  });

  test('GET /jobs/:job_id/artifacts: the zipped archive, for readers of jobs only', async () => {
    const build = second.jobs.build;
    const res = await t.get(api(`/jobs/${build.id}/artifacts`));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers['content-type'], 'application/zip');
    assert.match(res.headers['content-disposition'], /^attachment; filename="artifacts.zip"/);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    const raw = await t.app.inject({ method: 'GET', url: api(`/jobs/${build.id}/artifacts`), headers: { 'private-token': users.reporter.token } });
    assert.equal(raw.statusCode, 200);
    assert.equal(Number(raw.headers['content-length']), raw.rawPayload.length);
    assert.deepEqual((await zipNames(raw.rawPayload)).filter((n) => !n.endsWith('/')), ['out/a.txt', 'out/deep/d.txt', 'out/page.html']);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: users.reporter.token })).status, 200);
    // Guests read jobs (and so artifacts) while the project's jobs are public (public_jobs), as in GitLab.
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: users.guest.token })).status, 200);
    assert.equal((await t.put(api(''), { public_jobs: false })).status, 200);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: users.guest.token })).status, 403, 'public_jobs off: guests may not');
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: users.reporter.token })).status, 200);
    assert.equal((await t.put(api(''), { public_jobs: true })).status, 200);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: users.outsider.token })).status, 404);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`), { token: null })).status, 404);
    assert.equal((await t.get(api(`/jobs/${second.jobs.plain.id}/artifacts`))).status, 404, 'a job without artifacts');
    assert.equal((await t.get(api(`/jobs/${second.jobs.child.id}/artifacts`))).status, 404, 'a bridge is not a build');
    assert.equal((await t.get(api(`/jobs/999999999/artifacts`))).status, 404);
    assert.equal((await t.get(`/api/v4/projects/999999999/jobs/${build.id}/artifacts`)).status, 404);
  });

  test('artifacts:access developer: reporters may see the job but not its artifacts', async () => {
    const job = second.jobs.private;
    assert.equal((await t.get(api(`/jobs/${job.id}`), { token: users.reporter.token })).status, 200);
    assert.equal((await t.get(api(`/jobs/${job.id}/artifacts`), { token: users.reporter.token })).status, 403);
    assert.equal((await t.get(api(`/jobs/${job.id}/artifacts/s.txt`), { token: users.reporter.token })).status, 403);
    const dev = await t.get(api(`/jobs/${job.id}/artifacts/s.txt`), { token: users.developer.token });
    assert.equal(dev.status, 200);
    assert.equal(dev.text, 'secret\n');
  });

  test('GET /jobs/:job_id/artifacts/*artifact_path: one file, streamed, never rendered as HTML', async () => {
    const build = second.jobs.build;
    const a = await t.get(api(`/jobs/${build.id}/artifacts/out/a.txt`), { token: users.reporter.token });
    assert.equal(a.status, 200, a.text);
    assert.equal(a.text, `parent ${second.parent.id}\n`);
    assert.equal(a.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(a.headers['content-length'], String(a.text.length));
    assert.match(a.headers['content-disposition'], /^attachment; filename="a.txt"/);
    const html = await t.get(api(`/jobs/${build.id}/artifacts/out/page.html`));
    assert.equal(html.status, 200);
    assert.equal(html.headers['content-type'], 'application/octet-stream');
    assert.equal(html.headers['x-content-type-options'], 'nosniff');
    assert.match(html.headers['content-disposition'], /^attachment/);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts/out/deep/d.txt`))).text, 'deep\n');
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts/./out/a.txt`))).status, 200);
    // Invalid paths: 400. Missing ones, directories: 404.
    for (const bad of ['..%2F..%2Fetc%2Fpasswd', 'out/..%2F..%2F..%2Fetc%2Fpasswd', 'out/%2E%2E%2F%2E%2E%2Fx', '%2Fetc%2Fpasswd', 'out/a.txt%00.png', 'out%5C..%5C..%5Cx']) {
      const res = await t.get(api(`/jobs/${build.id}/artifacts/${bad}`));
      assert.equal(res.status, 400, `${bad}: ${res.status} ${res.text}`);
    }
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts/out/missing.txt`))).status, 404);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts/out/deep`))).status, 404);
    assert.equal((await t.get(api(`/jobs/${second.jobs.plain.id}/artifacts/out/a.txt`))).status, 404);
    assert.equal((await t.get(api(`/jobs/${second.jobs.private.id}/artifacts/s.txt`), { token: users.guest.token })).status, 403);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts/out/a.txt`), { token: users.outsider.token })).status, 404);
  });

  test('by ref: the latest successful pipeline, parent before child; raw files; job required', async () => {
    const dl = await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'build' }, token: users.reporter.token });
    assert.equal(dl.status, 200, dl.text);
    assert.equal(dl.headers['content-type'], 'application/zip');
    const raw = await t.get(api('/jobs/artifacts/main/raw/out/a.txt'), { query: { job: 'build' } });
    assert.equal(raw.status, 200, raw.text);
    assert.equal(raw.text, `parent ${second.parent.id}\n`, 'the parent of the latest pipeline wins over its child (same job name) and older pipelines');
    const childOnly = await t.get(api('/jobs/artifacts/main/raw/c.txt'), { query: { job: 'child-only' } });
    assert.equal(childOnly.status, 200);
    assert.equal(childOnly.text, 'only\n', 'jobs of child pipelines are found');
    assert.equal((await t.get(api('/jobs/artifacts/main/download'))).status, 400, 'job is required');
    assert.equal((await t.get(api('/jobs/artifacts/main/raw/out/a.txt'))).status, 400);
    assert.equal((await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'nope' } })).status, 404);
    assert.equal((await t.get(api('/jobs/artifacts/no-such-branch/download'), { query: { job: 'build' } })).status, 404);
    assert.equal((await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'plain' } })).status, 404, 'a job without artifacts');
    assert.equal((await t.get(api('/jobs/artifacts/main/raw/out/nope'), { query: { job: 'build' } })).status, 404);
    assert.equal((await t.get(api('/jobs/artifacts/main/raw/..%2F..%2Fx'), { query: { job: 'build' } })).status, 400);
    assert.equal((await t.get(api(`/jobs/artifacts/${second.parent.sha}/download`), { query: { job: 'build' } })).status, 404, 'a SHA is not a ref');
    assert.equal((await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'private' }, token: users.reporter.token })).status, 403, 'artifacts:access developer');
    assert.equal((await t.get(api('/jobs/artifacts/main/raw/s.txt'), { query: { job: 'private' }, token: users.developer.token })).text, 'secret\n');
    assert.equal((await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'build' }, token: null })).status, 404);
  });

  test('job_token: a running job of the project downloads artifacts (header and query); finished, it no longer can', async () => {
    await commitFiles(t, project, { '.gitlab-ci.yml': 'waiting:\n  tags: [nowhere]\n  script: [echo]\n' }, { branch: 'tok', startBranch: 'main' });
    const pipeline = await t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', project.id).where('ref', '=', 'tok').executeTakeFirstOrThrow();
    const job = (await jobsByName(t, pipeline.id)).waiting;
    const runnerId = await testRunner(t);
    const taken = await t.db.transaction().execute((trx) => assignBuild(trx, job.id, runnerId));
    assert.ok(taken);
    const byHeader = await t.get(api('/jobs/artifacts/main/raw/out/a.txt'), { query: { job: 'build' }, token: null, headers: { 'job-token': taken.token } });
    assert.equal(byHeader.status, 200, byHeader.text);
    const byQuery = await t.get(api(`/jobs/${second.jobs.build.id}/artifacts`), { query: { job_token: taken.token }, token: null });
    assert.equal(byQuery.status, 200);
    assert.equal((await t.get(api(`/jobs/${second.jobs.build.id}/artifacts/out/a.txt`), { token: null, headers: { 'job-token': taken.token } })).status, 200);
    assert.equal((await t.get(api('/jobs/artifacts/main/download'), { query: { job: 'build', job_token: 'not-a-token' }, token: null })).status, 401);
    // Job tokens work only where the spec allows: not for keep or delete.
    assert.equal((await t.call('POST', api(`/jobs/${second.jobs.build.id}/artifacts/keep`), { token: null, headers: { 'job-token': taken.token } })).status, 401);
    await t.db.updateTable('ci_builds').set({ status: 'success', token_digest: null }).where('id', '=', job.id).execute();
    assert.equal((await t.get(api(`/jobs/${second.jobs.build.id}/artifacts`), { query: { job_token: taken.token }, token: null })).status, 401);
  });

  test('the Job shows artifacts, artifacts_file and artifacts_expire_at', async () => {
    const res = await t.get(api(`/jobs/${second.jobs.build.id}`));
    assert.equal(res.status, 200);
    assert.equal(res.body.artifacts_file.filename, 'artifacts.zip');
    assert.ok(res.body.artifacts_file.size > 0);
    const archive = res.body.artifacts.find((a: any) => a.file_type === 'archive');
    assert.deepEqual(archive, { file_type: 'archive', size: res.body.artifacts_file.size, filename: 'artifacts.zip', file_format: 'zip' });
    assert.ok(res.body.artifacts_expire_at && new Date(res.body.artifacts_expire_at).getTime() > Date.now(), 'the instance default expiry');
    const plain = await t.get(api(`/jobs/${second.jobs.plain.id}`));
    assert.deepEqual(plain.body.artifacts, []);
    assert.equal(plain.body.artifacts_file, undefined);
  });

  test('POST /jobs/:job_id/artifacts/keep: developers; clears the expiry; 404 without artifacts', async () => {
    const build = first.jobs.build;
    assert.equal((await t.post(api(`/jobs/${build.id}/artifacts/keep`), {}, { token: users.reporter.token })).status, 403);
    assert.equal((await t.post(api(`/jobs/${build.id}/artifacts/keep`), {}, { token: null })).status, 401);
    assert.equal((await t.post(api(`/jobs/${build.id}/artifacts/keep`), {}, { token: users.outsider.token })).status, 404);
    assert.equal((await t.post(api(`/jobs/${first.jobs.plain.id}/artifacts/keep`), {}, { token: users.developer.token })).status, 404);
    const res = await t.post(api(`/jobs/${build.id}/artifacts/keep`), {}, { token: users.developer.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, build.id);
    assert.equal(res.body.artifacts_expire_at, null);
    assert.equal(res.body.download_url, null);
    assert.ok(res.body.artifacts_file);
    const rows = await t.db.selectFrom('ci_job_artifacts').select('expire_at').where('job_id', '=', build.id).execute();
    assert.ok(rows.length && rows.every((r) => r.expire_at === null));
  });

  test('DELETE /projects/:id/artifacts: maintainers, 202, a queued job expires all but the latest successful pipeline of each ref; the worker removes them', async () => {
    assert.equal((await t.delete(api('/artifacts'), { token: users.developer.token })).status, 403);
    assert.equal((await t.delete(api('/artifacts'), { token: null })).status, 401);
    assert.equal((await t.delete(api('/artifacts'), { token: users.outsider.token })).status, 404);
    const res = await t.delete(api('/artifacts'), { token: users.maintainer.token });
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(res.body, { message: '202 Accepted' });
    // Durable: the work is a queued job, not done in the request.
    const queued = await t.db.selectFrom('background_jobs').selectAll().where('kind', '=', 'ci.artifacts.expire_project').where('state', '=', 'pending').execute();
    assert.equal(queued.length, 1);
    assert.equal((await t.get(api(`/jobs/${first.jobs.build.id}/artifacts`))).status, 200, 'not yet expired');
    await drainJobs(t.app.cairn);
    // The older pipeline's artifacts (the kept one too: bulk expiry overrides keep) expired now; the latest's untouched.
    const oldJob = await t.get(api(`/jobs/${first.jobs.build.id}`));
    assert.ok(oldJob.body.artifacts_expire_at && new Date(oldJob.body.artifacts_expire_at).getTime() <= Date.now());
    assert.equal(oldJob.body.artifacts_file, undefined);
    assert.equal((await t.get(api(`/jobs/${first.jobs.build.id}/artifacts`))).status, 404);
    assert.equal((await t.get(api(`/jobs/${first.childJobs['child-only'].id}/artifacts`))).status, 404, "the old child pipeline's too");
    assert.equal((await t.get(api(`/jobs/${second.jobs.build.id}/artifacts`))).status, 200);
    assert.equal((await t.get(api(`/jobs/${second.childJobs['child-only'].id}/artifacts`))).status, 200, "the latest pipeline's child pipeline is kept with it");
    const oldKeys = await t.db.selectFrom('ci_job_artifacts').select('store_key').where('job_id', 'in', [first.jobs.build.id, first.childJobs.build.id]).execute();
    assert.ok(oldKeys.length >= 2);
    // The recurring expiry worker: rows first, then their objects.
    const removed = await destroyExpiredArtifacts(t.app.cairn);
    assert.ok(removed >= oldKeys.length, String(removed));
    assert.equal((await t.db.selectFrom('ci_job_artifacts').select('id').where('job_id', 'in', [first.jobs.build.id, first.childJobs.build.id]).execute()).length, 0);
    for (const k of oldKeys) assert.equal(await artifactStore(t.config).size(k.store_key), null, 'the object is gone');
    assert.equal((await t.get(api(`/jobs/${second.jobs.build.id}/artifacts/out/a.txt`))).status, 200);
  });

  test('the expiry worker (recurring job) removes expired artifacts but keeps those of the latest successful pipeline', async () => {
    const latest = second.jobs.build.id;
    await t.db.updateTable('ci_job_artifacts').set({ expire_at: new Date(Date.now() - 60_000) as any }).where('job_id', '=', latest).execute();
    // A job of another project, not of a latest pipeline, expired too: removed by the scheduled run.
    const tokJob = (await t.db.selectFrom('ci_builds').select('id').where('project_id', '=', project.id).where('ref', '=', 'tok').executeTakeFirstOrThrow()).id;
    const key = `${project.id}/${tokJob}/file-test`;
    const { Readable } = await import('node:stream');
    const put = await artifactStore(t.config).put(key, Readable.from([Buffer.from('x')]));
    await t.db.insertInto('ci_job_artifacts').values({ job_id: tokJob, project_id: project.id, file_type: 'archive', file_format: 'zip', file_name: 'artifacts.zip', size: put.size, store_key: key, expire_at: new Date(Date.now() - 1000) as any, created_at: new Date() as any }).execute();
    await t.db.insertInto('background_jobs').values({ kind: DESTROY_EXPIRED_ARTIFACTS_JOB, recurring: true, run_at: new Date(Date.now() - 1000) as any, payload: '{}' as any } as any).execute();
    while (await runOneJob(t.app.cairn)) {
      /* until the due run is done */
    }
    assert.equal((await t.db.selectFrom('ci_job_artifacts').select('id').where('job_id', '=', tokJob).execute()).length, 0);
    assert.equal(await artifactStore(t.config).size(key), null);
    assert.ok((await t.db.selectFrom('ci_job_artifacts').select('id').where('job_id', '=', latest).execute()).length > 0, 'locked: the latest successful pipeline of main');
    const next = await t.db.selectFrom('background_jobs').selectAll().where('kind', '=', DESTROY_EXPIRED_ARTIFACTS_JOB).where('state', '=', 'pending').execute();
    assert.equal(next.length, 1, 'the next run is scheduled');
  });

  test('DELETE /jobs/:job_id/artifacts: maintainers, 204, rows and objects gone', async () => {
    const build = second.jobs.build;
    const keys = (await t.db.selectFrom('ci_job_artifacts').select('store_key').where('job_id', '=', build.id).execute()).map((r) => r.store_key);
    assert.ok(keys.length);
    assert.equal((await t.delete(api(`/jobs/${build.id}/artifacts`), { token: users.developer.token })).status, 403);
    assert.equal((await t.delete(api(`/jobs/${build.id}/artifacts`), { token: users.reporter.token })).status, 403);
    assert.equal((await t.delete(api(`/jobs/${build.id}/artifacts`), { token: null })).status, 401);
    assert.equal((await t.delete(api(`/jobs/999999999/artifacts`), { token: users.maintainer.token })).status, 404);
    const res = await t.delete(api(`/jobs/${build.id}/artifacts`), { token: users.maintainer.token });
    assert.equal(res.status, 204, res.text);
    assert.equal((await t.get(api(`/jobs/${build.id}/artifacts`))).status, 404);
    for (const k of keys) assert.equal(await artifactStore(t.config).size(k), null);
    const job = await t.get(api(`/jobs/${build.id}`));
    assert.deepEqual(job.body.artifacts, []);
    // By ref, the child's job of the same name is found now that the parent's is gone.
    const raw = await t.get(api('/jobs/artifacts/main/raw/out/a.txt'), { query: { job: 'build' } });
    assert.equal(raw.status, 200);
    assert.equal(raw.text, 'child\n');
  });
});

describe('job artifacts on S3 (s3rver)', () => {
  let s3: Awaited<ReturnType<typeof startS3>>;
  let t: TestContext;
  let runner: BuiltinRunner;
  let messages: string[];
  let project: Project;
  let run: Awaited<ReturnType<typeof runPipeline>>;
  const api = (p: string) => `/api/v4/projects/${project.id}${p}`;

  before(async () => {
    s3 = await startS3();
    ({ t, runner, messages } = await startInstance({ objectStoreUrl: s3.url }));
    project = await t.createProject();
    run = await runPipeline(t, project, 's3', messages);
    await runner.stop();
  });
  after(async () => {
    await runner?.stop().catch(() => {});
    // The client's keep-alive sockets would hold the S3 server's close until they time out.
    if (t) (artifactStore(t.config) as S3ObjectStore).destroy();
    t?.app.server.closeAllConnections();
    await t?.close();
    await s3?.close();
  });

  test('uploaded by the runner into the bucket, served back: archive, one file, by ref, errors', async () => {
    const rows = await t.db.selectFrom('ci_job_artifacts').selectAll().where('job_id', '=', run.jobs.build.id).execute();
    const archive = rows.find((r) => r.file_type === 'archive')!;
    const store = artifactStore(t.config);
    assert.equal(store.constructor.name, 'S3ObjectStore');
    assert.equal(await store.size(archive.store_key), Number(archive.size));
    const zip = await t.get(api(`/jobs/${run.jobs.build.id}/artifacts`));
    assert.equal(zip.status, 200);
    assert.equal(Number(zip.headers['content-length']), Number(archive.size));
    const file = await t.get(api(`/jobs/${run.jobs.build.id}/artifacts/out/a.txt`));
    assert.equal(file.text, `parent ${run.parent.id}\n`);
    assert.equal((await t.get(api('/jobs/artifacts/main/raw/c.txt'), { query: { job: 'child-only' } })).text, 'only\n');
    assert.equal((await t.get(api(`/jobs/${run.jobs.build.id}/artifacts/out/nope`))).status, 404);
    assert.equal((await t.get(api(`/jobs/${run.jobs.build.id}/artifacts/..%2Fx`))).status, 400);
    // The dependency download of the runner protocol reads the bucket too (the child's jobs ran).
    assert.equal(run.childJobs.build.status, 'success');
  });

  test('delete and expiry remove the objects from the bucket', async () => {
    const store = artifactStore(t.config);
    const key = (await t.db.selectFrom('ci_job_artifacts').select('store_key').where('job_id', '=', run.childJobs['child-only'].id).executeTakeFirstOrThrow()).store_key;
    assert.equal((await t.delete(api(`/jobs/${run.childJobs['child-only'].id}/artifacts`))).status, 204);
    assert.equal(await store.size(key), null);
    const other = (await t.db.selectFrom('ci_job_artifacts').select(['store_key', 'job_id']).where('job_id', '=', run.jobs.private.id).executeTakeFirstOrThrow());
    // A pipeline that is no longer the latest successful one of main: its expired artifacts go.
    await t.db.updateTable('ci_pipelines').set({ status: 'failed' }).where('id', '=', run.parent.id).execute();
    await t.db.updateTable('ci_job_artifacts').set({ expire_at: new Date(Date.now() - 1000) as any }).where('job_id', '=', other.job_id).execute();
    assert.ok((await destroyExpiredArtifacts(t.app.cairn)) >= 1);
    assert.equal(await store.size(other.store_key), null);
  });
});
