import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { ProjectIdentitySchema, ProjectSchema, ProjectSimpleSchema, ProjectWithAccessSchema, StarrerSchema } from '../../src/presenters/schemas/projects.js';
import { UserBasicSchema } from '../../src/presenters/schemas/users.js';
import { presentProjectIdentity } from '../../src/presenters/projects.js';
import { findProjectRow } from '../../src/finders/projects.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertMatches, assertOne } from '../helpers/contract.js';

describe('projects: response forms match their schemas', () => {
  let t: TestContext;
  let owner: TestUser, guest: TestUser;
  let group: Namespace;
  let personal: Project, inGroup: Project, empty: Project;
  before(async () => {
    t = await createTestContext();
    [owner, guest] = await Promise.all([t.createUser(), t.createUser()]);
    group = await t.createGroup({ owner: owner.user, visibility: 20 });
    personal = await t.createProject({ owner: owner.user, visibility: 20 });
    inGroup = await t.createProject({ group, visibility: 20 });
    empty = await t.createProject({ group, visibility: 0 });
    await t.addMember(inGroup, guest.user, 10);
    for (const p of [personal, inGroup]) {
      const res = await t.post(`/api/v4/projects/${p.id}/repository/commits`, {
        branch: 'main', commit_message: 'init', actions: [{ action: 'create', file_path: 'README.md', content: '# hi\n' }],
      });
      assert.equal(res.status, 201, res.text);
    }
    const other = await t.createGroup({ visibility: 20 });
    assert.equal((await t.post(`/api/v4/projects/${inGroup.id}/share`, { group_id: other.id, group_access: 30 })).status, 201);
    await t.post(`/api/v4/projects/${inGroup.id}/star`, {}, { token: guest.token });
  });
  after(async () => { await t.close(); });

  it('lists: simple for anonymous and simple=true, with permissions for signed-in callers', async () => {
    assertEach(ProjectSimpleSchema, await t.get('/api/v4/projects', { token: null }), 'GET /projects (anonymous)');
    assertEach(ProjectSimpleSchema, await t.get('/api/v4/projects?simple=true', { token: guest.token }), 'GET /projects?simple=true');
    assertEach(ProjectWithAccessSchema, await t.get('/api/v4/projects', { token: guest.token }), 'GET /projects (user)');
    assertEach(ProjectWithAccessSchema, await t.get('/api/v4/projects', { token: owner.token }), 'GET /projects (owner)');
    assertEach(ProjectWithAccessSchema, await t.get('/api/v4/projects'), 'GET /projects (admin)');
    assertEach(ProjectWithAccessSchema, await t.get(`/api/v4/users/${owner.user.id}/projects`, { token: guest.token }), 'GET /users/:id/projects');
    assertEach(ProjectSimpleSchema, await t.get(`/api/v4/users/${owner.user.id}/projects`, { token: null }), 'GET /users/:id/projects (anonymous)');
    assertEach(ProjectWithAccessSchema, await t.get(`/api/v4/users/${guest.user.id}/starred_projects`, { token: guest.token }), 'starred_projects');
  });

  it('single: full form for anonymous, with permissions for members, guests and admins', async () => {
    for (const p of [personal, inGroup]) {
      assertOne(ProjectSchema, await t.get(`/api/v4/projects/${p.id}`, { token: null }), `GET /projects/${p.path} (anonymous)`);
      assertOne(ProjectWithAccessSchema, await t.get(`/api/v4/projects/${p.id}`, { token: guest.token }), `GET /projects/${p.path} (guest)`);
      assertOne(ProjectWithAccessSchema, await t.get(`/api/v4/projects/${p.id}`, { token: owner.token }), `GET /projects/${p.path} (owner)`);
      assertOne(ProjectWithAccessSchema, await t.get(`/api/v4/projects/${p.id}`), `GET /projects/${p.path} (admin)`);
    }
    assertOne(ProjectWithAccessSchema, await t.get(`/api/v4/projects/${empty.id}`, { token: owner.token }), 'empty private project');
    const withAccess = (await t.get(`/api/v4/projects/${inGroup.id}`, { token: owner.token })).body;
    assert.equal(withAccess.permissions.group_access.access_level, 50);
  });

  it('create, update, transfer, star answer the full form', async () => {
    const created = await t.post('/api/v4/projects', { name: t.unique('contract') }, { token: owner.token });
    assertOne(ProjectSchema, created, 'POST /projects');
    assertOne(ProjectSchema, await t.post(`/api/v4/projects/user/${guest.user.id}`, { name: t.unique('for-user') }), 'POST /projects/user/:id');
    assertOne(ProjectSchema, await t.put(`/api/v4/projects/${created.body.id}`, { description: 'd', topics: 'a,b' }, { token: owner.token }), 'PUT /projects/:id');
    assertOne(ProjectSchema, await t.put(`/api/v4/projects/${created.body.id}/transfer`, { namespace: group.id }, { token: owner.token }), 'PUT transfer');
    assertOne(ProjectSchema, await t.post(`/api/v4/projects/${created.body.id}/star`, {}, { token: owner.token }), 'POST star');
    assertOne(ProjectSchema, await t.post(`/api/v4/projects/${created.body.id}/unstar`, {}, { token: owner.token }), 'POST unstar');
  });

  it('starrers, users and the identity form', async () => {
    assertEach(StarrerSchema, await t.get(`/api/v4/projects/${inGroup.id}/starrers`, { token: guest.token }), 'starrers');
    assertEach(UserBasicSchema, await t.get(`/api/v4/projects/${inGroup.id}/users`, { token: guest.token }), 'project users');
    const row = (await findProjectRow(t.app.cairn.db, inGroup.id))!;
    assertMatches(ProjectIdentitySchema, JSON.parse(JSON.stringify(presentProjectIdentity(row))), 'identity');
  });

  it('the schemas reject stray and missing fields', async () => {
    const body = (await t.get(`/api/v4/projects/${inGroup.id}`, { token: guest.token })).body;
    assert.equal(Value.Check(ProjectWithAccessSchema, { ...body, extra: 1 }), false);
    const { permissions: _p, ...full } = body;
    assert.equal(Value.Check(ProjectWithAccessSchema, full), false);
    assert.equal(Value.Check(ProjectSchema, full), true);
  });
});
