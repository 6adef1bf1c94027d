import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { drainJobs } from '../../src/jobs/queue.js';
import { projectRepoPath } from '../../src/services/projects.js';
import { createTestContext, type TestContext } from '../helpers/app.js';

describe('Projects API', () => {
  let t: TestContext;
  before(async () => { t = await createTestContext(); });
  after(async () => { await t.close(); });

  it('creates a personal project with a README commit on the default branch', async () => {
    const alice = await t.createUser();
    const res = await t.post('/api/v4/projects', { name: 'My Project', description: 'Hello', initialize_with_readme: true, visibility: 'internal' }, { token: alice.token });
    assert.equal(res.status, 201, res.text);
    const p = res.body;
    assert.equal(p.path, 'my-project');
    assert.equal(p.name, 'My Project');
    assert.equal(p.path_with_namespace, `${alice.user.username}/my-project`);
    assert.equal(p.name_with_namespace, `${alice.user.name} / My Project`);
    assert.equal(p.visibility, 'internal');
    assert.equal(p.default_branch, 'main');
    assert.equal(p.empty_repo, false);
    assert.equal(p.http_url_to_repo, `${t.config.externalUrl}/${alice.user.username}/my-project.git`);
    // Cairn's SSH server is on CAIRN_SSH_PORT (2222 unless set): the URL names the port.
    assert.equal(p.ssh_url_to_repo, `ssh://git@127.0.0.1:${t.config.sshPort}/${alice.user.username}/my-project.git`);
    assert.equal(p.readme_url, `${t.config.externalUrl}/${alice.user.username}/my-project/-/blob/main/README.md`);
    assert.equal(p.namespace.kind, 'user');
    assert.equal(p.owner.id, alice.user.id);
    assert.equal(p.creator_id, alice.user.id);
    assert.equal(typeof p.runners_token, 'string');
    assert.equal(p.repository_storage, undefined, 'repository_storage is for administrators only');
    assert.equal(p._links.self, `${t.config.externalUrl}/api/v4/projects/${p.id}`);

    const row = await t.db.selectFrom('projects').selectAll().where('id', '=', p.id).executeTakeFirstOrThrow();
    const repo = projectRepoPath(t.app.cairn, row);
    const log = execFileSync('git', ['--git-dir', repo, 'log', '--format=%an <%ae>|%s', 'main'], { encoding: 'utf8' }).trim();
    assert.equal(log, `${alice.user.name} <${alice.user.email}>|Initial commit`);
    const readme = execFileSync('git', ['--git-dir', repo, 'show', 'main:README.md'], { encoding: 'utf8' });
    assert.equal(readme, '# My Project\n\nHello\n');

    const single = await t.get(`/api/v4/projects/${encodeURIComponent(p.path_with_namespace)}`, { token: alice.token });
    assert.equal(single.status, 200);
    assert.equal(single.body.id, p.id);
    assert.deepEqual(single.body.permissions, { project_access: { access_level: 50, notification_level: 3 }, group_access: null });
  });

  it('validates name/path and reports taken paths like GitLab', async () => {
    const bob = await t.createUser();
    assert.deepEqual((await t.post('/api/v4/projects', {}, { token: bob.token })).body, { error: 'name, path are missing, at least one parameter must be provided' });
    assert.equal((await t.post('/api/v4/projects', { path: 'dup' }, { token: bob.token })).status, 201);
    const again = await t.post('/api/v4/projects', { path: 'dup' }, { token: bob.token });
    assert.equal(again.status, 400);
    assert.deepEqual(again.body.message.path, ['has already been taken']);
    const bad = await t.post('/api/v4/projects', { path: '-bad' }, { token: bob.token });
    assert.equal(bad.status, 400);
    assert.ok(bad.body.message.path);
    const vis = await t.post('/api/v4/projects', { path: 'v', visibility: 'secret' }, { token: bob.token });
    assert.equal(vis.status, 400);
    assert.equal((await t.post('/api/v4/projects', { path: 'x' }, { token: null })).status, 401);
    const readOnly = await t.createUser({ scopes: ['read_api'] });
    assert.equal((await t.post('/api/v4/projects', { path: 'x' }, { token: readOnly.token })).status, 403);
  });

  it('group projects: creation rights, visibility capped by the group, developer becomes maintainer', async () => {
    const owner = await t.createUser();
    const dev = await t.createUser();
    const guest = await t.createUser();
    const group = await t.createGroup({ visibility: 10, owner: owner.user });
    await t.addMember(group, dev.user, 30);
    await t.addMember(group, guest.user, 10);
    const denied = await t.post('/api/v4/projects', { path: 'g1', namespace_id: group.id }, { token: guest.token });
    assert.equal(denied.status, 400);
    assert.deepEqual(denied.body, { message: { namespace: ['is not valid'] } });
    const tooOpen = await t.post('/api/v4/projects', { path: 'g1', namespace_id: group.id, visibility: 'public' }, { token: owner.token });
    assert.equal(tooOpen.status, 400);
    assert.deepEqual(tooOpen.body.message.visibility_level, ['public is not allowed in a internal group.']);
    const created = await t.post('/api/v4/projects', { path: 'g1', namespace_id: group.full_path }, { token: dev.token });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.namespace.kind, 'group');
    assert.equal(created.body.owner, undefined);
    const member = await t.db.selectFrom('members').selectAll().where('source_type', '=', 'Project').where('source_id', '=', created.body.id).executeTakeFirst();
    assert.equal(member?.access_level, 40);
    const mine = await t.get(`/api/v4/projects/${created.body.id}`, { token: dev.token });
    assert.deepEqual(mine.body.permissions, { project_access: { access_level: 40, notification_level: 3 }, group_access: { access_level: 30, notification_level: 3 } });
  });

  it('visibility: anonymous sees public, signed-in internal, outsiders get 404 for private', async () => {
    const owner = await t.createUser();
    const outsider = await t.createUser();
    const pub = await t.createProject({ owner: owner.user, visibility: 20 });
    const internal = await t.createProject({ owner: owner.user, visibility: 10 });
    const priv = await t.createProject({ owner: owner.user, visibility: 0 });
    assert.equal((await t.get(`/api/v4/projects/${pub.id}`, { token: null })).status, 200);
    assert.equal((await t.get(`/api/v4/projects/${internal.id}`, { token: null })).status, 404);
    assert.equal((await t.get(`/api/v4/projects/${internal.id}`, { token: outsider.token })).status, 200);
    const hidden = await t.get(`/api/v4/projects/${priv.id}`, { token: outsider.token });
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.body, { message: '404 Project Not Found' });

    const anonList = await t.get('/api/v4/projects', { token: null, query: { per_page: 100 } });
    const anonIds = anonList.body.map((p: any) => p.id);
    assert.ok(anonIds.includes(pub.id));
    assert.ok(!anonIds.includes(internal.id) && !anonIds.includes(priv.id));
    assert.equal(anonList.body[0].permissions, undefined, 'anonymous lists use the simple form');
    const outsiderList = await t.get('/api/v4/projects', { token: outsider.token, query: { per_page: 100 } });
    const outsiderIds = outsiderList.body.map((p: any) => p.id);
    assert.ok(outsiderIds.includes(internal.id) && !outsiderIds.includes(priv.id));
    const ownerList = await t.get('/api/v4/projects', { token: owner.token, query: { owned: true } });
    assert.deepEqual(ownerList.body.map((p: any) => p.id).sort(), [pub.id, internal.id, priv.id].sort());
    assert.equal(ownerList.headers['x-total'], '3');
    assert.ok(ownerList.body[0].permissions);
    const userProjects = await t.get(`/api/v4/users/${owner.user.username}/projects`, { token: outsider.token });
    assert.deepEqual(userProjects.body.map((p: any) => p.id).sort(), [pub.id, internal.id].sort());
    assert.equal((await t.get('/api/v4/users/nobody-here/projects')).status, 404);
  });

  it('runners_token only for maintainers, repository_storage only for admins', async () => {
    const owner = await t.createUser();
    const dev = await t.createUser();
    const maint = await t.createUser();
    const project = await t.createProject({ owner: owner.user, visibility: 0 });
    await t.addMember(project, dev.user, 30);
    await t.addMember(project, maint.user, 40);
    const asDev = await t.get(`/api/v4/projects/${project.id}`, { token: dev.token });
    assert.equal(asDev.status, 200);
    assert.equal(asDev.body.runners_token, undefined);
    assert.equal(asDev.body.repository_storage, undefined);
    const asMaint = await t.get(`/api/v4/projects/${project.id}`, { token: maint.token });
    assert.match(asMaint.body.runners_token, /^GR1348941/);
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: maint.token })).body.runners_token, asMaint.body.runners_token, 'the same token at every read');
    const asAdmin = await t.get(`/api/v4/projects/${project.id}`);
    assert.equal(asAdmin.body.repository_storage, 'default');
    const byStorage = await t.get('/api/v4/projects', { query: { repository_storage: 'default', per_page: 100 } });
    assert.ok(byStorage.body.some((p: any) => p.id === project.id));
    const noStorage = await t.get('/api/v4/projects', { query: { repository_storage: 'nope' } });
    assert.equal(noStorage.body.length, 0);
  });

  it('update: guest 403, maintainer settings, owner-only rename and visibility', async () => {
    const owner = await t.createUser();
    const guest = await t.createUser();
    const maint = await t.createUser();
    const project = await t.createProject({ owner: owner.user, visibility: 0 });
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, maint.user, 40);
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { description: 'x' }, { token: guest.token })).status, 403);
    const ok = await t.put(`/api/v4/projects/${project.id}`, { description: 'new', merge_method: 'ff', topics: ['a', 'b'], issues_enabled: false }, { token: maint.token });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.description, 'new');
    assert.equal(ok.body.merge_method, 'ff');
    assert.deepEqual(ok.body.topics, ['a', 'b']);
    assert.equal(ok.body.issues_access_level, 'disabled');
    assert.equal(ok.body.issues_enabled, false);
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { visibility: 'public' }, { token: maint.token })).status, 403);
    assert.equal((await t.put(`/api/v4/projects/${project.id}`, { path: 'renamed' }, { token: maint.token })).status, 403);
    const badEnum = await t.put(`/api/v4/projects/${project.id}`, { merge_method: 'squash' }, { token: maint.token });
    assert.equal(badEnum.status, 400);
    assert.deepEqual(badEnum.body, { error: 'merge_method does not have a valid value' });
    const renamed = await t.put(`/api/v4/projects/${project.id}`, { path: 'renamed', name: 'Renamed', visibility: 'public' }, { token: owner.token });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal(renamed.body.path_with_namespace, `${owner.user.username}/renamed`);
    assert.equal(renamed.body.visibility, 'public');
    assert.equal((await t.get(`/api/v4/projects/${encodeURIComponent(`${owner.user.username}/renamed`)}`, { token: null })).status, 200);
    const noBranch = await t.put(`/api/v4/projects/${project.id}`, { default_branch: 'dev' }, { token: owner.token });
    assert.equal(noBranch.status, 200, 'an empty repository accepts any default branch');
    assert.equal(noBranch.body.default_branch, 'dev');
  });

  it('delete: developer 403, owner 202; the repository leaves the disk in the queue', async () => {
    const owner = await t.createUser();
    const dev = await t.createUser();
    const project = await t.createProject({ owner: owner.user });
    await t.addMember(project, dev.user, 30);
    assert.equal((await t.delete(`/api/v4/projects/${project.id}`, { token: dev.token })).status, 403);
    const repo = projectRepoPath(t.app.cairn, project);
    assert.ok(fs.existsSync(repo));
    const res = await t.delete(`/api/v4/projects/${project.id}`, { token: owner.token });
    assert.equal(res.status, 202);
    assert.deepEqual(res.body, { message: '202 Accepted' });
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: owner.token })).status, 404);
    // The answer came before the disk work: the removal waits in the durable queue.
    assert.ok(fs.existsSync(repo));
    await drainJobs(t.app.cairn);
    assert.ok(!fs.existsSync(repo));
  });

  it('filters, ordering and keyset pagination', async () => {
    const u = await t.createUser();
    const ids: number[] = [];
    for (const name of ['Alpha', 'Beta', 'Gamma']) {
      ids.push((await t.post('/api/v4/projects', { name, topics: name === 'Beta' ? 'x,y' : 'x' }, { token: u.token })).body.id);
    }
    const byName = await t.get('/api/v4/projects', { token: u.token, query: { owned: true, order_by: 'name', sort: 'asc', simple: true } });
    assert.deepEqual(byName.body.map((p: any) => p.name), ['Alpha', 'Beta', 'Gamma']);
    assert.equal(byName.body[0].permissions, undefined);
    assert.equal((await t.get('/api/v4/projects', { token: u.token, query: { owned: true, search: 'amm' } })).body[0].name, 'Gamma');
    assert.deepEqual((await t.get('/api/v4/projects', { token: u.token, query: { owned: true, topic: 'x,y' } })).body.map((p: any) => p.name), ['Beta']);
    assert.equal((await t.get('/api/v4/projects', { query: { order_by: 'bogus' } })).status, 400);
    const first = await t.get('/api/v4/projects', { token: u.token, query: { owned: true, pagination: 'keyset', order_by: 'id', sort: 'asc', per_page: 2 } });
    assert.deepEqual(first.body.map((p: any) => p.id), ids.slice(0, 2));
    const next = /<([^>]+)>; rel="next"/.exec(first.headers.link)![1];
    const second = await t.get(next.replace(t.config.externalUrl, ''), { token: u.token });
    assert.deepEqual(second.body.map((p: any) => p.id), ids.slice(2));
    assert.equal(second.headers.link, undefined);
    assert.equal((await t.get('/api/v4/projects', { query: { pagination: 'keyset', order_by: 'name' } })).status, 405);
    const paged = await t.get('/api/v4/projects', { token: u.token, query: { owned: true, per_page: 2, page: 2 } });
    assert.equal(paged.headers['x-total'], '3');
    assert.equal(paged.body.length, 1);
  });

  it('stars, starrers, archive, transfer and project users', async () => {
    const owner = await t.createUser();
    const other = await t.createUser();
    const project = await t.createProject({ owner: owner.user, visibility: 20 });
    assert.equal((await t.post(`/api/v4/projects/${project.id}/star`, {}, { token: other.token })).status, 201);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/star`, {}, { token: other.token })).status, 304);
    assert.equal((await t.get(`/api/v4/projects/${project.id}`, { token: null })).body.star_count, 1);
    const starrers = await t.get(`/api/v4/projects/${project.id}/starrers`, { token: null });
    assert.equal(starrers.body[0].user.id, other.user.id);
    assert.equal((await t.get('/api/v4/projects', { token: other.token, query: { starred: true } })).body[0].id, project.id);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/unstar`, {}, { token: other.token })).status, 201);

    const archived = await t.post(`/api/v4/projects/${project.id}/archive`, {}, { token: owner.token });
    assert.equal(archived.status, 201);
    assert.equal(archived.body.archived, true);
    assert.equal((await t.post(`/api/v4/projects/${project.id}/archive`, {}, { token: other.token })).status, 403);

    const group = await t.createGroup({ owner: owner.user, visibility: 10 });
    const moved = await t.put(`/api/v4/projects/${project.id}/transfer`, { namespace: group.full_path }, { token: owner.token });
    assert.equal(moved.status, 200, moved.text);
    assert.equal(moved.body.namespace.id, group.id);
    assert.equal(moved.body.visibility, 'internal', 'lowered to the group visibility');
    const again = await t.put(`/api/v4/projects/${project.id}/transfer`, { namespace: group.id }, { token: owner.token });
    assert.equal(again.status, 400);
    assert.match(again.body.message, /Project is already in this namespace/);

    const users = await t.get(`/api/v4/projects/${project.id}/users`, { token: owner.token });
    assert.deepEqual(users.body.map((u: any) => u.id), [owner.user.id]);
  });

  it('an admin creates a project for a user', async () => {
    const target = await t.createUser();
    const plain = await t.createUser();
    assert.equal((await t.post(`/api/v4/projects/user/${target.user.id}`, { name: 'For you' }, { token: plain.token })).status, 403);
    const res = await t.post(`/api/v4/projects/user/${target.user.id}`, { name: 'For you' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.namespace.path, target.user.username);
    assert.equal(res.body.creator_id, target.user.id);
  });
});
