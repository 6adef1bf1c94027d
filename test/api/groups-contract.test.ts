import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Namespace } from '../../src/db/schema/core.js';
import { GroupDetailSchema, GroupDetailWithProjectsSchema, GroupSchema } from '../../src/presenters/schemas/groups.js';
import { ProjectSchema, ProjectSimpleSchema } from '../../src/presenters/schemas/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('groups: response forms match their schemas', () => {
  let t: TestContext;
  let owner: TestUser, guest: TestUser;
  let top: Namespace, sub: Namespace, other: Namespace;
  before(async () => {
    t = await createTestContext();
    [owner, guest] = await Promise.all([t.createUser(), t.createUser()]);
    top = await t.createGroup({ owner: owner.user, visibility: 20 });
    sub = await t.createGroup({ parent: top, visibility: 20 });
    other = await t.createGroup({ owner: owner.user, visibility: 20 });
    await t.addMember(top, guest.user, 10);
    await t.createProject({ group: top, visibility: 20 });
    await t.createProject({ group: sub, visibility: 20 });
    const shared = await t.createProject({ group: other, visibility: 20 });
    assert.equal((await t.post(`/api/v4/projects/${shared.id}/share`, { group_id: top.id, group_access: 30 })).status, 201);
    assert.equal((await t.post(`/api/v4/groups/${other.id}/share`, { group_id: top.id, group_access: 30 }, { token: owner.token })).status, 201);
  });
  after(async () => { await t.close(); });

  it('lists answer the Group form', async () => {
    assertEach(GroupSchema, await t.get('/api/v4/groups', { token: null }), 'GET /groups (anonymous)');
    assertEach(GroupSchema, await t.get('/api/v4/groups', { token: guest.token }), 'GET /groups (guest)');
    assertEach(GroupSchema, await t.get('/api/v4/groups?all_available=true'), 'GET /groups (admin)');
    assertEach(GroupSchema, await t.get(`/api/v4/groups/${top.id}/subgroups`, { token: guest.token }), 'subgroups');
    assertEach(GroupSchema, await t.get(`/api/v4/groups/${top.id}/descendant_groups`, { token: null }), 'descendant_groups');
  });

  it('detail: with projects by default, without on with_projects=false; owners see runners_token', async () => {
    for (const [who, token] of [['anonymous', null], ['guest', guest.token], ['owner', owner.token], ['admin', undefined]] as const) {
      const res = await t.get(`/api/v4/groups/${top.id}`, token === undefined ? {} : { token });
      assertOne(GroupDetailWithProjectsSchema, res, `GET /groups/:id (${who})`);
      assert.ok(res.body.projects.length > 0 && res.body.shared_projects.length > 0, who);
      assertOne(GroupDetailSchema, await t.get(`/api/v4/groups/${sub.id}?with_projects=false`, token === undefined ? {} : { token }), `subgroup without projects (${who})`);
    }
    const detail = (await t.get(`/api/v4/groups/${top.id}`, { token: owner.token })).body;
    assert.equal(typeof detail.runners_token, 'string');
    assert.equal(detail.shared_with_groups.length, 0);
    assert.equal((await t.get(`/api/v4/groups/${other.id}?with_projects=false`)).body.shared_with_groups.length, 1);
  });

  it('create and transfer answer GroupDetail without projects, update with them (as GitLab)', async () => {
    const path = t.unique('cg');
    const created = await t.post('/api/v4/groups', { name: path, path }, { token: owner.token });
    assertOne(GroupDetailSchema, created, 'POST /groups');
    const child = await t.post('/api/v4/groups', { name: `${path}-c`, path: `${path}-c`, parent_id: created.body.id }, { token: owner.token });
    assertOne(GroupDetailSchema, child, 'POST /groups (subgroup)');
    assertOne(GroupDetailWithProjectsSchema, await t.put(`/api/v4/groups/${created.body.id}`, { description: 'x', auto_devops_enabled: true }, { token: owner.token }), 'PUT /groups/:id');
    assertOne(GroupDetailSchema, await t.post(`/api/v4/groups/${child.body.id}/transfer`, {}, { token: owner.token }), 'POST transfer (to top level)');
  });

  it('group projects lists', async () => {
    // GitLab lists group projects in the Project form (not ProjectWithAccess), simple=true in BasicProjectDetails.
    assertEach(ProjectSchema, await t.get(`/api/v4/groups/${top.id}/projects?include_subgroups=true`, { token: guest.token }), 'group projects');
    assertEach(ProjectSchema, await t.get(`/api/v4/groups/${top.id}/projects`, { token: null }), 'group projects (anonymous)');
    assertEach(ProjectSimpleSchema, await t.get(`/api/v4/groups/${top.id}/projects?simple=true`, { token: guest.token }), 'group projects (simple)');
    assertEach(ProjectSchema, await t.get(`/api/v4/groups/${top.id}/projects/shared`, { token: guest.token }), 'shared projects');
  });

  it('the schemas reject stray fields', async () => {
    const g = (await t.get('/api/v4/groups', { token: guest.token })).body[0];
    assert.equal(Value.Check(GroupSchema, { ...g, extra: 1 }), false);
  });
});
