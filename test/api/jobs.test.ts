import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';

const YAML = `
stages: [build, test, deploy]
build: { stage: build, script: [make], tags: [linux] }
test: { stage: test, script: [t] }
deploy: { stage: deploy, script: [d], when: manual }
child: { stage: test, trigger: { include: child.yml } }
`;

describe('pipelines and jobs API', () => {
  let t: TestContext;
  let project: Project;
  let publicProject: Project;
  let guest: TestUser, reporter: TestUser, developer: TestUser, maintainer: TestUser, outsider: TestUser;
  const api = (p: Project, rest: string) => `/api/v4/projects/${p.id}${rest}`;

  before(async () => {
    // Developers run and retry pipelines on main here: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    project = await t.createProject();
    publicProject = await t.createProject({ visibility: 20 });
    [guest, reporter, developer, maintainer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML, 'child.yml': 'inner: { script: [y] }\n' });
    await commitFiles(t, publicProject, { '.gitlab-ci.yml': 'job: { script: [x] }\n' });
  });
  after(async () => {
    await t?.close();
  });

  it('lists and reads pipelines with filters', async () => {
    const p = await latestPipeline(t, project.id);
    const list = await t.get(api(project, '/pipelines'), { token: reporter.token });
    assert.equal(list.status, 200);
    assert.equal(list.body[0].id, p.id);
    assert.equal(list.body[0].source, 'push');
    assert.equal(list.body[0].ref, 'main');
    assert.equal((await t.get(api(project, '/pipelines'), { query: { status: 'success' } })).body.length, 0);
    assert.equal((await t.get(api(project, '/pipelines'), { query: { ref: 'main', scope: 'branches' } })).body.length, 1);
    assert.equal((await t.get(api(project, '/pipelines'), { query: { status: 'bogus' } })).status, 400);
    assert.equal((await t.get(api(project, '/pipelines'), { query: { yaml_errors: true } })).body.length, 0);
    const one = await t.get(api(project, `/pipelines/${p.id}`), { token: reporter.token });
    assert.equal(one.status, 200);
    assert.equal(one.body.detailed_status.group, one.body.status);
    assert.equal((await t.get(api(project, '/pipelines/latest'))).body.id, p.id);
    assert.equal((await t.get(api(project, '/pipelines/999999'))).status, 404);
    // Private project: outsiders see nothing; guests see jobs when they are public (the default).
    assert.equal((await t.get(api(project, '/pipelines'), { token: outsider.token })).status, 404);
    assert.equal((await t.get(api(project, '/pipelines'), { token: null })).status, 404);
    assert.equal((await t.get(api(project, '/pipelines'), { token: guest.token })).status, 200);
    // Public project: anonymous callers read pipelines and jobs.
    assert.equal((await t.get(api(publicProject, '/pipelines'), { token: null })).status, 200);
    assert.equal((await t.get(api(publicProject, '/jobs'), { token: null })).status, 200);
  });

  it('lists jobs newest first, with scope as string or array', async () => {
    const p = await latestPipeline(t, project.id);
    const jobs = await t.get(api(project, '/jobs'), { token: reporter.token });
    assert.equal(jobs.status, 200);
    const ids = jobs.body.map((j: any) => j.id);
    assert.deepEqual(ids, [...ids].sort((a: number, b: number) => b - a));
    assert.ok(jobs.body.every((j: any) => j.name !== 'child'), 'bridges are not jobs');
    const build = jobs.body.find((j: any) => j.name === 'build');
    assert.equal(build.status, 'pending');
    assert.deepEqual(build.tag_list, ['linux']);
    assert.equal(build.pipeline.id, p.id);
    assert.equal(build.commit.id, p.sha);
    assert.deepEqual(build.artifacts, []);
    assert.equal(build.runner, null);
    assert.match(build.web_url, new RegExp(`/-/jobs/${build.id}$`));
    const pending = await t.get(api(project, '/jobs'), { query: { scope: 'pending' } });
    assert.deepEqual(pending.body.map((j: any) => j.name), ['build']);
    const two = await t.get(`${api(project, '/jobs')}?scope[]=pending&scope[]=created`);
    assert.deepEqual(two.body.map((j: any) => j.name).sort(), ['build', 'deploy', 'test']);
    assert.equal((await t.get(api(project, '/jobs'), { query: { scope: 'nope' } })).status, 400);
    const one = await t.get(api(project, `/jobs/${build.id}`));
    assert.equal(one.body.id, build.id);
    assert.equal((await t.get(api(project, '/jobs/99999999'))).status, 404);
    assert.equal((await t.get(api(project, `/jobs/${build.id}`), { token: outsider.token })).status, 404);
  });

  it('runs the pipeline: trace, retry, cancel, play, erase, bridges and child jobs', async () => {
    const p = await latestPipeline(t, project.id);
    let jobs = await jobsByName(t, p.id);
    assert.equal((await t.get(api(project, `/jobs/${jobs.build.id}/trace`))).status, 404);
    await runJob(t, jobs.build, 'failed', { trace: 'hello\nworld\n' });
    const trace = await t.get(api(project, `/jobs/${jobs.build.id}/trace`), { token: reporter.token });
    assert.equal(trace.status, 200);
    assert.equal(trace.text, 'hello\nworld\n');
    const failed = await t.get(api(project, `/jobs/${jobs.build.id}`));
    assert.equal(failed.body.failure_reason, 'script_failure');
    assert.equal(typeof failed.body.duration, 'number');
    // retry: developers, not reporters
    assert.equal((await t.post(api(project, `/jobs/${jobs.build.id}/retry`), {}, { token: reporter.token })).status, 403);
    const retried = await t.post(api(project, `/jobs/${jobs.build.id}/retry`), {}, { token: developer.token });
    assert.equal(retried.status, 201);
    assert.notEqual(retried.body.id, jobs.build.id);
    assert.equal(retried.body.status, 'pending');
    assert.equal(retried.body.user.username, developer.user.username);
    assert.equal((await t.post(api(project, `/jobs/${jobs.build.id}/retry`), {}, { token: developer.token })).status, 403);
    // pipeline jobs hide retried ones unless include_retried
    const pj = await t.get(api(project, `/pipelines/${p.id}/jobs`));
    assert.equal(pj.body.filter((j: any) => j.name === 'build').length, 1);
    const pjr = await t.get(api(project, `/pipelines/${p.id}/jobs`), { query: { include_retried: true } });
    assert.equal(pjr.body.filter((j: any) => j.name === 'build').length, 2);
    // run build, then child bridge + test
    await runJob(t, retried.body.id, 'success');
    await (await import('../../src/jobs/queue.js')).drainJobs(t.app.cairn);
    const bridges = await t.get(api(project, `/pipelines/${p.id}/bridges`));
    assert.equal(bridges.status, 200);
    assert.equal(bridges.body[0].name, 'child');
    assert.ok(bridges.body[0].downstream_pipeline);
    const withChild = await t.get(api(project, `/pipelines/${p.id}/jobs`));
    assert.ok(withChild.body.some((j: any) => j.name === 'inner'), 'child pipeline jobs are included');
    jobs = await jobsByName(t, p.id);
    // cancel
    const canceled = await t.post(api(project, `/jobs/${jobs.test.id}/cancel`), {}, { token: developer.token });
    assert.equal(canceled.status, 201);
    assert.equal(canceled.body.status, 'canceled');
    // play: only manual jobs
    assert.equal((await t.post(api(project, `/jobs/${jobs.test.id}/play`), {}, { token: developer.token })).status, 400);
    // erase: maintainers (or the job's user)
    assert.equal((await t.post(api(project, `/jobs/${retried.body.id}/erase`), {}, { token: reporter.token })).status, 403);
    const erased = await t.post(api(project, `/jobs/${retried.body.id}/erase`), {}, { token: developer.token });
    assert.equal(erased.status, 403, 'no log: not erasable');
    const firstAttempt = (await t.db.selectFrom('ci_builds').select('id').where('pipeline_id', '=', p.id).where('name', '=', 'build').where('retried', '=', true).executeTakeFirstOrThrow()).id;
    const erased2 = await t.post(api(project, `/jobs/${firstAttempt}/erase`), {}, { token: maintainer.token });
    assert.equal(erased2.status, 201);
    assert.ok(erased2.body.erased_at);
    assert.equal((await t.get(api(project, `/jobs/${firstAttempt}/trace`))).status, 404);
  });

  it('plays a manual job with variables', async () => {
    const p2 = await t.createProject();
    await commitFiles(t, p2, { '.gitlab-ci.yml': 'deploy: { script: [d], when: manual }\n' });
    const p = await latestPipeline(t, p2.id);
    const jobs = await jobsByName(t, p.id);
    assert.equal(jobs.deploy.status, 'manual');
    const bad = await t.post(api(p2, `/jobs/${jobs.deploy.id}/play`), { job_variables_attributes: [{ key: 'bad key', value: 'x' }] });
    assert.equal(bad.status, 400);
    const played = await t.post(api(p2, `/jobs/${jobs.deploy.id}/play`), { job_variables_attributes: [{ key: 'TARGET', value: 'prod' }] });
    assert.equal(played.status, 200);
    assert.equal(played.body.status, 'pending');
    const vars = await t.db.selectFrom('ci_job_variables').selectAll().where('job_id', '=', jobs.deploy.id).execute();
    assert.equal(vars.length, 1);
    assert.notEqual(vars[0].value_encrypted, 'prod');
  });

  it('creates pipelines through the API; retry, cancel, delete', async () => {
    const bad = await t.post(api(project, '/pipeline'), { ref: 'nope' }, { token: developer.token });
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body, { message: { base: ['Reference not found'] } });
    assert.equal((await t.post(api(project, '/pipeline'), { ref: 'main' }, { token: reporter.token })).status, 403);
    const created = await t.post(api(project, '/pipeline'), { ref: 'main', variables: [{ key: 'FOO', value: 'bar' }] }, { token: developer.token });
    assert.equal(created.status, 201);
    assert.equal(created.body.source, 'api');
    assert.equal(created.body.user.username, developer.user.username);
    const vars = await t.get(api(project, `/pipelines/${created.body.id}/variables`), { token: developer.token });
    assert.deepEqual(vars.body, [{ key: 'FOO', value: 'bar', variable_type: 'env_var' }]);
    assert.equal((await t.get(api(project, `/pipelines/${created.body.id}/variables`), { token: reporter.token })).status, 403);
    const canceled = await t.post(api(project, `/pipelines/${created.body.id}/cancel`), {}, { token: developer.token });
    assert.equal(canceled.status, 200);
    assert.equal(canceled.body.status, 'canceled');
    const retried = await t.post(api(project, `/pipelines/${created.body.id}/retry`), {}, { token: developer.token });
    assert.equal(retried.status, 201);
    assert.equal(retried.body.status, 'pending');
    assert.equal((await t.delete(api(project, `/pipelines/${created.body.id}`), { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(api(project, `/pipelines/${created.body.id}`))).status, 204);
    assert.equal((await t.get(api(project, `/pipelines/${created.body.id}`))).status, 404);
  });

  it('invalid configuration: failed pipeline with yaml_errors on push, 400 on the API', async () => {
    const p2 = await t.createProject();
    await commitFiles(t, p2, { '.gitlab-ci.yml': 'job: { script: [x], stage: nowhere }\n' });
    const p = await latestPipeline(t, p2.id);
    assert.equal(p.status, 'failed');
    assert.equal(p.failure_reason, 'config_error');
    assert.ok(p.yaml_errors);
    const listed = await t.get(api(p2, '/pipelines'), { query: { yaml_errors: true } });
    assert.equal(listed.body.length, 1);
    const res = await t.post(api(p2, '/pipeline'), { ref: 'main' });
    assert.equal(res.status, 400);
    assert.ok(Array.isArray(res.body.message.base));
  });

  it('[skip ci] gives a skipped pipeline; no file gives none', async () => {
    const p2 = await t.createProject();
    await commitFiles(t, p2, { 'README.md': 'hi' });
    assert.equal((await t.db.selectFrom('ci_pipelines').selectAll().where('project_id', '=', p2.id).execute()).length, 0);
    await commitFiles(t, p2, { '.gitlab-ci.yml': 'job: { script: [x] }\n' }, { message: 'wip [skip ci]' });
    const p = await latestPipeline(t, p2.id);
    assert.equal(p.status, 'skipped');
    // A new branch gets its own pipeline, iid counts on.
    await commitFiles(t, p2, { 'a.txt': 'a' }, { branch: 'feature', startBranch: 'main' });
    const f = await latestPipeline(t, p2.id);
    assert.equal(f.ref, 'feature');
    assert.equal(f.iid, 2);
  });
});
