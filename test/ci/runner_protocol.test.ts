import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildApp, type App } from '../../src/app.js';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import type { CiBuild } from '../../src/db/schema/ci.js';
import { cancelBuild, enqueueBuild } from '../../src/ci/jobs/state.js';
import { registrationToken } from '../../src/ci/runners.js';
import { readTrace } from '../../src/ci/trace.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, latestPipeline } from '../helpers/ci.js';

// Replays, request by request, what the gitlab-runner binary sends (network/gitlab.go):
// headers (RUNNER-TOKEN / JOB-TOKEN, X-Request-Id, Accept, Content-Type, Content-Range) and
// bodies (common/network.go's RegisterRunnerRequest, VerifyRunnerRequest, JobRequest,
// UpdateJobRequest), and checks every answer the way the runner reads it.

const RUNNER_INFO = {
  name: 'gitlab-runner',
  version: '17.5.0',
  revision: '8ec04662',
  platform: 'linux',
  architecture: 'amd64',
  executor: 'shell',
  shell: 'bash',
  features: {
    variables: true, image: false, services: false, artifacts: true, cache: true, fallback_cache_keys: true, shared: true,
    upload_multiple_artifacts: true, upload_raw_artifacts: true, session: true, terminal: true, refspecs: true, masking: true,
    proxy: false, raw_variables: true, artifacts_exclude: true, multi_build_steps: true, trace_reset: true, trace_checksum: true,
    trace_size: true, vault_secrets: true, cancelable: true, return_exit_code: true, service_variables: false,
    service_multiple_aliases: false, image_executor_opts: false, service_executor_opts: false, cancel_gracefully: true,
    native_steps_integration: false, two_phase_job_commit: true, job_inputs: true,
  },
  config: { gpus: '' },
};

let requestSeq = 0;
const runnerHeaders = (extra: Record<string, string> = {}) => ({
  'user-agent': 'gitlab-runner 17.5.0 (17-5-stable; go1.22.7; linux/amd64)',
  accept: 'application/json',
  'content-type': 'application/json',
  'x-request-id': `01J${(++requestSeq).toString().padStart(20, '0')}`,
  ...extra,
});

interface Answer {
  status: number;
  headers: Record<string, any>;
  body: any;
  raw: Buffer;
}

async function send(app: App, method: string, url: string, opts: { headers?: Record<string, string>; json?: unknown; payload?: Buffer | string } = {}): Promise<Answer> {
  const res = await app.inject({
    method: method as any,
    url,
    headers: opts.headers ?? {},
    payload: opts.json !== undefined ? JSON.stringify(opts.json) : opts.payload,
  });
  let body: any = res.body;
  if (String(res.headers['content-type'] ?? '').startsWith('application/json') && res.body) body = JSON.parse(res.body);
  return { status: res.statusCode, headers: res.headers, body, raw: res.rawPayload };
}

function multipart(boundary: string, parts: Array<{ name: string; filename?: string; data: Buffer | string }>): Buffer {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ''}`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${p.filename !== undefined ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`));
    chunks.push(Buffer.isBuffer(p.data) ? p.data : Buffer.from(p.data));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

