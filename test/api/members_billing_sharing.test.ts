import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';
import { recordStatements } from '../helpers/statements.js';

describe('billable members, access requests and sharing', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  describe('billable members', () => {
    it('lists active human users across the hierarchy and invited groups, with membership_type', async () => {
      const owner = await t.createUser({ name: 'Aaron Owner' });
      const top = await t.createGroup({ owner: owner.user });
      const sub = await t.createGroup({ parent: top });
      const project = await t.createProject({ group: sub });
      const subDev = await t.createUser({ name: 'Bea Sub' });
      const projDev = await t.createUser({ name: 'Cid Project' });
      const invitedUser = await t.createUser({ name: 'Dee Invited' });
      const blocked = await t.createUser({ state: 'blocked', name: 'Eve Blocked' });
      const minimal = await t.createUser({ name: 'Fay Minimal' });
      await t.addMember(sub, subDev.user, 30);
      await t.addMember(project, projDev.user, 10);
      await t.addMember(top, blocked.user, 30);
      await t.addMember(top, minimal.user, 5);
      const invited = await t.createGroup();
      await t.addMember(invited, invitedUser.user, 40);
      await t.db.insertInto('group_group_links').values({ shared_group_id: sub.id, shared_with_group_id: invited.id, group_access: 20 }).execute();

      const res = await t.get(`/api/v4/groups/${top.id}/billable_members?sort=name_asc`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.map((m: any) => [m.name, m.membership_type, m.removable]), [
        ['Aaron Owner', 'group_member', true],
        ['Bea Sub', 'group_member', true],
        ['Cid Project', 'project_member', true],
        ['Dee Invited', 'group_invite', false],
      ]);
      assert.equal(res.headers['x-total'], '4');
      const first = res.body[0];
      for (const key of ['id', 'username', 'name', 'state', 'avatar_url', 'web_url', 'email', 'last_activity_on', 'membership_type', 'removable', 'created_at']) {
        assert.ok(key in first, `missing ${key}`);
      }
      assert.equal(first.is_last_owner, true);

      const desc = await t.get(`/api/v4/groups/${top.id}/billable_members?sort=name_desc`, { token: owner.token });
      assert.equal(desc.body[0].name, 'Dee Invited');
      const byLevel = await t.get(`/api/v4/groups/${top.id}/billable_members?sort=access_level_desc`, { token: owner.token });
      assert.equal(byLevel.body[0].name, 'Aaron Owner');
      assert.equal(byLevel.body[3].name, 'Cid Project');
      for (const sort of ['last_joined', 'oldest_joined', 'oldest_sign_in', 'recent_sign_in', 'last_activity_on_asc', 'last_activity_on_desc', 'access_level_asc']) {
        const r = await t.get(`/api/v4/groups/${top.id}/billable_members?sort=${sort}`, { token: owner.token });
        assert.equal(r.status, 200, sort);
        assert.equal(r.body.length, 4, sort);
      }
      const joined = await t.get(`/api/v4/groups/${top.id}/billable_members?sort=last_joined`, { token: owner.token });
      assert.equal(joined.body[0].name, 'Dee Invited');
      assert.deepEqual((await t.get(`/api/v4/groups/${top.id}/billable_members?sort=nope`, { token: owner.token })).body, { error: 'sort does not have a valid value' });
      const search = await t.get(`/api/v4/groups/${top.id}/billable_members?search=cid`, { token: owner.token });
      assert.deepEqual(search.body.map((m: any) => m.name), ['Cid Project']);
    });

    it('top-level groups and owners only', async () => {
      const owner = await t.createUser();
      const maint = await t.createUser();
      const top = await t.createGroup({ owner: owner.user });
      await t.addMember(top, maint.user, 40);
      const sub = await t.createGroup({ parent: top });
      const subRes = await t.get(`/api/v4/groups/${sub.id}/billable_members`, { token: owner.token });
      assert.equal(subRes.status, 400);
      assert.deepEqual(subRes.body, { message: '400 Bad request' });
      assert.equal((await t.get(`/api/v4/groups/${top.id}/billable_members`, { token: maint.token })).status, 400);
      assert.equal((await t.get(`/api/v4/groups/${top.id}/billable_members`)).status, 200, 'admin');
      const outsider = await t.createUser();
      assert.equal((await t.get(`/api/v4/groups/${top.id}/billable_members`, { token: outsider.token })).status, 404);
    });

    it('memberships of a billable user, and removal from the whole hierarchy', async () => {
      const owner = await t.createUser();
      const top = await t.createGroup({ owner: owner.user, name: 'Top' });
      const sub = await t.createGroup({ parent: top, name: 'Sub' });
      const project = await t.createProject({ group: sub, name: 'proj' });
      const dev = await t.createUser();
      await t.addMember(sub, dev.user, 30, { expires_at: '2999-01-01' });
      await t.addMember(project, dev.user, 40);
      const res = await t.get(`/api/v4/groups/${top.id}/billable_members/${dev.user.id}/memberships`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.length, 2);
      const [g, p] = res.body;
      assert.equal(g.source_id, sub.id);
      assert.equal(g.source_full_name, 'Top / Sub');
      assert.match(g.source_members_url, new RegExp(`/groups/${top.path}/${sub.path}/-/group_members$`));
      assert.equal(g.expires_at, '2999-01-01');
      assert.deepEqual(g.access_level, { string_value: 'Developer', integer_value: 30 });
      assert.equal(p.source_full_name, 'Top / Sub / proj');
      assert.match(p.source_members_url, /\/-\/project_members$/);
      const stranger = await t.createUser();
      assert.equal((await t.get(`/api/v4/groups/${top.id}/billable_members/${stranger.user.id}/memberships`, { token: owner.token })).status, 404);
      assert.equal((await t.get(`/api/v4/groups/${top.id}/billable_members/${dev.user.id}/memberships`, { token: dev.token })).status, 400);

      const lastOwner = await t.delete(`/api/v4/groups/${top.id}/billable_members/${owner.user.id}`, { token: owner.token });
      assert.equal(lastOwner.status, 400);
      assert.equal((await t.delete(`/api/v4/groups/${top.id}/billable_members/${dev.user.id}`, { token: dev.token })).status, 400);
      assert.equal((await t.delete(`/api/v4/groups/${sub.id}/billable_members/${dev.user.id}`, { token: owner.token })).status, 400);
      assert.equal((await t.delete(`/api/v4/groups/${top.id}/billable_members/${dev.user.id}`, { token: owner.token })).status, 204);
      const left = await t.db.selectFrom('members').select('id').where('user_id', '=', dev.user.id).execute();
      assert.equal(left.length, 0);
      const none = await t.delete(`/api/v4/groups/${top.id}/billable_members/${dev.user.id}`, { token: owner.token });
      assert.deepEqual(none.body, { message: '400 Bad request - No member found for the given user_id' });
    });

    it('a page costs the same statements for 2 members as for 20 (is_last_owner for the page at once)', async (ctx) => {
      const owner = await t.createUser();
      const top = await t.createGroup({ owner: owner.user });
      for (let i = 0; i < 20; i++) await t.addMember(top, (await t.createUser()).user, i % 2 ? 50 : 30);
      const page = (perPage: number) => t.get(`/api/v4/groups/${top.id}/billable_members?per_page=${perPage}`, { token: owner.token });
      // Warm the caches (the first answer's writes, such as the token's last use, reset them once).
      await page(2);
      await page(2);
      const few = await recordStatements(t.db, () => page(2));
      const many = await recordStatements(t.db, () => page(20));
      assert.equal(many.result.body.length, 20);
      assert.ok(many.result.body.every((m: any) => m.is_last_owner === false));
      ctx.diagnostic(`2 rows: ${few.statements.length} statements, 20 rows: ${many.statements.length}`);
      assert.equal(many.statements.length, few.statements.length, `2 rows: ${few.statements.length} statements, 20 rows: ${many.statements.length}`);
    });
  });

  describe('access requests', () => {
    it('request, list, approve and deny', async () => {
      const owner = await t.createUser();
      const group = await t.createGroup({ owner: owner.user, visibility: 20 });
      const asker = await t.createUser();
      const other = await t.createUser();
      const req = await t.post(`/api/v4/groups/${group.id}/access_requests`, {}, { token: asker.token });
      assert.equal(req.status, 201);
      assert.equal(req.body.id, asker.user.id);
      assert.ok(req.body.requested_at);
      assert.equal((await t.post(`/api/v4/groups/${group.id}/access_requests`, {}, { token: asker.token })).status, 403, 'already requested');
      assert.equal((await t.post(`/api/v4/groups/${group.id}/access_requests`, {}, { token: owner.token })).status, 403, 'already a member');
      await t.post(`/api/v4/groups/${group.id}/access_requests`, {}, { token: other.token });
      // A request is not a membership.
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members/${asker.user.id}`, { token: owner.token })).status, 404);

      assert.equal((await t.get(`/api/v4/groups/${group.id}/access_requests`, { token: asker.token })).status, 403);
      const list = await t.get(`/api/v4/groups/${group.id}/access_requests`, { token: owner.token });
      assert.deepEqual(list.body.map((r: any) => r.id), [asker.user.id, other.user.id]);

      const approved = await t.put(`/api/v4/groups/${group.id}/access_requests/${asker.user.id}/approve`, { access_level: 20 }, { token: owner.token });
      assert.equal(approved.status, 201);
      assert.equal(approved.body.access_level, 20);
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members/${asker.user.id}`, { token: owner.token })).body.access_level, 20);
      // The requester withdraws their own request.
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/access_requests/${other.user.id}`, { token: other.token })).status, 204);
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/access_requests/${other.user.id}`, { token: owner.token })).status, 404);
    });

    it('project requests default to Developer; private projects are invisible', async () => {
      const group = await t.createGroup();
      const project = await t.createProject({ group, visibility: 10 });
      const maint = await t.createUser();
      await t.addMember(project, maint.user, 40);
      const asker = await t.createUser();
      assert.equal((await t.post(`/api/v4/projects/${project.id}/access_requests`, {}, { token: asker.token })).status, 201);
      const approved = await t.put(`/api/v4/projects/${project.id}/access_requests/${asker.user.id}/approve`, {}, { token: maint.token });
      assert.equal(approved.body.access_level, 30);
      const secret = await t.createProject({ group });
      assert.equal((await t.post(`/api/v4/projects/${secret.id}/access_requests`, {}, { token: asker.token })).status, 404);
    });
  });

  describe('sharing', () => {
    it('shares a project with a group: permissions, errors, access', async () => {
      const home = await t.createGroup();
      const project = await t.createProject({ group: home });
      const maint = await t.createUser();
      const dev = await t.createUser();
      await t.addMember(project, maint.user, 40);
      await t.addMember(project, dev.user, 30);
      const team = await t.createGroup({ visibility: 10 });
      const teamMember = await t.createUser();
      await t.addMember(team, teamMember.user, 40);
      const url = `/api/v4/projects/${project.id}/share`;

      assert.equal((await t.post(url, { group_id: team.id, group_access: 30 }, { token: dev.token })).status, 403);
      assert.deepEqual((await t.post(url, { group_id: team.id, group_access: 50 }, { token: maint.token })).body, { error: 'group_access does not have a valid value' });
      assert.deepEqual((await t.post(url, { group_access: 30 }, { token: maint.token })).body, { error: 'group_id is missing' });
      const hidden = await t.createGroup();
      assert.equal((await t.post(url, { group_id: hidden.id, group_access: 30 }, { token: maint.token })).status, 404);
      const own = await t.post(url, { group_id: home.id, group_access: 30 });
      assert.equal(own.status, 409);
      assert.deepEqual(own.body, { message: 'Project cannot be shared with the group it is in or one of its ancestors.' });

      assert.equal((await t.get(`/api/v4/projects/${project.id}/members`, { token: teamMember.token })).status, 404);
      const res = await t.post(url, { group_id: team.id, group_access: 30, expires_at: '2999-12-31' }, { token: maint.token });
      assert.equal(res.status, 201);
      assert.deepEqual(res.body, { id: res.body.id, project_id: project.id, group_id: team.id, group_access: 30, expires_at: '2999-12-31' });
      assert.equal((await t.post(url, { group_id: team.id, group_access: 30 }, { token: maint.token })).status, 409);
      const seen = await t.get(`/api/v4/projects/${project.id}/members/all/${teamMember.user.id}`, { token: teamMember.token });
      assert.equal(seen.status, 200);
      assert.equal(seen.body.access_level, 30);

      // share_with_group_lock on the namespace: new shares refused, existing ones grant nothing.
      await t.db.updateTable('namespaces').set({ settings: { share_with_group_lock: true } }).where('id', '=', home.id).execute();
      const locked = await t.post(url, { group_id: hidden.id, group_access: 30 });
      assert.deepEqual(locked.body, { message: 'The project sharing with group is disabled' });
      assert.equal(locked.status, 400);
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members`, { token: teamMember.token })).status, 404);
      await t.db.updateTable('namespaces').set({ settings: {} }).where('id', '=', home.id).execute();

      assert.equal((await t.delete(`/api/v4/projects/${project.id}/share/${team.id}`, { token: dev.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/share/${team.id}`, { token: maint.token })).status, 204);
      const gone = await t.delete(`/api/v4/projects/${project.id}/share/${team.id}`, { token: maint.token });
      assert.deepEqual(gone.body, { message: '404 Group Link Not Found' });
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members`, { token: teamMember.token })).status, 404);
    });

    it('shares a group with a group (owners only)', async () => {
      const owner = await t.createUser();
      const maint = await t.createUser();
      const shared = await t.createGroup({ owner: owner.user });
      await t.addMember(shared, maint.user, 40);
      const team = await t.createGroup({ visibility: 20, name: 'Team' });
      const url = `/api/v4/groups/${shared.id}/share`;
      // GitLab's GroupLinks::CreateService: "Not Found" to a caller without admin_group_member.
      const refused = await t.post(url, { group_id: team.id, group_access: 30 }, { token: maint.token });
      assert.equal(refused.status, 404);
      assert.deepEqual(refused.body, { message: 'Not Found' });
      assert.equal((await t.post(url, { group_id: 999999, group_access: 30 }, { token: owner.token })).status, 404);
      assert.deepEqual((await t.post(url, { group_id: team.id, group_access: 60 }, { token: owner.token })).body, { error: 'group_access does not have a valid value' });
      const res = await t.post(url, { group_id: team.id, group_access: 30 }, { token: owner.token });
      assert.equal(res.status, 201);
      assert.equal(res.body.id, shared.id);
      assert.deepEqual(res.body.shared_with_groups, [{ group_id: team.id, group_name: 'Team', group_full_path: team.full_path, group_access_level: 30, expires_at: null }]);
      const dup = await t.post(url, { group_id: team.id, group_access: 30 }, { token: owner.token });
      assert.equal(dup.status, 409);
      assert.equal((await t.delete(`/api/v4/groups/${shared.id}/share/${team.id}`, { token: maint.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/groups/${shared.id}/share/${team.id}`, { token: owner.token })).status, 204);
      assert.equal((await t.delete(`/api/v4/groups/${shared.id}/share/${team.id}`, { token: owner.token })).status, 404);
    });
  });
});
