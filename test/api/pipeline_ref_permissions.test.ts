import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, jobsByName, latestPipeline, runJob } from '../helpers/ci.js';
import { postForm, webSignIn, type WebSession } from '../helpers/web.js';

// A pipeline of a protected branch gets the protected CI variables, so creating one, or retrying,
// playing or canceling its jobs, takes the right to push or merge to that branch (GitLab's
// Validate::Abilities chain step and the protected_ref condition of its build and pipeline policies).
const YAML = `
build: { script: [make] }
deploy: { script: [d], when: manual }
`;

describe('pipelines on protected refs', () => {
  let t: TestContext;
  let project: Project;
  let developer: TestUser, maintainer: TestUser;
  let developerWeb: WebSession;
  const api = (rest: string) => `/api/v4/projects/${project.id}${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject();
    [developer, maintainer] = await Promise.all([t.createUser(), t.createUser()]);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await commitFiles(t, project, { '.gitlab-ci.yml': YAML });
    assert.equal((await t.post(api('/repository/branches'), { branch: 'release', ref: 'main' })).status, 201);
    assert.equal((await t.post(api('/repository/branches'), { branch: 'feature', ref: 'main' })).status, 201);
    // Only maintainers push and merge to main and release, whatever protection main got by default.
    await t.delete(api('/protected_branches/main'));
    for (const name of ['main', 'release']) {
      const res = await t.post(api('/protected_branches'), { name, push_access_level: 40, merge_access_level: 40 });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    await t.post(api('/variables'), { key: 'DEPLOY_KEY', value: 'protected-secret', protected: true });
    developerWeb = await webSignIn(t, developer);
  });
  after(async () => {
    await t?.close();
  });

  it('refuses a developer a pipeline on a protected branch, with GitLab\'s 400', async () => {
    const before = await t.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', project.id).execute();
    const res = await t.post(api('/pipeline'), { ref: 'release', variables: [{ key: 'X', value: 'y' }] }, { token: developer.token });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body, {
      message: { base: ["You do not have sufficient permission to run a pipeline on 'release'. Please select a different branch or contact your administrator for assistance."] },
    });
    const afterRows = await t.db.selectFrom('ci_pipelines').select('id').where('project_id', '=', project.id).execute();
    assert.equal(afterRows.length, before.length, 'no pipeline was created');
    // An unprotected branch is the developer's; the protected one the maintainer's.
    assert.equal((await t.post(api('/pipeline'), { ref: 'feature' }, { token: developer.token })).status, 201);
    const ok = await t.post(api('/pipeline'), { ref: 'release' }, { token: maintainer.token });
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
  });

  it('a developer allowed to merge (or push) to the branch may run its pipeline', async () => {
    await t.delete(api('/protected_branches/release'));
    assert.equal((await t.post(api('/protected_branches'), { name: 'release', push_access_level: 40, merge_access_level: 30 })).status, 201);
    try {
      assert.equal((await t.post(api('/pipeline'), { ref: 'release' }, { token: developer.token })).status, 201);
    } finally {
      await t.delete(api('/protected_branches/release'));
      assert.equal((await t.post(api('/protected_branches'), { name: 'release', push_access_level: 40, merge_access_level: 40 })).status, 201);
    }
  });

  it('refuses a developer retrying, canceling or playing jobs and pipelines of a protected branch (API and web)', async () => {
    const created = await t.post(api('/pipeline'), { ref: 'release' }, { token: maintainer.token });
    assert.equal(created.status, 201);
    const p = await latestPipeline(t, project.id);
    assert.equal(p.ref, 'release');
    assert.equal(p.protected, true);
    const jobs = await jobsByName(t, p.id);
    await runJob(t, jobs.build, 'failed');

    assert.deepEqual((await t.post(api(`/jobs/${jobs.build.id}/retry`), {}, { token: developer.token })).body, { message: '403 Forbidden' });
    assert.equal((await t.post(api(`/jobs/${jobs.build.id}/retry`), {}, { token: developer.token })).status, 403);
    assert.equal((await t.post(api(`/jobs/${jobs.deploy.id}/play`), {}, { token: developer.token })).status, 403);
    assert.equal((await t.post(api(`/jobs/${jobs.deploy.id}/cancel`), {}, { token: developer.token })).status, 403);
    assert.equal((await t.post(api(`/pipelines/${p.id}/retry`), {}, { token: developer.token })).status, 403);
    assert.equal((await t.post(api(`/pipelines/${p.id}/cancel`), {}, { token: developer.token })).status, 403);

    const full = (await t.get(api(''))).body.path_with_namespace as string;
    assert.equal((await postForm(t, developerWeb, `/${full}/-/pipelines/${p.id}/retry`, {})).status, 403);
    assert.equal((await postForm(t, developerWeb, `/${full}/-/jobs/${jobs.build.id}/retry`, {})).status, 403);
    assert.equal((await postForm(t, developerWeb, `/${full}/-/jobs/${jobs.deploy.id}/play`, {})).status, 403);

    const retriedJobs = await t.db.selectFrom('ci_builds').select('id').where('pipeline_id', '=', p.id).execute();
    assert.equal(retriedJobs.length, 2, 'nothing was retried');

    // The maintainer may.
    assert.equal((await t.post(api(`/jobs/${jobs.build.id}/retry`), {}, { token: maintainer.token })).status, 201);
    assert.equal((await t.post(api(`/jobs/${jobs.deploy.id}/play`), {}, { token: maintainer.token })).status, 200);
  });

  it('leaves developers their rights on unprotected branches', async () => {
    const created = await t.post(api('/pipeline'), { ref: 'feature' }, { token: developer.token });
    assert.equal(created.status, 201);
    const jobs = await jobsByName(t, created.body.id);
    await runJob(t, jobs.build, 'failed');
    assert.equal((await t.post(api(`/jobs/${jobs.build.id}/retry`), {}, { token: developer.token })).status, 201);
    assert.equal((await t.post(api(`/jobs/${jobs.deploy.id}/play`), {}, { token: developer.token })).status, 200);
    assert.equal((await t.post(api(`/pipelines/${created.body.id}/cancel`), {}, { token: developer.token })).status, 200);
  });
});