describe('runner protocol (gitlab-runner replay)', () => {
  let t: TestContext;
  let app: App;
  let group: Namespace;
  let project: Project;
  let other: Project;
  let developer: TestUser;
  let pipelineSeq = 0;
  const POLL = 1;
  const MAX_ARTIFACTS = 64 * 1024;
  const MAX_TRACE = 4096;

  before(async () => {
    t = await createTestContext({ runnerPollTimeout: POLL, maxArtifactsSize: MAX_ARTIFACTS, maxTraceSize: MAX_TRACE });
    app = t.app;
    developer = await t.createUser();
    group = await t.createGroup({ owner: developer.user });
    const sub = await t.createGroup({ parent: group });
    project = await t.createProject({ group: sub });
    other = await t.createProject();
  });
  after(async () => {
    await t.close();
  });

  async function createJob(
    p: Project,
    attrs: { name?: string; stage?: string; stageIdx?: number; tags?: string[]; protected?: boolean; options?: Record<string, unknown>; pipelineId?: number; enqueue?: boolean } = {},
  ): Promise<CiBuild> {
    let pipelineId = attrs.pipelineId;
    if (!pipelineId) {
      const pipeline = await t.db
        .insertInto('ci_pipelines')
        .values({ iid: ++pipelineSeq, project_id: p.id, ref: 'main', sha: 'a'.repeat(40), before_sha: '0'.repeat(40), source: 'push', status: 'pending', user_id: developer.user.id, protected: attrs.protected ?? false, created_at: new Date(), updated_at: new Date() } as any)
        .returning('id')
        .executeTakeFirstOrThrow();
      pipelineId = pipeline.id;
    }
    const name = attrs.name ?? 'test';
    const stage = attrs.stage ?? 'test';
    const options = {
      name, kind: 'build', stage, stageIdx: attrs.stageIdx ?? 1, when: 'on_success', allowFailure: false, needs: null, dependencies: null,
      beforeScript: ['echo before'], script: ['echo hello', 'make test'], afterScript: ['echo after'],
      image: { name: 'ruby:3.3', entrypoint: [''] }, services: [{ name: 'postgres:16', alias: 'db' }],
      variables: [{ key: 'JOB_VAR', value: 'x', raw: false }], tags: attrs.tags ?? [], timeout: null, retry: null,
      artifacts: { name: 'bin', paths: ['bin/'], exclude: [], untracked: false, when: 'on_success', expireIn: '1 week', expireInSeconds: 604800, expireNever: false, exposeAs: null, reports: { junit: ['report.xml'] }, public: null, access: null },
      cache: [{ key: 'deps', paths: ['vendor/'], untracked: false, policy: 'pull-push', when: 'on_success', unprotect: false, fallbackKeys: [] }],
      coverage: null, environment: null, interruptible: null, resourceGroup: null, parallel: null, trigger: null, extra: {},
      ...attrs.options,
    };
    const build = await t.db
      .insertInto('ci_builds')
      .values({
        pipeline_id: pipelineId, project_id: p.id, stage, stage_idx: attrs.stageIdx ?? 1, name, status: 'created', options: JSON.stringify(options),
        yaml_variables: JSON.stringify([{ key: 'JOB_VAR', value: 'x' }]), ref: 'main', sha: 'a'.repeat(40), protected: attrs.protected ?? false,
        tag_list: attrs.tags ?? [], user_id: developer.user.id, created_at: new Date(), updated_at: new Date(),
      } as any)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (attrs.enqueue !== false) assert.ok(await enqueueBuild(t.db, build.id));
    return build;
  }

  async function register(extra: Record<string, unknown> = {}, token?: string): Promise<{ id: number; token: string }> {
    const reg = token ?? (await registrationToken(app.cairn, { type: 'instance_type' }));
    const res = await send(app, 'POST', '/api/v4/runners', {
      headers: runnerHeaders({ 'runner-token': reg }),
      json: { description: 'replay runner', tag_list: 'docker,linux', run_untagged: true, locked: false, paused: false, info: RUNNER_INFO, token: reg, ...extra },
    });
    assert.equal(res.status, 201, res.raw.toString());
    return res.body;
  }

  const requestJob = (runnerToken: string, a: App = app) =>
    send(a, 'POST', '/api/v4/jobs/request', { headers: runnerHeaders({ 'runner-token': runnerToken }), json: { info: RUNNER_INFO, token: runnerToken, system_id: 's_0123456789ab', last_update: 'abc' } });

  /** Takes every job pending now for this runner (so later tests start from an empty queue for it). */
  async function drain(runnerToken: string) {
    for (;;) {
      const res = await requestJob(runnerToken);
      if (res.status !== 201) return;
      await send(app, 'PUT', `/api/v4/jobs/${res.body.id}`, { headers: runnerHeaders({ 'job-token': res.body.token }), json: { token: res.body.token, state: 'failed', failure_reason: 'runner_system_failure', info: RUNNER_INFO } });
    }
  }

  it('registers with the instance registration token, refuses a bad one', async () => {
    const reg = await registrationToken(app.cairn, { type: 'instance_type' });
    assert.equal(await registrationToken(app.cairn, { type: 'instance_type' }), reg, 'the same token at the next need');
    const bad = await send(app, 'POST', '/api/v4/runners', { headers: runnerHeaders({ 'runner-token': 'nope' }), json: { token: 'nope', info: RUNNER_INFO, run_untagged: true, locked: false, paused: false } });
    assert.equal(bad.status, 403);
    const missing = await send(app, 'POST', '/api/v4/runners', { headers: runnerHeaders(), json: { info: RUNNER_INFO } });
    assert.equal(missing.status, 400);
    const invalid = await send(app, 'POST', '/api/v4/runners', { headers: runnerHeaders(), json: { token: reg, maximum_timeout: 10, run_untagged: true, locked: false, paused: false } });
    assert.equal(invalid.status, 400);
    const noTags = await send(app, 'POST', '/api/v4/runners', { headers: runnerHeaders(), json: { token: reg, run_untagged: false, locked: false, paused: false } });
    assert.equal(noTags.status, 400);

    const created = await register({ maintenance_note: 'replayed', access_level: 'not_protected', maximum_timeout: 1800 });
    assert.equal(typeof created.id, 'number');
    assert.match(created.token, /^[A-Za-z0-9]{30}$/);
    assert.equal((created as any).token_expires_at, null);
    const row = await t.db.selectFrom('ci_runners').selectAll().where('id', '=', created.id).executeTakeFirstOrThrow();
    assert.equal(row.runner_type, 'instance_type');
    assert.deepEqual(row.tag_list, ['docker', 'linux']);
    assert.equal(row.version, '17.5.0');
    assert.equal(row.executor_type, 'shell');
    assert.equal(row.maximum_timeout, 1800);
    assert.equal(row.maintenance_note, 'replayed');
    assert.notEqual(row.token_digest, created.token, 'only a digest is stored');
  });

  it('verifies a runner token (200) and refuses an unknown one (403); unregisters by token (204)', async () => {
    const r = await register();
    const ok = await send(app, 'POST', '/api/v4/runners/verify', { headers: runnerHeaders({ 'runner-token': r.token }), json: { info: RUNNER_INFO, token: r.token, system_id: 's_0123456789ab' } });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.id, r.id);
    assert.equal(ok.body.token, r.token);
    const bad = await send(app, 'POST', '/api/v4/runners/verify', { headers: runnerHeaders(), json: { info: RUNNER_INFO, token: 'wrong' } });
    assert.equal(bad.status, 403);

    const reset = await send(app, 'POST', '/api/v4/runners/reset_authentication_token', { headers: runnerHeaders(), json: { token: r.token } });
    assert.equal(reset.status, 201);
    assert.notEqual(reset.body.token, r.token);
    assert.equal((await send(app, 'POST', '/api/v4/runners/verify', { headers: runnerHeaders(), json: { token: r.token } })).status, 403, 'the old token is dead');

    const del = await send(app, 'DELETE', '/api/v4/runners', { headers: runnerHeaders({ 'runner-token': reset.body.token }), json: { token: reset.body.token } });
    assert.equal(del.status, 204);
    assert.equal((await send(app, 'DELETE', '/api/v4/runners', { headers: runnerHeaders(), json: { token: reset.body.token } })).status, 403);
    assert.equal((await send(app, 'POST', '/api/v4/runners/verify', { headers: runnerHeaders(), json: { token: reset.body.token } })).status, 403);
  });

  it('answers 204 with X-GitLab-Last-Update after holding the poll, 403 to an unknown runner', async () => {
    const r = await register({ tag_list: 'nothing-matches', run_untagged: false });
    const started = Date.now();
    const res = await requestJob(r.token);
    assert.equal(res.status, 204);
    assert.ok(res.headers['x-gitlab-last-update']);
    assert.ok(Date.now() - started >= POLL * 1000 - 100, 'held open for the poll time');
    assert.equal((await requestJob('unknown-token')).status, 403);
  });

  it('runs a job through the whole sequence: request, update, trace, artifacts, finish', async () => {
    const r = await register();
    await drain(r.token);
    const build = await createJob(project);
    const res = await requestJob(r.token);
    assert.equal(res.status, 201, res.raw.toString());
    const job = res.body;
    assert.equal(job.id, build.id);
    assert.match(job.token, /^glcbt-/);
    assert.equal(job.allow_git_fetch, true);
    assert.equal(job.job_info.id, build.id);
    assert.equal(job.job_info.name, 'test');
    assert.equal(job.job_info.stage, 'test');
    assert.equal(job.job_info.project_id, project.id);
    assert.equal(job.job_info.project_name, project.name);
    assert.equal(typeof job.job_info.time_in_queue_seconds, 'number');
    assert.equal(typeof job.job_info.project_jobs_running_on_instance_runners_count, 'string');
    const fullPath = `${(await t.db.selectFrom('namespaces').select('full_path').where('id', '=', project.namespace_id).executeTakeFirstOrThrow()).full_path}/${project.path}`;
    assert.equal(job.git_info.repo_url, `${t.config.externalUrl.replace('://', `://gitlab-ci-token:${job.token}@`)}/${fullPath}.git`);
    assert.equal(job.git_info.ref, 'main');
    assert.equal(job.git_info.sha, 'a'.repeat(40));
    assert.equal(job.git_info.ref_type, 'branch');
    assert.deepEqual(job.git_info.refspecs, ['+refs/heads/main:refs/remotes/origin/main']);
    assert.equal(job.git_info.depth, 20);
    assert.equal(job.runner_info.timeout, 1800 > 3600 ? 3600 : 3600);
    const vars = Object.fromEntries(job.variables.map((v: any) => [v.key, v]));
    assert.equal(vars.CI_JOB_ID.value, String(build.id));
    assert.equal(vars.CI_JOB_TOKEN.value, job.token);
    assert.equal(vars.CI_JOB_TOKEN.masked, true);
    assert.equal(vars.CI_JOB_TOKEN.public, false);
    assert.equal(vars.CI_REPOSITORY_URL.value, job.git_info.repo_url);
    assert.equal(vars.CI.value, 'true');
    assert.equal(vars.GITLAB_CI.value, 'true');
    assert.equal(vars.CI_SERVER_URL.value, t.config.externalUrl);
    assert.equal(vars.CI_API_V4_URL.value, `${t.config.externalUrl}/api/v4`);
    assert.equal(vars.CI_PROJECT_PATH.value, fullPath);
    assert.equal(vars.CI_PROJECT_ID.value, String(project.id));
    assert.equal(vars.CI_COMMIT_SHA.value, 'a'.repeat(40));
    assert.equal(vars.CI_COMMIT_BRANCH.value, 'main');
    assert.equal(vars.CI_PIPELINE_ID.value, String(build.pipeline_id));
    assert.equal(vars.GITLAB_USER_LOGIN.value, developer.user.username);
    assert.equal(vars.JOB_VAR.value, 'x');
    for (const v of job.variables) assert.deepEqual(Object.keys(v).sort(), ['file', 'key', 'masked', 'public', 'raw', 'value']);
    assert.deepEqual(job.steps, [
      { name: 'script', script: ['echo before', 'echo hello', 'make test'], timeout: 3600, when: 'on_success', allow_failure: false },
      { name: 'after_script', script: ['echo after'], timeout: 3600, when: 'always', allow_failure: true },
    ]);
    assert.equal(job.image.name, 'ruby:3.3');
    assert.deepEqual(job.image.entrypoint, ['']);
    assert.equal(job.services[0].name, 'postgres:16');
    assert.equal(job.services[0].alias, 'db');
    assert.deepEqual(job.artifacts[0], { name: 'bin', untracked: false, paths: ['bin/'], exclude: [], when: 'on_success', artifact_type: 'archive', artifact_format: 'zip', expire_in: '1 week' });
    assert.equal(job.artifacts[1].artifact_type, 'junit');
    assert.equal(job.artifacts[1].artifact_format, 'gzip');
    assert.deepEqual(job.cache, [{ key: 'deps-non_protected', untracked: false, policy: 'pull-push', paths: ['vendor/'], when: 'on_success', unprotect: false, fallback_keys: [] }]);
    assert.deepEqual(job.credentials, []);
    assert.deepEqual(job.dependencies, []);
    assert.equal(job.features.trace_sections, true);

    const row = await t.db.selectFrom('ci_builds').selectAll().where('id', '=', build.id).executeTakeFirstOrThrow();
    assert.equal(row.status, 'running');
    assert.equal(row.runner_id, r.id);
    assert.equal(await t.db.selectFrom('ci_pending_builds').select('build_id').where('build_id', '=', build.id).executeTakeFirst(), undefined);

    // The job token clones the project's repository (read-only) while the job runs.
    const basic = 'Basic ' + Buffer.from(`gitlab-ci-token:${job.token}`).toString('base64');
    const refs = await send(app, 'GET', `/${fullPath}.git/info/refs?service=git-upload-pack`, { headers: { authorization: basic } });
    assert.equal(refs.status, 200);
    const pushRefs = await send(app, 'GET', `/${fullPath}.git/info/refs?service=git-receive-pack`, { headers: { authorization: basic } });
    assert.equal(pushRefs.status, 403);
    // ... and is refused on API routes that do not take job tokens.
    assert.equal((await send(app, 'GET', '/api/v4/user', { headers: { 'job-token': job.token } })).status, 401);
    // GET /job: the job of the token, by JOB-TOKEN, Bearer or job_token.
    for (const how of [{ 'job-token': job.token }, { authorization: `Bearer ${job.token}` }] as Record<string, string>[]) {
      const me = await send(app, 'GET', '/api/v4/job', { headers: how });
      assert.equal(me.status, 200, me.raw.toString());
      assert.equal(me.body.id, job.id);
      assert.equal(me.body.status, 'running');
    }
    assert.equal((await send(app, 'GET', `/api/v4/job?job_token=${job.token}`)).status, 200);
    assert.equal((await send(app, 'GET', '/api/v4/job', { headers: { 'private-token': developer.token } })).status, 401);
    assert.equal((await send(app, 'GET', '/api/v4/job')).status, 401);
    // GET /job/allowed_agents: no agents in Cairn; the job, pipeline, project and user as the spec shows them.
    const agents = await send(app, 'GET', `/api/v4/job/allowed_agents?job_token=${job.token}`);
    assert.equal(agents.status, 200, agents.raw.toString());
    assert.deepEqual(agents.body.allowed_agents, []);
    assert.equal(agents.body.job.id, job.id);
    assert.equal(agents.body.project.path_with_namespace, fullPath);
    assert.deepEqual(Object.keys(agents.body.pipeline).sort(), ['created_at', 'id', 'project_id', 'ref', 'sha', 'status', 'updated_at', 'web_url']);
    assert.equal((await send(app, 'GET', '/api/v4/job/allowed_agents', { headers: { 'private-token': developer.token } })).status, 401);

    const jobHeaders = (extra: Record<string, string> = {}) => runnerHeaders({ 'job-token': job.token, ...extra });
    // UpdateJob: state running, as the runner's keep-alive.
    const running = await send(app, 'PUT', `/api/v4/jobs/${job.id}`, { headers: jobHeaders(), json: { info: RUNNER_INFO, token: job.token, state: 'running', output: { checksum: 'crc32:00000000', bytesize: 0 } } });
    assert.equal(running.status, 200);
    assert.equal(running.headers['job-status'], 'running');
    assert.ok(Number(running.headers['x-gitlab-trace-update-interval']) > 0);

    // PatchTrace: Content-Range start-end (inclusive), text/plain body.
    const first = Buffer.from('Running with gitlab-runner\n');
    const patch1 = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace?debug_trace=false`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': `0-${first.length - 1}` }, payload: first });
    assert.equal(patch1.status, 202);
    assert.equal(patch1.headers.range, `0-${first.length}`);
    assert.equal(patch1.headers['job-status'], 'running');
    assert.ok(patch1.headers['x-gitlab-trace-update-interval']);
    // A wrong offset: 416 with the size the runner must continue from; nothing is lost or added.
    const wrong = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace?debug_trace=false`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': '5-9' }, payload: 'xxxxx' });
    assert.equal(wrong.status, 416);
    assert.equal(wrong.headers.range, `0-${first.length}`);
    const second = Buffer.from([0xe2, 0x9c, 0x93, 0x20, 0x00, 0xff, 0x0a]);
    const patch2 = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace?debug_trace=false`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': `${first.length}-${first.length + second.length - 1}` }, payload: second });
    assert.equal(patch2.status, 202);
    assert.equal(patch2.headers.range, `0-${first.length + second.length}`);
    assert.deepEqual(await readTrace(t.db, job.id), Buffer.concat([first, second]));
    const noRange = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace`, { headers: { 'job-token': job.token, 'content-type': 'text/plain' }, payload: 'x' });
    assert.equal(noRange.status, 400);
    const otherToken = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace`, { headers: { 'job-token': 'nope', 'content-type': 'text/plain', 'content-range': '0-0' }, payload: 'x' });
    assert.equal(otherToken.status, 403);

    // UploadRawArtifacts: multipart `file`, options in the query.
    const zip = Buffer.alloc(20_000, 7);
    const authorize = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts/authorize?artifact_type=archive&filesize=${zip.length}`, { headers: jobHeaders() , json: {} });
    assert.equal(authorize.status, 200);
    assert.equal(authorize.body.MaximumSize, MAX_ARTIFACTS);
    const upload = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts?artifact_format=zip&artifact_type=archive&expire_in=1+week`, {
      headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=runnerboundary' },
      payload: multipart('runnerboundary', [{ name: 'file', filename: 'artifacts.zip', data: zip }]),
    });
    assert.equal(upload.status, 201, upload.raw.toString());
    const junit = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts?artifact_format=gzip&artifact_type=junit&expire_in=1+week`, {
      headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=b2' },
      payload: multipart('b2', [{ name: 'file', filename: 'junit.xml.gz', data: Buffer.from('gz') }]),
    });
    assert.equal(junit.status, 201);
    const again = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts?artifact_type=junit&artifact_format=gzip`, {
      headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=b2' },
      payload: multipart('b2', [{ name: 'file', filename: 'junit.xml.gz', data: Buffer.from('gz') }]),
    });
    assert.equal(again.status, 400);
    const tooBig = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts?artifact_type=dotenv&artifact_format=gzip`, {
      headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=b3' },
      payload: multipart('b3', [{ name: 'file', filename: 'big.gz', data: Buffer.alloc(MAX_ARTIFACTS + 1, 1) }]),
    });
    assert.equal(tooBig.status, 413);
    assert.equal(tooBig.body.message, 'file size has reached maximum size limit');
    const bigAuthorize = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts/authorize?filesize=${MAX_ARTIFACTS * 10}`, { headers: jobHeaders(), json: {} });
    assert.equal(bigAuthorize.status, 413);
    const noFile = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts`, {
      headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=b4' },
      payload: multipart('b4', [{ name: 'other', data: 'x' }]),
    });
    assert.equal(noFile.status, 400);
    const artifacts = await t.db.selectFrom('ci_job_artifacts').selectAll().where('job_id', '=', job.id).orderBy('id').execute();
    assert.deepEqual(artifacts.map((a) => [a.file_type, a.file_format, a.file_name, Number(a.size)]), [['archive', 'zip', 'artifacts.zip', zip.length], ['junit', 'gzip', 'junit.xml.gz', 2]]);
    assert.ok(artifacts[0].expire_at && new Date(artifacts[0].expire_at).getTime() > Date.now() + 6 * 86400_000);

    // The next stage's job gets this one as a dependency with its archive, and downloads it with its own token.
    const next = await createJob(project, { name: 'deploy', stage: 'deploy', stageIdx: 2, pipelineId: build.pipeline_id });
    const nextRes = await requestJob(r.token);
    assert.equal(nextRes.status, 201);
    assert.equal(nextRes.body.id, next.id);
    assert.deepEqual(nextRes.body.dependencies, [{ id: job.id, name: 'test', token: nextRes.body.token, artifacts_file: { filename: 'artifacts.zip', size: zip.length } }]);
    const download = await send(app, 'GET', `/api/v4/jobs/${job.id}/artifacts?direct_download=true`, { headers: { 'job-token': nextRes.body.token } });
    assert.equal(download.status, 200);
    assert.equal(download.headers['content-type'], 'application/zip');
    assert.deepEqual(download.raw, zip);
    assert.equal((await send(app, 'GET', `/api/v4/jobs/${job.id}/artifacts`, { headers: { 'job-token': 'dead' } })).status, 401);
    assert.equal((await send(app, 'GET', `/api/v4/jobs/999999/artifacts`, { headers: { 'job-token': nextRes.body.token } })).status, 404);

    // UpdateJob: success finishes the job; the token dies with it.
    const done = await send(app, 'PUT', `/api/v4/jobs/${job.id}`, { headers: jobHeaders(), json: { info: RUNNER_INFO, token: job.token, state: 'success', output: { checksum: 'crc32:1', bytesize: first.length + second.length }, exit_code: 0 } });
    assert.equal(done.status, 200);
    assert.equal(done.headers['job-status'], 'success');
    const finished = await t.db.selectFrom('ci_builds').selectAll().where('id', '=', job.id).executeTakeFirstOrThrow();
    assert.equal(finished.status, 'success');
    assert.equal(finished.token_digest, null);
    const late = await send(app, 'PUT', `/api/v4/jobs/${job.id}`, { headers: jobHeaders(), json: { token: job.token, state: 'success' } });
    assert.equal(late.status, 403);
    const latePatch = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': `${first.length + second.length}-${first.length + second.length}` }, payload: 'x' });
    assert.equal(latePatch.status, 403);
    assert.deepEqual(await readTrace(t.db, job.id), Buffer.concat([first, second]), 'nothing appended after the end');
    const lateUpload = await send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts`, { headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=b5' }, payload: multipart('b5', [{ name: 'file', filename: 'a.zip', data: 'x' }]) });
    assert.equal(lateUpload.status, 403);
    assert.equal((await send(app, 'GET', `/${fullPath}.git/info/refs?service=git-upload-pack`, { headers: { authorization: basic } })).status, 401, 'a dead job token no longer clones');
    assert.equal((await send(app, 'GET', '/api/v4/job', { headers: { 'job-token': job.token } })).status, 401, 'a dead job token no longer authenticates');
    assert.equal((await send(app, 'PUT', '/api/v4/jobs/999999', { headers: jobHeaders(), json: { token: job.token, state: 'success' } })).status, 404);

    // The second job fails with the runner's failure reason and exit code.
    const failed = await send(app, 'PUT', `/api/v4/jobs/${next.id}`, { headers: runnerHeaders({ 'job-token': nextRes.body.token }), json: { token: nextRes.body.token, state: 'failed', failure_reason: 'script_failure', exit_code: 2, info: RUNNER_INFO } });
    assert.equal(failed.status, 200);
    assert.equal(failed.headers['job-status'], 'failed');
    const failedRow = await t.db.selectFrom('ci_builds').selectAll().where('id', '=', next.id).executeTakeFirstOrThrow();
    assert.equal(failedRow.failure_reason, 'script_failure');
    assert.equal(failedRow.exit_code, 2);
  });

  it('refuses an expire_in no date can hold with a 400, never a 500', async () => {
    const r = await register();
    await drain(r.token);
    await createJob(project);
    const { body: job } = await requestJob(r.token);
    const upload = (query: string, fields: Array<{ name: string; data: string }> = []) =>
      send(app, 'POST', `/api/v4/jobs/${job.id}/artifacts?artifact_format=zip&artifact_type=archive${query}`, {
        headers: { 'job-token': job.token, 'content-type': 'multipart/form-data; boundary=exp' },
        payload: multipart('exp', [...fields, { name: 'file', filename: 'artifacts.zip', data: Buffer.alloc(100, 1) }]),
      });
    for (const bad of ['999999999999 years', '1001 years', '9'.repeat(400), '99999999999999999 seconds', 'soon']) {
      const res = await upload(`&expire_in=${encodeURIComponent(bad)}`);
      assert.equal(res.status, 400, `${bad.slice(0, 30)}: ${res.raw.toString()}`);
      assert.deepEqual(res.body, { message: '400 Bad request - expire_in is invalid' });
    }
    const field = await upload('', [{ name: 'expire_in', data: '999999999999 years' }]);
    assert.equal(field.status, 400, 'the same in a form field');
    assert.equal(await t.db.selectFrom('ci_job_artifacts').select('id').where('job_id', '=', job.id).executeTakeFirst(), undefined, 'nothing stored');
    const good = await upload(`&expire_in=${encodeURIComponent('100 years')}`);
    assert.equal(good.status, 201, good.raw.toString());
    const row = await t.db.selectFrom('ci_job_artifacts').select('expire_at').where('job_id', '=', job.id).executeTakeFirstOrThrow();
    const years = (new Date(row.expire_at as any).getTime() - Date.now()) / (365 * 86400_000);
    assert.ok(Math.abs(years - 100) < 0.01, String(years));
  });

  it('refuses trace beyond the size limit and fails the job', async () => {
    const r = await register();
    await drain(r.token);
    await createJob(project);
    const { body: job } = await requestJob(r.token);
    const res = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': `0-${MAX_TRACE}` }, payload: Buffer.alloc(MAX_TRACE + 1, 65) });
    assert.equal(res.status, 403);
    const row = await t.db.selectFrom('ci_builds').select(['status', 'failure_reason']).where('id', '=', job.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { status: 'failed', failure_reason: 'trace_size_exceeded' });
  });

  it('a canceled job answers 403 to its runner', async () => {
    const r = await register();
    await drain(r.token);
    const build = await createJob(project);
    const { body: job } = await requestJob(r.token);
    assert.equal(job.id, build.id);
    const cancel = await cancelBuild(app.cairn, build.id);
    assert.equal(cancel?.status, 'canceled', JSON.stringify(cancel));
    const update = await send(app, 'PUT', `/api/v4/jobs/${job.id}`, { headers: runnerHeaders({ 'job-token': job.token }), json: { token: job.token, state: 'running' } });
    assert.equal(update.status, 403);
    // The token died with the cancel: 403 alone makes the runner abort (RemoteJobStateResponse.IsFailed).
    assert.equal(update.body.message, '403 Forbidden - Job is not processing on runner');
    const patch = await send(app, 'PATCH', `/api/v4/jobs/${job.id}/trace`, { headers: { 'job-token': job.token, 'content-type': 'text/plain', 'content-range': '0-0' }, payload: 'x' });
    assert.equal(patch.status, 403);
  });

  it('wakes a long-polling runner as soon as a job is enqueued', async () => {
    await t.db.updateTable('ci_runners').set({ active: false }).execute();
    const r = await register({ tag_list: 'wake' });
    const build = await createJob(project, { tags: ['wake'], enqueue: false });
    // A long poll well beyond the wait below.
    app.cairn.config.runnerPollTimeout = 10;
    try {
      const started = Date.now();
      const polling = requestJob(r.token);
      await new Promise((res) => setTimeout(res, 300));
      const enqueuedAt = Date.now();
      await enqueueBuild(t.db, build.id);
      const res = await polling;
      const latency = Date.now() - enqueuedAt;
      assert.equal(res.status, 201);
      assert.equal(res.body.id, build.id);
      assert.ok(latency < 1500, `picked up ${latency} ms after enqueue`);
      assert.ok(Date.now() - started < 5000);
    } finally {
      app.cairn.config.runnerPollTimeout = POLL;
    }
  });

  it('never gives one job to two runners, from one or two Cairn processes', async () => {
    await t.db.updateTable('ci_runners').set({ active: false }).execute();
    const runners = await Promise.all(Array.from({ length: 4 }, () => register({ tag_list: 'race' })));
    let second: App | null = null;
    if (t.databaseUrl) second = await buildApp({ config: t.config, prepare: false, logger: false });
    try {
      const builds = [];
      for (let i = 0; i < 6; i++) builds.push(await createJob(project, { tags: ['race'] }));
      const apps = second ? [app, second] : [app];
      const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => requestJob(runners[i % runners.length].token, apps[i % apps.length])));
      const taken = answers.filter((a) => a.status === 201).map((a) => a.body.id as number);
      assert.equal(answers.filter((a) => a.status !== 201 && a.status !== 204).length, 0);
      assert.equal(taken.length, builds.length, 'every job is taken');
      assert.equal(new Set(taken).size, taken.length, 'no job twice');
      assert.deepEqual([...taken].sort((a, b) => a - b), builds.map((b) => b.id));
    } finally {
      await second?.close();
    }
  });

  it('hands out the jobs of a pipeline created by a push of .gitlab-ci.yml', async () => {
    await t.db.updateTable('ci_runners').set({ active: false }).execute();
    const r = await register({ tag_list: '' });
    const pushed = await t.createProject({ owner: developer.user });
    await t.addMember(pushed, developer.user, 40);
    const sha = await commitFiles(t, pushed, {
      '.gitlab-ci.yml': 'variables:\n  GREETING: hello\nbuild:\n  stage: build\n  script:\n    - echo $GREETING > out.txt\n  artifacts:\n    paths: [out.txt]\ntest:\n  stage: test\n  script: [cat out.txt]\n',
    }, { token: developer.token });
    const pipeline = await latestPipeline(t, pushed.id);
    assert.equal(pipeline.sha, sha);
    const res = await requestJob(r.token);
    assert.equal(res.status, 201, res.raw.toString());
    assert.equal(res.body.job_info.name, 'build');
    assert.equal(res.body.git_info.sha, sha);
    assert.deepEqual(res.body.steps[0].script, ['echo $GREETING > out.txt']);
    assert.equal(res.body.variables.find((v: any) => v.key === 'GREETING')?.value, 'hello');
    assert.equal(res.body.artifacts[0].paths[0], 'out.txt');
    assert.equal((await requestJob(r.token)).status, 204, 'test waits for build');
    const done = await send(app, 'PUT', `/api/v4/jobs/${res.body.id}`, { headers: runnerHeaders({ 'job-token': res.body.token }), json: { token: res.body.token, state: 'success', exit_code: 0 } });
    assert.equal(done.status, 200);
    const next = await requestJob(r.token);
    assert.equal(next.status, 201);
    assert.equal(next.body.job_info.name, 'test');
    assert.deepEqual(next.body.dependencies.map((d: any) => d.name), ['build']);
  });

  it('matches jobs to runners: tags, run_untagged, paused, protected refs, group and project runners', async () => {
    await t.db.updateTable('ci_runners').set({ active: false }).execute();
    const tagged = await register({ tag_list: 'gpu,linux', run_untagged: false });
    const untaggedOnly = await register({ tag_list: '', run_untagged: true });
    const paused = await register({ tag_list: '', paused: true });
    const protectedOnly = await register({ tag_list: 'prot', run_untagged: false, access_level: 'ref_protected' });
    const groupRunner = await register({ tag_list: 'grp', run_untagged: false }, await registrationToken(app.cairn, { type: 'group_type', namespaceId: group.id }));
    const projectRunner = await register({ tag_list: 'own', run_untagged: false }, await registrationToken(app.cairn, { type: 'project_type', projectId: other.id }));
    assert.equal((await t.db.selectFrom('ci_runners').select('runner_type').where('id', '=', groupRunner.id).executeTakeFirstOrThrow()).runner_type, 'group_type');

    const gpuJob = await createJob(project, { tags: ['gpu'] });
    assert.equal((await requestJob(untaggedOnly.token)).status, 204, 'a tagged job needs a runner with its tags');
    const got = await requestJob(tagged.token);
    assert.equal(got.body.id, gpuJob.id);

    const plain = await createJob(project);
    assert.equal((await requestJob(tagged.token)).status, 204, 'run_untagged false: no untagged jobs');
    assert.equal((await requestJob(paused.token)).status, 204, 'paused runners get nothing');
    assert.equal((await requestJob(untaggedOnly.token)).body.id, plain.id);

    const unprotected = await createJob(project, { tags: ['prot'] });
    assert.equal((await requestJob(protectedOnly.token)).status, 204);
    await t.db.deleteFrom('ci_pending_builds').where('build_id', '=', unprotected.id).execute();
    const prot = await createJob(project, { tags: ['prot'], protected: true });
    assert.equal((await requestJob(protectedOnly.token)).body.id, prot.id);

    // The group runner runs jobs of projects in its group's subgroups, not elsewhere.
    const elsewhere = await createJob(other, { tags: ['grp'] });
    assert.equal((await requestJob(groupRunner.token)).status, 204);
    await t.db.deleteFrom('ci_pending_builds').where('build_id', '=', elsewhere.id).execute();
    const inGroup = await createJob(project, { tags: ['grp'] });
    assert.equal((await requestJob(groupRunner.token)).body.id, inGroup.id);

    // The project runner runs its own project's jobs only.
    const notOwn = await createJob(project, { tags: ['own'] });
    assert.equal((await requestJob(projectRunner.token)).status, 204);
    await t.db.deleteFrom('ci_pending_builds').where('build_id', '=', notOwn.id).execute();
    const own = await createJob(other, { tags: ['own'] });
    assert.equal((await requestJob(projectRunner.token)).body.id, own.id);
  });
});
