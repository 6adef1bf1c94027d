import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { drainJobs } from '../../src/jobs/queue.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('Groups API', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('creates a group with the creator as Owner; subgroups need maintainer', async () => {
    const alice = await t.createUser();
    const res = await t.post('/api/v4/groups', { name: 'Team A', path: 'team-a', visibility: 'internal', description: 'd' }, { token: alice.token });
    assert.equal(res.status, 201, res.text);
    const g = res.body;
    assert.equal(g.full_path, 'team-a');
    assert.equal(g.visibility, 'internal');
    assert.equal(g.web_url, `${t.config.externalUrl}/groups/team-a`);
    assert.equal(g.parent_id, null);
    assert.equal(g.subgroup_creation_level, 'maintainer');
    assert.equal(g.project_creation_level, 'developer');
    assert.match(g.runners_token, /^GR1348941/);
    assert.deepEqual(g.shared_with_groups, []);
    assert.equal(g.projects, undefined);
    const member = await t.db.selectFrom('members').selectAll().where('source_type', '=', 'Namespace').where('source_id', '=', g.id).executeTakeFirstOrThrow();
    assert.equal(member.user_id, alice.user.id);
    assert.equal(member.access_level, 50);

    const taken = await t.post('/api/v4/groups', { name: 'Team A', path: 'team-a' }, { token: alice.token });
    assert.equal(taken.status, 400);
    assert.equal(taken.body.message, 'Failed to save group {:path=>["has already been taken"]}');
    assert.deepEqual((await t.post('/api/v4/groups', { name: 'x' }, { token: alice.token })).body, { error: 'path is missing' });
    const reserved = await t.post('/api/v4/groups', { name: 'Admin', path: 'admin' }, { token: alice.token });
    assert.equal(reserved.status, 400);

    const dev = await t.createUser();
    const maint = await t.createUser();
    await t.addMember({ ...(await t.db.selectFrom('namespaces').selectAll().where('id', '=', g.id).executeTakeFirstOrThrow()) }, dev.user, 30);
    await t.addMember((await t.db.selectFrom('namespaces').selectAll().where('id', '=', g.id).executeTakeFirstOrThrow()), maint.user, 40);
    assert.equal((await t.post('/api/v4/groups', { name: 'sub', path: 'sub', parent_id: g.id }, { token: dev.token })).status, 403);
    const sub = await t.post('/api/v4/groups', { name: 'Sub', path: 'sub', parent_id: g.id, visibility: 'private' }, { token: maint.token });
    assert.equal(sub.status, 201, sub.text);
    assert.equal(sub.body.full_path, 'team-a/sub');
    assert.equal(sub.body.full_name, 'Team A / Sub');
    const tooOpen = await t.post('/api/v4/groups', { name: 'Pub', path: 'pub', parent_id: g.id, visibility: 'public' }, { token: alice.token });
    assert.equal(tooOpen.status, 400);
    assert.match(tooOpen.body.message, /public is not allowed since the parent group has a internal visibility/);
    const outsider = await t.createUser();
    const hiddenParent = await t.createGroup({ visibility: 0 });
    assert.equal((await t.post('/api/v4/groups', { name: 's', path: 's', parent_id: hiddenParent.id }, { token: outsider.token })).status, 404);
    const noCreate = await t.createUser({ can_create_group: false });
    assert.equal((await t.post('/api/v4/groups', { name: 'n', path: 'n-group' }, { token: noCreate.token })).status, 403);
  });

  it('list and read visibility: anonymous public only, members see private, outsiders 404', async () => {
    const owner = await t.createUser();
    const outsider = await t.createUser();
    const pub = await t.createGroup({ visibility: 20, owner: owner.user });
    const internal = await t.createGroup({ visibility: 10, owner: owner.user });
    const priv = await t.createGroup({ visibility: 0, owner: owner.user });
    const anon = await t.get('/api/v4/groups', { token: null, query: { per_page: 100 } });
    const anonIds = anon.body.map((g: any) => g.id);
    assert.ok(anonIds.includes(pub.id) && !anonIds.includes(internal.id) && !anonIds.includes(priv.id));
    assert.equal((await t.get(`/api/v4/groups/${internal.id}`, { token: null })).status, 404);
    assert.equal((await t.get(`/api/v4/groups/${internal.id}`, { token: outsider.token })).status, 200);
    const hidden = await t.get(`/api/v4/groups/${priv.id}`, { token: outsider.token });
    assert.deepEqual([hidden.status, hidden.body], [404, { message: '404 Group Not Found' }]);
    // Signed-in non-admins list only their groups unless all_available=true.
    const outsiderDefault = await t.get('/api/v4/groups', { token: outsider.token, query: { per_page: 100 } });
    assert.equal(outsiderDefault.body.length, 0);
    const outsiderAll = await t.get('/api/v4/groups', { token: outsider.token, query: { all_available: true, per_page: 100 } });
    const allIds = outsiderAll.body.map((g: any) => g.id);
    assert.ok(allIds.includes(pub.id) && allIds.includes(internal.id) && !allIds.includes(priv.id));
    const mine = await t.get('/api/v4/groups', { token: owner.token, query: { owned: true, order_by: 'id', sort: 'desc' } });
    assert.deepEqual(mine.body.map((g: any) => g.id), [priv.id, internal.id, pub.id]);
    const skipped = await t.get('/api/v4/groups', { token: owner.token, query: { 'skip_groups[]': [pub.id, internal.id] } });
    assert.deepEqual(skipped.body.map((g: any) => g.id), [priv.id]);
    const byPath = await t.get(`/api/v4/groups/${encodeURIComponent(priv.full_path)}`, { token: owner.token });
    assert.equal(byPath.body.id, priv.id);
    assert.match(byPath.body.runners_token, /^GR1348941/);
    assert.equal((await t.get(`/api/v4/groups/${priv.id}`, { token: owner.token })).body.runners_token, byPath.body.runners_token, 'the same token at every read');
    assert.equal((await t.get('/api/v4/groups', { query: { order_by: 'size' } })).status, 400);
  });

  it('detail has projects and shared projects; with_projects=false omits them', async () => {
    const owner = await t.createUser();
    const group = await t.createGroup({ visibility: 20, owner: owner.user });
    const other = await t.createGroup({ visibility: 20 });
    const own = await t.createProject({ group, visibility: 20 });
    const shared = await t.createProject({ group: other, visibility: 20 });
    await t.createProject({ group, visibility: 0 });
    await t.db.insertInto('project_group_links').values({ project_id: shared.id, group_id: group.id, group_access: 30 }).execute();
    const detail = await t.get(`/api/v4/groups/${group.id}`, { token: null });
    assert.equal(detail.status, 200);
    assert.deepEqual(detail.body.projects.map((p: any) => p.id), [own.id]);
    assert.deepEqual(detail.body.shared_projects.map((p: any) => p.id), [shared.id]);
    assert.equal(detail.body.runners_token, undefined);
    const plain = await t.get(`/api/v4/groups/${group.id}`, { token: null, query: { with_projects: false } });
    assert.equal(plain.body.projects, undefined);
    const list = await t.get(`/api/v4/groups/${group.id}/projects`, { token: owner.token });
    assert.equal(list.body.length, 3);
    assert.equal(list.body[0].permissions, undefined);
    const noShared = await t.get(`/api/v4/groups/${group.id}/projects`, { token: owner.token, query: { with_shared: false, simple: true } });
    assert.equal(noShared.body.length, 2);
    assert.equal(noShared.body[0]._links, undefined);
  });

  it('subgroups, descendant groups and projects with include_subgroups', async () => {
    const owner = await t.createUser();
    const top = await t.createGroup({ visibility: 20, owner: owner.user });
    const a = await t.createGroup({ parent: top, visibility: 20, path: t.unique('a') });
    const b = await t.createGroup({ parent: a, visibility: 20 });
    const p1 = await t.createProject({ group: top, visibility: 20 });
    const p2 = await t.createProject({ group: b, visibility: 20 });
    assert.deepEqual((await t.get(`/api/v4/groups/${top.id}/subgroups`, { token: null })).body.map((g: any) => g.id), [a.id]);
    const desc = await t.get(`/api/v4/groups/${top.id}/descendant_groups`, { token: null, query: { order_by: 'id' } });
    assert.deepEqual(desc.body.map((g: any) => g.id), [a.id, b.id]);
    const projects = await t.get(`/api/v4/groups/${top.id}/projects`, { token: null, query: { include_subgroups: true, order_by: 'id', sort: 'asc' } });
    assert.deepEqual(projects.body.map((p: any) => p.id), [p1.id, p2.id]);
  });

  it('update: guest 403; owner renames the path and descendants follow in one step', async () => {
    const owner = await t.createUser();
    const guest = await t.createUser();
    const top = await t.createGroup({ path: 'old-top', name: 'Old Top', visibility: 20, owner: owner.user });
    await t.addMember(top, guest.user, 10);
    const sub = await t.createGroup({ parent: top, path: 'child', name: 'Child', visibility: 10 });
    const leaf = await t.createGroup({ parent: sub, path: 'leaf', name: 'Leaf', visibility: 0 });
    const project = await t.createProject({ group: leaf, path: 'proj' });
    assert.equal((await t.put(`/api/v4/groups/${top.id}`, { description: 'x' }, { token: guest.token })).status, 403);
    const res = await t.put(`/api/v4/groups/${top.id}`, { path: 'new-top', name: 'New Top', project_creation_level: 'maintainer', lfs_enabled: false }, { token: owner.token });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.full_path, 'new-top');
    assert.equal(res.body.project_creation_level, 'maintainer');
    assert.equal(res.body.lfs_enabled, false);
    assert.ok(Array.isArray(res.body.projects));
    const rows = await t.db.selectFrom('namespaces').select(['id', 'full_path', 'full_name']).where('id', 'in', [sub.id, leaf.id]).orderBy('id').execute();
    assert.deepEqual(rows.map((r) => [r.full_path, r.full_name]), [['new-top/child', 'New Top / Child'], ['new-top/child/leaf', 'New Top / Child / Leaf']]);
    const p = await t.get(`/api/v4/projects/${encodeURIComponent('new-top/child/leaf/proj')}`);
    assert.equal(p.body.id, project.id);
    const lower = await t.put(`/api/v4/groups/${top.id}`, { visibility: 'private' }, { token: owner.token });
    assert.equal(lower.status, 400);
    assert.ok(lower.body.message.visibility_level);
    const badLevel = await t.put(`/api/v4/groups/${top.id}`, { subgroup_creation_level: 'everyone' }, { token: owner.token });
    assert.deepEqual([badLevel.status, badLevel.body], [400, { error: 'subgroup_creation_level does not have a valid value' }]);
  });

  it('delete: maintainer 403; owner 202 removes subgroups, projects and repositories', async () => {
    const owner = await t.createUser();
    const maint = await t.createUser();
    const top = await t.createGroup({ owner: owner.user });
    await t.addMember(top, maint.user, 40);
    const sub = await t.createGroup({ parent: top });
    const project = await t.createProject({ group: sub });
    const repo = projectRepoPath(t.app.cairn, project);
    assert.equal((await t.delete(`/api/v4/groups/${top.id}`, { token: maint.token })).status, 403);
    const res = await t.delete(`/api/v4/groups/${top.id}`, { token: owner.token });
    assert.deepEqual([res.status, res.body], [202, { message: '202 Accepted' }]);
    assert.equal(await t.db.selectFrom('namespaces').select('id').where('id', 'in', [top.id, sub.id]).executeTakeFirst(), undefined);
    assert.equal(await t.db.selectFrom('projects').select('id').where('id', '=', project.id).executeTakeFirst(), undefined);
    assert.equal(await t.db.selectFrom('members').select('id').where('source_type', '=', 'Namespace').where('source_id', '=', top.id).executeTakeFirst(), undefined);
    await drainJobs(t.app.cairn);
    assert.ok(!fs.existsSync(repo));
  });

  it('transfer: moves a subtree under a new parent and back to the top level', async () => {
    const owner = await t.createUser();
    const a = await t.createGroup({ path: t.unique('ta'), owner: owner.user, visibility: 20 });
    const b = await t.createGroup({ path: t.unique('tb'), owner: owner.user, visibility: 10 });
    const child = await t.createGroup({ parent: a, path: 'child', visibility: 20 });
    const grandchild = await t.createGroup({ parent: child, path: 'gc', visibility: 20 });
    const res = await t.post(`/api/v4/groups/${child.id}/transfer`, { group_id: b.id }, { token: owner.token });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.full_path, `${b.full_path}/child`);
    assert.equal(res.body.parent_id, b.id);
    assert.equal(res.body.visibility, 'internal');
    const gc = await t.db.selectFrom('namespaces').selectAll().where('id', '=', grandchild.id).executeTakeFirstOrThrow();
    assert.equal(gc.full_path, `${b.full_path}/child/gc`);
    assert.deepEqual(gc.traversal_ids, [b.id, child.id, grandchild.id]);
    const intoSelf = await t.post(`/api/v4/groups/${child.id}/transfer`, { group_id: grandchild.id }, { token: owner.token });
    assert.equal(intoSelf.status, 400);
    const top = await t.post(`/api/v4/groups/${child.id}/transfer`, {}, { token: owner.token });
    assert.equal(top.status, 201, top.text);
    assert.equal(top.body.full_path, 'child');
    assert.equal(top.body.parent_id, null);
  });
});
