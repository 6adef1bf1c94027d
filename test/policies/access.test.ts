import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { groupAccessLevel, projectAccessLevel } from '../../src/finders/access_levels.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('access levels', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('inherits down the group tree, ignores expired memberships, caps shares at the link level', async () => {
    const { user: alice } = await t.createUser();
    const { user: bob } = await t.createUser();
    const { user: carol } = await t.createUser();
    const top = await t.createGroup();
    const sub = await t.createGroup({ parent: top });
    const project = await t.createProject({ group: sub });
    await t.addMember(top, alice, 40);
    await t.addMember(sub, bob, 30, { expires_at: '2000-01-01' });
    assert.equal(await projectAccessLevel(t.db, alice.id, project), 40);
    assert.equal(await groupAccessLevel(t.db, alice.id, sub), 40);
    assert.equal(await projectAccessLevel(t.db, bob.id, project), 0);

    const other = await t.createGroup();
    await t.addMember(other, carol, 50);
    await t.db.insertInto('project_group_links').values({ project_id: project.id, group_id: other.id, group_access: 20 }).execute();
    assert.equal(await projectAccessLevel(t.db, carol.id, project), 20);
    const auth = await sql<{ project_id: number; access_level: number }>`select * from project_authorizations(${carol.id})`.execute(t.db);
    assert.deepEqual(auth.rows, [{ project_id: project.id, access_level: 20 }]);

    await t.db.insertInto('group_group_links').values({ shared_group_id: top.id, shared_with_group_id: other.id, group_access: 30 }).execute();
    assert.equal(await projectAccessLevel(t.db, carol.id, project), 30);
    assert.equal(await groupAccessLevel(t.db, carol.id, sub), 30);
  });

  it('owner of a personal namespace has owner access to its projects', async () => {
    const { user } = await t.createUser();
    const project = await t.createProject({ owner: user });
    assert.equal(await projectAccessLevel(t.db, user.id, project), 50);
  });

  it('a group share reaches direct members of the invited group only (as GitLab), consistently in TS and SQL', async () => {
    const { user: direct } = await t.createUser();
    const { user: parentMember } = await t.createUser();
    const shared = await t.createGroup();
    const project = await t.createProject({ group: shared });
    const invitedParent = await t.createGroup();
    const invited = await t.createGroup({ parent: invitedParent });
    await t.addMember(invited, direct, 40);
    await t.addMember(invitedParent, parentMember, 40);
    await t.db.insertInto('group_group_links').values({ shared_group_id: shared.id, shared_with_group_id: invited.id, group_access: 30 }).execute();
    assert.equal(await groupAccessLevel(t.db, direct.id, shared), 30);
    assert.equal(await projectAccessLevel(t.db, direct.id, project), 30);
    assert.equal(await groupAccessLevel(t.db, parentMember.id, shared), 0);
    assert.equal(await projectAccessLevel(t.db, parentMember.id, project), 0);
    const sqlLevels = await sql<{ project_id: number }>`select project_id from project_authorizations(${parentMember.id})`.execute(t.db);
    assert.equal(sqlLevels.rows.length, 0);
    const groups = await sql<{ group_id: number }>`select group_id from group_authorizations(${parentMember.id})`.execute(t.db);
    assert.deepEqual(groups.rows.map((r) => r.group_id).sort(), [invitedParent.id, invited.id].sort());
  });

  it('project shares: reached through groups shared into the invited group, ignored under share_with_group_lock', async () => {
    const { user: carol } = await t.createUser();
    const home = await t.createGroup();
    const project = await t.createProject({ group: home });
    const team = await t.createGroup();
    const outer = await t.createGroup();
    await t.addMember(outer, carol, 50);
    await t.db.insertInto('project_group_links').values({ project_id: project.id, group_id: team.id, group_access: 30 }).execute();
    await t.db.insertInto('group_group_links').values({ shared_group_id: team.id, shared_with_group_id: outer.id, group_access: 20 }).execute();
    assert.equal(await projectAccessLevel(t.db, carol.id, project), 20);
    const auth = await sql<{ project_id: number; access_level: number }>`select * from project_authorizations(${carol.id}) where project_id = ${project.id}`.execute(t.db);
    assert.deepEqual(auth.rows, [{ project_id: project.id, access_level: 20 }]);
    await t.db.updateTable('namespaces').set({ settings: { share_with_group_lock: true } }).where('id', '=', home.id).execute();
    assert.equal(await projectAccessLevel(t.db, carol.id, project), 0);
    const locked = await sql`select * from project_authorizations(${carol.id}) where project_id = ${project.id}`.execute(t.db);
    assert.equal(locked.rows.length, 0);
  });

  it('minimal access in a group grants nothing on its projects', async () => {
    const { user } = await t.createUser();
    const group = await t.createGroup();
    const project = await t.createProject({ group });
    await t.addMember(group, user, 5);
    assert.equal(await projectAccessLevel(t.db, user.id, project), 0);
    const rows = await sql`select * from project_authorizations(${user.id})`.execute(t.db);
    assert.equal(rows.rows.length, 0);
  });
});
