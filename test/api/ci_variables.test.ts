import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles, latestPipeline } from '../helpers/ci.js';

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
});
