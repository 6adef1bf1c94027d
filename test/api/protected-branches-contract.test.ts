import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { ProtectedBranchSchema } from '../../src/presenters/schemas/branches.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('protected branches: response forms match their schemas', () => {
  let t: TestContext;
  let maintainer: TestUser, dev: TestUser;
  let group: Namespace, sharedGroup: Namespace;
  let project: Project;
  let url: string;
  before(async () => {
    t = await createTestContext();
    [maintainer, dev] = await Promise.all([t.createUser(), t.createUser()]);
    group = await t.createGroup();
    sharedGroup = await t.createGroup();
    project = await t.createProject({ group });
    url = `/api/v4/projects/${project.id}/protected_branches`;
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, dev.user, 30);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/share`, { group_id: sharedGroup.id, group_access: 30 })).status, 201);
  });
  after(async () => { await t.close(); });

  it('role, user and group access levels: create, list, single, update', async () => {
    assertOne(ProtectedBranchSchema, await t.post(url, { name: 'main', push_access_level: 30, merge_access_level: 40, unprotect_access_level: 40 }, { token: maintainer.token }), 'POST (roles)');
    const mixed = await t.post(url, {
      name: 'release-*', allow_force_push: true,
      allowed_to_push: [{ user_id: dev.user.id }, { group_id: sharedGroup.id }, { access_level: 40 }],
      allowed_to_merge: [{ access_level: 30 }], allowed_to_unprotect: [{ access_level: 40 }],
    }, { token: maintainer.token });
    assertOne(ProtectedBranchSchema, mixed, 'POST (users and groups)');
    assert.ok(mixed.body.push_access_levels.some((l: { user_id: number | null }) => l.user_id === dev.user.id));
    assertEach(ProtectedBranchSchema, await t.get(url, { token: maintainer.token }), 'GET protected branches');
    assertOne(ProtectedBranchSchema, await t.get(`${url}/${encodeURIComponent('release-*')}`, { token: maintainer.token }), 'GET protected branch');
    assertOne(ProtectedBranchSchema, await t.call('PATCH', `${url}/main`, { body: { allow_force_push: true, allowed_to_push: [{ access_level: 0 }] }, token: maintainer.token }), 'PATCH');
    const l = mixed.body.push_access_levels[0];
    assert.equal(Value.Check(ProtectedBranchSchema, { ...mixed.body, push_access_levels: [{ ...l, deploy_key_id: null }] }), false);
  });
});
