import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { workTree } from '../helpers/repo.js';

describe('protected branches API', () => {
  let t: TestContext;
  let project: Project;
  let group: Namespace;
  let developer: TestUser;
  let maintainer: TestUser;
  let readApi: TestUser;
  const api = (rest = '') => `/api/v4/projects/${project.id}/protected_branches${rest}`;

  before(async () => {
    t = await createTestContext();
    project = await t.createProject({ visibility: 20 });
    group = await t.createGroup({ name: 'Release Team' });
    developer = await t.createUser();
    maintainer = await t.createUser();
    readApi = await t.createUser({ scopes: ['read_api'] });
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, readApi.user, 40);
    await t.addMember(group, developer.user, 30);
    const w = workTree(t, project);
    w.commit('init');
    w.push();
  });
  after(async () => {
    await t.close();
  });

  it('protects a branch with default Maintainer levels', async () => {
    const res = await t.post(api(), { name: 'main' }, { token: maintainer.token });
    assert.equal(res.status, 201);
    assert.equal(res.body.name, 'main');
    assert.equal(res.body.allow_force_push, false);
    assert.equal(res.body.code_owner_approval_required, false);
    for (const key of ['push_access_levels', 'merge_access_levels', 'unprotect_access_levels']) {
      assert.equal(res.body[key].length, 1, key);
      const level = res.body[key][0];
      assert.equal(level.access_level, 40);
      assert.equal(level.access_level_description, 'Maintainers');
      assert.equal(level.user_id, null);
      assert.equal(level.group_id, null);
      assert.equal(typeof level.id, 'number');
    }
    const branch = await t.get(`/api/v4/projects/${project.id}/repository/branches/main`, { token: developer.token });
    assert.equal(branch.body.protected, true);
    assert.equal(branch.body.can_push, false);
  });

  it('levels, wildcards, users and groups; duplicates conflict', async () => {
    const res = await t.post(
      api(),
      {
        name: 'release/*',
        push_access_level: 30,
        merge_access_level: 0,
        allow_force_push: true,
        allowed_to_push: [{ user_id: maintainer.user.id }, { group_id: group.id }],
      },
      { token: maintainer.token },
    );
    assert.equal(res.status, 201);
    assert.equal(res.body.allow_force_push, true);
    const push = res.body.push_access_levels;
    assert.deepEqual(push.map((l: any) => l.access_level_description), ['Developers + Maintainers', maintainer.user.name, 'Release Team']);
    assert.equal(push[1].user_id, maintainer.user.id);
    assert.equal(push[2].group_id, group.id);
    assert.equal(res.body.merge_access_levels[0].access_level_description, 'No one');
    const dup = await t.post(api(), { name: 'release/*' });
    assert.equal(dup.status, 409);
    assert.deepEqual(dup.body, { message: "Protected branch 'release/*' already exists" });
    // form encoding with nested arrays
    const form = await t.call('POST', api(), { form: 'name=hotfix&push_access_level=40&allowed_to_merge[][access_level]=30' });
    assert.equal(form.status, 201);
    assert.deepEqual(form.body.merge_access_levels.map((l: any) => l.access_level), [30]);
    // developers_can_push follows the role level
    await t.post(`/api/v4/projects/${project.id}/repository/branches`, { branch: 'release/9', ref: 'main' });
    const b = await t.get(`/api/v4/projects/${project.id}/repository/branches/release%2F9`);
    assert.equal(b.body.developers_can_push, true);
    assert.equal(b.body.developers_can_merge, false);
  });

  it('bad input is 400', async () => {
    assert.deepEqual((await t.post(api(), {})).body, { error: 'name is missing' });
    assert.equal((await t.post(api(), { name: 'x', push_access_level: 35 })).status, 400);
    assert.equal((await t.post(api(), { name: 'x', push_access_level: 'abc' })).status, 400);
    assert.equal((await t.post(api(), { name: 'x', allowed_to_push: 'nope' })).status, 400);
    assert.equal((await t.post(api(), { name: 'x', allowed_to_push: [{ user_id: 999999 }] })).status, 422);
  });

  it('lists (paginated, search), reads one with URL-encoded wildcard names', async () => {
    const list = await t.get(api(), { token: maintainer.token });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.map((r: any) => r.name), ['hotfix', 'main', 'release/*']);
    assert.equal(list.headers['x-total'], '3');
    assert.deepEqual((await t.get(api('?search=rel'))).body.map((r: any) => r.name), ['release/*']);
    const one = await t.get(api('/release%2F*'));
    assert.equal(one.status, 200);
    assert.equal(one.body.name, 'release/*');
    assert.deepEqual((await t.get(api('/nope'))).body, { message: '404 Protected Branch Not Found' });
  });

  it('PATCH updates flags and grants (add, change, _destroy)', async () => {
    const before = (await t.get(api('/release%2F*'))).body;
    const userGrant = before.push_access_levels.find((l: any) => l.user_id);
    const res = await t.call('PATCH', api('/release%2F*'), {
      body: {
        allow_force_push: false,
        allowed_to_push: [{ id: userGrant.id, _destroy: true }],
        allowed_to_merge: [{ access_level: 40 }],
      },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.allow_force_push, false);
    assert.ok(!res.body.push_access_levels.some((l: any) => l.user_id));
    assert.deepEqual(res.body.merge_access_levels.map((l: any) => l.access_level).sort(), [0, 40]);
    assert.equal((await t.call('PATCH', api('/release%2F*'), { body: { allowed_to_push: [{ id: 999999, _destroy: true }] } })).status, 404);
    assert.equal((await t.call('PATCH', api('/nope'), { body: {} })).status, 404);
  });

  it('only maintainers manage protection; read_api tokens cannot write', async () => {
    assert.equal((await t.get(api(), { token: developer.token })).status, 403);
    assert.equal((await t.post(api(), { name: 'dev' }, { token: developer.token })).status, 403);
    assert.equal((await t.get(api(), { token: null })).status, 403);
    assert.equal((await t.post(api(), { name: 'x' }, { token: null })).status, 401);
    assert.equal((await t.post(api(), { name: 'x' }, { token: readApi.token })).status, 403);
    assert.equal((await t.get(api(), { token: readApi.token })).status, 200);
    const outsider = await t.createUser();
    assert.equal((await t.get(api(), { token: outsider.token })).status, 403);
    const priv = await t.createProject();
    assert.equal((await t.get(`/api/v4/projects/${priv.id}/protected_branches`, { token: outsider.token })).status, 404);
  });

  it('unprotecting honours the unprotect level', async () => {
    await t.post(api(), { name: 'locked', unprotect_access_level: 60 });
    assert.equal((await t.delete(api('/locked'), { token: maintainer.token })).status, 403);
    assert.equal((await t.delete(api('/locked'))).status, 204);
    assert.equal((await t.delete(api('/main'), { token: developer.token })).status, 403);
    assert.equal((await t.delete(api('/main'), { token: maintainer.token })).status, 204);
    assert.equal((await t.delete(api('/main'))).status, 404);
    const branch = await t.get(`/api/v4/projects/${project.id}/repository/branches/main`, { token: developer.token });
    assert.equal(branch.body.protected, false);
    assert.equal(branch.body.can_push, true);
  });
});
