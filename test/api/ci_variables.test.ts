import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, latestPipeline, ProtocolRunner } from '../helpers/ci.js';

describe('CI variables API', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let developer: TestUser, maintainer: TestUser, outsider: TestUser;

  before(async () => {
    // main is protected by the test itself, later: no default branch protection.
    t = await createTestContext({ defaultBranchProtection: 0 });
    group = await t.createGroup();
    project = await t.createProject({ group });
    [developer, maintainer, outsider] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(group, maintainer.user, 40);
  });
  after(async () => {
    await t?.close();
  });

  it('creates, reads, updates and deletes project variables (maintainers)', async () => {
    const base = `/api/v4/projects/${project.id}/variables`;
    assert.equal((await t.get(base, { token: developer.token })).status, 403);
    assert.equal((await t.get(base, { token: outsider.token })).status, 404);
    assert.equal((await t.get(base, { token: null })).status, 401);
    const created = await t.post(base, { key: 'DEPLOY_TOKEN', value: 'abcdefgh1234', masked: true, protected: true }, { token: maintainer.token });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { variable_type: 'env_var', key: 'DEPLOY_TOKEN', value: 'abcdefgh1234', protected: true, masked: true, raw: false, environment_scope: '*', description: null });
    const row = await t.db.selectFrom('ci_variables').selectAll().where('key', '=', 'DEPLOY_TOKEN').executeTakeFirstOrThrow();
    assert.ok(!row.value_encrypted.includes('abcdefgh1234'), 'stored encrypted');
    assert.equal((await t.post(base, { key: 'DEPLOY_TOKEN', value: 'x' }, { token: maintainer.token })).status, 400);
    const short = await t.post(base, { key: 'SHORT', value: 'abc', masked: true }, { token: maintainer.token });
    assert.equal(short.status, 400);
    assert.deepEqual(short.body, { message: { value: ['is invalid'] } });
    assert.equal((await t.post(base, { key: 'NL', value: 'abcdefgh\nijkl', masked: true }, { token: maintainer.token })).status, 400);
    assert.equal((await t.post(base, { key: 'bad-key', value: 'x' }, { token: maintainer.token })).status, 400);
    assert.equal((await t.post(base, { key: 'NOVALUE' }, { token: maintainer.token })).status, 400);
    const list = await t.get(base, { token: maintainer.token });
    assert.deepEqual(list.body.map((v: any) => v.key), ['DEPLOY_TOKEN']);
    const updated = await t.put(`${base}/DEPLOY_TOKEN`, { value: 'zyxwvuts9876', protected: false }, { token: maintainer.token });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.value, 'zyxwvuts9876');
    assert.equal(updated.body.protected, false);
    assert.equal((await t.put(`${base}/DEPLOY_TOKEN`, { value: 'short' }, { token: maintainer.token })).status, 400);
    assert.equal((await t.get(`${base}/NOPE`, { token: maintainer.token })).status, 404);
    assert.equal((await t.delete(`${base}/DEPLOY_TOKEN`, { token: developer.token })).status, 403);
    assert.equal((await t.delete(`${base}/DEPLOY_TOKEN`, { token: maintainer.token })).status, 204);
    assert.equal((await t.get(`${base}/DEPLOY_TOKEN`, { token: maintainer.token })).status, 404);
  });

  it('group variables, and variables reach pipelines (protected ones only on protected refs)', async () => {
    const gbase = `/api/v4/groups/${group.id}/variables`;
    assert.equal((await t.post(gbase, { key: 'ENV', value: 'group' }, { token: developer.token })).status, 403);
    assert.equal((await t.post(gbase, { key: 'ENV', value: 'group' }, { token: maintainer.token })).status, 201);
    assert.equal((await t.post(gbase, { key: 'SECRET', value: 'topsecret', protected: true }, { token: maintainer.token })).status, 201);
    assert.equal((await t.get(`${gbase}/ENV`, { token: maintainer.token })).body.value, 'group');
    // rules use the variables: ENV == group runs `a`; SECRET is only on protected refs.
    const yaml = `
a: { script: [x], rules: [{ if: '$ENV == "group"' }] }
s: { script: [x], rules: [{ if: '$SECRET' }] }
`;
    await commitFiles(t, project, { '.gitlab-ci.yml': yaml });
    let p = await latestPipeline(t, project.id);
    let names = (await t.db.selectFrom('ci_builds').select('name').where('pipeline_id', '=', p.id).execute()).map((r) => r.name).sort();
    assert.deepEqual(names, ['a']);
    await t.post(`/api/v4/projects/${project.id}/protected_branches`, { name: 'main' });
    await commitFiles(t, project, { 'x.txt': 'x' });
    p = await latestPipeline(t, project.id);
    assert.equal(p.protected, true);
    names = (await t.db.selectFrom('ci_builds').select('name').where('pipeline_id', '=', p.id).execute()).map((r) => r.name).sort();
    assert.deepEqual(names, ['a', 's']);
  });

  it('instance variables (/admin/ci/variables): administrators only, no environment scope', async () => {
    const base = '/api/v4/admin/ci/variables';
    assert.equal((await t.get(base, { token: null })).status, 401);
    assert.equal((await t.get(base, { token: maintainer.token })).status, 403);
    assert.equal((await t.post(base, { key: 'X', value: 'y' }, { token: maintainer.token })).status, 403);
    const created = await t.post(base, { key: 'INSTANCE_ONLY', value: 'everywhere', description: 'for all' });
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { variable_type: 'env_var', key: 'INSTANCE_ONLY', value: 'everywhere', protected: false, masked: false, raw: false, description: 'for all' });
    const row = await t.db.selectFrom('ci_variables').selectAll().where('key', '=', 'INSTANCE_ONLY').executeTakeFirstOrThrow();
    assert.equal(row.project_id, null);
    assert.equal(row.namespace_id, null);
    assert.ok(!row.value_encrypted.includes('everywhere'), 'stored encrypted');
    assert.deepEqual((await t.post(base, { key: 'INSTANCE_ONLY', value: 'again' })).body, { message: { key: ['(INSTANCE_ONLY) has already been taken'] } });
    assert.deepEqual((await t.post(base, { key: 'bad key', value: 'x' })).body, { message: { key: ["can contain only letters, digits and '_'."] } });
    assert.deepEqual((await t.post(base, { key: 'MASKED', value: 'short', masked: true })).body, { message: { value: ['is invalid'] } });
    assert.equal((await t.post(base, { key: 'T', value: 'x', variable_type: 'yaml' })).status, 400);
    assert.equal((await t.post(base, { key: 'NOVALUE' })).status, 400);
    assert.equal((await t.post(base, { key: 'ENV', value: 'instance' })).status, 201);
    assert.equal((await t.post(base, { key: 'INSTANCE_SECRET', value: 'protected-one', protected: true })).status, 201);
    // A project variable of the same key is another variable.
    assert.equal((await t.post(`/api/v4/projects/${project.id}/variables`, { key: 'INSTANCE_ONLY', value: 'project' }, { token: maintainer.token })).status, 201);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/variables/INSTANCE_ONLY`, { token: maintainer.token })).body.value, 'project');
    assert.equal((await t.get(`${base}/INSTANCE_ONLY`)).body.value, 'everywhere');
    assert.deepEqual((await t.get(base)).body.map((v: any) => v.key), ['INSTANCE_ONLY', 'ENV', 'INSTANCE_SECRET']);
    assert.equal((await t.delete(`/api/v4/projects/${project.id}/variables/INSTANCE_ONLY`, { token: maintainer.token })).status, 204);
    const updated = await t.put(`${base}/INSTANCE_ONLY`, { value: 'everywhere!', raw: true });
    assert.equal(updated.status, 200);
    assert.equal(updated.body.value, 'everywhere!');
    assert.equal(updated.body.raw, true);
    assert.deepEqual((await t.get(`${base}/NOPE`)).body, { message: '404 InstanceVariable Not Found' });
    assert.equal((await t.put(`${base}/NOPE`, { value: 'x' })).status, 404);

    // In jobs: the lowest of the CI/CD variables (a group's ENV wins), protected ones on protected refs only.
    const yaml = `
i: { script: [x], rules: [{ if: '$INSTANCE_ONLY == "everywhere!" && $ENV == "group"' }] }
s: { script: [x], rules: [{ if: '$INSTANCE_SECRET' }] }
`;
    await commitFiles(t, project, { '.gitlab-ci.yml': yaml });
    const p = await latestPipeline(t, project.id);
    assert.equal(p.protected, true, 'main was protected above');
    const names = (await t.db.selectFrom('ci_builds').select('name').where('pipeline_id', '=', p.id).execute()).map((r) => r.name).sort();
    assert.deepEqual(names, ['i', 's']);
    const runner = await ProtocolRunner.register(t);
    let job = await runner.takeJob();
    while (job && !job.payload.variables.some((v: any) => v.key === 'CI_PIPELINE_ID' && v.value === String(p.id))) {
      await runner.finish(job);
      job = await runner.takeJob();
    }
    assert.ok(job);
    const vars = job.payload.variables.filter((v: any) => ['INSTANCE_ONLY', 'ENV', 'INSTANCE_SECRET'].includes(v.key));
    // Later entries win: the instance's ENV comes before the group's.
    assert.deepEqual(vars.map((v: any) => `${v.key}=${v.value}`), ['INSTANCE_ONLY=everywhere!', 'ENV=instance', 'INSTANCE_SECRET=protected-one', 'ENV=group']);
    await runner.finish(job);

    assert.equal((await t.delete(`${base}/ENV`, { token: maintainer.token })).status, 403);
    for (const key of ['INSTANCE_ONLY', 'ENV', 'INSTANCE_SECRET']) assert.equal((await t.delete(`${base}/${key}`)).status, 204);
    assert.deepEqual((await t.get(base)).body, []);
  });
});
