import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { commitFiles } from '../helpers/ci.js';
import { ANONYMOUS, getPage, postForm, webSignIn, type WebSession } from '../helpers/web.js';

describe('web: settings pages (members, protected branches)', () => {
  let t: TestContext;
  let group: Namespace;
  let project: Project;
  let base: string;
  let maintainer: TestUser, developer: TestUser, newcomer: TestUser, groupie: TestUser, outsider: TestUser;
  let maintainerWeb: WebSession, developerWeb: WebSession, newcomerWeb: WebSession, outsiderWeb: WebSession;

  before(async () => {
    t = await createTestContext();
    maintainer = await t.createUser();
    developer = await t.createUser();
    newcomer = await t.createUser({ name: 'New <script>alert(1)</script> comer' });
    groupie = await t.createUser();
    outsider = await t.createUser();
    group = await t.createGroup();
    await t.addMember(group, groupie.user, 20);
    project = await t.createProject({ group });
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(project, developer.user, 30);
    base = `/${group.path}/${project.path}`;
    await commitFiles(t, project, { 'README.md': 'hi\n' });
    [maintainerWeb, developerWeb, newcomerWeb, outsiderWeb] = await Promise.all([maintainer, developer, newcomer, outsider].map((u) => webSignIn(t, u)));
  });
  after(() => t.close());

  const memberRow = (userId: number) =>
    t.db.selectFrom('members').selectAll().where('source_type', '=', 'Project').where('source_id', '=', project.id).where('user_id', '=', userId).executeTakeFirst();

  it('lists direct and inherited members to those who see the project, with the add form only for maintainers', async () => {
    const dev = await getPage(t, developerWeb, `${base}/-/project_members`);
    assert.equal(dev.status, 200, dev.text);
    assert.ok(dev.text.includes(`@${maintainer.user.username}`));
    assert.ok(dev.text.includes(`@${groupie.user.username}`));
    assert.match(dev.text, /Inherited from a group/);
    assert.match(dev.text, /Direct member/);
    assert.ok(!dev.text.includes('Add a member'), 'developers get no add form');
    assert.ok(!dev.text.includes('name="access_level"'));
    const maint = await getPage(t, maintainerWeb, `${base}/-/project_members`);
    assert.match(maint.text, /Add a member/);
    assert.match(maint.text, /<option value="40"[^>]*>Maintainer<\/option>/);
    assert.ok(!maint.text.includes('<option value="50"'), 'no Owner role on a project');
    assert.equal((await getPage(t, outsiderWeb, `${base}/-/project_members`)).status, 404);
    const anon = await getPage(t, ANONYMOUS, `${base}/-/project_members`);
    assert.equal(anon.status, 302);
    assert.match(anon.headers.location, /^\/users\/sign_in/);
  });

  it('adds a member by username, changes the role and expiry, removes them', async () => {
    const add = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: newcomer.user.username, access_level: '20', expires_at: '' });
    assert.equal(add.status, 303, add.text);
    assert.equal(add.headers.location, `${base}/-/project_members`);
    const row = await memberRow(newcomer.user.id);
    assert.equal(row?.access_level, 20);
    assert.equal(row?.created_by_id, maintainer.user.id);
    // The new member now sees the project; their name is escaped on the list.
    assert.equal((await getPage(t, newcomerWeb, base)).status, 200);
    const list = await getPage(t, maintainerWeb, `${base}/-/project_members`);
    assert.ok(list.text.includes('New &lt;script&gt;alert(1)&lt;/script&gt; comer'));
    assert.ok(!list.text.includes('<script>alert(1)'));
    assert.ok(list.text.includes(`action="${base}/-/project_members/${row!.id}"`));

    const again = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: newcomer.user.username, access_level: '30' });
    assert.equal(again.status, 422);
    assert.match(again.text, /already a member/);
    const unknown = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: 'nobody-here', access_level: '30' });
    assert.equal(unknown.status, 422);
    assert.match(unknown.text, /No user with the username/);
    assert.ok(unknown.text.includes('value="nobody-here"'), 'the form keeps what was typed');
    const badLevel = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: outsider.user.username, access_level: '50' });
    assert.equal(badLevel.status, 422);
    const past = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: outsider.user.username, access_level: '30', expires_at: '2001-01-01' });
    assert.equal(past.status, 422);
    assert.match(past.text, /cannot be a date in the past/);
    assert.equal(await memberRow(outsider.user.id), undefined);

    const change = await postForm(t, maintainerWeb, `${base}/-/project_members/${row!.id}`, { _method: 'put', access_level: '30', expires_at: '2999-12-31' });
    assert.equal(change.status, 303);
    const changed = await memberRow(newcomer.user.id);
    assert.equal(changed?.access_level, 30);
    assert.match(String(changed?.expires_at), /2999/);
    // A group member's level cannot go below what they inherit.
    await t.addMember(project, groupie.user, 30);
    const groupieRow = (await memberRow(groupie.user.id))!;
    const below = await postForm(t, maintainerWeb, `${base}/-/project_members/${groupieRow.id}`, { _method: 'put', access_level: '10' });
    assert.equal(below.status, 422);
    assert.match(below.text, /inherited membership/);

    const remove = await postForm(t, maintainerWeb, `${base}/-/project_members/${row!.id}`, { _method: 'delete' });
    assert.equal(remove.status, 303);
    assert.equal(await memberRow(newcomer.user.id), undefined);
    assert.equal((await getPage(t, newcomerWeb, base)).status, 404, 'the removed member no longer sees the private project');
    assert.equal((await postForm(t, maintainerWeb, `${base}/-/project_members/${row!.id}`, { _method: 'delete' })).status, 404);
  });

  it('refuses member changes to developers (403), checks CSRF (422), lets members leave', async () => {
    const add = await postForm(t, developerWeb, `${base}/-/project_members`, { username: outsider.user.username, access_level: '30' });
    assert.equal(add.status, 403);
    const maintRow = (await memberRow(maintainer.user.id))!;
    assert.equal((await postForm(t, developerWeb, `${base}/-/project_members/${maintRow.id}`, { _method: 'put', access_level: '10' })).status, 403);
    assert.equal((await postForm(t, developerWeb, `${base}/-/project_members/${maintRow.id}`, { _method: 'delete' })).status, 403);
    assert.equal((await memberRow(maintainer.user.id))?.access_level, 40);
    assert.equal((await postForm(t, outsiderWeb, `${base}/-/project_members`, { username: outsider.user.username, access_level: '30' })).status, 404);
    const stale = await postForm(t, maintainerWeb, `${base}/-/project_members`, { username: outsider.user.username, access_level: '30', authenticity_token: 'stale' });
    assert.equal(stale.status, 422);
    assert.match(stale.text, /The change you requested was rejected/);
    assert.equal(await memberRow(outsider.user.id), undefined);

    // A developer may leave.
    const devRow = (await memberRow(developer.user.id))!;
    const leave = await postForm(t, developerWeb, `${base}/-/project_members/${devRow.id}`, { _method: 'delete' });
    assert.equal(leave.status, 303);
    assert.equal(leave.headers.location, '/dashboard/projects');
    assert.equal(await memberRow(developer.user.id), undefined);
    await t.addMember(project, developer.user, 30);
  });

  it('protects and unprotects branches for maintainers; the settings are 404 to developers', async () => {
    assert.equal((await getPage(t, developerWeb, `${base}/-/settings/repository`)).status, 404);
    assert.equal((await getPage(t, outsiderWeb, `${base}/-/settings/repository`)).status, 404);
    assert.equal((await postForm(t, developerWeb, `${base}/-/protected_branches`, { name: 'main', merge_access_level: '30', push_access_level: '30' })).status, 404);

    const page = await getPage(t, maintainerWeb, `${base}/-/settings/repository`);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /Protect a branch/);
    assert.match(page.text, /<option value="main">/, 'the branches are offered');

    const protect = await postForm(t, maintainerWeb, `${base}/-/protected_branches`, { name: 'release/*', merge_access_level: '30', push_access_level: '0', allow_force_push: 'true' });
    assert.equal(protect.status, 303, protect.text);
    assert.equal(protect.headers.location, `${base}/-/settings/repository`);
    const api = await t.get(`/api/v4/projects/${project.id}/protected_branches/${encodeURIComponent('release/*')}`);
    assert.equal(api.status, 200);
    assert.deepEqual(api.body.merge_access_levels.map((l: any) => l.access_level), [30]);
    assert.deepEqual(api.body.push_access_levels.map((l: any) => l.access_level), [0]);
    assert.equal(api.body.allow_force_push, true);

    const shown = await getPage(t, maintainerWeb, `${base}/-/settings/repository`);
    assert.match(shown.text, /<code>release\/\*<\/code>/);
    assert.match(shown.text, /Developers \+ Maintainers/);
    const dup = await postForm(t, maintainerWeb, `${base}/-/protected_branches`, { name: 'release/*', merge_access_level: '40', push_access_level: '40' });
    assert.equal(dup.status, 409);
    assert.match(dup.text, /already protected/);
    const bad = await postForm(t, maintainerWeb, `${base}/-/protected_branches`, { name: 'x', merge_access_level: '7', push_access_level: '40' });
    assert.equal(bad.status, 422);
    const stale = await postForm(t, maintainerWeb, `${base}/-/protected_branches`, { name: 'y', merge_access_level: '40', push_access_level: '40', authenticity_token: 'nope' });
    assert.equal(stale.status, 422);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/protected_branches/y`)).status, 404);

    const id = api.body.id;
    assert.equal((await postForm(t, developerWeb, `${base}/-/protected_branches/${id}`, { _method: 'delete' })).status, 404);
    const unprotect = await postForm(t, maintainerWeb, `${base}/-/protected_branches/${id}`, { _method: 'delete' });
    assert.equal(unprotect.status, 303);
    assert.equal((await t.get(`/api/v4/projects/${project.id}/protected_branches/${encodeURIComponent('release/*')}`)).status, 404);
    assert.equal((await postForm(t, maintainerWeb, `${base}/-/protected_branches/${id}`, { _method: 'delete' })).status, 404);
  });

  it('links the personal access tokens page from the header', async () => {
    const page = await getPage(t, maintainerWeb, `${base}/-/project_members`);
    assert.ok(page.text.includes('href="/-/user_settings/personal_access_tokens"'));
  });
});
