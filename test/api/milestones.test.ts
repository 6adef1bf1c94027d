import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Namespace, Project } from '../../src/db/schema/core.js';
import { GroupMilestoneSchema, MilestoneSchema, ProjectMilestoneSchema } from '../../src/presenters/schemas/milestones.js';
import { createTestContext, type TestContext, type TestUser } from '../helpers/app.js';
import { assertEach, assertOne } from '../helpers/contract.js';

describe('milestones API', () => {
  let t: TestContext;
  let top: Namespace;
  let sub: Namespace;
  let project: Project;
  let publicProject: Project;
  let guest: TestUser;
  let reporter: TestUser;
  let developer: TestUser;
  let maintainer: TestUser;
  let groupReporter: TestUser;
  let groupGuest: TestUser;
  let outsider: TestUser;
  const api = (p: Project, rest = '') => `/api/v4/projects/${p.id}/milestones${rest}`;
  const gapi = (g: Namespace, rest = '') => `/api/v4/groups/${g.id}/milestones${rest}`;

  before(async () => {
    t = await createTestContext();
    top = await t.createGroup({ path: t.unique('top') });
    sub = await t.createGroup({ path: t.unique('sub'), parent: top });
    project = await t.createProject({ group: sub });
    publicProject = await t.createProject({ visibility: 20 });
    [guest, reporter, developer, maintainer, groupReporter, groupGuest, outsider] = await Promise.all(Array.from({ length: 7 }, () => t.createUser()));
    await t.addMember(project, guest.user, 10);
    await t.addMember(project, reporter.user, 20);
    await t.addMember(project, developer.user, 30);
    await t.addMember(project, maintainer.user, 40);
    await t.addMember(top, groupReporter.user, 20);
    await t.addMember(top, groupGuest.user, 10);
  });
  after(async () => {
    await t.close();
  });

  describe('permissions', () => {
    it('asks anonymous callers to sign in', async () => {
      for (const url of [api(publicProject), api(project), gapi(top)]) {
        const res = await t.get(url, { token: null });
        assert.equal(res.status, 401, url);
      }
    });

    it('hides private projects and groups from outsiders', async () => {
      assert.equal((await t.get(api(project), { token: outsider.token })).status, 404);
      assert.equal((await t.get(gapi(top), { token: outsider.token })).status, 404);
      assert.equal((await t.get(api(publicProject), { token: outsider.token })).status, 200);
      assert.equal((await t.post(api(publicProject), { title: 'nope' }, { token: outsider.token })).status, 403);
    });

    it('lets guests read and reporters and up manage project milestones', async () => {
      assert.equal((await t.get(api(project), { token: guest.token })).status, 200);
      assert.equal((await t.post(api(project), { title: 'by guest' }, { token: guest.token })).status, 403);
      for (const [who, title] of [[reporter, 'by reporter'], [developer, 'by developer'], [maintainer, 'by maintainer']] as const) {
        const res = await t.post(api(project), { title }, { token: who.token });
        assert.equal(res.status, 201, `${title}: ${JSON.stringify(res.body)}`);
      }
      const byAdmin = await t.post(api(project), { title: 'by admin' });
      assert.equal(byAdmin.status, 201);
      assert.equal((await t.put(api(project, `/${byAdmin.body.id}`), { title: 'x' }, { token: guest.token })).status, 403);
      assert.equal((await t.delete(api(project, `/${byAdmin.body.id}`), { token: guest.token })).status, 403);
      assert.equal((await t.delete(api(project, `/${byAdmin.body.id}`), { token: reporter.token })).status, 204);
    });

    it('lets group guests read and group reporters manage group milestones', async () => {
      assert.equal((await t.get(gapi(top), { token: groupGuest.token })).status, 200);
      assert.equal((await t.post(gapi(top), { title: 'g by guest' }, { token: groupGuest.token })).status, 403);
      assert.equal((await t.post(gapi(top), { title: 'g by reporter' }, { token: groupReporter.token })).status, 201);
      assert.equal((await t.post(gapi(sub), { title: 'g by project member' }, { token: maintainer.token })).status, 403);
      assert.equal((await t.get(gapi(sub), { token: maintainer.token })).status, 200);
    });
  });

  describe('project milestones', () => {
    let release: any;

    it('creates a milestone with GitLab’s fields', async () => {
      const res = await t.post(api(project), { title: 'v1.0', description: 'First release', start_date: '2020-01-01', due_date: '2020-02-01' }, { token: reporter.token });
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assertOne(ProjectMilestoneSchema, res, 'created milestone');
      release = res.body;
      assert.equal(release.project_id, project.id);
      assert.equal(release.title, 'v1.0');
      assert.equal(release.description, 'First release');
      assert.equal(release.state, 'active');
      assert.equal(release.start_date, '2020-01-01');
      assert.equal(release.due_date, '2020-02-01');
      assert.equal(release.expired, true);
      assert.equal(release.web_url, `${t.config.externalUrl}/${sub.full_path}/${project.path}/-/milestones/${release.iid}`);
      const next = await t.post(api(project), { title: 'v2.0', due_date: '2999-01-01T10:00:00Z' });
      assert.equal(next.body.iid, release.iid + 1);
      assert.equal(next.body.due_date, '2999-01-01');
      assert.equal(next.body.expired, false);
      assert.equal(next.body.start_date, null);
      assert.equal(next.body.description, null);
    });

    it('answers validation errors as GitLab does', async () => {
      assert.deepEqual((await t.post(api(project), { description: 'no title' })).body, { error: 'title is missing' });
      const dup = await t.post(api(project), { title: 'v1.0' });
      assert.equal(dup.status, 400);
      assert.deepEqual(dup.body, { message: 'Failed to create milestone {:title=>["already being used for another group or project milestone."]}' });
      const blank = await t.post(api(project), { title: '' });
      assert.deepEqual(blank.body, { message: 'Failed to create milestone {:title=>["can\'t be blank"]}' });
      const dates = await t.post(api(project), { title: 'backwards', start_date: '2021-05-01', due_date: '2021-04-01' });
      assert.equal(dates.status, 400);
      assert.deepEqual(dates.body, { message: 'Failed to create milestone {:due_date=>["must be greater than start date"]}' });
      // An unreadable date is no date, as Rails casts it.
      const odd = await t.post(api(project), { title: 'odd date', due_date: '2021-02-30' });
      assert.equal(odd.status, 201);
      assert.equal(odd.body.due_date, null);
    });

    it('shares titles with the project’s group: one title once', async () => {
      const groupOne = await t.post(gapi(sub), { title: 'shared title' });
      assert.equal(groupOne.status, 201);
      const clash = await t.post(api(project), { title: 'shared title' });
      assert.equal(clash.status, 400);
      const reverse = await t.post(gapi(sub), { title: 'v1.0' });
      assert.equal(reverse.status, 400);
      assert.deepEqual(reverse.body, { message: 'Failed to create milestone {:title=>["already being used for another group or project milestone."]}' });
    });

    it('gets one by id; 404 for others’ and unknown ids', async () => {
      const res = await t.get(api(project, `/${release.id}`), { token: guest.token });
      assertOne(ProjectMilestoneSchema, res, 'milestone');
      assert.equal(res.body.title, 'v1.0');
      const missing = await t.get(api(project, '/999999'));
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.body, { message: '404 Not found' });
      const bad = await t.get(api(project, '/abc'));
      assert.equal(bad.status, 400);
      assert.deepEqual(bad.body, { error: 'milestone_id is invalid' });
      const other = await t.post(api(publicProject), { title: 'elsewhere' });
      assert.equal((await t.get(api(project, `/${other.body.id}`))).status, 404);
    });

    it('updates fields and closes and reopens', async () => {
      const res = await t.put(api(project, `/${release.id}`), { title: 'v1.0.0', description: 'Renamed', due_date: '2020-03-01' }, { token: reporter.token });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assertOne(ProjectMilestoneSchema, res, 'updated milestone');
      assert.equal(res.body.title, 'v1.0.0');
      assert.equal(res.body.due_date, '2020-03-01');
      assert.equal(res.body.start_date, '2020-01-01');
      const closed = await t.put(api(project, `/${release.id}`), { state_event: 'close' });
      assert.equal(closed.body.state, 'closed');
      const again = await t.put(api(project, `/${release.id}`), { state_event: 'close' });
      assert.equal(again.status, 200);
      assert.equal(again.body.state, 'closed');
      const reopened = await t.put(api(project, `/${release.id}`), { state_event: 'activate' });
      assert.equal(reopened.body.state, 'active');
      const cleared = await t.put(api(project, `/${release.id}`), { due_date: '' });
      assert.equal(cleared.body.due_date, null);

      const none = await t.put(api(project, `/${release.id}`), {});
      assert.equal(none.status, 400);
      assert.deepEqual(none.body, { error: 'title, description, start_date, due_date, state_event are missing, at least one parameter must be provided' });
      const badEvent = await t.put(api(project, `/${release.id}`), { state_event: 'reopen' });
      assert.deepEqual(badEvent.body, { error: 'state_event does not have a valid value' });
      const taken = await t.put(api(project, `/${release.id}`), { title: 'v2.0' });
      assert.equal(taken.status, 400);
      assert.deepEqual(taken.body, { message: 'Failed to update milestone {:title=>["already being used for another group or project milestone."]}' });
      const backwards = await t.put(api(project, `/${release.id}`), { due_date: '2019-01-01' });
      assert.deepEqual(backwards.body, { message: 'Failed to update milestone {:due_date=>["must be greater than start date"]}' });
      assert.equal((await t.put(api(project, '/999999'), { title: 'x' })).status, 404);
    });

    it('lists with filters, GitLab’s order and pagination', async () => {
      const p = await t.createProject({ group: sub });
      const made: Record<string, any> = {};
      for (const [title, due, description] of [
        ['late', '2030-06-01', 'the late one'],
        ['early', '2030-01-01', 'the early one'],
        ['undated', null, 'no date at all'],
        ['middle', '2030-03-01', 'in between'],
      ] as const) {
        made[title] = (await t.post(api(p), { title, description, ...(due ? { due_date: due } : {}) })).body;
      }
      await t.put(api(p, `/${made.middle.id}`), { state_event: 'close' });

      const all = await t.get(api(p));
      assertEach(ProjectMilestoneSchema, all, 'milestones');
      assert.deepEqual(all.body.map((m: any) => m.title), ['early', 'middle', 'late', 'undated']);
      assert.equal(all.headers['x-total'], '4');
      const active = await t.get(api(p), { query: { state: 'active' } });
      assert.deepEqual(active.body.map((m: any) => m.title), ['early', 'late', 'undated']);
      const closed = await t.get(api(p), { query: { state: 'closed' } });
      assert.deepEqual(closed.body.map((m: any) => m.title), ['middle']);
      assert.deepEqual((await t.get(api(p), { query: { state: 'open' } })).body, { error: 'state does not have a valid value' });
      const byIids = await t.call('GET', `${api(p)}?iids[]=${made.late.iid}&iids[]=${made.early.iid}`);
      assert.deepEqual(byIids.body.map((m: any) => m.title), ['early', 'late']);
      const commaIids = await t.get(api(p), { query: { iids: `${made.late.iid},${made.undated.iid}` } });
      assert.deepEqual(commaIids.body.map((m: any) => m.title), ['late', 'undated']);
      assert.deepEqual((await t.get(api(p), { query: { iids: 'x' } })).body, { error: 'iids is invalid' });
      assert.deepEqual((await t.get(api(p), { query: { title: 'late' } })).body.map((m: any) => m.title), ['late']);
      assert.deepEqual((await t.get(api(p), { query: { search: 'no date' } })).body.map((m: any) => m.title), ['undated']);
      assert.deepEqual((await t.get(api(p), { query: { search: 'ARL' } })).body.map((m: any) => m.title), ['early']);
      const page = await t.get(api(p), { query: { per_page: 2, page: 2 } });
      assert.deepEqual(page.body.map((m: any) => m.title), ['late', 'undated']);
      assert.equal(page.headers['x-page'], '2');
      assert.deepEqual((await t.get(api(p), { query: { updated_after: '2999-01-01T00:00:00Z' } })).body, []);
      assert.equal((await t.get(api(p), { query: { updated_before: '2999-01-01T00:00:00Z' } })).body.length, 4);
      assert.deepEqual((await t.get(api(p), { query: { updated_before: 'yesterday-ish' } })).body, { error: 'updated_before is invalid' });

      // Ancestors: the group's and those above; iids no longer filter.
      const topOne = (await t.post(gapi(top), { title: 'top level', due_date: '2030-02-01' })).body;
      const withAncestors = await t.get(api(p), { query: { include_ancestors: true, per_page: 100 } });
      assertEach(MilestoneSchema, withAncestors, 'milestones with ancestors');
      const titles = withAncestors.body.map((m: any) => m.title);
      assert.ok(titles.includes('top level') && titles.includes('shared title') && titles.includes('early'), titles.join(','));
      const fromTop = withAncestors.body.find((m: any) => m.title === 'top level');
      assert.equal(fromTop.group_id, top.id);
      assert.equal('project_id' in fromTop, false);
      assert.equal(fromTop.web_url, `${t.config.externalUrl}/groups/${top.full_path}/-/milestones/${topOne.iid}`);
      const legacy = await t.get(api(p), { query: { include_parent_milestones: true, iids: made.late.iid, per_page: 100 } });
      assert.equal(legacy.body.length, withAncestors.body.length);
      const both = await t.get(api(p), { query: { include_parent_milestones: true, include_ancestors: true } });
      assert.deepEqual(both.body, { error: 'include_ancestors, include_parent_milestones are mutually exclusive' });
    });

    it('deletes a milestone (204); its issues lose it', async () => {
      const m = (await t.post(api(project), { title: 'to delete' })).body;
      const issue = await t.db
        .insertInto('issues')
        .values({ iid: 9001, project_id: project.id, title: 'planned', milestone_id: m.id })
        .returningAll()
        .executeTakeFirstOrThrow();
      const res = await t.delete(api(project, `/${m.id}`), { token: reporter.token });
      assert.equal(res.status, 204);
      assert.equal((await t.get(api(project, `/${m.id}`))).status, 404);
      const after = await t.db.selectFrom('issues').select('milestone_id').where('id', '=', issue.id).executeTakeFirstOrThrow();
      assert.equal(after.milestone_id, null);
      assert.equal((await t.delete(api(project, `/${m.id}`))).status, 404);
    });
  });

  describe('group milestones', () => {
    it('creates, reads, updates, closes and deletes', async () => {
      const created = await t.post(gapi(top), { title: 'Q1', description: 'Quarter', start_date: '2031-01-01', due_date: '2031-03-31' }, { token: groupReporter.token });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      assertOne(GroupMilestoneSchema, created, 'group milestone');
      assert.equal(created.body.group_id, top.id);
      assert.equal('project_id' in created.body, false);
      assert.equal(created.body.web_url, `${t.config.externalUrl}/groups/${top.full_path}/-/milestones/${created.body.iid}`);
      const one = await t.get(gapi(top, `/${created.body.id}`), { token: groupGuest.token });
      assertOne(GroupMilestoneSchema, one, 'group milestone');
      const closed = await t.put(gapi(top, `/${created.body.id}`), { state_event: 'close', title: 'Q1 2031' }, { token: groupReporter.token });
      assert.equal(closed.status, 200);
      assert.equal(closed.body.state, 'closed');
      assert.equal(closed.body.title, 'Q1 2031');
      assert.equal((await t.put(gapi(top, `/${created.body.id}`), {})).status, 400);
      assert.equal((await t.get(gapi(sub, `/${created.body.id}`))).status, 404, 'a group milestone is its own group’s');
      assert.equal((await t.delete(gapi(top, `/${created.body.id}`), { token: groupGuest.token })).status, 403);
      assert.equal((await t.delete(gapi(top, `/${created.body.id}`), { token: groupReporter.token })).status, 204);
      assert.equal((await t.get(gapi(top, `/${created.body.id}`))).status, 404);
    });

    it('includes ancestors’ and descendants’ milestones on request', async () => {
      const g = await t.createGroup({ path: t.unique('g') });
      const child = await t.createGroup({ path: t.unique('child'), parent: g });
      const p = await t.createProject({ group: child });
      await t.post(gapi(g), { title: 'parent ms' });
      await t.post(gapi(child), { title: 'child ms' });
      await t.post(api(p), { title: 'project ms' });
      const own = await t.get(gapi(child));
      assert.deepEqual(own.body.map((m: any) => m.title), ['child ms']);
      const up = await t.get(gapi(child), { query: { include_ancestors: true } });
      assert.deepEqual(up.body.map((m: any) => m.title).sort(), ['child ms', 'parent ms']);
      const down = await t.get(gapi(g), { query: { include_descendants: true } });
      assertEach(MilestoneSchema, down, 'group milestones with descendants');
      assert.deepEqual(down.body.map((m: any) => m.title).sort(), ['child ms', 'parent ms', 'project ms']);
      // A group member sees what the tree holds; a member of the subgroup only does not see the parent's group list.
      const childOnly = await t.createUser();
      await t.addMember(child, childOnly.user, 10);
      const seen = await t.get(gapi(child), { token: childOnly.token, query: { include_ancestors: true } });
      assert.equal(seen.status, 200);
      assert.deepEqual(seen.body.map((m: any) => m.title).sort(), ['child ms', 'parent ms']);
    });
  });
});
