import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles } from '../helpers/ci.js';

describe('CI lint API', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser, guest: TestUser;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    [developer, guest] = await Promise.all([t.createUser(), t.createUser()]);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, guest.user, 10);
    await commitFiles(t, project, { '.gitlab-ci.yml': 'include: [{ local: common.yml }]\nbuild: { script: [make] }\n', 'common.yml': 'test: { script: [t] }\n' });
  });
  after(async () => {
    await t?.close();
  });

  it('POST lints given content with the project context', async () => {
    const url = `/api/v4/projects/${project.id}/ci/lint`;
    const ok = await t.post(url, { content: 'include: [{ local: common.yml }]\njob: { script: [x] }\n', include_jobs: true }, { token: developer.token });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.valid, true);
    assert.deepEqual(ok.body.errors, []);
    assert.match(ok.body.merged_yaml, /test:/);
    assert.equal(ok.body.includes[0].location, 'common.yml');
    assert.deepEqual(ok.body.jobs.map((j: any) => j.name).sort(), ['job', 'test']);
    const bad = await t.post(url, { content: 'job: { script: [x], stage: nowhere }\n' }, { token: developer.token });
    assert.equal(bad.body.valid, false);
    assert.ok(bad.body.errors.length > 0);
    assert.equal(bad.body.jobs, undefined);
    const dry = await t.post(url, { content: 'job: { script: [x], rules: [{ if: "$CI_COMMIT_BRANCH == \\"nope\\"" }] }\n', dry_run: true }, { token: developer.token });
    assert.equal(dry.status, 200);
    assert.equal(dry.body.valid, false);
    assert.equal((await t.post(url, {}, { token: developer.token })).status, 400);
    assert.equal((await t.post(url, { content: 'a: 1' }, { token: guest.token })).status, 403);
    assert.equal((await t.post(url, { content: 'a: 1' }, { token: null })).status, 401);
  });

  it("a dry run uses the project's CI/CD variables, as GitLab's simulated pipeline does", async () => {
    const url = `/api/v4/projects/${project.id}/ci/lint`;
    const content = 'deploy:\n  script: [d]\n  rules:\n    - if: $DEPLOY_TARGET == "prod"\n';
    const before = await t.post(url, { content, dry_run: true }, { token: developer.token });
    assert.equal(before.status, 200);
    assert.equal(before.body.valid, false);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/variables`, { key: 'DEPLOY_TARGET', value: 'prod' })).status, 201);
    const after = await t.post(url, { content, dry_run: true, include_jobs: true }, { token: developer.token });
    assert.equal(after.body.valid, true, JSON.stringify(after.body.errors));
    assert.deepEqual(after.body.jobs.map((j: any) => j.name), ['deploy']);
  });

  it('lints include:local wildcards and inputs against the repository', async () => {
    await commitFiles(t, project, { 'ci/a.yml': 'a: { script: [a] }\n', 'ci/b.yml': 'spec:\n  inputs:\n    who: { default: world }\n---\nb:\n  script: echo $[[ inputs.who ]]\n' });
    const url = `/api/v4/projects/${project.id}/ci/lint`;
    const res = await t.post(url, { content: 'include: "ci/*.yml"\n', include_jobs: true }, { token: developer.token });
    assert.equal(res.body.valid, true, JSON.stringify(res.body.errors));
    assert.deepEqual(res.body.includes.map((i: any) => i.location), ['ci/a.yml', 'ci/b.yml']);
    assert.deepEqual(res.body.jobs.find((j: any) => j.name === 'b').script, ['echo world']);
    const bad = await t.post(url, { content: 'include: [{ local: ci/b.yml, inputs: { whom: x } }]\n' }, { token: developer.token });
    assert.deepEqual(bad.body.errors, ['`ci/b.yml`: unknown input arguments: whom']);
  });

  it('GET lints the project file at a sha', async () => {
    const url = `/api/v4/projects/${project.id}/ci/lint`;
    const res = await t.get(url, { token: developer.token, query: { include_jobs: true } });
    assert.equal(res.status, 200);
    assert.equal(res.body.valid, true);
    assert.deepEqual(res.body.jobs.map((j: any) => j.name).sort(), ['build', 'test']);
    assert.equal((await t.get(url, { token: developer.token, query: { sha: 'deadbeef' } })).status, 404);
  });
});
