import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Value } from 'typebox/value';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import {
  AccessRequesterSchema, BillableMemberSchema, BillableMembershipSchema, MemberSchema, MemberWithOverrideSchema, ProjectGroupLinkSchema,
} from '../../src/presenters/schemas/members.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('members: response forms match their schemas', () => {
  let t: TestContext;
  let owner: TestUser, dev: TestUser, visible: TestUser, newcomer: TestUser;
  let group: Namespace, sub: Namespace;
  let project: Project, personal: Project;
  before(async () => {
    t = await createTestContext();
    [owner, dev, newcomer] = await Promise.all([t.createUser(), t.createUser(), t.createUser()]);
    visible = await t.createUser();
    await t.put(`/api/v4/users/${visible.user.id}`, { public_email: visible.user.email });
    group = await t.createGroup({ owner: owner.user, visibility: 20 });
    sub = await t.createGroup({ parent: group, visibility: 20 });
    project = await t.createProject({ group: sub, visibility: 20 });
    personal = await t.createProject({ owner: owner.user, visibility: 20 });
    await t.addMember(group, dev.user, 30, { expires_at: '2999-01-01' });
    // Added through the API so the membership records its creator.
    assert.equal((await t.post(`/api/v4/projects/${project.id}/members`, { user_id: visible.user.id, access_level: 20 }, { token: owner.token })).status, 201);
  });
  after(async () => { await t.close(); });

  it('member lists and single members of groups and projects', async () => {
    for (const [kind, id] of [['groups', group.id], ['groups', sub.id], ['projects', project.id], ['projects', personal.id]] as const) {
      assertEach(MemberSchema, await t.get(`/api/v4/${kind}/${id}/members/all`, { token: owner.token }), `${kind}/${id}/members/all`);
      assertEach(MemberSchema, await t.get(`/api/v4/${kind}/${id}/members/all`, { token: dev.token }), `${kind}/${id}/members/all (developer)`);
    }
    assertEach(MemberSchema, await t.get(`/api/v4/groups/${group.id}/members`, { token: dev.token }), 'group members');
    assertEach(MemberSchema, await t.get(`/api/v4/groups/${group.id}/members?show_seat_info=true`, { token: owner.token }), 'group members with seat info');
    assertEach(MemberSchema, await t.get(`/api/v4/projects/${project.id}/members`, { token: owner.token }), 'project members');
    assertOne(MemberSchema, await t.get(`/api/v4/projects/${project.id}/members/${visible.user.id}`, { token: owner.token }), 'project member (public email, created_by)');
    assertOne(MemberSchema, await t.get(`/api/v4/groups/${group.id}/members/${dev.user.id}`, { token: owner.token }), 'group member (expires)');
    assertOne(MemberSchema, await t.get(`/api/v4/projects/${project.id}/members/all/${dev.user.id}`, { token: owner.token }), 'inherited member');
    const m = (await t.get(`/api/v4/projects/${project.id}/members/${visible.user.id}`, { token: owner.token })).body;
    assert.equal(m.email, visible.user.email);
    assert.equal(m.created_by.id, owner.user.id);
  });

  it('add, edit and override', async () => {
    assertOne(MemberSchema, await t.post(`/api/v4/groups/${sub.id}/members`, { user_id: newcomer.user.id, access_level: 30 }, { token: owner.token }), 'POST group member');
    assertOne(MemberSchema, await t.put(`/api/v4/groups/${sub.id}/members/${newcomer.user.id}`, { access_level: 40, expires_at: '2999-02-02' }, { token: owner.token }), 'PUT group member');
    assertOne(MemberWithOverrideSchema, await t.post(`/api/v4/groups/${sub.id}/members/${newcomer.user.id}/override`, {}, { token: owner.token }), 'POST override');
    assertOne(MemberWithOverrideSchema, await t.delete(`/api/v4/groups/${sub.id}/members/${newcomer.user.id}/override`, { token: owner.token }), 'DELETE override');
  });

  it('billable members and memberships', async () => {
    assertEach(BillableMemberSchema, await t.get(`/api/v4/groups/${group.id}/billable_members`, { token: owner.token }), 'billable members (owner)');
    assertEach(BillableMemberSchema, await t.get(`/api/v4/groups/${group.id}/billable_members`), 'billable members (admin)');
    assertEach(BillableMembershipSchema, await t.get(`/api/v4/groups/${group.id}/billable_members/${dev.user.id}/memberships`, { token: owner.token }), 'group membership');
    assertEach(BillableMembershipSchema, await t.get(`/api/v4/groups/${group.id}/billable_members/${visible.user.id}/memberships`, { token: owner.token }), 'project membership');
  });

  it('access requests and project sharing', async () => {
    const asker = await t.createUser();
    assertOne(AccessRequesterSchema, await t.post(`/api/v4/groups/${group.id}/access_requests`, {}, { token: asker.token }), 'POST access request');
    assertEach(AccessRequesterSchema, await t.get(`/api/v4/groups/${group.id}/access_requests`, { token: owner.token }), 'access requests');
    assertOne(MemberSchema, await t.put(`/api/v4/groups/${group.id}/access_requests/${asker.user.id}/approve`, { access_level: 20 }, { token: owner.token }), 'approve request');
    const other = await t.createGroup();
    assertOne(ProjectGroupLinkSchema, await t.post(`/api/v4/projects/${project.id}/share`, { group_id: other.id, group_access: 30, expires_at: '2999-01-01' }), 'POST share');
  });

  it('the schemas reject stray fields', async () => {
    const m = (await t.get(`/api/v4/groups/${group.id}/members`, { token: dev.token })).body[0];
    assert.equal(Value.Check(MemberSchema, { ...m, override: false }), false);
  });
});
