import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createTestContext, type TestContext } from '../helpers/app.js';

const FUTURE = '2999-01-01';
const PAST = '2000-01-01';

describe('members API', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  /** A group with an owner, a maintainer, a developer, a reporter and a guest. */
  async function groupWithRoles(visibility = 0) {
    const owner = await t.createUser();
    const maintainer = await t.createUser();
    const developer = await t.createUser();
    const reporter = await t.createUser();
    const guest = await t.createUser();
    const group = await t.createGroup({ visibility, owner: owner.user });
    await t.addMember(group, maintainer.user, 40);
    await t.addMember(group, developer.user, 30);
    await t.addMember(group, reporter.user, 20);
    await t.addMember(group, guest.user, 10);
    return { group, owner, maintainer, developer, reporter, guest };
  }

  async function projectWithRoles(visibility = 0) {
    const maintainer = await t.createUser();
    const developer = await t.createUser();
    const reporter = await t.createUser();
    const guest = await t.createUser();
    const group = await t.createGroup();
    const project = await t.createProject({ group, visibility });
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, guest.user, 10);
    return { group, project, maintainer, developer, reporter, guest };
  }

  const ids = (body: any[]) => body.map((m) => m.id).sort((a, b) => a - b);

  describe('listing', () => {
    it('lists direct members with the Member fields, paginated, ordered by membership', async () => {
      const { group, owner, maintainer, developer } = await groupWithRoles();
      await t.db.updateTable('users').set({ public_email: 'dev@public.example' }).where('id', '=', developer.user.id).execute();
      const res = await t.get(`/api/v4/groups/${group.id}/members?per_page=2`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-total'], '5');
      assert.equal(res.headers['x-total-pages'], '3');
      assert.equal(res.body.length, 2);
      const [first, second] = res.body;
      assert.equal(first.id, owner.user.id);
      assert.equal(first.access_level, 50);
      assert.equal(second.id, maintainer.user.id);
      for (const key of ['id', 'username', 'name', 'state', 'avatar_url', 'web_url', 'access_level', 'created_at', 'expires_at', 'group_saml_identity', 'membership_state']) {
        assert.ok(key in first, `missing ${key}`);
      }
      assert.equal(first.membership_state, 'active');
      assert.equal(first.group_saml_identity, null);
      assert.equal('email' in first, false);
      const page2 = await t.get(`/api/v4/groups/${group.id}/members?per_page=2&page=2`, { token: owner.token });
      const dev = page2.body.find((m: any) => m.id === developer.user.id);
      assert.equal(dev.email, 'dev@public.example');
    });

    it('filters by query, user_ids (array or comma list) and skip_users', async () => {
      const { group, owner, developer, guest } = await groupWithRoles();
      const byName = await t.get(`/api/v4/groups/${group.id}/members?query=${developer.user.username}`, { token: owner.token });
      assert.deepEqual(ids(byName.body), [developer.user.id]);
      const byIds = await t.get(`/api/v4/groups/${group.id}/members?user_ids[]=${developer.user.id}&user_ids[]=${guest.user.id}`, { token: owner.token });
      assert.deepEqual(ids(byIds.body), [developer.user.id, guest.user.id].sort((a, b) => a - b));
      const byComma = await t.get(`/api/v4/groups/${group.id}/members?user_ids=${developer.user.id},${guest.user.id}`, { token: owner.token });
      assert.equal(byComma.body.length, 2);
      const skipped = await t.get(`/api/v4/groups/${group.id}/members?skip_users[]=${developer.user.id}`, { token: owner.token });
      assert.equal(skipped.body.length, 4);
      assert.ok(!skipped.body.some((m: any) => m.id === developer.user.id));
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members?user_ids[]=abc`, { token: owner.token })).status, 400);
    });

    it('anonymous callers get 401; outsiders see public sources only', async () => {
      const pub = await groupWithRoles(20);
      const priv = await groupWithRoles(0);
      assert.equal((await t.get(`/api/v4/groups/${pub.group.id}/members`, { token: null })).status, 401);
      assert.equal((await t.get(`/api/v4/groups/${priv.group.id}/members`, { token: null })).status, 401);
      const outsider = await t.createUser();
      assert.equal((await t.get(`/api/v4/groups/${pub.group.id}/members`, { token: outsider.token })).status, 200);
      const hidden = await t.get(`/api/v4/groups/${priv.group.id}/members`, { token: outsider.token });
      assert.equal(hidden.status, 404);
      assert.deepEqual(hidden.body, { message: '404 Group Not Found' });
      const privProject = await projectWithRoles(0);
      assert.equal((await t.get(`/api/v4/projects/${privProject.project.id}/members`, { token: outsider.token })).status, 404);
      assert.equal((await t.get(`/api/v4/projects/${privProject.project.id}/members`, { token: privProject.guest.token })).status, 200);
    });

    it('a member of a project in a private group may list the group members', async () => {
      const group = await t.createGroup();
      const project = await t.createProject({ group });
      const dev = await t.createUser();
      await t.addMember(project, dev.user, 30);
      const res = await t.get(`/api/v4/groups/${group.id}/members`, { token: dev.token });
      assert.equal(res.status, 200);
    });

    it('blocked users are listed with their state', async () => {
      const { group, owner } = await groupWithRoles();
      const blocked = await t.createUser({ state: 'blocked' });
      await t.addMember(group, blocked.user, 30);
      const res = await t.get(`/api/v4/groups/${group.id}/members/${blocked.user.id}`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.state, 'blocked');
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members`, { token: blocked.token })).status, 401);
    });

    it('the owner of a personal project is listed, as Maintainer (not 50)', async () => {
      const owner = await t.createUser();
      const project = await t.createProject({ owner: owner.user });
      const dev = await t.createUser();
      await t.addMember(project, dev.user, 30);
      const res = await t.get(`/api/v4/projects/${project.id}/members`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.map((m: any) => [m.id, m.access_level]), [[owner.user.id, 40], [dev.user.id, 30]]);
      const all = await t.get(`/api/v4/projects/${project.id}/members/all/${owner.user.id}`, { token: owner.token });
      assert.equal(all.body.access_level, 40);
      // The owner can neither be changed nor removed, and is already a member.
      assert.equal((await t.put(`/api/v4/projects/${project.id}/members/${owner.user.id}`, { access_level: 30 }, { token: owner.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/members/${owner.user.id}`, { token: owner.token })).status, 403);
      const again = await t.post(`/api/v4/projects/${project.id}/members`, { user_id: owner.user.id, access_level: 30 }, { token: owner.token });
      assert.equal(again.status, 409);
    });

    it('GET one member: direct only, 404 for others; all/:user_id includes inherited', async () => {
      const { group, owner } = await groupWithRoles();
      const sub = await t.createGroup({ parent: group });
      const res = await t.get(`/api/v4/groups/${sub.id}/members/${owner.user.id}`, { token: owner.token });
      assert.equal(res.status, 404);
      assert.deepEqual(res.body, { message: '404 Not found' });
      const inherited = await t.get(`/api/v4/groups/${sub.id}/members/all/${owner.user.id}`, { token: owner.token });
      assert.equal(inherited.status, 200);
      assert.equal(inherited.body.access_level, 50);
      assert.equal((await t.get(`/api/v4/groups/${sub.id}/members/abc`, { token: owner.token })).status, 400);
    });
  });

  describe('members/all', () => {
    it('inherits down the tree with the highest level per user', async () => {
      const alice = await t.createUser();
      const bob = await t.createUser();
      const top = await t.createGroup();
      const sub = await t.createGroup({ parent: top });
      const project = await t.createProject({ group: sub });
      await t.addMember(top, alice.user, 20);
      await t.addMember(sub, alice.user, 40);
      await t.addMember(top, bob.user, 30);
      await t.addMember(project, bob.user, 20);
      const res = await t.get(`/api/v4/projects/${project.id}/members/all`);
      assert.equal(res.status, 200);
      const levels = Object.fromEntries(res.body.map((m: any) => [m.id, m.access_level]));
      assert.deepEqual(levels, { [alice.user.id]: 40, [bob.user.id]: 30 });
      assert.equal(res.headers['x-total'], '2');
      const direct = await t.get(`/api/v4/projects/${project.id}/members`);
      assert.deepEqual(ids(direct.body), [bob.user.id]);
    });

    it('expired memberships grant nothing but stay listed with expires_at', async () => {
      const { group, owner } = await groupWithRoles();
      const project = await t.createProject({ group });
      const late = await t.createUser();
      await t.addMember(project, late.user, 30, { expires_at: PAST });
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members`, { token: late.token })).status, 404);
      const res = await t.get(`/api/v4/projects/${project.id}/members/${late.user.id}`, { token: owner.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.expires_at, PAST);
      // With an active inherited membership, /all shows the level that counts.
      await t.addMember(group, late.user, 20);
      const all = await t.get(`/api/v4/projects/${project.id}/members/all/${late.user.id}`, { token: owner.token });
      assert.equal(all.body.access_level, 20);
      assert.equal(all.body.expires_at, null);
    });

    it('invited groups: members shown when the group is public or the caller belongs to it', async () => {
      const { group, owner } = await groupWithRoles();
      const project = await t.createProject({ group });
      const pubInvited = await t.createGroup({ visibility: 20 });
      const privInvited = await t.createGroup({ visibility: 0 });
      const pubMember = await t.createUser();
      const privMember = await t.createUser();
      await t.addMember(pubInvited, pubMember.user, 40);
      await t.addMember(privInvited, privMember.user, 50);
      await t.post(`/api/v4/projects/${project.id}/share`, { group_id: pubInvited.id, group_access: 30 });
      await t.post(`/api/v4/projects/${project.id}/share`, { group_id: privInvited.id, group_access: 20 });

      const asOwner = await t.get(`/api/v4/projects/${project.id}/members/all`, { token: owner.token });
      const ownerView = Object.fromEntries(asOwner.body.map((m: any) => [m.id, m.access_level]));
      assert.equal(ownerView[pubMember.user.id], 30, 'capped at the share level');
      assert.equal(ownerView[privMember.user.id], undefined, 'private invited group hidden');

      const asPrivMember = await t.get(`/api/v4/projects/${project.id}/members/all`, { token: privMember.token });
      const privView = Object.fromEntries(asPrivMember.body.map((m: any) => [m.id, m.access_level]));
      assert.equal(privView[privMember.user.id], 20);
      const admin = await t.get(`/api/v4/projects/${project.id}/members/all/${privMember.user.id}`);
      assert.equal(admin.body.access_level, 20);
    });

    it('group shares reach direct members of the invited group only, capped', async () => {
      const shared = await t.createGroup({ visibility: 20 });
      const invitedParent = await t.createGroup({ visibility: 20 });
      const invited = await t.createGroup({ parent: invitedParent, visibility: 20 });
      const direct = await t.createUser();
      const fromParent = await t.createUser();
      await t.addMember(invited, direct.user, 50);
      await t.addMember(invitedParent, fromParent.user, 50);
      const res = await t.post(`/api/v4/groups/${shared.id}/share`, { group_id: invited.id, group_access: 30 });
      assert.equal(res.status, 201);
      const all = await t.get(`/api/v4/groups/${shared.id}/members/all`);
      const levels = Object.fromEntries(all.body.map((m: any) => [m.id, m.access_level]));
      assert.deepEqual(levels, { [direct.user.id]: 30 });
      // The same rule as the access check: the parent's member gets nothing.
      const sub = await t.createGroup({ parent: shared });
      const asDirect = await t.post(`/api/v4/groups/${sub.id}/members`, { user_id: fromParent.user.id, access_level: 30 }, { token: direct.token });
      assert.equal(asDirect.status, 403, 'developer-level share cannot manage members');
    });
  });

  describe('adding', () => {
    it('owners add group members; others get 403; the answer is the member', async () => {
      const { group, owner, maintainer, guest, reporter } = await groupWithRoles();
      const newbie = await t.createUser();
      for (const who of [maintainer, reporter, guest]) {
        const res = await t.post(`/api/v4/groups/${group.id}/members`, { user_id: newbie.user.id, access_level: 30 }, { token: who.token });
        assert.equal(res.status, 403);
      }
      const res = await t.post(`/api/v4/groups/${group.id}/members`, { user_id: newbie.user.id, access_level: 30, expires_at: FUTURE }, { token: owner.token });
      assert.equal(res.status, 201);
      assert.equal(res.body.id, newbie.user.id);
      assert.equal(res.body.access_level, 30);
      assert.equal(res.body.expires_at, FUTURE);
      assert.equal(res.body.created_by.id, owner.user.id);
      const dup = await t.post(`/api/v4/groups/${group.id}/members`, { user_id: newbie.user.id, access_level: 30 }, { token: owner.token });
      assert.equal(dup.status, 409);
      assert.deepEqual(dup.body, { message: 'Member already exists' });
    });

    it('maintainers add project members up to Maintainer; Owner is not a project level', async () => {
      const { project, maintainer, developer, reporter, guest } = await projectWithRoles();
      const newbie = await t.createUser();
      for (const who of [developer, reporter, guest]) {
        assert.equal((await t.post(`/api/v4/projects/${project.id}/members`, { user_id: newbie.user.id, access_level: 10 }, { token: who.token })).status, 403);
      }
      const owner = await t.post(`/api/v4/projects/${project.id}/members`, { user_id: newbie.user.id, access_level: 50 }, { token: maintainer.token });
      assert.equal(owner.status, 400);
      assert.deepEqual(owner.body, { message: { access_level: ['is not included in the list'] } });
      const ok = await t.post(`/api/v4/projects/${project.id}/members`, { user_id: newbie.user.id, access_level: 40 }, { token: maintainer.token });
      assert.equal(ok.status, 201);
      assert.equal(ok.body.access_level, 40);
    });

    it('validates parameters like GitLab', async () => {
      const { group, owner } = await groupWithRoles();
      const u = await t.createUser();
      const url = `/api/v4/groups/${group.id}/members`;
      assert.deepEqual((await t.post(url, { user_id: u.user.id }, { token: owner.token })).body, { error: 'access_level is missing' });
      assert.deepEqual((await t.post(url, { access_level: 30 }, { token: owner.token })).body, { error: 'user_id is missing' });
      assert.deepEqual((await t.post(url, { user_id: u.user.id, access_level: 35 }, { token: owner.token })).body, { error: 'access_level does not have a valid value' });
      assert.deepEqual((await t.post(url, { user_id: u.user.id, access_level: 30, expires_at: 'soon' }, { token: owner.token })).body, { error: 'expires_at is invalid' });
      const past = await t.post(url, { user_id: u.user.id, access_level: 30, expires_at: PAST }, { token: owner.token });
      assert.equal(past.status, 400);
      assert.deepEqual(past.body, { message: { expires_at: ['cannot be a date in the past'] } });
      const missing = await t.post(url, { user_id: 999999, access_level: 30 }, { token: owner.token });
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 User Not Found' });
      const tasksAlone = await t.post(url, { user_id: u.user.id, access_level: 30, tasks_to_be_done: ['ci'] }, { token: owner.token });
      assert.equal(tasksAlone.status, 400);
      assert.equal(tasksAlone.body.error, 'tasks_to_be_done, tasks_project_id provide all or none of parameters');
      const badTask = await t.post(url, { user_id: u.user.id, access_level: 30, tasks_to_be_done: ['dance'], tasks_project_id: 1 }, { token: owner.token });
      assert.equal(badTask.body.error, 'tasks_to_be_done does not have a valid value');
      const project = await t.createProject({ group });
      const withTasks = await t.post(url, { user_id: u.user.id, access_level: 30, tasks_to_be_done: ['ci', 'code'], tasks_project_id: project.id }, { token: owner.token });
      assert.equal(withTasks.status, 201);
      const row = await t.db.selectFrom('members').selectAll().where('user_id', '=', u.user.id).where('source_id', '=', group.id).executeTakeFirstOrThrow();
      assert.deepEqual(row.tasks_to_be_done, ['ci', 'code']);
      assert.equal(row.tasks_project_id, project.id);
      assert.equal(row.invite_source, 'members-api');
      // Form-encoded bodies work too.
      const v = await t.createUser();
      const form = await t.call('POST', url, { form: `user_id=${v.user.id}&access_level=20`, token: owner.token });
      assert.equal(form.status, 201);
    });

    it('refuses a direct level below an inherited one', async () => {
      const { group, owner, developer } = await groupWithRoles();
      const project = await t.createProject({ group });
      const res = await t.post(`/api/v4/projects/${project.id}/members`, { user_id: developer.user.id, access_level: 20 }, { token: owner.token });
      assert.equal(res.status, 400);
      assert.deepEqual(res.body, { message: { access_level: [`should be greater than or equal to Developer inherited membership from group ${group.name}`] } });
      assert.equal((await t.post(`/api/v4/projects/${project.id}/members`, { user_id: developer.user.id, access_level: 40 }, { token: owner.token })).status, 201);
    });

    it('adds several users at once with a status answer', async () => {
      const { group, owner, developer } = await groupWithRoles();
      const a = await t.createUser();
      const b = await t.createUser();
      const ok = await t.post(`/api/v4/groups/${group.id}/members`, { user_id: `${a.user.id},${b.user.id}`, access_level: 20 }, { token: owner.token });
      assert.equal(ok.status, 201);
      assert.deepEqual(ok.body, { status: 'success' });
      const members = await t.get(`/api/v4/groups/${group.id}/members?user_ids=${a.user.id},${b.user.id}`, { token: owner.token });
      assert.deepEqual(members.body.map((m: any) => m.access_level), [20, 20]);
      const project = await t.createProject({ group });
      const c = await t.createUser();
      const mixed = await t.post(`/api/v4/projects/${project.id}/members`, { user_id: `${developer.user.id},${c.user.id}`, access_level: 10 }, { token: owner.token });
      assert.equal(mixed.body.status, 'error');
      assert.equal(mixed.body.message, `${developer.user.username}: Access level should be greater than or equal to Developer inherited membership from group ${group.name}`);
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members/${c.user.id}`, { token: owner.token })).status, 200);
    });

    it('a read_api token cannot add members', async () => {
      const owner = await t.createUser({ scopes: ['read_api'] });
      const group = await t.createGroup({ owner: owner.user });
      const u = await t.createUser();
      const res = await t.post(`/api/v4/groups/${group.id}/members`, { user_id: u.user.id, access_level: 30 }, { token: owner.token });
      assert.equal(res.status, 403);
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members`, { token: owner.token })).status, 200);
    });
  });

  describe('changing and removing', () => {
    it('owners change levels; maintainers cannot; the last owner is protected', async () => {
      const { group, owner, maintainer, developer } = await groupWithRoles();
      assert.equal((await t.put(`/api/v4/groups/${group.id}/members/${developer.user.id}`, { access_level: 20 }, { token: maintainer.token })).status, 403);
      assert.equal((await t.put(`/api/v4/groups/${group.id}/members/${owner.user.id}`, { access_level: 40 }, { token: maintainer.token })).status, 403);
      const res = await t.put(`/api/v4/groups/${group.id}/members/${developer.user.id}`, { access_level: 40, expires_at: FUTURE }, { token: owner.token });
      assert.equal(res.status, 200);
      assert.equal(res.body.access_level, 40);
      assert.equal(res.body.expires_at, FUTURE);
      assert.deepEqual((await t.put(`/api/v4/groups/${group.id}/members/${developer.user.id}`, {}, { token: owner.token })).body, { error: 'access_level is missing' });

      const demote = await t.put(`/api/v4/groups/${group.id}/members/${owner.user.id}`, { access_level: 40 }, { token: owner.token });
      assert.equal(demote.status, 403);
      const remove = await t.delete(`/api/v4/groups/${group.id}/members/${owner.user.id}`, { token: owner.token });
      assert.equal(remove.status, 403);
      // With a second owner the first may go.
      await t.put(`/api/v4/groups/${group.id}/members/${maintainer.user.id}`, { access_level: 50 }, { token: owner.token });
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/members/${owner.user.id}`, { token: owner.token })).status, 204);
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members/${owner.user.id}`, { token: maintainer.token })).status, 404);
    });

    it('members may leave; others need admin rights; only direct members can be removed', async () => {
      const { group, owner, developer, reporter } = await groupWithRoles();
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/members/${developer.user.id}`, { token: reporter.token })).status, 403);
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/members/${reporter.user.id}`, { token: reporter.token })).status, 204);
      const sub = await t.createGroup({ parent: group });
      const inherited = await t.delete(`/api/v4/groups/${sub.id}/members/${developer.user.id}`, { token: owner.token });
      assert.equal(inherited.status, 404);
    });

    it('removing a group member removes their memberships below unless skip_subresources', async () => {
      const { group, owner } = await groupWithRoles();
      const sub = await t.createGroup({ parent: group });
      const project = await t.createProject({ group: sub });
      const a = await t.createUser();
      const b = await t.createUser();
      for (const u of [a, b]) {
        await t.addMember(group, u.user, 20);
        await t.addMember(sub, u.user, 30);
        await t.addMember(project, u.user, 40);
      }
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/members/${a.user.id}`, { token: owner.token })).status, 204);
      assert.equal((await t.get(`/api/v4/groups/${sub.id}/members/${a.user.id}`, { token: owner.token })).status, 404);
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members/${a.user.id}`, { token: owner.token })).status, 404);
      assert.equal((await t.delete(`/api/v4/groups/${group.id}/members/${b.user.id}?skip_subresources=true`, { token: owner.token })).status, 204);
      assert.equal((await t.get(`/api/v4/groups/${sub.id}/members/${b.user.id}`, { token: owner.token })).status, 200);
      assert.equal((await t.get(`/api/v4/projects/${project.id}/members/${b.user.id}`, { token: owner.token })).status, 200);
    });

    it('project maintainers change and remove project members', async () => {
      const { project, maintainer, developer, guest } = await projectWithRoles();
      assert.equal((await t.put(`/api/v4/projects/${project.id}/members/${guest.user.id}`, { access_level: 30 }, { token: developer.token })).status, 403);
      const up = await t.put(`/api/v4/projects/${project.id}/members/${guest.user.id}`, { access_level: 30 }, { token: maintainer.token });
      assert.equal(up.status, 200);
      assert.equal(up.body.access_level, 30);
      assert.equal((await t.put(`/api/v4/projects/${project.id}/members/${guest.user.id}`, { access_level: 50 }, { token: maintainer.token })).status, 400);
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/members/${guest.user.id}`, { token: maintainer.token })).status, 204);
      assert.equal((await t.delete(`/api/v4/projects/${project.id}/members/${guest.user.id}`, { token: maintainer.token })).status, 404);
    });
  });

  describe('override and approval', () => {
    it('override sets and resets the flag (owners only)', async () => {
      const { group, owner, maintainer, developer } = await groupWithRoles();
      assert.equal((await t.post(`/api/v4/groups/${group.id}/members/${developer.user.id}/override`, {}, { token: maintainer.token })).status, 403);
      const set = await t.post(`/api/v4/groups/${group.id}/members/${developer.user.id}/override`, {}, { token: owner.token });
      assert.equal(set.status, 201);
      assert.equal(set.body.override, true);
      const reset = await t.delete(`/api/v4/groups/${group.id}/members/${developer.user.id}/override`, { token: owner.token });
      assert.equal(reset.status, 200);
      assert.equal(reset.body.override, false);
      assert.equal((await t.post(`/api/v4/groups/${group.id}/members/999999/override`, {}, { token: owner.token })).status, 404);
    });

    it('approves awaiting members in the group tree', async () => {
      const { group, owner, maintainer } = await groupWithRoles();
      const sub = await t.createGroup({ parent: group });
      const project = await t.createProject({ group: sub });
      const waiting = await t.createUser();
      await t.addMember(group, waiting.user, 30);
      await t.addMember(project, waiting.user, 40);
      await t.db.updateTable('members').set({ state: 1 }).where('user_id', '=', waiting.user.id).execute();
      assert.equal((await t.get(`/api/v4/groups/${group.id}/members`, { token: waiting.token })).status, 404);
      const listed = await t.get(`/api/v4/groups/${group.id}/members?state=awaiting`, { token: owner.token });
      assert.deepEqual(listed.body.map((m: any) => [m.id, m.membership_state]), [[waiting.user.id, 'awaiting']]);
      const row = await t.db.selectFrom('members').select('id').where('user_id', '=', waiting.user.id).where('source_type', '=', 'Namespace').executeTakeFirstOrThrow();
      assert.equal((await t.put(`/api/v4/groups/${group.id}/members/${row.id}/approve`, {}, { token: maintainer.token })).status, 400);
      assert.equal((await t.put(`/api/v4/groups/${sub.id}/members/${row.id}/approve`, {}, { token: owner.token })).status, 400);
      assert.equal((await t.put(`/api/v4/groups/${group.id}/members/${row.id}/approve`, {}, { token: owner.token })).status, 204);
      const states = await t.db.selectFrom('members').select('state').where('user_id', '=', waiting.user.id).execute();
      assert.deepEqual(states.map((s) => s.state), [0, 0]);
      assert.equal((await t.put(`/api/v4/groups/${group.id}/members/${row.id}/approve`, {}, { token: owner.token })).status, 400);

      const other = await t.createUser();
      await t.addMember(sub, other.user, 20);
      await t.db.updateTable('members').set({ state: 1 }).where('user_id', '=', other.user.id).execute();
      assert.equal((await t.post(`/api/v4/groups/${group.id}/members/approve_all`, {}, { token: owner.token })).status, 204);
      const after = await t.get(`/api/v4/groups/${sub.id}/members/${other.user.id}`, { token: owner.token });
      assert.equal(after.body.membership_state, 'active');
    });
  });

  describe('seat info', () => {
    it('show_seat_info adds is_using_seat', async () => {
      const { group, owner, developer } = await groupWithRoles();
      const blocked = await t.createUser({ state: 'blocked' });
      await t.addMember(group, blocked.user, 30);
      const res = await t.get(`/api/v4/groups/${group.id}/members?show_seat_info=true`, { token: owner.token });
      const seats = Object.fromEntries(res.body.map((m: any) => [m.id, m.is_using_seat]));
      assert.equal(seats[developer.user.id], true);
      assert.equal(seats[blocked.user.id], false);
      const plain = await t.get(`/api/v4/groups/${group.id}/members`, { token: owner.token });
      assert.equal('is_using_seat' in plain.body[0], false);
    });
  });

});
